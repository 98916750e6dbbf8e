#!/usr/bin/env bash
# Builds QueueBox's release artifacts into dist/ (git-ignored), each the way its language's
# users install it:
#   dist/crates/   queuebox-core-<v>.crate                      (cargo package)
#   dist/c/        queuebox-c-<v>-<triple>.tar.gz               (header, .a, .so, pkg-config)
#   dist/go/       a file GOPROXY serving github.com/alternayte/queuebox/clients/go @ v<v>
#                  (header + lib/<goos>_<goarch>/libqueuebox.a inside the module)
#   dist/python/   queuebox_inbox-<v>-cp39-abi3-manylinux_*.whl and the sdist (maturin)
#   dist/npm/      @alternayte/queuebox-inbox and one package per platform (napi-rs layout)
#   dist/nuget/    QueueBox.Inbox.<v>.nupkg   (lib/net45 built by mono, runtimes/<rid>/native/)
#   dist/relay/    queuebox-<v>-<triple>.tar.gz                 (binary, LICENSE, example, migrations)
#   dist/SHA256SUMS, dist/MANIFEST.txt (every artifact, its size, its platform)
# Usage: bash scripts/package.sh [crates c go python npm nuget relay ...]   (default: all of them)
# Built for the host, linux x86_64 glibc, only; README.md "Install" names what is not built.
# The native code is built once per artifact kind with --release (the shared target dir).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"
export CARGO_TERM_COLOR=never
rel="$CARGO_TARGET_DIR/release"
dist="$root/dist"
bash scripts/version.sh >/dev/null # every manifest carries one version, or stop here
version=$(grep -m1 -E '^version = "' Cargo.toml | sed -E 's/^version = "([^"]+)"$/\1/')
triple=$(rustc -vV | sed -n 's/^host: //p')
case "$triple" in
  x86_64-unknown-linux-gnu) goplat=linux_amd64 npmplat=linux-x64-gnu npmcpu=x64 ;;
  aarch64-unknown-linux-gnu) goplat=linux_arm64 npmplat=linux-arm64-gnu npmcpu=arm64 ;;
  *) echo "package: host $triple is not a platform QueueBox packages" >&2; exit 1 ;;
esac
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
log() { echo "package: $*"; }

# need_apt <command> <package>: installs the Debian package when the command is missing.
need_apt() {
  command -v "$1" >/dev/null 2>&1 && return 0
  log "installing $2 from Debian's packages"
  export DEBIAN_FRONTEND=noninteractive
  if [ ! -f /tmp/.qb-apt-updated ]; then apt-get update -qq && touch /tmp/.qb-apt-updated; fi
  apt-get install -y -qq "$2" >/dev/null
}

# A copy of a native file without its debug info (release builds keep line tables for
# backtraces in the workspace; a shipped artifact does not need them).
strip_copy() { mkdir -p "$(dirname "$2")"; strip --strip-debug -o "$2" "$1"; }

build_c_lib() {
  [ -n "${c_built:-}" ] && return 0
  log "cargo build --release -p queuebox-c"
  cargo build --quiet --release -p queuebox-c
  c_built=1
}

pkg_crates() {
  mkdir -p "$dist/crates"
  # --no-verify: the verify step rebuilds the crate from the extracted package in its own
  # target dir (a full build); scripts/test.d/50-install.sh builds it as a user would.
  log "cargo package -p queuebox-core"
  cargo package --quiet -p queuebox-core --no-verify --allow-dirty
  cp "$CARGO_TARGET_DIR/package/queuebox-core-$version.crate" "$dist/crates/"
}

pkg_c() {
  build_c_lib
  local name="queuebox-c-$version-$triple" d="$stage/c/queuebox-c-$version-$triple"
  mkdir -p "$d/include" "$d/lib/pkgconfig" "$dist/c"
  cp bindings/c/include/queuebox.h "$d/include/"
  strip_copy "$rel/libqueuebox.a" "$d/lib/libqueuebox.a"
  strip_copy "$rel/libqueuebox.so" "$d/lib/libqueuebox.so"
  cp LICENSE "$d/"
  # Relocatable: pkg-config computes the prefix from where the .pc file lies.
  cat >"$d/lib/pkgconfig/queuebox.pc" <<EOF
prefix=\${pcfiledir}/../..
libdir=\${prefix}/lib
includedir=\${prefix}/include

Name: queuebox
Description: QueueBox C ABI: the inbox pull worker of the Rust core
Version: $version
Cflags: -I\${includedir}
Libs: -L\${libdir} -lqueuebox
Libs.private: -lpthread -lm -ldl -lgcc_s
EOF
  cat >"$d/README.txt" <<EOF
QueueBox $version C library for $triple.
  include/queuebox.h        the API (contract: proto-docs/ffi.md in the repository)
  lib/libqueuebox.so        shared library
  lib/libqueuebox.a         static library (link also -lpthread -lm -ldl: pkg-config --static)
  lib/pkgconfig/queuebox.pc PKG_CONFIG_PATH=<this dir>/lib/pkgconfig pkg-config --cflags --libs queuebox
EOF
  tar -C "$stage/c" -czf "$dist/c/$name.tar.gz" "$name"
}

