#!/usr/bin/env bash
# pe-check.sh <file> [<export>...]: checks that a shipped Windows file (.exe, .dll, or a .a of
# COFF objects) is x86-64 and, for an .exe or .dll, that every DLL it imports comes with
# Windows itself: no MinGW runtime (libgcc_s_seh-1.dll, libwinpthread-1.dll, libstdc++-6.dll)
# that a user's machine would not have. Each <export> must be in a DLL's export table.
# Needs Debian's binutils-mingw-w64-x86-64. Prints what it found; exits 1 naming what is wrong.
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: pe-check.sh <file> [<export>...]" >&2; exit 2; }
file=$1; shift
fail() { echo "pe-check: $file: $*" >&2; exit 1; }
[ -f "$file" ] || fail "no such file"
objdump=x86_64-w64-mingw32-objdump
formats=$($objdump -f "$file" 2>/dev/null | sed -n 's/.*file format //p' | sort -u)
if [ "$(head -c 7 "$file" | tr -d '\0')" = '!<arch>' ]; then
  [ "$formats" = pe-x86-64 ] || fail "archive members are '$(echo "$formats" | paste -sd,)', not pe-x86-64"
  echo "$file: x86-64 COFF static archive"
  exit 0
fi
[ "$formats" = pei-x86-64 ] || fail "format '$formats', not pei-x86-64 (a 64-bit Windows image)"
headers=$($objdump -p "$file")
# The DLLs of a Windows 10 / Server 2016 installation that Rust's std, ring, mimalloc, tokio
# and the C runtime use (msvcrt: the MinGW C runtime's base; api-ms-win-*: its API sets).
system='kernel32|ntdll|ws2_32|bcrypt|bcryptprimitives|advapi32|userenv|msvcrt|ucrtbase|api-ms-win-[a-z0-9-]+|secur32|crypt32|ncrypt|ole32|oleaut32|shell32|user32|iphlpapi|dbghelp|synchronization|mswsock|rpcrt4|normaliz|combase'
dlls=$(echo "$headers" | sed -n 's/^\s*DLL Name: //p' | sort -uf)
[ -n "$dlls" ] || fail "imports no DLL at all (not a Windows image?)"
bad=$(echo "$dlls" | grep -viE "^($system)\.dll$" || true)
[ -z "$bad" ] || fail "imports DLLs that are not part of Windows: $(echo "$bad" | paste -sd' ')"
for sym in "$@"; do
  grep -qE "^\s*\[ *[0-9]+\] $sym$" <<<"$headers" || fail "exports no $sym"
done
subsystem=$(echo "$headers" | sed -n 's/^Subsystem\s*//p')
echo "$file: pei-x86-64, subsystem $subsystem, imports $(echo "$dlls" | paste -sd' ')"
