#!/usr/bin/env bash
# Migration stall (issue 41, online migrations): the longest an application's insert waits
# while every migration is applied to a database holding ROWS outbox rows and INBOX_ROWS
# inbox rows. Both runs start from a database at version 2 (the tables exist; 1 and 2 create
# them, nothing can be in them before), filled, VACUUM ANALYZEd, and then have versions 3 to
# the latest applied while pgbench inserts continuously:
#   before : the migrations as they were at BEFORE (3692f83, migration 9 as released), each
#            file in its own transaction with its history row (`psql -1`), which is what that
#            build's runner did;
#   after  : the real `queuebox migrate` of this tree (QB_BIN), online migrations included.
# The application: pgbench, CLIENTS connections each inserting one outbox row or one inbox row
# (half each) after another, no think time; every transaction's latency is logged (-l).
# Longest stall = the longest single insert among those that ended while migrations ran (plus
# STALL_TAIL seconds after, so an insert held until the end is counted); also reported: p99,
# and how many inserts ran. Outbox rows: 95 % sent (what retention keeps), 5 % pending, half of
# them keyed; inbox rows: 95 % processed, push and pull.
# Usage: bash benchmarks/migrations/stall.sh
#   env: ROWS (1000000) INBOX_ROWS (ROWS) CLIENTS (2) MODES ("before after") BEFORE (3692f83)
#        QB_BIN (target/debug/queuebox: the migration work is the server's; built if absent)
#        QUEUEBOX_TEST_DATABASE_URL (the server; scripts/postgres.sh) TAG (the date)
# Writes benchmarks/results/migration-stall-<TAG>.json; the write-up is BENCHMARKS.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROWS="${ROWS:-1000000}" INBOX_ROWS="${INBOX_ROWS:-${ROWS}}" CLIENTS="${CLIENTS:-2}"
MODES="${MODES:-before after}" BEFORE="${BEFORE:-3692f83}" TAG="${TAG:-$(date -u +%Y-%m-%d)}"
STALL_TAIL=3
: "${QUEUEBOX_TEST_DATABASE_URL:?run: source scripts/postgres.sh}"
SERVER="${QUEUEBOX_TEST_DATABASE_URL%/*}"
QB_BIN="${QB_BIN:-target/debug/queuebox}"
[ -x "$QB_BIN" ] || cargo build -q -p queuebox --bin queuebox
QB_BIN="$(realpath "$QB_BIN")"
PGBENCH="$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)/pgbench"
OUT="benchmarks/results/migration-stall-$TAG.json"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

# The history table as the runner creates it (core/src/store/postgres/sql.rs, HISTORY_CREATE).
HISTORY="CREATE TABLE IF NOT EXISTS queuebox_schema_history (version INTEGER PRIMARY KEY,
  name VARCHAR(255) NOT NULL, checksum VARCHAR(64) NOT NULL,
  applied_at TIMESTAMPTZ NOT NULL DEFAULT CURRENT_TIMESTAMP)"

# apply_in_tx <url> <file> <version>: one migration file and its history row, in one
# transaction (the runner's way for a migration without the no-transaction marker).
apply_in_tx() {
  local name; name="$(basename "$2" .sql)"
  psql -q -X -v ON_ERROR_STOP=1 "$1" -1 -f "$2" \
    -c "INSERT INTO queuebox_schema_history (version, name, checksum)
        VALUES ($3, '$name', '$(sha256sum "$2" | cut -d' ' -f1)')" >/dev/null
}

cat >"$WORK/outbox.sql" <<'EOF'
INSERT INTO outbox (topic, payload) VALUES ('app', '{"n": 1}');
EOF
cat >"$WORK/inbox.sql" <<'EOF'
INSERT INTO inbox (source, idempotency_key, payload) VALUES ('app', gen_random_uuid()::text, '{"n": 1}');
EOF

