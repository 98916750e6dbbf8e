#!/usr/bin/env bash
# The acceptance suite (tests/acceptance): one black-box test per row of the
# feature table in tests/acceptance/README.md, each driving the real `queuebox` binary against the test PostgreSQL,
# real brokers and a real HTTP receiver. Prints the per-row table (passed / failed / not run)
# and the closing line; fails if any row fails or tests/acceptance/README.md's table is stale.
# Then the README's shell steps (tests/readme/run.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=scripts/postgres.sh
source scripts/postgres.sh start  # a no-op when scripts/test.sh has started it
export QUEUEBOX_TEST_DATABASE_URL
# Brokers for the broker rows: started here unless already up (then left running as found).
bash scripts/brokers.sh deps
up() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
if ! { up "${QB_AMQP_PORT:-55672}" && up "${QB_NATS_PORT:-54222}" && up "${QB_KAFKA_PORT:-59092}"; }; then
  trap 'bash scripts/brokers.sh stop' EXIT
  bash scripts/brokers.sh start
fi
eval "$(bash scripts/brokers.sh env)"
export QUEUEBOX_TEST_AMQP_URL QUEUEBOX_TEST_NATS_URL QUEUEBOX_TEST_KAFKA_BROKERS
# The suite finds the binary next to its own executable (target/debug/queuebox).
cargo build -p queuebox --bins --quiet
cargo test -p queuebox-acceptance --quiet
# The README's shell steps (migrate, the relay, the job's curl, the push curl), typed as a
# newcomer would, with the README's Rust quick start as the worker.
QUEUEBOX_BIN="${CARGO_TARGET_DIR:-$PWD/target}/debug/queuebox" bash tests/readme/run.sh
