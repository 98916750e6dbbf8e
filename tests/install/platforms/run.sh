#!/usr/bin/env bash
# Platforms: every native file in dist/ is for the platform its package names, and needs no
# newer glibc than that platform promises (scripts/elf-check.sh: ELF machine, newest
# GLIBC_x.y symbol version). This covers what the other install tests cannot run here — the
# aarch64 wheel, npm addon and NuGet runtime (no aarch64 Python, Node or mono) — and catches
# a wheel tagged manylinux2014 whose extension needs glibc 2.34, or an x86_64 file in an
# arm64 folder.
set -euo pipefail
source tests/install/lib.sh
check="$repo/scripts/elf-check.sh"
install_dir=$(install_workdir platforms)
trap install_cleanup EXIT
arch_of_name() { case "$1" in *x86_64* | *x64* | *amd64*) echo x86_64 ;; *aarch64* | *arm64*) echo aarch64 ;; *) return 1 ;; esac; }
host_glibc=$(ldd --version | sed -n '1s/.* \([0-9][0-9]*\.[0-9][0-9]*\)$/\1/p')
checked=0
# elf <file> <name that says the platform> <glibc>
elf() { bash "$check" "$1" "$(arch_of_name "$2")" "$3" | sed "s#$install_dir/##"; checked=$((checked + 1)); }
# musl_loads <file> [<symbol prefixes the host program provides>]: there is no musl CPython
# or Node here, so a musl extension cannot run its quick start; musl's own dynamic loader
# (Debian's musl package) loads it instead (--list), and every symbol it cannot resolve must
# be one the interpreter provides (Python's C API, Node-API): the rest resolved against musl.
# Without prefixes (the C library, the NuGet runtime) every symbol must resolve.
musl_loads() {
  local ld=/lib/ld-musl-x86_64.so.1 missing other
  [ -e "$ld" ] || ffi_need_apt_pkg musl || { echo "install-platforms: $1: no musl loader here, not loaded"; return 0; }
  missing=$("$ld" --list "$1" 2>&1 | sed -n -E 's/^Error relocating .*: ([A-Za-z0-9_]+): symbol not found$/\1/p' || true)
  other=$missing
  [ -z "${2:-}" ] || other=$(echo "$missing" | grep -vE "^($2)" | grep . || true)
  [ -z "$other" ] || { echo "install-platforms: $1: musl's loader cannot resolve $(echo "$other" | head -5 | paste -sd' ')" >&2; exit 1; }
  if [ -z "${2:-}" ]; then echo "${1#"$install_dir"/}: loaded by musl's loader; every symbol resolved"
  else echo "${1#"$install_dir"/}: loaded by musl's loader; unresolved only the host's $(echo "$missing" | grep -c .) symbols ($2)"; fi
}

# The libraries (C, Python, npm, NuGet, Go) of every glibc target, x86_64 too, are zig builds
# that promise glibc 2.17 (scripts/package.sh); only the host's relay needs the host's glibc.
# C: the tarball's triple; a musl .so needs no glibc, only musl's libc.so, and loads.
for t in "$dist"/c/queuebox-c-*.tar.gz; do
  [ -e "$t" ] || continue
  tar -xzf "$t" -C "$install_dir"
  d="$install_dir/$(basename "$t" .tar.gz)"; g=2.17
  case "$t" in *-musl.tar.gz) g=musl ;; esac
  elf "$d/lib/libqueuebox.so" "$t" "$g"; elf "$d/lib/libqueuebox.a" "$t" "$g"
  [ "$g" != musl ] || musl_loads "$d/lib/libqueuebox.so"
done
# Python: manylinux2014 is glibc 2.17 (PEP 599), manylinux_X_Y is glibc X.Y (PEP 600).
for w in "$dist"/python/*.whl; do
  [ -e "$w" ] || continue
  tag=$(basename "$w" .whl | sed 's/.*-//')
  case "$tag" in
    manylinux2014_*) g=2.17 ;;
    manylinux_*) g=$(echo "$tag" | sed -E 's/^manylinux_([0-9]+)_([0-9]+)_.*/\1.\2/') ;;
    musllinux_*) g=musl ;; # PEP 656: linked to musl's libc.so, no glibc symbol
    *) echo "install-platforms: $w: platform tag $tag is not manylinux or musllinux" >&2; exit 1 ;;
  esac
  rm -rf "$install_dir/whl"; mkdir "$install_dir/whl"
  python3 -m zipfile -e "$w" "$install_dir/whl"
  elf "$(ls "$install_dir"/whl/queuebox_inbox/_native*.so)" "$tag" "$g"
  [ "$g" != musl ] || musl_loads "$(ls "$install_dir"/whl/queuebox_inbox/_native*.so)" '_?Py'
