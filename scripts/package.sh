#!/usr/bin/env bash
# Builds QueueBox's release artifacts into dist/ (git-ignored), each the way its language's
# users install it:
#   dist/crates/   queuebox-protocol-<v>.crate, queuebox-core-<v>.crate (cargo package)
#   dist/c/        queuebox-c-<v>-<triple>.tar.gz               (header, .a, .so, pkg-config)
#   dist/go/       a file GOPROXY serving github.com/alternayte/queuebox/clients/go @ v<v>
#                  (header + lib/<goos>_<goarch>/libqueuebox.a inside the module)
#   dist/python/   queuebox_inbox-<v>-cp39-abi3-manylinux_2_17_x86_64.manylinux2014_x86_64.whl,
#                  the sdist, and the aarch64 manylinux2014 wheel when QB_PACKAGE_TARGETS
#                  names aarch64-unknown-linux-gnu (or all), the x86_64 musllinux_1_2 wheel
#                  when it names x86_64-unknown-linux-musl (or all)
#   dist/npm/      @alternayte/queuebox-inbox and one package per platform (napi-rs layout)
#   dist/nuget/    QueueBox.Inbox.<v>.nupkg   (lib/net45 built by mono, runtimes/<rid>/native/)
#   dist/relay/    queuebox-<v>-<triple>.tar.gz                 (binary, LICENSE, example, migrations)
#   dist/image/    queuebox-<v>-oci/ (an OCI image layout, tag <v>) and queuebox-<v>-oci.tar
#                  (the same as an oci-archive): the relay, non-root, no shell (pkg_image)
#   dist/SHA256SUMS, dist/MANIFEST.txt (every artifact, its size, its platform)
#   With a Windows or macOS triple in QB_PACKAGE_TARGETS (parts c and relay only):
#   dist/c/        queuebox-c-<v>-x86_64-pc-windows-gnu.zip        (header, queuebox.dll,
#                  import library, .a, .def) and queuebox-c-<v>-<arch>-apple-darwin.tar.gz
#                  (header, .dylib, .a)
#   dist/relay/    queuebox-<v>-x86_64-pc-windows-gnu.zip          (queuebox.exe, ...)
# QB_DIST=<dir> writes there instead of dist/ (scripts/test.d/53-windows.sh: its Windows
# build beside, not over, the artifacts 50-install tested).
# Usage: [QB_PACKAGE_TARGETS="<triple> ..."|all] bash scripts/package.sh [crates c go python npm nuget relay image ...]
# (default: every part). Targets, Rust triples:
#   x86_64-unknown-linux-gnu   the host. The libraries (c, go, python, npm, nuget) with
#                              cargo-zigbuild for glibc 2.17, like aarch64; the relay with
#                              native cargo (it links the host's OpenSSL 3: the host's glibc)
#   aarch64-unknown-linux-gnu  cross, cargo-zigbuild for glibc 2.17: c, go, npm, nuget; the relay
#                              and the manylinux2014 wheel when QB_PACKAGE_TARGETS names it (all)
#   x86_64-unknown-linux-musl  only when QB_PACKAGE_TARGETS names it (all): the relay, a static
#                              binary (cargo-zigbuild, musl's crt-static, OpenSSL and librdkafka
#                              built in); the musllinux_1_2 wheel and the npm linux-x64-musl
#                              package (cdylibs: -crt-static, target/musl-dylib, see lib_env);
#                              the C tarball (libqueuebox.a and .so from that cdylib build)
#                              and the NuGet linux-musl-x64 runtime; the Go library for musl
#                              is not built (docs/install.md)
#   x86_64-pc-windows-gnu      only when QB_PACKAGE_TARGETS names it (all): the C library
#                              (queuebox.dll) and the relay (queuebox.exe, without Kafka:
#                              win_relay_features), with Debian's mingw-w64 and native cargo
#                              in target/windows-gnu; tests/platforms/windows.sh runs them
#                              under wine (CI: 53-windows)
#   aarch64-apple-darwin, x86_64-apple-darwin
#                              only when QB_PACKAGE_TARGETS names them (all): the C library
#                              (.dylib, .a) with cargo-zigbuild, no Apple SDK; checked by
#                              scripts/macho-check.sh, never run (no macOS here)
# The default, unset, is what CI builds: x86_64 and aarch64 glibc, without the cross relays
# and the aarch64 wheel (their cold builds compile OpenSSL and librdkafka, or a Python tree,
# from source; tests/install/README.md has the times). Each zig target is one dependency
# tree (target/<triple>/release): the C library, the Node addon and the wheel share it (the
# wheel: maturin with cargo-zigbuild as its cargo, see pkg_python). docs/install.md has
# the table of what is built and tested.
# Every native file is checked with scripts/elf-check.sh (machine, newest glibc symbol).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"
export CARGO_TERM_COLOR=never
dist=$(mkdir -p "${QB_DIST:-$root/dist}" && cd "${QB_DIST:-$root/dist}" && pwd)
bash scripts/version.sh >/dev/null # every manifest carries one version, or stop here
version=$(grep -m1 -E '^version = "' Cargo.toml | sed -E 's/^version = "([^"]+)"$/\1/')
host=$(rustc -vV | sed -n 's/^host: //p')
[ "$host" = x86_64-unknown-linux-gnu ] || { echo "package: the host $host is not linux x86_64 glibc, the only build host packaging knows" >&2; exit 1; }
# aarch64-unknown-linux-musl would take the same path as x86_64 musl, but was never built
# here (time): not offered (docs/install.md).
all_targets="x86_64-unknown-linux-gnu aarch64-unknown-linux-gnu x86_64-unknown-linux-musl x86_64-pc-windows-gnu aarch64-apple-darwin x86_64-apple-darwin"
ci_targets="x86_64-unknown-linux-gnu aarch64-unknown-linux-gnu"
targets=${QB_PACKAGE_TARGETS:-$ci_targets}
[ "$targets" = all ] && targets=$all_targets
for t in $targets; do
  case " $all_targets " in *" $t "*) ;; *) echo "package: QB_PACKAGE_TARGETS: '$t' is not one of: all $all_targets" >&2; exit 1 ;; esac
done
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
log() { echo "package: $*"; }

