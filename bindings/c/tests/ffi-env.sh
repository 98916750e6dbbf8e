# Shared by the FFI test parts (scripts/test.d/30-c-abi.sh, 31-go.sh, 32-csharp.sh) and
# benchmarks/ffi_bench.sh: builds the native library once, installs tools idempotently,
# makes throwaway databases. Source it from the repository root.

: "${QUEUEBOX_TEST_DATABASE_URL:?source scripts/postgres.sh first}"
QB_CARGO_TARGET="${CARGO_TARGET_DIR:-$PWD/target}"
QB_PROFILE="${QB_FFI_PROFILE:-debug}"
QB_NATIVE_DIR="$QB_CARGO_TARGET/$QB_PROFILE"
export QB_NATIVE_DIR
# The server part of the URL (everything before the database name).
QB_PG_SERVER="${QUEUEBOX_TEST_DATABASE_URL%/*}"
QB_CBINDGEN_VERSION=0.29.4

ffi_build_native() {
  local flag=()
  [ "$QB_PROFILE" = release ] && flag=(--release)
  cargo build --quiet -p queuebox-c "${flag[@]}"
  [ -f "$QB_NATIVE_DIR/libqueuebox.so" ] && [ -f "$QB_NATIVE_DIR/libqueuebox.a" ]
}

# ffi_need_apt <command> <package>: installs the Debian package when the command is missing.
ffi_need_apt() {
  command -v "$1" >/dev/null 2>&1 && return 0
  echo "installing $2 from Debian's packages" >&2
  export DEBIAN_FRONTEND=noninteractive
  if [ ! -f /tmp/.qb-apt-updated ]; then apt-get update -qq && touch /tmp/.qb-apt-updated; fi
  apt-get install -y -qq "$2" >/dev/null
}

# cbindgen's output can change between versions, so the check pins the one that made the header.
ffi_need_cbindgen() {
  if ! cbindgen --version 2>/dev/null | grep -q " $QB_CBINDGEN_VERSION\$"; then
    echo "installing cbindgen $QB_CBINDGEN_VERSION (cargo install, debug profile: faster to build)" >&2
    cargo install --quiet --locked --debug cbindgen --version "$QB_CBINDGEN_VERSION"
  fi
  export PATH="$HOME/.cargo/bin:$PATH"
}

# ffi_create_db <suite>: a fresh empty database, printed by name.
ffi_create_db() {
  local name="qb_$1_$$_$RANDOM"
  psql "$QB_PG_SERVER/postgres" -X -q -v ON_ERROR_STOP=1 -c "CREATE DATABASE $name" >/dev/null
  echo "$name"
}

ffi_drop_db() {
  psql "$QB_PG_SERVER/postgres" -X -q -c "DROP DATABASE IF EXISTS $1 WITH (FORCE)" >/dev/null 2>&1 || true
}

ffi_db_url() { echo "$QB_PG_SERVER/$1"; }
