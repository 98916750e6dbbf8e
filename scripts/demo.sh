#!/usr/bin/env bash
# The README's main job, on a fresh machine: start a local PostgreSQL (unless
# QUEUEBOX_DATABASE_URL names one), migrate it with `queuebox migrate`, run the example pull
# worker against sample rows and print what it processed; then run the relay demo (an HTTP
# push source delivered to an HTTP receiver) when the relay provides it.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${QUEUEBOX_DATABASE_URL:-}" ]; then
  # shellcheck source=scripts/postgres.sh
  source scripts/postgres.sh start
  # A fresh demo database each run, on the throwaway cluster.
  psql "$QUEUEBOX_TEST_DATABASE_URL" -qc "DROP DATABASE IF EXISTS queuebox_demo WITH (FORCE)" -c "CREATE DATABASE queuebox_demo" >/dev/null
  QUEUEBOX_DATABASE_URL="${QUEUEBOX_TEST_DATABASE_URL%/*}/queuebox_demo"
fi
export QUEUEBOX_DATABASE_URL
echo "== building queuebox and the example worker"
# The relay links librdkafka (Kafka sources and destinations): Debian's librdkafka-dev.
bash scripts/brokers.sh deps
cargo build --quiet -p queuebox --bin queuebox
cargo build --quiet -p queuebox-core --example pull_worker
target_dir="${CARGO_TARGET_DIR:-target}"
echo "== queuebox migrate"
"$target_dir/debug/queuebox" migrate --database-url "$QUEUEBOX_DATABASE_URL"
echo "== example pull worker (source: orders)"
"$target_dir/debug/examples/pull_worker" "$QUEUEBOX_DATABASE_URL"
if [ -x scripts/demo-relay.sh ]; then
  echo "== relay demo"
  # The relay demo uses its own database; QUEUEBOX_DATABASE_URL would override its config.
  env -u QUEUEBOX_DATABASE_URL bash scripts/demo-relay.sh
fi