# The glibc targets asked for (the libraries'), and the relay's and the wheels': a cross
# build only when QB_PACKAGE_TARGETS names it, its cold build is long; musl is the relay's.
gnu_targets() { for t in $targets; do case "$t" in *-linux-gnu) echo "$t" ;; esac; done; }
relay_targets() {
  for t in $targets; do
    if [ "$t" = "$host" ] || [ -n "${QB_PACKAGE_TARGETS:-}" ]; then echo "$t"; fi
  done
}
# The wheels are Linux only (no Windows or macOS wheel is built: docs/install.md).
wheel_targets() { relay_targets | grep -- '-linux-' || true; }
# The Windows and macOS targets asked for (parts c and relay).
other_os_targets() { for t in $targets; do case "$t" in *-windows-* | *-apple-*) echo "$t" ;; esac; done; }
# The library packages with a musl build (C, npm, NuGet): the glibc targets, and x86_64 musl
# when QB_PACKAGE_TARGETS names it.
lib_targets() { for t in $targets; do case "$t" in *-linux-gnu | x86_64-unknown-linux-musl) echo "$t" ;; esac; done; }
# Per target: the arch name of elf-check.sh, Go's GOOS_GOARCH, napi-rs's platform, npm's
# cpu, .NET's runtime identifier, and the newest glibc its native files may need.
arch_of() { echo "${1%%-*}"; }
goplat_of() { case "$1" in x86_64-*) echo linux_amd64 ;; aarch64-*) echo linux_arm64 ;; esac; }
npmplat_of() { case "$1" in x86_64-*-musl) echo linux-x64-musl ;; x86_64-*) echo linux-x64-gnu ;; aarch64-*) echo linux-arm64-gnu ;; esac; }
npmlibc_of() { case "$1" in *-musl) echo musl ;; *) echo glibc ;; esac; }
npmcpu_of() { case "$1" in x86_64-*) echo x64 ;; aarch64-*) echo arm64 ;; esac; }
rid_of() { case "$1" in x86_64-*-musl) echo linux-musl-x64 ;; x86_64-*) echo linux-x64 ;; aarch64-*) echo linux-arm64 ;; esac; }
# Every glibc library build, the host's arch too, targets glibc 2.17 (zig links against that
# version's symbols: manylinux2014, RHEL/CentOS 7 and everything newer); a musl build is
# static (elf-check.sh: no NEEDED library, no program interpreter). The host's relay alone is
# built by native cargo and needs the host's glibc (relay_glibc_of).
zig_glibc=2.17
glibc_of() {
  case "$1" in
    *-musl) echo static ;;
    *) echo "$zig_glibc" ;;
  esac
}
host_glibc() { ldd --version | sed -n '1s/.* \([0-9][0-9]*\.[0-9][0-9]*\)$/\1/p'; }
relay_glibc_of() { if [ "$1" = "$host" ]; then host_glibc; else glibc_of "$1"; fi; }
elf_check() { bash "$root/scripts/elf-check.sh" "$1" "$(arch_of "$2")" "${3:-$(glibc_of "$2")}"; }

# need_apt <command> <package>: installs the Debian package when the command is missing.
need_apt() {
  command -v "$1" >/dev/null 2>&1 && return 0
  log "installing $2 from Debian's packages"
  export DEBIAN_FRONTEND=noninteractive
  if [ ! -f /tmp/.qb-apt-updated ]; then apt-get update -qq && touch /tmp/.qb-apt-updated; fi
  apt-get install -y -qq "$2" >/dev/null
}

# The tools of the packaging's virtualenv: maturin, and for cross builds zig (the ziglang
# wheel: a C compiler and linker for every target, with the glibc versions' symbol lists)
# and cargo-zigbuild (cargo with zig as the linker and C compiler of the target).
python_tools() {
  local venv="$root/.venv/package"
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  [ -x "$venv/bin/maturin" ] || "$venv/bin/pip" install -q --disable-pip-version-check "maturin>=1.5,<2"
  export PATH="$venv/bin:$PATH"
}
zig_tools() {
  python_tools
  [ -x "$root/.venv/package/bin/cargo-zigbuild" ] ||
    pip install -q --disable-pip-version-check "ziglang>=0.13,<0.18" "cargo-zigbuild>=0.19,<0.21"
  # The target's Rust standard library (rustup downloads it once).
  local t
  for t in $targets; do
    rustup target list --installed | grep -qx "$t" || rustup target add "$t"
  done
}

# lib_env <triple> <command...>: runs a build of a shared library (the C library, the Node
# addon, the Python extension) for the target. On musl a cdylib needs -crt-static (Rust's
# musl default links statically, and refuses a cdylib): the library then needs musl's
# libc.so where it runs (Alpine's), and it is built in a target dir of its own, so that these
# flags and the static relay's do not rebuild each other's tree.
lib_env() {
  local t=$1; shift
  case "$t" in
    *-musl) CARGO_TARGET_DIR="$CARGO_TARGET_DIR/musl-dylib" RUSTFLAGS="-C target-feature=-crt-static" "$@" ;;
    *) "$@" ;;
  esac
}
lib_rel_of() { case "$1" in *-musl) echo "$CARGO_TARGET_DIR/musl-dylib/$1/release" ;; *) rel_of "$1" ;; esac; }
# cargo_build <triple> <cargo args...>: a --release build for the target with cargo-zigbuild
# (glibc 2.17 for a -gnu triple), the host's arch too: its files in target/<triple>/release,
# apart from the native host build of the other tests (target/release).
zig_target_of() { case "$1" in *-linux-gnu) echo "$1.$zig_glibc" ;; *) echo "$1" ;; esac; }
cargo_build() {
  local t=$1; shift
  zig_tools
  cargo zigbuild --quiet --release --target "$(zig_target_of "$t")" "$@"
}
# Where cargo_build puts the target's files.
rel_of() { echo "$CARGO_TARGET_DIR/$1/release"; }

# A copy of a native file without its debug info (release builds keep line tables for
# backtraces in the workspace; a shipped artifact does not need them). Debian's binutils
# reads x86_64 files only; its aarch64 cross binutils strip the others.
strip_copy() {
  mkdir -p "$(dirname "$2")"
  case "$(readelf -h "$1" | sed -n 's/^ *Machine: *//p' | head -1)" in
    AArch64) need_apt aarch64-linux-gnu-strip binutils-aarch64-linux-gnu; aarch64-linux-gnu-strip --strip-debug -o "$2" "$1" ;;
    *) strip --strip-debug -o "$2" "$1" ;;
  esac
}

# build_c_lib <triple>: libqueuebox.{a,so} for the target, once per run, in lib_rel_of's
# tree (musl: the cdylib build of lib_env, which makes the .so; the .a is the same code).
build_c_lib() {
  case " ${c_built:-} " in *" $1 "*) return 0 ;; esac
  log "cargo build --release -p queuebox-c --target $1"
  lib_env "$1" cargo_build "$1" -p queuebox-c
  c_built="${c_built:-} $1"
}

pkg_crates() {
  mkdir -p "$dist/crates"
  # --no-verify: the verify step rebuilds the crate from the extracted package in its own
  # target dir (a full build); scripts/test.d/50-install.sh builds it as a user would.
  # Both crates at once: the core names queuebox-protocol as a registry dependency, which
  # cargo resolves from the protocol crate packaged beside it.
  log "cargo package -p queuebox-protocol -p queuebox-core"
  cargo package --quiet -p queuebox-protocol -p queuebox-core --no-verify --allow-dirty
  cp "$CARGO_TARGET_DIR/package/queuebox-protocol-$version.crate" \
    "$CARGO_TARGET_DIR/package/queuebox-core-$version.crate" "$dist/crates/"
}

