#!/usr/bin/env bash
# The README's main job, on a fresh machine: start a local PostgreSQL (unless
# QUEUEBOX_DATABASE_URL names one), migrate it with `queuebox migrate`, run the example pull
# worker against sample rows and print what it processed; then run the relay demo (an HTTP
# push source delivered to an HTTP receiver); then say what happened and what is still running.
set -euo pipefail
cd "$(dirname "$0")/.."
# Plain text when the output is not a terminal (a log file, CI): no colour codes from cargo or
# the relay (its logs honour NO_COLOR and check for a terminal themselves).
[ -t 1 ] || export NO_COLOR=1 CARGO_TERM_COLOR=never
started_pg=no
if [ -z "${QUEUEBOX_DATABASE_URL:-}" ]; then
  # shellcheck source=scripts/postgres.sh
  source scripts/postgres.sh start
  started_pg=yes
  # A fresh demo database each run, on the throwaway cluster.
  PGOPTIONS=--client-min-messages=warning psql "$QUEUEBOX_TEST_DATABASE_URL" -qc "DROP DATABASE IF EXISTS queuebox_demo WITH (FORCE)" -c "CREATE DATABASE queuebox_demo" >/dev/null
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
# The versions applied, once: stdout lists them; the same events as log records on stderr
# would print each twice, so only warnings and errors are logged here.
RUST_LOG=warn "$target_dir/debug/queuebox" migrate --database-url "$QUEUEBOX_DATABASE_URL"
echo "== example pull worker (source: orders)"
"$target_dir/debug/examples/pull_worker" "$QUEUEBOX_DATABASE_URL"
relay_demo=no
if [ -x scripts/demo-relay.sh ]; then
  echo "== relay demo"
  # The relay demo uses its own database; QUEUEBOX_DATABASE_URL would override its config.
  env -u QUEUEBOX_DATABASE_URL QB_DEMO_QUIET=1 bash scripts/demo-relay.sh
  relay_demo=yes
fi

# What happened, in plain words, and what is left running.
safe_url=$(printf '%s' "$QUEUEBOX_DATABASE_URL" | sed -E 's#(://[^:/@]+):[^@]*@#\1:***@#')
echo
echo "== what happened"
echo "- queuebox migrate created the inbox and outbox tables in $safe_url."
echo "- The example worker inserted sample pull rows for source 'orders' (each twice: the"
echo "  duplicate was stored once), handled each in its own transaction with a business write"
echo "  into example_orders, and completed it."
if [ "$relay_demo" = yes ]; then
  echo "- The relay stored a push message once (its repeat answered 'duplicate'), forwarded it"
  echo "  into the outbox with its own x-source header (the sender's X-SOURCE: evil was replaced)"
  echo "  and delivered it to the HTTP receiver. The pull job for source 'jobs' stayed pending:"
  echo "  the relay never touches pull rows, they wait for your worker. Its relay, receiver and"
  echo "  database are gone."
fi
echo "- The relay binary is $target_dir/debug/queuebox."
echo
echo "== still running"
if [ "$started_pg" = yes ] || [ "$relay_demo" = yes ]; then
  echo "- PostgreSQL on 127.0.0.1:${QB_PG_PORT:-55432} (data in ${QB_PG_DIR:-/tmp/queuebox-pg-${QB_PG_PORT:-55432}}), started by the demo unless it was running."
  echo "  Stop it with: bash scripts/postgres.sh stop"
fi
echo "- The demo database stays: $safe_url (the README uses it as DATABASE_URL)"
echo "- Nothing else: the worker finished; the relay and its receiver were stopped."
echo "Next: your first worker (README, \"Your first worker\")."
