#!/usr/bin/env bash
# Go client (clients/go): builds libqueuebox, checks the module's copy of queuebox.h, then
# `go vet` and `go test` of the cgo package against the real PostgreSQL (each test makes
# and migrates its own database), including the conformance vectors through the native
# library, the application-transaction tests on pgx and database/sql, and a publish delivered
# by the real relay binary to an HTTP receiver, and the worker against a TLS-only PostgreSQL
# (scripts/postgres-tls.sh, worker_tls_test.go); then builds the example.
set -euo pipefail
cd "$(dirname "$0")/../.."
source bindings/c/tests/ffi-env.sh

if ! command -v go >/dev/null 2>&1; then
  [ -x /usr/local/go/bin/go ] && export PATH="/usr/local/go/bin:$PATH"
fi
ffi_need_apt go golang-go
ffi_build_native
# delivery_test.go runs the relay binary (publish -> HTTP delivery); usually already built by 10-rust.
relay_flag=()
[ "$QB_PROFILE" = release ] && relay_flag=(--release)
cargo build --quiet -p queuebox --bin queuebox "${relay_flag[@]}"
export QUEUEBOX_BIN="$QB_NATIVE_DIR/queuebox"

# The module carries its own copy of the C header (so `go get` compiles); a stale copy fails.
if ! cmp -s bindings/c/include/queuebox.h clients/go/queuebox.h; then
  echo "clients/go/queuebox.h differs from bindings/c/include/queuebox.h: copy it with" >&2
  echo "  cp bindings/c/include/queuebox.h clients/go/queuebox.h" >&2
  exit 1
fi

# The worker's TLS test (worker_tls_test.go) needs a TLS-only PostgreSQL of its own.
export QB_PG_TLS_PORT="${QB_PG_TLS_PORT_GO:-55436}"
trap "bash '$PWD/scripts/postgres-tls.sh' stop" EXIT  # the tests run from clients/go
bash scripts/postgres-tls.sh start
eval "$(bash scripts/postgres-tls.sh env)"

# cgo links -lqueuebox (the shared library) from the workspace build; rpath lets the
# test binary find it without LD_LIBRARY_PATH.
export CGO_ENABLED=1
export CGO_LDFLAGS="-L$QB_NATIVE_DIR -Wl,-rpath,$QB_NATIVE_DIR"
cd clients/go
# pgx v5 (the driver of the application-transaction API and its tests) from the Go module
# proxy, checked against go.sum.
go mod download
go vet ./...
go test -count=1 -timeout 300s ./...
go build -o /dev/null ./examples/...
# The repository README's Go quick start builds against this module, as an application's
# main package would (a directory of its own, removed afterwards; compile only: its table and
# source are the other quick starts', which run in their languages' suites).
qs=$(mktemp -d "$PWD/readmequickstart.XXXX")
awk '/<!-- quick start: go/ { m = 1 } m && /^```go$/ { f = 1; next } f && /^```$/ { exit } f { print }' ../../README.md > "$qs/main.go"
if [ ! -s "$qs/main.go" ] || ! go build -o /dev/null "./$(basename "$qs")"; then
  rm -rf "$qs"; echo "go: README.md's Go quick start (after its <!-- quick start: go --> marker) does not build" >&2; exit 1
fi
rm -rf "$qs"
echo "go: vet clean, tests passed, example and README quick start build"