pkg_c() {
  rm -rf "$dist/c"; mkdir -p "$dist/c"
  local t
  for t in $(lib_targets); do c_tarball "$t"; done
  for t in $(other_os_targets); do
    case "$t" in *-windows-*) windows_c_zip "$t" ;; *) macos_c_tarball "$t" ;; esac
  done
}

# write_pc <file> <Libs.private>: the pkg-config file of a C package, relocatable (the prefix
# is computed from where the .pc file lies).
write_pc() {
  mkdir -p "$(dirname "$1")"
  cat >"$1" <<EOF
prefix=\${pcfiledir}/../..
libdir=\${prefix}/lib
includedir=\${prefix}/include

Name: queuebox
Description: QueueBox C ABI: the inbox pull worker of the Rust core
Version: $version
Cflags: -I\${includedir}
Libs: -L\${libdir} -lqueuebox
Libs.private: $2
EOF
}

# c_tarball <triple>: the C library of one target, relocatable (pkg-config computes the
# prefix from where the .pc file lies). musl: the .so needs musl's libc.so (Alpine's); the .a
# carries its unwinder (musl_unwind_into), so no -lgcc_s.
c_tarball() {
  local t=$1 rel name="queuebox-c-$version-$1" d="$stage/c/queuebox-c-$version-$1"
  local libc="glibc >= $(glibc_of "$1")" private="-lpthread -lm -ldl -lgcc_s"
  case "$t" in *-musl) libc="musl libc: Alpine, or a static program, musl-gcc -static; the .a holds LLVM's libunwind" private="-lpthread -lm -ldl" ;; esac
  build_c_lib "$t"; rel=$(lib_rel_of "$t")
  mkdir -p "$d/include" "$d/lib/pkgconfig"
  cp bindings/c/include/queuebox.h "$d/include/"
  strip_copy "$rel/libqueuebox.a" "$d/lib/libqueuebox.a"
  case "$t" in *-musl) musl_unwind_into "$d/lib/libqueuebox.a" "$t" ;; esac
  strip_copy "$rel/libqueuebox.so" "$d/lib/libqueuebox.so"
  elf_check "$d/lib/libqueuebox.a" "$t"
  elf_check "$d/lib/libqueuebox.so" "$t" "$(dylib_glibc_of "$t")"
  cp LICENSE "$d/"
  write_pc "$d/lib/pkgconfig/queuebox.pc" "$private"
  cat >"$d/README.txt" <<EOF
QueueBox $version C library for $t ($libc).
  include/queuebox.h        the API (contract: proto-docs/ffi.md in the repository)
  lib/libqueuebox.so        shared library
  lib/libqueuebox.a         static library (link also -lpthread -lm -ldl: pkg-config --static)
  lib/pkgconfig/queuebox.pc PKG_CONFIG_PATH=<this dir>/lib/pkgconfig pkg-config --cflags --libs queuebox
EOF
  tar -C "$stage/c" -czf "$dist/c/$name.tar.gz" "$name"
}

