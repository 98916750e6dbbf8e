#!/usr/bin/env bash
# End-to-end demo of the relay: PostgreSQL, migrate, relay, receiver, a POST, the delivery.
set -euo pipefail
cd "$(dirname "$0")/.."
# Plain text when the output is not a terminal: no colour codes in the relay's log file.
[ -t 1 ] || export NO_COLOR=1 CARGO_TERM_COLOR=never
# scripts/demo.sh has already started it and said so: say it once.
if [ -n "${QB_DEMO_QUIET:-}" ]; then source scripts/postgres.sh start 2>/dev/null; else source scripts/postgres.sh start; fi
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target}"
cargo build -q -p queuebox
BIN="$CARGO_TARGET_DIR/debug/queuebox"
PG="${QUEUEBOX_TEST_DATABASE_URL%/*}"
DB="queuebox_demo_$$"
psql "$PG/postgres" -qc "CREATE DATABASE $DB" >/dev/null
export QB_DEMO_DATABASE_URL="$PG/$DB" QB_DEMO_PORT="${QB_DEMO_PORT:-18080}" QB_DEMO_RECEIVER="http://127.0.0.1:19099"
# Its own fresh database, migrated quietly: scripts/demo.sh has already shown the versions.
RUST_LOG=warn "$BIN" migrate --database-url "$QB_DEMO_DATABASE_URL" >/dev/null
echo "--- relay on port $QB_DEMO_PORT (examples/relay.yml, log: /tmp/qb-demo-relay.log), receiver on 19099"
"$BIN" --config examples/relay.yml check-config >/dev/null
python3 examples/relay-receiver.py 19099 > /tmp/qb-demo-receiver.log & RECV=$!
"$BIN" --config examples/relay.yml run 2> /tmp/qb-demo-relay.log & RELAY=$!
trap 'kill $RELAY $RECV 2>/dev/null || true; psql "$PG/postgres" -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" >/dev/null 2>&1 || true' EXIT
for _ in $(seq 1 100); do curl -fs "http://127.0.0.1:$QB_DEMO_PORT/health/ready" >/dev/null && break; sleep 0.1; done
# The receiver too (any HTTP answer will do), or the first delivery fails and is retried.
for _ in $(seq 1 100); do curl -s -o /dev/null "$QB_DEMO_RECEIVER/" && break; sleep 0.1; done
echo "--- POST the same order twice to the push source 'orders', with a spoofed X-SOURCE header"
for _ in 1 2; do
  curl -s -w ' (%{http_code})\n' -H 'Content-Type: application/json' -H 'X-SOURCE: evil' \
    -d '{"id":"evt-1","type":"created","orderId":"o-42","total":12.5}' "http://127.0.0.1:$QB_DEMO_PORT/inbox/orders"
done
echo "    (202: stored; 200 duplicate: the same id was stored once)"
echo "--- POST a job to the pull source 'jobs'"
curl -s -w ' (%{http_code})\n' -H 'X-Job-Id: job-1' -d '{"task":"resize"}' "http://127.0.0.1:$QB_DEMO_PORT/inbox/jobs"
for _ in $(seq 1 50); do [ -s /tmp/qb-demo-receiver.log ] && break; sleep 0.1; done
echo "--- the receiver got"
cat /tmp/qb-demo-receiver.log
echo "    (x-source is 'orders': the relay sets it; the sender's X-SOURCE: evil was replaced)"
echo "--- rows"
psql "$QB_DEMO_DATABASE_URL" -c "SELECT source, idempotency_key, consumption, state FROM inbox ORDER BY created_at" \
  -c "SELECT topic, key, state, attempt FROM outbox"
echo "    (the 'orders' row is forwarded and its outbox row sent; the 'jobs' row stays pending:"
echo "     the relay never touches pull rows, they wait for a worker — README, \"Your first worker\")"
