#!/usr/bin/env bash
# macho-check.sh <file> <arm64|x86_64> <min-macos> [<dylib>...]: checks a shipped macOS file
# without running it (no macOS here), with Debian's LLVM tools (llvm-objdump, llvm-nm):
#   - every Mach-O header (one per member of a .a) is of the arch;
#   - every LC_BUILD_VERSION (or LC_VERSION_MIN_MACOSX) says macOS and a minimum version not
#     newer than <min-macos> (what the package promises, e.g. 11.0 for Apple silicon);
#   - a .dylib's install name is @rpath/...; an arm64 image carries a code signature;
#   - a .dylib or executable loads /usr/lib/libSystem.B.dylib and otherwise only the <dylib>s
#     named (install names such as
#     /System/Library/Frameworks/CoreFoundation.framework/Versions/A/CoreFoundation), and
#     each of its undefined symbols is bound (two-level namespace) to one of those.
# Prints what it found; exits 1 naming what is wrong.
set -euo pipefail
[ $# -ge 3 ] || { echo "usage: macho-check.sh <file> <arm64|x86_64> <min-macos> [<dylib install name>...]" >&2; exit 2; }
file=$1 arch=$2 minos=$3; shift 3
allowed=(/usr/lib/libSystem.B.dylib "$@")
fail() { echo "macho-check: $file: $*" >&2; exit 1; }
[ -f "$file" ] || fail "no such file"
case "$arch" in arm64) cpu=ARM64 ;; x86_64) cpu=X86_64 ;; *) echo "macho-check: arch '$arch' is not arm64 or x86_64" >&2; exit 2 ;; esac
heads=$(llvm-objdump --macho --private-headers "$file" 2>&1) || fail "not a Mach-O file: $(echo "$heads" | tail -1)"
# The line after each "magic cputype ..." heading: MH_MAGIC_64 <cputype> <subtype> <caps> <filetype> ...
cpus=$(echo "$heads" | awk '/^ *magic +cputype/ {getline; print $2}' | sort -u)
[ -n "$cpus" ] || fail "no Mach-O header found"
[ "$cpus" = "$cpu" ] || fail "built for '$(echo "$cpus" | paste -sd,)', not $arch"
filetypes=$(echo "$heads" | awk '/^ *magic +cputype/ {getline; print $5}' | sort -u | paste -sd,)

# version_le <a> <b>: a <= b, as dotted versions.
version_le() { [ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | head -1)" = "$1" ]; }
# Minimum versions: LC_BUILD_VERSION's "minos", LC_VERSION_MIN_MACOSX's "version".
mins=$(echo "$heads" | awk '/cmd LC_BUILD_VERSION/ {b=1} b && /^ *minos / {print $2; b=0} /cmd LC_VERSION_MIN_MACOSX/ {v=1} v && /^ *version / {print $2; v=0}' | sort -uV)
[ -n "$mins" ] || fail "no LC_BUILD_VERSION or LC_VERSION_MIN_MACOSX load command"
platforms=$(echo "$heads" | awk '/cmd LC_BUILD_VERSION/ {b=1} b && /^ *platform / {print $2; b=0}' | sort -u)
for p in $platforms; do
  case "$p" in macos | 1) ;; *) fail "LC_BUILD_VERSION platform '$p', not macos" ;; esac
done
newest=$(echo "$mins" | tail -1)
version_le "$newest" "$minos" || fail "needs macOS $newest, newer than the $minos it promises"

if [ "$(head -c 7 "$file" | tr -d '\0')" = '!<arch>' ]; then
  echo "$file: $arch static archive ($filetypes), minimum macOS $(echo "$mins" | paste -sd,)"
  exit 0
fi
# A dylib's id: @rpath/<name>, never the build machine's path. Apple silicon runs signed code
# only: the linker's ad-hoc signature (LC_CODE_SIGNATURE) must be there.
id=$(echo "$heads" | awk '/cmd LC_ID_DYLIB/ {d=1} d && /^ *name / {print $2; d=0}')
case "$filetypes" in *DYLIB*) case "$id" in @rpath/*) ;; *) fail "its install name is '$id', not @rpath/..." ;; esac ;; esac
if [ "$arch" = arm64 ]; then grep -q 'cmd LC_CODE_SIGNATURE' <<<"$heads" || fail "no code signature (arm64 macOS loads signed code only)"; fi
dylibs=$(echo "$heads" | awk '/cmd LC_(LOAD|LOAD_WEAK|REEXPORT|LAZY_LOAD)_DYLIB/ {d=1} d && /^ *name / {print $2; d=0}')
for d in $dylibs; do
  ok=no
  for a in "${allowed[@]}"; do [ "$d" = "$a" ] && ok=yes; done
  [ $ok = yes ] || fail "loads $d, which is not one of: ${allowed[*]}"
done
grep -qx /usr/lib/libSystem.B.dylib <<<"$dylibs" || fail "does not load libSystem"
# llvm-nm -m: "(undefined) external _sym (from libSystem)": the library each symbol binds to,
# by its short name (libSystem, CoreFoundation, ...).
short=$(for a in "${allowed[@]}"; do basename "$a" | sed 's/\.B\.dylib$//; s/\.dylib$//'; done | paste -sd'|')
undef=$(llvm-nm -m -u "$file")
stray=$(echo "$undef" | grep -vE "\(from ($short)\)$" | grep -v '^$' || true)
[ -z "$stray" ] || fail "undefined symbols not bound to ${allowed[*]}: $(echo "$stray" | head -5 | paste -sd';')"
echo "$file: $arch $filetypes${id:+ $id}, minimum macOS $newest, loads $(echo "$dylibs" | paste -sd' '), $(echo "$undef" | grep -c . || true) undefined symbols, all from $(echo "$short" | tr '|' ' ')"