results=()
for mode in $MODES; do
  db="qb_stall_${mode}_$$"
  url="$SERVER/$db"
  psql -q -X "$SERVER/postgres" -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db"
  src="$WORK/$mode"
  mkdir -p "$src"
  if [ "$mode" = before ]; then
    for f in $(git ls-tree --name-only "$BEFORE" core/migrations/postgres/); do
      git show "$BEFORE:$f" >"$src/$(basename "$f")"
    done
  else
    cp core/migrations/postgres/*.sql "$src/"
  fi
  psql -q -X -v ON_ERROR_STOP=1 "$url" -c "$HISTORY"
  apply_in_tx "$url" "$src/0001_create_outbox.sql" 1
  apply_in_tx "$url" "$src/0002_create_inbox.sql" 2
  echo "stall[$mode]: filling $ROWS outbox and $INBOX_ROWS inbox rows" >&2
  psql -q -X -v ON_ERROR_STOP=1 "$url" <<EOF
INSERT INTO outbox (topic, key, payload, state, updated_at)
SELECT 'topic-' || (g % 20), CASE WHEN g % 2 = 0 THEN 'k' || (g % 10000) END,
       jsonb_build_object('n', g, 'pad', repeat('x', 100)),
       CASE WHEN g % 20 = 0 THEN 'pending' ELSE 'sent' END, now()
  FROM generate_series(1, $ROWS) g;
INSERT INTO inbox (source, idempotency_key, payload, state, consumption, processed_at)
SELECT 'src-' || (g % 5), 'k' || g, jsonb_build_object('n', g, 'pad', repeat('x', 100)),
       CASE WHEN g % 20 = 0 THEN 'pending' ELSE 'processed' END,
       CASE WHEN g % 2 = 0 THEN 'pull' ELSE 'push' END, now()
  FROM generate_series(1, $INBOX_ROWS) g;
VACUUM ANALYZE outbox;
VACUUM ANALYZE inbox;
EOF
  # The application, started before the migrations and stopped after them.
  (cd "$WORK" && exec "$PGBENCH" -n -c "$CLIENTS" -j "$CLIENTS" -T 3600 -l --log-prefix="log_$mode" \
    -f outbox.sql@1 -f inbox.sql@1 "$url" >"$WORK/$mode.pgbench.out" 2>&1) &
  bench=$!
  sleep 2
  start=$(date +%s.%N)
  if [ "$mode" = before ]; then
    for f in "$src"/*.sql; do
      v=$((10#$(basename "$f" | cut -c1-4)))
      [ "$v" -le 2 ] && continue
      apply_in_tx "$url" "$f" "$v"
      echo "applied $(basename "$f" .sql)"
    done >"$WORK/$mode.migrate.out"
  else
    RUST_LOG=warn "$QB_BIN" migrate --database-url "$url" >"$WORK/$mode.migrate.out"
  fi
  end=$(date +%s.%N)
  sleep "$STALL_TAIL"
  # pgbench writes its log through stdio: SIGINT ends it without flushing the last block,
  # which holds only inserts of the tail after the migrations.
  kill -INT "$bench" 2>/dev/null || true
  wait "$bench" 2>/dev/null || true
  applied=$(grep -c '^applied ' "$WORK/$mode.migrate.out" || true)
  names=$(sed -n 's/^applied //p' "$WORK/$mode.migrate.out" | jq -R . | jq -sc .)
  # Log line: client transaction_no latency_us script_no epoch_s epoch_us (PostgreSQL 15).
  stats=$(cat "$WORK/log_$mode".* 2>/dev/null | awk -v s="$start" -v e="$end" -v tail="$STALL_TAIL" '
    NF >= 6 && $3 ~ /^[0-9]+$/ { t = $5 + $6 / 1e6; if (t >= s && t <= e + tail) print $3 / 1000 }' \
    | sort -n | awk '{ lat[NR] = $1 }
    END {
      if (NR == 0) { print "{\"inserts\": 0}"; exit }
      k = int(NR * 0.99); if (k < 1) k = 1
      printf "{\"inserts\": %d, \"longest_insert_ms\": %.1f, \"p99_insert_ms\": %.1f}", NR, lat[NR], lat[k]
    }')
  took=$(awk -v s="$start" -v e="$end" 'BEGIN { printf "%.2f", e - s }')
  echo "stall[$mode]: $applied migrations in ${took} s: $stats" >&2
  results+=("$(jq -nc --arg mode "$mode" --argjson took "$took" --argjson stats "$stats" \
    --argjson applied "$names" '{mode: $mode, migrate_s: $took, applied: $applied} + $stats')")
  psql -q -X "$SERVER/postgres" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)"
done

mkdir -p benchmarks/results
printf '%s\n' "${results[@]}" | jq -s \
  --arg date "$(date -u +%FT%TZ)" --arg load "$(cut -d' ' -f1-3 /proc/loadavg)" \
  --arg pg "$(psql -X -Atc 'SHOW server_version' "$SERVER/postgres")" \
  --argjson rows "$ROWS" --argjson inbox_rows "$INBOX_ROWS" --argjson clients "$CLIENTS" \
  --arg before "$BEFORE" --arg commit "$(git rev-parse --short HEAD)" \
  '{benchmark: "migration-stall", date: $date, load_average: $load, postgres: $pg,
    outbox_rows: $rows, inbox_rows: $inbox_rows, insert_clients: $clients,
    before_commit: $before, after_commit: $commit, runs: .}' >"$OUT"
echo "wrote $OUT" >&2
cat "$OUT"