# musl_unwind_into <archive> <triple>: adds to a musl static library the unwinder that Rust
# links into static musl programs (LLVM's libunwind, the toolchain's self-contained copy,
# built for musl). The Rust code needs _Unwind_*; what a C compiler would bring, libgcc_eh, is
# built for glibc on Debian: `musl-gcc -static` failed with "undefined reference to
# `_dl_find_object'" (a glibc 2.35 function).
# zig's ar (llvm-ar) writes the archive's index: Debian's GNU ar, with the LLVM 14 gold plugin
# of bfd-plugins, rebuilt it without 2,000 of the Rust members' symbols (it cannot read their
# LLVM 22 bitcode), and the link then missed core and alloc functions.
musl_unwind_into() {
  local x="$stage/unwind-$2"
  rm -rf "$x"; mkdir -p "$x"
  (cd "$x" && ar x "$(rustc --print sysroot)/lib/rustlib/$2/lib/self-contained/libunwind.a")
  zig_tools
  python -m ziglang ar qs "$1" "$x"/*.o
}

pkg_go() {
  local mod=github.com/alternayte/queuebox/clients/go v="v$version" t
  local src="$stage/go/src" out="$dist/go/$mod/@v"
  rm -rf "$dist/go"
  mkdir -p "$src" "$out"
  # The module as committed (HEAD: a consistent snapshot even while the tree is being
  # edited), header copy included, plus the static library per platform.
  git archive --format=tar HEAD clients/go | tar -x -C "$stage/go"
  mv "$stage/go/clients/go"/* "$src/"
  cmp -s bindings/c/include/queuebox.h "$src/queuebox.h" ||
    { echo "package: clients/go/queuebox.h is stale (cp bindings/c/include/queuebox.h clients/go/)" >&2; exit 1; }
  for t in $(gnu_targets); do
    build_c_lib "$t"
    strip_copy "$(lib_rel_of "$t")/libqueuebox.a" "$src/lib/$(goplat_of "$t")/libqueuebox.a"
    elf_check "$src/lib/$(goplat_of "$t")/libqueuebox.a" "$t"
  done
  cp LICENSE "$src/"
  # A GOPROXY directory (the protocol's file layout): list, .info, .mod and the module zip.
  echo "$v" >"$out/list"
  printf '{"Version":"%s","Time":"%s"}\n' "$v" "$(git log -1 --format=%cI)" >"$out/$v.info"
  cp "$src/go.mod" "$out/$v.mod"
  zip_tree "$src" "$mod@$v" "$out/$v.zip"
}

pkg_python() {
  python_tools
  rm -rf "$dist/python"; mkdir -p "$dist/python"
  # The wheels, built with zig against glibc 2.17's symbols, so each is manylinux2014
  # (maturin's auditwheel check refuses the tag if the extension needs a newer symbol);
  # abi3-py39 (bindings/python/Cargo.toml) makes one wheel for CPython >= 3.9. The host's
  # arch always; aarch64 only when QB_PACKAGE_TARGETS names aarch64-unknown-linux-gnu (or
  # all); x86_64 musl (musllinux_1_2, Alpine 3.17+) only when it names x86_64-unknown-linux-musl
  # (or all), in the musl library tree of lib_env. maturin runs cargo-zigbuild as its cargo (maturin_cargo) rather than `maturin
  # --zig`: the same zig link, but with cargo-zigbuild's wrappers, so the extension's
  # dependencies are the ones the C library and the Node addon built in target/<triple>/release.
  # `--zig` writes wrappers named after maturin's own binary: cargo sees another linker and C
  # compiler and rebuilds the whole tree, then cargo-zigbuild rebuilds it back on the next
  # run (two cold trees per arch in CI, which is why the x86_64 wheel was once built natively).
  local t cargo
  cargo=$(maturin_cargo)
  for t in $(wheel_targets); do
    zig_tools
    local compat=manylinux2014
    case "$t" in *-musl) compat=musllinux_1_2 ;; esac
    log "maturin build --release --compatibility $compat --target $t, zig via cargo-zigbuild (clients/python)"
    (cd clients/python && CARGO="$cargo" lib_env "$t" maturin build --quiet --release --strip --compatibility "$compat" \
      --target "$t" --out "$dist/python")
    python_wheel_check "$t"
  done
  (cd clients/python && maturin sdist --out "$dist/python")
}

# maturin_cargo: prints the path of a cargo for maturin ($CARGO) that turns maturin's
# `cargo rustc --target <triple>` into `cargo-zigbuild rustc --target <triple>.2.17` (glibc
# triples) and passes every other command to cargo.
maturin_cargo() {
  local f="$stage/maturin-cargo"
  cat >"$f" <<EOF
#!/usr/bin/env bash
set -euo pipefail
unset CARGO
[ "\${1:-}" = rustc ] || exec cargo "\$@"
shift
a=()
while [ \$# -gt 0 ]; do
  case "\$1" in
    --target) case "\$2" in *-gnu) a+=(--target "\$2.$zig_glibc") ;; *) a+=(--target "\$2") ;; esac; shift 2 ;;
    *) a+=("\$1"); shift ;;
  esac
done
exec cargo-zigbuild rustc "\${a[@]}"
EOF
  chmod +x "$f"
  echo "$f"
}

# python_wheel_check <triple>: the wheel of that target holds an extension of the target's
# machine, needing no newer glibc than the target's (a musl one: no glibc at all).
python_wheel_check() {
  local whl tag=manylinux
  case "$1" in *-musl) tag=musllinux ;; esac
  whl=$(ls "$dist/python"/queuebox_inbox-"$version"-cp39-abi3-"$tag"*"$(arch_of "$1")".whl)
  rm -rf "$stage/whl"; mkdir -p "$stage/whl"
  python3 -m zipfile -e "$whl" "$stage/whl"
  elf_check "$(ls "$stage"/whl/queuebox_inbox/_native*.so)" "$1" "$(dylib_glibc_of "$1")"
}
# The newest glibc a shared library of the target may need; "musl" for a musl one (elf-check.sh:
# no glibc symbol version, only musl's libc.so).
dylib_glibc_of() { case "$1" in *-musl) echo musl ;; *) glibc_of "$1" ;; esac; }

pkg_npm() {
  local ts="$root/clients/typescript" main="$stage/npm/main" t plats=()
  mkdir -p "$main"; rm -rf "$dist/npm"; mkdir -p "$dist/npm"
  (cd "$ts" && { [ -d node_modules ] || npm ci --no-audit --no-fund --loglevel=error; })
  # The TypeScript outputs from a copy of the committed sources (the package's own build
  # script, its node_modules linked), not in clients/typescript where tests may be running.
  local tsb="$stage/npm/build"
  mkdir -p "$tsb"
  git archive --format=tar HEAD clients/typescript | tar -x -C "$stage/npm"
  mv "$stage/npm/clients/typescript"/* "$tsb/"
  ln -s "$ts/node_modules" "$tsb/node_modules"
  (cd "$tsb" && node scripts/build.mjs >/dev/null)
  for t in $(lib_targets); do
    npm_platform "$t" "$tsb/package.json"
    plats+=("$(npmplat_of "$t")")
  done
  # The main package: the TypeScript outputs and the loader, no addon; one optional
  # dependency per platform package (what `napi prepublish` writes), npm installs the one
  # whose os/cpu/libc match.
  cp -r "$tsb/dist" "$tsb/README.md" LICENSE "$main/"
  node - "$tsb/package.json" "$main/package.json" "${plats[@]}" <<'EOF'
const fs = require("node:fs");
const [src, dst, ...plats] = process.argv.slice(2);
const pkg = JSON.parse(fs.readFileSync(src, "utf8"));
pkg.files = ["dist", "README.md", "LICENSE"];
pkg.optionalDependencies = Object.fromEntries(plats.map((p) => [`${pkg.name}-${p}`, pkg.version]));
delete pkg.scripts; delete pkg.devDependencies;
fs.writeFileSync(dst, JSON.stringify(pkg, null, 2) + "\n");
EOF
  (cd "$main" && npm pack --silent --pack-destination "$dist/npm" >/dev/null)
}

# npm_platform <triple> <main package.json>: the platform package of one target, only the
# addon, installable only where it runs (os/cpu/libc). The addon is the cdylib `napi build`
# would copy; cargo directly, because napi passes an explicit --target, which builds every
# dependency again in a target dir of its own.
npm_platform() {
  local t=$1 npmplat plat addon
  npmplat=$(npmplat_of "$t"); plat="$stage/npm/$npmplat"; addon="queuebox.$npmplat.node"
  log "cargo build --release -p queuebox-node --target $t"
  lib_env "$t" cargo_build "$t" -p queuebox-node
  mkdir -p "$plat"
  strip_copy "$(lib_rel_of "$t")/libqueuebox_node.so" "$plat/$addon"
  elf_check "$plat/$addon" "$t" "$(dylib_glibc_of "$t")"
  cp LICENSE "$plat/"
  node - "$2" "$plat" "$npmplat" "$(npmcpu_of "$t")" "$addon" "$(npmlibc_of "$t")" <<'EOF'
const fs = require("node:fs");
const [pkgPath, dir, plat, cpu, addon, libc] = process.argv.slice(2);
const main = JSON.parse(fs.readFileSync(pkgPath, "utf8"));
const pkg = {
  name: `${main.name}-${plat}`, version: main.version,
  description: `The ${plat} native addon of ${main.name}`, license: main.license,
  os: ["linux"], cpu: [cpu], libc: [libc], main: addon, files: [addon, "LICENSE"],
  engines: main.engines,
};
fs.writeFileSync(`${dir}/package.json`, JSON.stringify(pkg, null, 2) + "\n");
fs.writeFileSync(`${dir}/README.md`, `# ${pkg.name}\n\nThe prebuilt ${plat} addon of [${main.name}](https://www.npmjs.com/package/${main.name}); installed by it as an optional dependency, not on its own.\n`);
EOF
  (cd "$plat" && npm pack --silent --pack-destination "$dist/npm" >/dev/null)
}

# C#: the .NET SDK cannot be installed here, so mono's mcs compiles the library (the .NET
# Framework 4.5 API: lib/net45; the csproj's netstandard2.0/net8.0 builds need the SDK) and
# Debian's NuGet 2.8 (nuget.exe on mono) packs it with runtimes/<rid>/native/libqueuebox.so.
pkg_nuget() {
  need_apt mcs mono-devel
  need_apt nuget nuget
  local d="$stage/nuget" t rid files=""
  mkdir -p "$d/lib/net45"
  rm -rf "$dist/nuget"; mkdir -p "$dist/nuget"
  # -nowarn:1591 as the csproj's NoWarn: undocumented members do not stop the build.
  mcs -nologo -target:library -warnaserror+ -nowarn:1591 -r:System.Data.dll -doc:"$d/lib/net45/QueueBox.Inbox.xml" \
    -out:"$d/lib/net45/QueueBox.Inbox.dll" clients/csharp/src/QueueBox.Inbox/*.cs
  for t in $(lib_targets); do
    build_c_lib "$t"; rid=$(rid_of "$t")
    strip_copy "$(lib_rel_of "$t")/libqueuebox.so" "$d/runtimes/$rid/native/libqueuebox.so"
    elf_check "$d/runtimes/$rid/native/libqueuebox.so" "$t" "$(dylib_glibc_of "$t")"
    files+="    <file src=\"runtimes/$rid/native/libqueuebox.so\" target=\"runtimes/$rid/native\" />"$'\n'
  done
  cp LICENSE "$d/"
  cat >"$d/QueueBox.Inbox.nuspec" <<NUSPEC
<?xml version="1.0" encoding="utf-8"?>
<package xmlns="http://schemas.microsoft.com/packaging/2011/08/nuspec.xsd">
  <metadata>
    <id>QueueBox.Inbox</id>
    <version>$version</version>
    <authors>QueueBox</authors>
    <licenseUrl>https://www.apache.org/licenses/LICENSE-2.0</licenseUrl>
    <description>QueueBox inbox pull worker for .NET over the native QueueBox core (lib/net45 built with mono; native library for $(for t in $(lib_targets); do rid_of "$t"; done | paste -sd' ')).</description>
  </metadata>
  <files>
    <file src="lib/net45/*" target="lib/net45" />
${files}    <file src="LICENSE" />
  </files>
</package>
NUSPEC
  (cd "$d" && nuget pack QueueBox.Inbox.nuspec -OutputDirectory "$dist/nuget" -NoPackageAnalysis -NonInteractive >/dev/null)
}

pkg_relay() {
  rm -rf "$dist/relay"; mkdir -p "$dist/relay"
  local t
  for t in $(relay_targets); do
    case "$t" in
      *-windows-*) windows_relay_zip "$t" ;;
      # Not built: it needs Apple's Security framework and librdkafka for macOS
      # (docs/install.md, "What is not built").
      *-apple-*) log "relay for $t: not built (no Apple SDK here: docs/install.md)" ;;
      *) relay_tarball "$t" ;;
    esac
  done
}

# relay_tarball <triple>: librdkafka built in. On the host (kafka-static, relay/brokers/
# Cargo.toml) the binary needs glibc and the system's OpenSSL 3 where it runs. A cross
# build (kafka-static-cross) builds OpenSSL from source too and links it statically (the
# target's libssl is not on this machine), and configures librdkafka with CMake, which takes
# zig from the toolchain file cargo-zigbuild writes. A musl build is the same plus Rust's
# musl default, crt-static: zig's musl libc linked in, one static binary (elf-check: no
# NEEDED library, no interpreter) that runs on Alpine or any Linux of its arch. Its root
# certificates: rustls (PostgreSQL, HTTP destinations) carries webpki-roots inside; the
# system's file for RabbitMQ (rustls-native-certs) and Kafka (librdkafka, linked with a
# static OpenSSL, probes /etc/ssl/certs/ca-certificates.crt and the other usual paths):
# Alpine's ca-certificates package, or SSL_CERT_FILE (docs/install.md, "The musl relay and root certificates").
# relay_build_failed <triple>: cargo prints a failing build script's whole output and the
# end of a long log is often all that is kept, so repeat what says why last: the disk left
# and the end of librdkafka's configure/make output (the build script most likely to fail).
relay_build_failed() {
  local out
  echo "package: the relay build for $1 failed; disk: $(df -h --output=avail "$CARGO_TARGET_DIR" | tail -1 | tr -d ' ') free" >&2
  out=$(ls -t "$(relay_rel_of "$1")"/build/rdkafka-sys-*/output 2>/dev/null | head -1)
  [ -n "$out" ] || return 0
  for f in "$out" "${out%output}stderr"; do
    [ -f "$f" ] || continue
    echo "package: the last lines of $f:" >&2
    grep -v '^cargo:' "$f" | tail -25 >&2
  done
}
# The host's relay: native cargo, in the release tree of the other tests (target/release),
# the host's glibc (kafka-static links the host's OpenSSL 3); the others cargo-zigbuild.
relay_cargo_build() {
  local t=$1; shift
  if [ "$t" = "$host" ]; then cargo build --quiet --release "$@"; else cargo_build "$t" "$@"; fi
}
relay_rel_of() { if [ "$1" = "$host" ]; then echo "$CARGO_TARGET_DIR/release"; else rel_of "$1"; fi; }
relay_tarball() {
  local t=$1 kafka=kafka-static
  case "$t" in
    "$host") ;;
    *-musl) kafka=kafka-static-musl ;; # relay/brokers/Cargo.toml: OpenSSL's ENGINE API on musl
    *) kafka=kafka-static-cross ;;
  esac
  log "cargo build --release -p queuebox --features sqlserver,$kafka --target $t (the relay)"
  if ! relay_cargo_build "$t" -p queuebox --bin queuebox --no-default-features --features "sqlserver,$kafka"; then
    relay_build_failed "$t"
    # Once more with one job (librdkafka's make runs with cargo's job count): a parallel
    # make race passes then; anything else fails again, after the lines above.
    log "the relay build failed; once more with one job"
    CARGO_BUILD_JOBS=1 relay_cargo_build "$t" -p queuebox --bin queuebox --no-default-features --features "sqlserver,$kafka" ||
      { relay_build_failed "$t"; exit 1; }
  fi
  local rel name="queuebox-$version-$t" d="$stage/relay/queuebox-$version-$t"
  rel=$(relay_rel_of "$t")
  if readelf -d "$rel/queuebox" | grep -q 'NEEDED.*librdkafka'; then
    echo "package: the relay still links the system's librdkafka" >&2; exit 1
  fi
  mkdir -p "$d"
  strip_copy "$rel/queuebox" "$d/queuebox"
  elf_check "$d/queuebox" "$t" "$(relay_glibc_of "$t")"
  cp LICENSE CHANGELOG.md "$d/"
  cp examples/relay.yml "$d/relay.example.yml"
  cp -r core/migrations "$d/migrations"
  tar -C "$stage/relay" -czf "$dist/relay/$name.tar.gz" "$name"
}