pkg_go() {
  build_c_lib
  local mod=github.com/alternayte/queuebox/clients/go v="v$version"
  local src="$stage/go/src" out="$dist/go/$mod/@v"
  rm -rf "$dist/go"
  mkdir -p "$src" "$out"
  # The module as committed (HEAD: a consistent snapshot even while the tree is being
  # edited), header copy included, plus the static library per platform.
  git archive --format=tar HEAD clients/go | tar -x -C "$stage/go"
  mv "$stage/go/clients/go"/* "$src/"
  cmp -s bindings/c/include/queuebox.h "$src/queuebox.h" ||
    { echo "package: clients/go/queuebox.h is stale (cp bindings/c/include/queuebox.h clients/go/)" >&2; exit 1; }
  strip_copy "$rel/libqueuebox.a" "$src/lib/$goplat/libqueuebox.a"
  cp LICENSE "$src/"
  # A GOPROXY directory (the protocol's file layout): list, .info, .mod and the module zip.
  echo "$v" >"$out/list"
  printf '{"Version":"%s","Time":"%s"}\n' "$v" "$(git log -1 --format=%cI)" >"$out/$v.info"
  cp "$src/go.mod" "$out/$v.mod"
  python3 - "$src" "$mod@$v" "$out/$v.zip" <<'EOF'
import os, sys, zipfile
src, prefix, out = sys.argv[1:]
with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
    for d, _, files in sorted(os.walk(src)):
        for f in sorted(files):
            p = os.path.join(d, f)
            z.write(p, prefix + "/" + os.path.relpath(p, src))
EOF
}

python_tools() {
  local venv="$root/.venv/package"
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  [ -x "$venv/bin/maturin" ] || "$venv/bin/pip" install -q --disable-pip-version-check "maturin>=1.5,<2"
  export PATH="$venv/bin:$PATH"
}

pkg_python() {
  python_tools
  rm -rf "$dist/python"; mkdir -p "$dist/python"
  # maturin picks the manylinux tag from the glibc symbols the extension uses (auditwheel's
  # rule), and abi3-py39 (bindings/python/Cargo.toml) makes one wheel for CPython >= 3.9.
  log "maturin build --release (clients/python)"
  (cd clients/python && maturin build --quiet --release --strip --out "$dist/python")
  (cd clients/python && maturin sdist --out "$dist/python")
}

pkg_npm() {
  local ts="$root/clients/typescript" main="$stage/npm/main" plat="$stage/npm/$npmplat"
  mkdir -p "$main" "$plat"; rm -rf "$dist/npm"; mkdir -p "$dist/npm"
  (cd "$ts" && { [ -d node_modules ] || npm ci --no-audit --no-fund --loglevel=error; })
  # The addon is the cdylib `napi build` would copy; cargo directly, because napi passes an
  # explicit --target, which builds every dependency again in a target dir of its own.
  log "cargo build --release -p queuebox-node"
  cargo build --quiet --release -p queuebox-node
  # The TypeScript outputs from a copy of the committed sources (the package's own build
  # script, its node_modules linked), not in clients/typescript where tests may be running.
  local tsb="$stage/npm/build"
  mkdir -p "$tsb"
  git archive --format=tar HEAD clients/typescript | tar -x -C "$stage/npm"
  mv "$stage/npm/clients/typescript"/* "$tsb/"
  ln -s "$ts/node_modules" "$tsb/node_modules"
  (cd "$tsb" && node scripts/build.mjs >/dev/null)
  # The platform package: only the addon, installable only where it runs (os/cpu/libc).
  local addon="queuebox.$npmplat.node"
  strip_copy "$rel/libqueuebox_node.so" "$plat/$addon"
  cp LICENSE "$plat/"
  node - "$tsb/package.json" "$plat" "$npmplat" "$npmcpu" "$addon" <<'EOF'
const fs = require("node:fs");
const [pkgPath, dir, plat, cpu, addon] = process.argv.slice(2);
const main = JSON.parse(fs.readFileSync(pkgPath, "utf8"));
const pkg = {
  name: `${main.name}-${plat}`, version: main.version,
  description: `The ${plat} native addon of ${main.name}`, license: main.license,
  os: ["linux"], cpu: [cpu], libc: ["glibc"], main: addon, files: [addon, "LICENSE"],
  engines: main.engines,
};
fs.writeFileSync(`${dir}/package.json`, JSON.stringify(pkg, null, 2) + "\n");
fs.writeFileSync(`${dir}/README.md`, `# ${pkg.name}\n\nThe prebuilt ${plat} addon of [${main.name}](https://www.npmjs.com/package/${main.name}); installed by it as an optional dependency, not on its own.\n`);
EOF
  # The main package: the TypeScript outputs and the loader, no addon; one optional
  # dependency per platform package (what `napi prepublish` writes), npm installs the one
  # whose os/cpu/libc match.
  cp -r "$tsb/dist" "$tsb/README.md" LICENSE "$main/"
  node - "$tsb/package.json" "$main/package.json" "$npmplat" <<'EOF'
const fs = require("node:fs");
const [src, dst, ...plats] = process.argv.slice(2);
const pkg = JSON.parse(fs.readFileSync(src, "utf8"));
pkg.files = ["dist", "README.md", "LICENSE"];
pkg.optionalDependencies = Object.fromEntries(plats.map((p) => [`${pkg.name}-${p}`, pkg.version]));
delete pkg.scripts; delete pkg.devDependencies;
fs.writeFileSync(dst, JSON.stringify(pkg, null, 2) + "\n");
EOF
  (cd "$plat" && npm pack --silent --pack-destination "$dist/npm" >/dev/null)
  (cd "$main" && npm pack --silent --pack-destination "$dist/npm" >/dev/null)
}

# C#: the .NET SDK cannot be installed here, so mono's mcs compiles the library (the .NET
# Framework 4.5 API: lib/net45; the csproj's netstandard2.0/net8.0 builds need the SDK) and
# Debian's NuGet 2.8 (nuget.exe on mono) packs it with runtimes/<rid>/native/libqueuebox.so.
pkg_nuget() {
  build_c_lib
  need_apt mcs mono-devel
  need_apt nuget nuget
  local d="$stage/nuget" rid=linux-x64
  [ "$triple" = aarch64-unknown-linux-gnu ] && rid=linux-arm64
  mkdir -p "$d/lib/net45" "$d/runtimes/$rid/native"
  rm -rf "$dist/nuget"; mkdir -p "$dist/nuget"
  # -nowarn:1591 as the csproj's NoWarn: undocumented members do not stop the build.
  mcs -nologo -target:library -warnaserror+ -nowarn:1591 -r:System.Data.dll -doc:"$d/lib/net45/QueueBox.Inbox.xml" \
    -out:"$d/lib/net45/QueueBox.Inbox.dll" clients/csharp/src/QueueBox.Inbox/*.cs
  strip_copy "$rel/libqueuebox.so" "$d/runtimes/$rid/native/libqueuebox.so"
  cp LICENSE "$d/"
  cat >"$d/QueueBox.Inbox.nuspec" <<NUSPEC
<?xml version="1.0" encoding="utf-8"?>
<package xmlns="http://schemas.microsoft.com/packaging/2011/08/nuspec.xsd">
  <metadata>
    <id>QueueBox.Inbox</id>
    <version>$version</version>
    <authors>QueueBox</authors>
    <licenseUrl>https://www.apache.org/licenses/LICENSE-2.0</licenseUrl>
    <description>QueueBox inbox pull worker for .NET over the native QueueBox core (lib/net45 built with mono; native library for $rid).</description>
  </metadata>
  <files>
    <file src="lib/net45/*" target="lib/net45" />
    <file src="runtimes/$rid/native/libqueuebox.so" target="runtimes/$rid/native" />
    <file src="LICENSE" />
  </files>
</package>
NUSPEC
  (cd "$d" && nuget pack QueueBox.Inbox.nuspec -OutputDirectory "$dist/nuget" -NoPackageAnalysis -NonInteractive >/dev/null)
}

pkg_relay() {
  # librdkafka built in (kafka-static, relay/brokers/Cargo.toml): the binary needs glibc and
  # OpenSSL 3 where it runs, no librdkafka.
  log "cargo build --release -p queuebox --features kafka-static (the relay)"
  cargo build --quiet --release -p queuebox --bin queuebox --no-default-features --features sqlserver,kafka-static
  if ldd "$rel/queuebox" | grep -q librdkafka; then
    echo "package: the relay still links the system's librdkafka" >&2; exit 1
  fi
  local name="queuebox-$version-$triple" d="$stage/relay/queuebox-$version-$triple"
  mkdir -p "$d" "$dist/relay"
  strip_copy "$rel/queuebox" "$d/queuebox"
  cp LICENSE CHANGELOG.md "$d/"
  cp examples/relay.yml "$d/relay.example.yml"
  cp -r core/migrations "$d/migrations"
  tar -C "$stage/relay" -czf "$dist/relay/$name.tar.gz" "$name"
}

manifest() {
  (cd "$dist" && find . -type f ! -name SHA256SUMS ! -name MANIFEST.txt ! -path './go/*/@v/list' \
    ! -name '*.info' ! -name '*.mod' | sort | sed 's#^\./##' >"$stage/files")
  (cd "$dist" && xargs -a "$stage/files" sha256sum >SHA256SUMS)
  {
    echo "QueueBox $version artifacts, built on $triple ($(date -u +%Y-%m-%dT%H:%M:%SZ))"
    (cd "$dist" && xargs -a "$stage/files" du -h --apparent-size)
  } >"$dist/MANIFEST.txt"
  cat "$dist/MANIFEST.txt"
}

parts=("$@")
[ ${#parts[@]} -eq 0 ] && parts=(crates c go python npm nuget relay)
mkdir -p "$dist"
for p in "${parts[@]}"; do
  t0=$(date +%s)
  "pkg_$p"
  log "$p done in $(($(date +%s) - t0))s"
done
manifest
