#!/usr/bin/env bash
# EXPLAIN (ANALYZE, BUFFERS) of QueueBox's pull claim (core/src/store/postgres/pull.rs, CLAIM)
# on ROWS pending rows, next to the plain SKIP LOCKED claim most peers run, inside a rolled-back
# transaction. Needs run.sh's build (the Rust adapter migrates and inserts).
#   bash benchmarks/peers/explain_claim.sh [ROWS] [BATCH]
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/postgres.sh start >/dev/null
ROWS="${1:-20000}" BATCH="${2:-10}"
BIN="${CARGO_TARGET_DIR:-$PWD/target}/peers-bench/queuebox-peers-bench"
SERVER="${QUEUEBOX_TEST_DATABASE_URL%/*}"
DB=peers_explain_$$
psql "$SERVER/postgres" -X -q -c "CREATE DATABASE $DB"
trap 'psql "$SERVER/postgres" -X -q -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)"' EXIT
"$BIN" enqueue "$SERVER/$DB" "$ROWS"
psql "$SERVER/$DB" -X -q -c "VACUUM ANALYZE inbox"
CAND=$(( BATCH * 3 < 50 ? 50 : (BATCH * 3 > 500 ? 500 : BATCH * 3) ))
CLAIM=$(python3 - "$BATCH" "$CAND" <<'PY'
import re, sys
src = open("core/src/store/postgres/pull.rs").read()
sql = re.search(r'const CLAIM: &str = "(.*?)";', src, re.S).group(1)
for k, v in {"$1": "'bench'", "$2": sys.argv[1], "$3": "30000", "$4": sys.argv[2]}.items():
    sql = sql.replace(k, v)
print(sql)
PY
)
echo "== QueueBox CLAIM (batch $BATCH, candidates $CAND, $ROWS pending rows)"
psql "$SERVER/$DB" -X -q -c "BEGIN" -c "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) $CLAIM" -c "ROLLBACK"
echo "== plain SKIP LOCKED claim (the shape of River's / pg-boss's fetch)"
psql "$SERVER/$DB" -X -q -c "BEGIN" -c "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF)
UPDATE inbox SET state = 'processing', claim_token = gen_random_uuid(), lease_expires_at = clock_timestamp() + interval '30 s'
 WHERE id IN (SELECT id FROM inbox WHERE consumption = 'pull' AND source = 'bench' AND state = 'pending'
               ORDER BY scheduled_at, sequence LIMIT $BATCH FOR UPDATE SKIP LOCKED) RETURNING id" -c "ROLLBACK"
