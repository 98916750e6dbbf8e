#!/usr/bin/env bash
# Rust: core unit tests, vectors, store and worker tests against the real PostgreSQL, and
# the relay's tests (the relay binary is built first so tests can spawn it).
set -euo pipefail
cd "$(dirname "$0")/../.."
# The TLS tests make throwaway certificates with openssl and start their own nats-server,
# and relay/tests/pgbouncer.rs starts Debian's pgbouncer (in /usr/sbin) in front of the test
# PostgreSQL; without them they fail saying NOT RUN, so install them here.
need=()
command -v openssl >/dev/null 2>&1 || need+=(openssl)
command -v nats-server >/dev/null 2>&1 || need+=(nats-server)
[ -x /usr/sbin/pgbouncer ] || command -v pgbouncer >/dev/null 2>&1 || need+=(pgbouncer)
if [ ${#need[@]} -gt 0 ]; then
  echo "10-rust: installing ${need[*]} from Debian's packages"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq "${need[@]}" >/dev/null
fi
# One formatting for every crate (rustfmt's defaults): a diff here fails the part.
cargo fmt --all -- --check
# Clippy with the workspace's lints ([workspace.lints] in Cargo.toml) over every crate and
# target: a warning fails the part.
if ! cargo clippy --version >/dev/null 2>&1; then
  echo "10-rust: installing clippy with rustup"
  rustup component add clippy
fi
cargo clippy --workspace --all-targets --quiet -- -D warnings
cargo build --workspace --bins --quiet
# The acceptance suite has its own part (25-acceptance.sh), which starts the brokers it needs.
cargo test --workspace --exclude queuebox-acceptance --quiet --no-fail-fast -- --test-threads=4
# The worker's handle span with the core's optional `otel` feature (the OpenTelemetry
# parent from the row's traceparent); the workspace run above builds the default features
# and shows that test as NOT RUN. The core library and one test rebuilt: about 40 s here.
cargo clippy -p queuebox-core --features otel --lib --test worker_spans --quiet -- -D warnings
cargo test -p queuebox-core --features otel --test worker_spans --quiet
