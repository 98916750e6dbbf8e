#!/usr/bin/env bash
# elf-check.sh <file> <arch> <glibc>: checks that a shipped native file is for the platform
# its package name claims. <arch> is x86_64 or aarch64 (the ELF machine of the file, or of
# every member of a .a); <glibc> is the newest glibc the file may need, e.g. 2.17 for a
# manylinux2014 wheel (the highest GLIBC_x.y symbol version it references must not be
# newer), "static" for a binary that must need no shared library at all (musl builds), "musl"
# for a musl shared library (no glibc symbol version, no glibc library: only musl's libc.so), or
# "any" to check the machine only.
# Prints "<file>: <arch>, needs glibc <x.y>"; exits 1 naming what is wrong.
set -euo pipefail
[ $# -eq 3 ] || { echo "usage: elf-check.sh <file> <x86_64|aarch64> <max-glibc|static|musl|any>" >&2; exit 2; }
file=$1 arch=$2 glibc=$3
case "$arch" in
  x86_64) machine='Advanced Micro Devices X86-64' ;;
  aarch64) machine='AArch64' ;;
  *) echo "elf-check: arch '$arch' is not x86_64 or aarch64" >&2; exit 2 ;;
esac
fail() { echo "elf-check: $file: $*" >&2; exit 1; }
[ -f "$file" ] || fail "no such file"

# Every ELF header in the file (one per member of an archive) must name the machine.
machines=$(readelf -h "$file" 2>/dev/null | sed -n 's/^ *Machine: *//p' | sort -u)
[ -n "$machines" ] || fail "not an ELF file or archive"
[ "$machines" = "$machine" ] || fail "built for '$(echo "$machines" | paste -sd,)', not $arch"

# A static archive has no symbol versions yet (the final link picks them); its machine is
# all there is to check.
if [ "$(head -c 7 "$file")" = '!<arch>' ]; then
  echo "$file: $arch static archive"
  exit 0
fi

# Version needs: "Name: GLIBC_2.17  Flags: none  Version: 3" lines of .gnu.version_r.
newest=$(readelf -V --wide "$file" | grep -oE 'Name: GLIBC_[0-9]+(\.[0-9]+)+' | sed 's/Name: GLIBC_//' |
  sort -t. -k1,1n -k2,2n -k3,3n | tail -n1 || true) # a static binary has none: grep fails
needed=$(readelf -d "$file" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | paste -sd' ')
if [ "$glibc" = static ]; then
  [ -z "$needed" ] || fail "must be static but needs $needed"
  readelf -l "$file" | grep -q 'Requesting program interpreter' && fail "must be static but has a program interpreter"
  echo "$file: $arch, static (no shared library, no interpreter)"
  exit 0
fi
if [ "$glibc" = musl ]; then
  [ -z "$newest" ] || fail "must be a musl build but needs glibc $newest"
  for n in $needed; do
    case "$n" in libc.so | libc.musl-*.so.1) ;; *) fail "must be a musl build but needs $n" ;; esac
  done
  echo "$file: $arch, musl (links ${needed:-nothing})"
  exit 0
fi
if [ "$glibc" = any ]; then
  echo "$file: $arch"
  exit 0
fi
[[ "$glibc" =~ ^[0-9]+\.[0-9]+$ ]] || { echo "elf-check: glibc '$glibc' is not x.y, static, musl or any" >&2; exit 2; }
[ -n "$newest" ] || fail "references no GLIBC_ symbol version (not a glibc build?)"
if [ "$(printf '%s\n%s\n' "$newest" "$glibc" | sort -t. -k1,1n -k2,2n | tail -n1)" != "$glibc" ]; then
  syms=$(readelf --dyn-syms --wide "$file" | grep -oE "[A-Za-z0-9_]+@GLIBC_$newest" | sort -u | head -5 | paste -sd' ')
  fail "needs glibc $newest (newer than $glibc): $syms"
fi
echo "$file: $arch, needs glibc $newest (<= $glibc); links ${needed:-nothing}"