done
# npm: the platform package's name and its package.json cpu must agree with the addon.
for p in "$dist"/npm/alternayte-queuebox-inbox-linux-*.tgz; do
  [ -e "$p" ] || continue
  rm -rf "$install_dir/npm"; mkdir "$install_dir/npm"
  tar -xzf "$p" -C "$install_dir/npm"
  cpu=$(node -p "require('$install_dir/npm/package/package.json').cpu[0]")
  [ "$(arch_of_name "$cpu")" = "$(arch_of_name "$p")" ] ||
    { echo "install-platforms: $p declares cpu $cpu" >&2; exit 1; }
  libc=$(node -p "require('$install_dir/npm/package/package.json').libc[0]")
  case "$p" in *-musl-*) want=musl g=musl ;; *) want=glibc g=2.17 ;; esac
  [ "$libc" = "$want" ] || { echo "install-platforms: $p declares libc $libc" >&2; exit 1; }
  elf "$(ls "$install_dir"/npm/package/*.node)" "$p" "$g"
  [ "$g" != musl ] || musl_loads "$(ls "$install_dir"/npm/package/*.node)" 'napi_|node_api_'
done
# The main npm package names every platform package built as an optional dependency.
main=$(ls "$dist"/npm/alternayte-queuebox-inbox-[0-9]*.tgz 2>/dev/null || true)
[ -z "$main" ] || tar -xzOf "$main" package/package.json >"$install_dir/main.json"
for p in "$dist"/npm/alternayte-queuebox-inbox-linux-*.tgz; do
  [ -e "$p" ] || continue
  name=$(tar -xzOf "$p" package/package.json | node -p 'JSON.parse(require("fs").readFileSync(0, "utf8")).name')
  node -e 'const m = require(process.argv[1]); if (!(m.optionalDependencies || {})[process.argv[2]]) process.exit(1)' \
    "$install_dir/main.json" "$name" || { echo "install-platforms: the main npm package does not list $name" >&2; exit 1; }
done
# NuGet: runtimes/<rid>/native per built target (linux-musl-x64: musl, as the C library).
for n in "$dist"/nuget/*.nupkg; do
  [ -e "$n" ] || continue
  rm -rf "$install_dir/nupkg"; mkdir "$install_dir/nupkg"
  python3 -m zipfile -e "$n" "$install_dir/nupkg"
  for so in "$install_dir"/nupkg/runtimes/*/native/libqueuebox.so; do
    case "$so" in */linux-musl-*) g=musl ;; *) g=2.17 ;; esac
    elf "$so" "$so" "$g"
    [ "$g" != musl ] || musl_loads "$so"
  done
  # Built from the same library as the C tarball (package.sh's build_c_lib), in the same run.
  if ls "$dist"/c/queuebox-c-*-x86_64-unknown-linux-musl.tar.gz >/dev/null 2>&1 &&
    [ ! -e "$install_dir/nupkg/runtimes/linux-musl-x64/native/libqueuebox.so" ]; then
    echo "install-platforms: dist/c has the x86_64 musl library but $(basename "$n") has no runtimes/linux-musl-x64" >&2; exit 1
  fi
done
# Go: lib/<goos>_<goarch>/libqueuebox.a inside the module zip.
for z in "$dist"/go/github.com/alternayte/queuebox/clients/go/@v/*.zip; do
  [ -e "$z" ] || continue
  rm -rf "$install_dir/go"; mkdir "$install_dir/go"
  python3 -m zipfile -e "$z" "$install_dir/go"
  libs=$(find "$install_dir/go" -path '*/lib/*/libqueuebox.a' | sort)
  [ -n "$libs" ] || { echo "install-platforms: $z holds no lib/<goos>_<goarch>/libqueuebox.a" >&2; exit 1; }
  for a in $libs; do elf "$a" "$a" any; done # the path names lib/linux_<goarch>
done
# Relay: glibc builds as the C library; a musl build must be static.
for t in "$dist"/relay/queuebox-*.tar.gz; do
  [ -e "$t" ] || continue
  tar -xzf "$t" -C "$install_dir"
  b="$install_dir/$(basename "$t" .tar.gz)/queuebox"
  case "$t" in
    *-musl.tar.gz) g=static ;;
    *x86_64-unknown-linux-gnu*) g=$host_glibc ;;
    *) g=2.17 ;;
  esac
  elf "$b" "$t" "$g"
done
[ "$checked" -gt 0 ] || { echo "install-platforms: no native file in $dist" >&2; exit 1; }
echo "install-platforms: $checked native files match the platform their package names"
