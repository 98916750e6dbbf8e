#!/usr/bin/env bash
# Where QueueBox's enqueue spends its server time (benchmarks/enqueue.md, "Why"): on a fresh
# database, for an inbox of each size in SIZES, the plan and time of every statement inside
# queuebox_enqueue_many (auto_explain of nested statements) for one message and for 1,000,
# and the functions' own times (track_functions) over many calls of each. Prints text.
# Not a throughput benchmark: it times single statements, under the benchmark lock.
#
# Usage: bash benchmarks/enqueue/explain.sh   (SIZES="0 2000 20000 200000" LOOPS=500)
# Needs target/enqueue-bench/queuebox-enqueue-bench (run.sh builds it) for the migration.
set -euo pipefail
cd "$(dirname "$0")/../.."
SIZES="${SIZES:-0 2000 20000 200000}" LOOPS="${LOOPS:-500}"
port="${QB_PG_PORT:-55432}"
pg() { psql -h 127.0.0.1 -p "$port" -U postgres -X -q -v ON_ERROR_STOP=1 "$@"; }
# The same under the machine's benchmark lock, for the statements whose time is read.
pg_locked() { flock "${EXPLAIN_LOCK:-/tmp/bench.lock}" psql -h 127.0.0.1 -p "$port" -U postgres -X -q -v ON_ERROR_STOP=1 "$@"; }
db=qb_enqueue_explain
pg -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" -c "CREATE DATABASE $db"
trap 'pg -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true' EXIT
"${CARGO_TARGET_DIR:-target}/enqueue-bench/queuebox-enqueue-bench" migrate "postgres://postgres@127.0.0.1:$port/$db"
pg -d "$db" -c "ALTER DATABASE $db SET track_functions = 'all'"

# The nested statements' plans, reduced to: duration, first line of the statement, and the
# plan lines that say how inbox is read.
nested() {  # nested N_MESSAGES
  pg -d "$db" 2>&1 <<SQL | awk '
    /duration:/ { d = $3 }
    /Query Text:/ { sub(/^.*Query Text: */, ""); q = substr($0, 1, 60); print "  " d " ms  " q }
    /Seq Scan on inbox|Index Scan using .* on inbox|Hash Join|Sort Method/ { sub(/^ */, ""); print "      " substr($0, 1, 110) }'
LOAD 'auto_explain';
SET auto_explain.log_nested_statements = on;
SET auto_explain.log_min_duration = 0;
SET auto_explain.log_analyze = on;
SET auto_explain.log_level = notice;
SET client_min_messages = notice;
BEGIN;
-- warm: the session's first call compiles and plans the function
SELECT count(*) FROM queuebox_enqueue_many((SELECT jsonb_agg(jsonb_build_object('source', 'bench', 'payload', jsonb_build_object('n', g))) FROM generate_series(1, $1) g));
ROLLBACK;
BEGIN;
SELECT count(*) FROM queuebox_enqueue_many((SELECT jsonb_agg(jsonb_build_object('source', 'bench', 'payload', jsonb_build_object('n', g))) FROM generate_series(1, $1) g));
ROLLBACK;
SQL
}

have=0
for size in $SIZES; do
  if [ "$size" -gt "$have" ]; then
    pg -d "$db" -c "INSERT INTO inbox (source, idempotency_key, payload, consumption)
      SELECT 'bench', 'fill-' || g, '{}', 'pull' FROM generate_series($have + 1, $size) g"
    have=$size
  fi
  pg -d "$db" -c "VACUUM ANALYZE inbox"
  echo "== inbox holds $size rows"
  for n in 1 1000; do
    echo " queuebox_enqueue_many of $n message(s), second call in the session (each statement inside):"
    # The last statements of the second call: the INSERT, the NOTIFY trigger, the lookup of
    # the stored ids, the call itself (the per-message checks before them are each < 0.01 ms).
    flock "${EXPLAIN_LOCK:-/tmp/bench.lock}" bash -c "$(declare -f pg nested); db=$db; port=$port; nested $n" | tail -n 9
  done
  # The functions' own times, without auto_explain (whose notices inflate the per-message
  # checks): LOOPS one-row calls, then LOOPS / 50 calls of 1,000 messages, each set in one
  # rolled-back transaction (so the inbox stays at its size).
  for n in 1 1000; do
    calls=$LOOPS; [ "$n" = 1 ] || calls=$((LOOPS / 50))
    pg -d "$db" -Atc "SELECT pg_stat_reset()" >/dev/null
    pg_locked -d "$db" -c "BEGIN" -c "DO \$\$ BEGIN FOR i IN 1..$calls LOOP
      PERFORM count(*) FROM queuebox_enqueue_many((SELECT jsonb_agg(jsonb_build_object('source', 'bench', 'payload', jsonb_build_object('n', g))) FROM generate_series(1, $n) g));
      END LOOP; END \$\$" -c "ROLLBACK"
    sleep 0.7  # function statistics reach the view within 500 ms of the session's end
    echo " $calls calls of queuebox_enqueue_many with $n message(s), server time per call (ms):"
    pg -d "$db" -c "SELECT funcname, calls, round((total_time / calls)::numeric, 3) AS total_ms, round((self_time / calls)::numeric, 3) AS self_ms
      FROM pg_stat_user_functions ORDER BY total_time DESC"
  done
  pg -d "$db" -c "DELETE FROM inbox WHERE idempotency_key NOT LIKE 'fill-%'" >/dev/null
done
