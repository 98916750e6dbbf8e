#!/usr/bin/env bash
# C ABI (bindings/c): builds libqueuebox, fails when the checked-in queuebox.h differs from a
# fresh cbindgen run, then runs the C program bindings/c/tests/abi_test.c (every export,
# success and error paths, every free) against the real PostgreSQL under valgrind:
# any leak ("definitely"/"possibly" lost) or invalid access fails the part.
set -euo pipefail
cd "$(dirname "$0")/../.."
source bindings/c/tests/ffi-env.sh

ffi_build_native          # cargo build -p queuebox-c -> $QB_NATIVE_DIR
ffi_need_apt valgrind valgrind
ffi_need_apt gcc gcc

# The header is generated and checked in; a stale one is a failure, not a silent rewrite.
ffi_need_cbindgen
fresh=$(mktemp)
cbindgen --quiet --config bindings/c/cbindgen.toml --crate queuebox-c --output "$fresh"
if ! diff -u bindings/c/include/queuebox.h "$fresh"; then
  echo "bindings/c/include/queuebox.h is stale: regenerate it with" >&2
  echo "  cbindgen --config bindings/c/cbindgen.toml --crate queuebox-c --output bindings/c/include/queuebox.h" >&2
  rm -f "$fresh"; exit 1
fi
rm -f "$fresh"
echo "c-abi: header is current"

bin="$QB_NATIVE_DIR/abi_test"
gcc -std=c11 -Wall -Wextra -Werror -g -O0 -D_DEFAULT_SOURCE -Ibindings/c/include bindings/c/tests/abi_test.c -o "$bin" \
  -L"$QB_NATIVE_DIR" -lqueuebox -Wl,-rpath,"$QB_NATIVE_DIR" -lpthread

db_a=$(ffi_create_db cabi)
db_b=$(ffi_create_db cabi_bare)
trap 'ffi_drop_db "$db_a"; ffi_drop_db "$db_b"' EXIT
valgrind --quiet --leak-check=full --errors-for-leak-kinds=definite,possible --error-exitcode=1 \
  --suppressions=bindings/c/tests/valgrind.supp \
  "$bin" "$(ffi_db_url "$db_a")" "$(ffi_db_url "$db_b")"
echo "c-abi: abi_test passed under valgrind"