# pkg_image: the relay as an OCI image (dist/image/queuebox-<v>-oci, tag <v>, and the same
# layout as an oci-archive tar that `podman load`, `skopeo copy oci-archive:` and
# `docker load`-compatible tools take), built with Debian's umoci: no daemon, no Dockerfile.
# From the x86_64 musl relay tarball when dist/relay has it (static: the image holds the
# binary and nothing it links), else from the host's glibc relay, with the shared libraries
# it needs (ldd: the loader, libc, libm, libgcc_s, OpenSSL 3) copied from this machine.
# Either way no shell and no package manager: /usr/local/bin/queuebox, CA certificates,
# /etc/passwd and /etc/group naming the non-root user 65532, an empty /tmp, LICENSE and the
# migrations. Config: Entrypoint [queuebox], Cmd [run], User 65532:65532, WorkingDir /,
# ports 8080 (ingest) and 9090 (the management port the Helm chart sets), OCI labels. No
# HEALTHCHECK (an OCI image has none; Kubernetes ignores Docker's): orchestrators probe
# /health/live and /health/ready (deploy/, docs/operations.md). tests/install/image runs it.
pkg_image() {
  need_apt umoci umoci
  local tarball t src img="$dist/image" tag="$version" rootfs="$stage/image-bundle/rootfs"
  tarball=$(ls "$dist/relay/queuebox-$version-x86_64-unknown-linux-musl.tar.gz" 2>/dev/null ||
    ls "$dist/relay/queuebox-$version-$host.tar.gz" 2>/dev/null) ||
    { echo "package: image: no x86_64 relay tarball in dist/relay (run the relay part first)" >&2; exit 1; }
  t=$(basename "$tarball" .tar.gz); t=${t#queuebox-"$version"-}
  rm -rf "$img" "$stage/image-src"; mkdir -p "$img" "$stage/image-src"
  tar -xzf "$tarball" -C "$stage/image-src"
  src="$stage/image-src/queuebox-$version-$t"
  log "image from $(basename "$tarball")"
  umoci init --layout "$img/queuebox-$version-oci"
  umoci new --image "$img/queuebox-$version-oci:$tag"
  umoci unpack --image "$img/queuebox-$version-oci:$tag" "$stage/image-bundle" >/dev/null
  install -D -m 0755 "$src/queuebox" "$rootfs/usr/local/bin/queuebox"
  mkdir -p "$rootfs/usr/share/queuebox" "$rootfs/etc/ssl/certs" "$rootfs/etc/queuebox"
  cp -r "$src/migrations" "$src/LICENSE" "$src/relay.example.yml" "$rootfs/usr/share/queuebox/"
  cp /etc/ssl/certs/ca-certificates.crt "$rootfs/etc/ssl/certs/"
  install -d -m 1777 "$rootfs/tmp"
  printf 'root:x:0:0:root:/root:/sbin/nologin\nqueuebox:x:65532:65532:queuebox:/nonexistent:/sbin/nologin\n' >"$rootfs/etc/passwd"
  printf 'root:x:0:\nqueuebox:x:65532:\n' >"$rootfs/etc/group"
  if [ "$t" = "$host" ]; then
    # The glibc build: its libraries and loader at the paths the binary names.
    local lib
    for lib in $(ldd "$src/queuebox" | grep -oE '/[^ ]+' | sort -u); do
      cp -L --parents "$lib" "$rootfs/"
    done
  fi
  # No shell or anything else came with the empty image (umoci new): the rootfs is this.
  [ ! -e "$rootfs/bin/sh" ] && [ ! -e "$rootfs/usr/bin/sh" ] ||
    { echo "package: image: a shell got into the image" >&2; exit 1; }
  umoci repack --image "$img/queuebox-$version-oci:$tag" "$stage/image-bundle" >/dev/null
  local created revision
  created=$(git log -1 --format=%cI)
  revision=$(git rev-parse HEAD)
  umoci config --image "$img/queuebox-$version-oci:$tag" \
    --os linux --architecture amd64 --author "QueueBox" --created "$created" \
    --config.entrypoint /usr/local/bin/queuebox --config.cmd run \
    --config.user 65532:65532 --config.workingdir / \
    --config.env PATH=/usr/local/bin --config.env SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt \
    --config.exposedports 8080/tcp --config.exposedports 9090/tcp \
    --config.label "org.opencontainers.image.title=queuebox" \
    --config.label "org.opencontainers.image.description=QueueBox relay: a safe inbox and outbox in your own database. Probes: GET /health/live (process up), GET /health/ready (database, schema and loops)" \
    --config.label "org.opencontainers.image.version=$version" \
    --config.label "org.opencontainers.image.revision=$revision" \
    --config.label "org.opencontainers.image.created=$created" \
    --config.label "org.opencontainers.image.source=https://github.com/alternayte/queuebox" \
    --config.label "org.opencontainers.image.url=https://github.com/alternayte/queuebox" \
    --config.label "org.opencontainers.image.documentation=https://github.com/alternayte/queuebox/blob/main/docs/operations.md" \
    --config.label "org.opencontainers.image.licenses=Apache-2.0" \
    --config.label "org.opencontainers.image.base.name=scratch" \
    --config.label "io.queuebox.relay.target=$t"
  umoci gc --layout "$img/queuebox-$version-oci"
  (cd "$img/queuebox-$version-oci" && tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="$created" -cf "../queuebox-$version-oci.tar" .)
  # The sizes MANIFEST.txt records: the layer as pulled (compressed) and as unpacked.
  local layer unpacked
  layer=$(python3 - "$img/queuebox-$version-oci" <<'PY'
import json, sys, os
d = sys.argv[1]
idx = json.load(open(os.path.join(d, "index.json")))
def blob(digest):
    return os.path.join(d, "blobs", *digest.split(":"))
m = json.load(open(blob(idx["manifests"][0]["digest"])))
print(sum(l["size"] for l in m["layers"]))
PY
)
  unpacked=$(du -sb "$rootfs" | cut -f1)
  echo "image queuebox:$tag ($t relay): layers $layer bytes compressed ($((layer / 1024 / 1024)) MiB), rootfs $unpacked bytes unpacked ($((unpacked / 1024 / 1024)) MiB)" >"$stage/image-size"
  log "$(cat "$stage/image-size")"
}

# zip_tree <dir> <prefix> <zip>: every file under <dir>, named <prefix>/<path> in the zip
# (the Go module zip, the Windows zips: Windows users unpack a .zip without other tools).
zip_tree() {
  python3 - "$1" "$2" "$3" <<'EOF'
import os, sys, zipfile
src, prefix, out = sys.argv[1:]
with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
    for d, _, files in sorted(os.walk(src)):
        for f in sorted(files):
            p = os.path.join(d, f)
            z.write(p, prefix + "/" + os.path.relpath(p, src))
EOF
}

# Windows, x86_64-pc-windows-gnu: Debian's mingw-w64 is the linker (Rust's default for the
# target) and the C compiler (ring, mimalloc, zstd), with native cargo, in a target dir of its
# own (win_dir): its cold build neither waits on nor blocks the Linux trees' cargo lock. The
# posix flavour of mingw's gcc (Debian's default); pe-check.sh makes sure nothing of the
# MinGW runtime (libwinpthread-1.dll, libgcc_s_seh-1.dll) is left for the user to find.
win_dir() { echo "$CARGO_TARGET_DIR/windows-gnu"; }
win_rel_of() { echo "$(win_dir)/$1/release"; }
win_build() {
  local t=$1; shift
  need_apt x86_64-w64-mingw32-gcc gcc-mingw-w64-x86-64-posix
  rustup target list --installed | grep -qx "$t" || rustup target add "$t"
  log "cargo build --release --target $t $* (mingw-w64)"
  CARGO_TARGET_DIR="$(win_dir)" cargo build --quiet --release --target "$t" "$@"
}
win_strip() { mkdir -p "$(dirname "$2")"; x86_64-w64-mingw32-strip --strip-debug -o "$2" "$1"; }
# The Windows relay's features: PostgreSQL and SQL Server, HTTP, RabbitMQ and NATS; no Kafka
# (queuebox-brokers' `kafka` off): librdkafka would need OpenSSL and librdkafka cross-built
# for MinGW, a cold C build that did not finish here in the time it was given, and far
# beyond CI's budget (docs/install.md, "Windows").
win_relay_features=sqlserver
# What a program linking libqueuebox.a statically needs besides it: the Windows libraries of
# Rust's std and of the crates (the DLL's imports; tests/platforms/windows.sh links with them).
win_static_libs="-lws2_32 -lbcrypt -ladvapi32 -lkernel32 -lntdll -luserenv -lsynchronization -lsecur32 -lshell32 -lole32"

# windows_c_zip <triple>: queuebox.dll with its import library (MinGW's libqueuebox.dll.a) and
# a .def of its exports (for MSVC's `lib /def:`), the static library and the header.
windows_c_zip() {
  local t=$1 rel name="queuebox-c-$version-$1" d="$stage/c/queuebox-c-$version-$1"
  win_build "$t" -p queuebox-c
  rel=$(win_rel_of "$t")
  mkdir -p "$d/include" "$d/bin" "$d/lib/pkgconfig"
  cp bindings/c/include/queuebox.h "$d/include/"
  win_strip "$rel/queuebox.dll" "$d/bin/queuebox.dll"
  cp "$rel/libqueuebox.dll.a" "$d/lib/"
  # Not stripped: MinGW's strip refuses the archive (an empty .dwo member, "has no sections").
  cp "$rel/libqueuebox.a" "$d/lib/libqueuebox.a"
  # Every function the header declares is exported by the DLL.
  # shellcheck disable=SC2046
  bash scripts/pe-check.sh "$d/bin/queuebox.dll" $(grep -oE '\bqb_[a-z0-9_]+\(' bindings/c/include/queuebox.h | tr -d '(' | sort -u)
  bash scripts/pe-check.sh "$d/lib/libqueuebox.a"
  {
    echo "LIBRARY queuebox.dll"
    echo "EXPORTS"
    x86_64-w64-mingw32-objdump -p "$d/bin/queuebox.dll" | sed -n 's/^\s*\[ *[0-9]*\] \(qb_[a-z0-9_]*\)$/    \1/p'
  } >"$d/lib/queuebox.def"
  cp LICENSE "$d/"
  write_pc "$d/lib/pkgconfig/queuebox.pc" "$win_static_libs"
  cat >"$d/README.txt" <<EOF
QueueBox $version C library for Windows x86_64 (built with MinGW-w64).
  include/queuebox.h        the API (contract: proto-docs/ffi.md in the repository)
  bin/queuebox.dll          the library: put it beside your .exe (or on PATH)
  lib/libqueuebox.dll.a     its import library for MinGW-w64 gcc/clang: -Llib -lqueuebox
  lib/queuebox.def          its exports; MSVC: lib /def:lib\\queuebox.def /machine:x64 /out:queuebox.lib
  lib/libqueuebox.a         static library (MinGW-w64 only), link also: $win_static_libs
  lib/pkgconfig/queuebox.pc pkg-config --cflags --libs [--static] queuebox (MSYS2)
Tested: built with Debian's x86_64-w64-mingw32-gcc and run under wine 8 (not on Windows
itself, and not with MSVC).
EOF
  zip_tree "$d" "$name" "$dist/c/$name.zip"
}

