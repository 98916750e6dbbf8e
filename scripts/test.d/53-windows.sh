#!/usr/bin/env bash
# Windows x86_64 (x86_64-pc-windows-gnu): builds the relay (queuebox.exe) and the C library
# (queuebox.dll, import library, static library, header) with Debian's mingw-w64
# (`QB_PACKAGE_TARGETS=x86_64-pc-windows-gnu scripts/package.sh c relay`, into a directory of
# its own: dist/ keeps the Linux artifacts 50-install tested), checks each file with
# scripts/pe-check.sh (x86-64, only Windows' own DLLs imported, every header function
# exported), then runs them under Debian's 64-bit wine with tests/platforms/windows.sh:
# `queuebox.exe migrate` and `run` against the test PostgreSQL, one POST delivered to a
# receiver on loopback, and the C quick start (built with x86_64-w64-mingw32-gcc, with the
# DLL and statically) migrating, claiming and completing a row.
# When mingw-w64 or wine cannot be installed, or wine cannot start a program here, this part
# exits 77 (NOT RUN), never passes. Cold cost: docs/install.md ("Windows").
# `--build` only builds (scripts/warm-builds.sh runs it early, in the background, in CI); the
# build holds a lock that the part takes too, so the part waits for a build still going.
set -euo pipefail
cd "$(dirname "$0")/../.."
source bindings/c/tests/ffi-env.sh
build_only=; [ "${1:-}" = --build ] && build_only=1
[ -n "$build_only" ] || : "${QUEUEBOX_TEST_DATABASE_URL:?run through scripts/test.sh (it starts PostgreSQL)}"
needs=("x86_64-w64-mingw32-gcc gcc-mingw-w64-x86-64-posix" "x86_64-w64-mingw32-objdump binutils-mingw-w64-x86-64")
[ -n "$build_only" ] || needs+=("/usr/lib/wine/wine64 wine64" "curl curl" "psql postgresql-client")
for need in "${needs[@]}"; do
  set -- $need
  if ! ffi_need_apt "$1" "$2"; then
    echo "53-windows: NOT RUN: Debian's $2 could not be installed"
    exit 77
  fi
done
target="${CARGO_TARGET_DIR:-$PWD/target}"
out="$target/windows-dist"
mkdir -p "$target"
exec 9>"$target/.windows-build.lock"
t0=$(date +%s)
flock 9
[ -n "$build_only" ] || echo "53-windows: waited $(($(date +%s) - t0))s for a build already running"
# The Windows tree (target/windows-gnu) is about 2.5 GB cold; CI (QB_DROP_DEBUG_TREE, as in
# 50-install) deletes it afterwards, as no later part needs it.
[ -z "$build_only" ] && [ -n "${QB_DROP_DEBUG_TREE:-}" ] && trap 'rm -rf "$target/windows-gnu" "$out"' EXIT
rm -rf "$out"
echo "53-windows: $(df -h --output=avail "$target" | tail -1 | tr -d ' ') free before the Windows build"
t0=$(date +%s)
QB_DIST="$out" QB_PACKAGE_TARGETS=x86_64-pc-windows-gnu bash scripts/package.sh c relay
echo "53-windows: the Windows build took $(($(date +%s) - t0))s"
[ -z "$build_only" ] || exit 0
flock -u 9
bash tests/platforms/windows.sh "$out"
