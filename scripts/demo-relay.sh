#!/usr/bin/env bash
# End-to-end demo of the relay: PostgreSQL, migrate, relay, receiver, a POST, the delivery.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/postgres.sh start
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target}"
cargo build -q -p queuebox
BIN="$CARGO_TARGET_DIR/debug/queuebox"
PG="${QUEUEBOX_TEST_DATABASE_URL%/*}"
DB="queuebox_demo_$$"
psql "$PG/postgres" -qc "CREATE DATABASE $DB" >/dev/null
export QB_DEMO_DATABASE_URL="$PG/$DB" QB_DEMO_PORT="${QB_DEMO_PORT:-18080}" QB_DEMO_RECEIVER="http://127.0.0.1:19099"
"$BIN" migrate --database-url "$QB_DEMO_DATABASE_URL"
"$BIN" --config examples/relay.yml check-config >/dev/null
python3 examples/relay-receiver.py 19099 > /tmp/qb-demo-receiver.log & RECV=$!
"$BIN" --config examples/relay.yml run 2> /tmp/qb-demo-relay.log & RELAY=$!
trap 'kill $RELAY $RECV 2>/dev/null || true; psql "$PG/postgres" -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" >/dev/null 2>&1 || true' EXIT
for _ in $(seq 1 100); do curl -fs "http://127.0.0.1:$QB_DEMO_PORT/health/ready" >/dev/null && break; sleep 0.1; done
echo "--- POST the same order twice"
for _ in 1 2; do
  curl -s -w ' (%{http_code})\n' -H 'Content-Type: application/json' -H 'X-SOURCE: evil' \
    -d '{"id":"evt-1","type":"created","orderId":"o-42","total":12.5}' "http://127.0.0.1:$QB_DEMO_PORT/inbox/orders"
done
echo "--- POST a pull job"
curl -s -w ' (%{http_code})\n' -H 'X-Job-Id: job-1' -d '{"task":"resize"}' "http://127.0.0.1:$QB_DEMO_PORT/inbox/jobs"
for _ in $(seq 1 50); do [ -s /tmp/qb-demo-receiver.log ] && break; sleep 0.1; done
echo "--- the receiver got"
cat /tmp/qb-demo-receiver.log
echo "--- rows"
psql "$QB_DEMO_DATABASE_URL" -c "SELECT source, idempotency_key, consumption, state FROM inbox ORDER BY created_at" \
  -c "SELECT topic, key, state, attempt FROM outbox"