# windows_relay_zip <triple>: queuebox.exe with the features of win_relay_features, in a zip
# with the example configuration and the migrations.
windows_relay_zip() {
  local t=$1 rel name="queuebox-$version-$1" d="$stage/relay/queuebox-$version-$1"
  win_build "$t" -p queuebox --bin queuebox --no-default-features --features "$win_relay_features"
  rel=$(win_rel_of "$t")
  mkdir -p "$d"
  win_strip "$rel/queuebox.exe" "$d/queuebox.exe"
  bash scripts/pe-check.sh "$d/queuebox.exe"
  cp LICENSE CHANGELOG.md "$d/"
  cp examples/relay.yml "$d/relay.example.yml"
  cp -r core/migrations "$d/migrations"
  zip_tree "$d" "$name" "$dist/relay/$name.zip"
}

# macOS, aarch64-apple-darwin and x86_64-apple-darwin: cargo-zigbuild, with no Apple SDK (none
# can be installed here). zig brings libSystem's stubs; the C library also calls two
# frameworks, through crates of the core's dependency tree: CoreFoundation (chrono's local
# time zone, iana-time-zone, which chrono's `clock` feature brings in; whoami, sqlx's default
# user name, for the computer's name) and SystemConfiguration (whoami:
# SCDynamicStoreCopyComputerName). macos_stubs writes a text stub (.tbd) of each framework
# with just the functions those crates call, so the link records the frameworks' install
# names as the SDK would; both are in every macOS. A crate that calls another framework
# function fails the link, naming it. The stubs live at a fixed path in the target dir:
# the path is part of the rustflags, and one that changed would rebuild the tree.
# Minimum macOS: 11.0 on Apple silicon, 10.12 on Intel (rustc's defaults for the targets;
# scripts/macho-check.sh verifies them in LC_BUILD_VERSION).
macos_min_of() { case "$1" in aarch64-*) echo 11.0 ;; *) echo 10.12 ;; esac; }
macos_arch_of() { case "$1" in aarch64-*) echo arm64 ;; *) echo x86_64 ;; esac; }
macos_fw() { echo "/System/Library/Frameworks/$1.framework/Versions/A/$1"; }
macos_stubs() {
  local d="$CARGO_TARGET_DIR/macos-stubs"
  macos_stub "$d" CoreFoundation _CFRelease _CFTimeZoneCopySystem _CFTimeZoneGetName _CFTimeZoneResetSystem \
    _CFStringGetCStringPtr _CFStringGetCString _CFStringGetLength _CFStringGetBytes _CFStringGetMaximumSizeForEncoding
  macos_stub "$d" SystemConfiguration _SCDynamicStoreCopyComputerName
  echo "$d"
}
# macos_stub <dir> <framework> <symbol>...: <dir>/<framework>.framework/<framework>.tbd.
macos_stub() {
  local d=$1/$2.framework fw=$2; shift 2
  mkdir -p "$d"
  cat >"$d/$fw.tbd" <<EOF
--- !tapi-tbd
tbd-version:     4
targets:         [ x86_64-macos, arm64-macos ]
install-name:    '$(macos_fw "$fw")'
exports:
  - targets:         [ x86_64-macos, arm64-macos ]
    symbols:         [ $(echo "$@" | sed 's/ /, /g') ]
...
EOF
}
# macos_build <triple> <cargo args...>: cargo-zigbuild for the target in a target dir of its
# own (target/apple: the Linux trees' cargo lock is not shared with it), the stub's
# directory on the framework search path (-F).
macos_dir() { echo "$CARGO_TARGET_DIR/apple"; }
macos_build() {
  local t=$1 stubs var zt; shift
  zig_tools
  stubs=$(macos_stubs)
  var="CARGO_TARGET_$(echo "$t" | tr 'a-z-' 'A-Z_')_RUSTFLAGS"
  zt="$(arch_of "$t")-macos.$(macos_min_of "$t")-none"
  log "cargo zigbuild --release --target $t $* (no Apple SDK, zig -target $zt)"
  # The minimum macOS: rustc's objects take MACOSX_DEPLOYMENT_TARGET, but zig compiles the C
  # code (ring, mimalloc) and links the image for the version in its -target, its newest
  # macOS (15.0) when the target has none. cargo-zigbuild's wrappers (0.20, and still 0.22)
  # put `-target <arch>-macos-none` first and drop the `--target=arm64-apple-macosx11.0`
  # that cc and rustc pass; zig lets -target override -mmacosx-version-min, and a target
  # with a suffix (`--target aarch64-apple-darwin.11.0`) becomes `aarch64-macos-none.11.0`,
  # which zig refuses (a version there is glibc's). zig takes the last -target it is given:
  # CFLAGS_<triple> (cc puts it after the wrapper's) and a link-arg give it
  # `<arch>-macos.<min>-none`, so every object and the image say <min> (macho-check.sh).
  # -install_name: the dylib's id is @rpath/libqueuebox.dylib (a program finds it through its
  # own rpath), not this build's absolute path. It cannot be changed after the link: that
  # breaks the ad-hoc code signature zig's linker writes, without which Apple silicon refuses
  # to load the code.
  env "$var=-C link-arg=-F$stubs -C link-arg=-target -C link-arg=$zt -C link-arg=-Wl,-install_name,@rpath/libqueuebox.dylib" \
    "CFLAGS_${t//-/_}=-target $zt" MACOSX_DEPLOYMENT_TARGET="$(macos_min_of "$t")" \
    CARGO_TARGET_DIR="$(macos_dir)" cargo zigbuild --quiet --release --target "$t" "$@"
}
# macos_check <file> <triple>: what the image may load: libSystem, the two frameworks, and
# libiconv with libcharset, which Rust's std links on Apple targets (-liconv; both in every
# macOS's /usr/lib) though nothing binds to them: macho-check.sh fails on any undefined
# symbol not bound to one of these.
macos_check() {
  bash "$root/scripts/macho-check.sh" "$1" "$(macos_arch_of "$2")" "$(macos_min_of "$2")" \
    "$(macos_fw CoreFoundation)" "$(macos_fw SystemConfiguration)" /usr/lib/libiconv.2.dylib /usr/lib/libcharset.1.dylib
}

# macos_c_tarball <triple>: libqueuebox.dylib (install name @rpath/libqueuebox.dylib), the .a
# and the header, checked by macho-check.sh, never run (no macOS here).
macos_c_tarball() {
  local t=$1 rel name="queuebox-c-$version-$1" d="$stage/c/queuebox-c-$version-$1"
  macos_build "$t" -p queuebox-c
  rel="$(macos_dir)/$t/release"
  mkdir -p "$d/include" "$d/lib/pkgconfig"
  cp bindings/c/include/queuebox.h "$d/include/"
  cp "$rel/libqueuebox.a" "$rel/libqueuebox.dylib" "$d/lib/"
  macos_check "$d/lib/libqueuebox.dylib" "$t"
  macos_check "$d/lib/libqueuebox.a" "$t"
  cp LICENSE "$d/"
  write_pc "$d/lib/pkgconfig/queuebox.pc" "-framework CoreFoundation -framework SystemConfiguration"
  cat >"$d/README.txt" <<EOF
QueueBox $version C library for macOS $(macos_arch_of "$t") (macOS >= $(macos_min_of "$t")).
  include/queuebox.h        the API (contract: proto-docs/ffi.md in the repository)
  lib/libqueuebox.dylib     shared library (needs libSystem, CoreFoundation, SystemConfiguration)
  lib/libqueuebox.a         static library (link also: -framework CoreFoundation -framework SystemConfiguration)
  lib/pkgconfig/queuebox.pc PKG_CONFIG_PATH=<this dir>/lib/pkgconfig pkg-config --cflags --libs queuebox
Built on Linux with cargo-zigbuild, without an Apple SDK; checked (architecture, load
commands, minimum macOS, undefined symbols), never run on a Mac. Not signed or notarized.
EOF
  tar -C "$stage/c" -czf "$dist/c/$name.tar.gz" "$name"
}

manifest() {
  (cd "$dist" && find . -type f ! -name SHA256SUMS ! -name MANIFEST.txt ! -path './go/*/@v/list' \
    ! -name '*.info' ! -name '*.mod' ! -path './image/*-oci/*' | sort | sed 's#^\./##' >"$stage/files")
  (cd "$dist" && xargs -a "$stage/files" sha256sum >SHA256SUMS)
  {
    echo "QueueBox $version artifacts, built on $host for $targets ($(date -u +%Y-%m-%dT%H:%M:%SZ))"
    (cd "$dist" && xargs -a "$stage/files" du -h --apparent-size)
    # The image: its sizes (pkg_image), this run's or the last one's.
    if [ -f "$stage/image-size" ]; then cp "$stage/image-size" "$dist/image/SIZE"; fi
    if [ -f "$dist/image/SIZE" ]; then cat "$dist/image/SIZE"; fi
  } >"$dist/MANIFEST.txt"
  cat "$dist/MANIFEST.txt"
}

parts=("$@")
[ ${#parts[@]} -eq 0 ] && parts=(crates c go python npm nuget relay image)
mkdir -p "$dist"
for p in "${parts[@]}"; do
  t0=$(date +%s)
  "pkg_$p"
  # The disk left: a cold run writes several GB of build trees, and a full disk fails a
  # build with a message about whatever file it was writing.
  log "$p done in $(($(date +%s) - t0))s ($(df -h --output=avail "$CARGO_TARGET_DIR" | tail -1 | tr -d ' ') free)"
done
manifest
