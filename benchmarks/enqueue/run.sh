#!/usr/bin/env bash
# Enqueue in the application's transaction, rows/s: QueueBox through each language's API
# (Rust core on sqlx, Go wrapper on pgx, Python wrapper on psycopg 3, TypeScript wrapper on
# node-postgres, and plain SQL `queuebox_enqueue` / `queuebox_enqueue_many` driven by pgbench)
# against River (InsertTx / InsertManyTx, Go, pgx) and pg-boss (send / insert, Node, pg) in the
# same run on the same PostgreSQL. Issue 38's last benchmark. Never part of CI.
#
# Every system gets the same work and the same treatment:
#   * TXS1 transactions of 1 row and TXS1000 transactions of 1,000 rows, one after another on
#     ONE connection; each transaction is BEGIN, one enqueue call of all its rows, COMMIT.
#   * Before each timed run: the system's job table truncated, then VACUUM ANALYZE (fresh
#     tables, fresh statistics).
#   * Timer boundary: the connection is open and two transactions of the same shape have run
#     and rolled back (statements prepared, code loaded) before the clock starts; the clock
#     stops when the last COMMIT has returned. Process start, connect and warm-up are outside.
#     pgbench (the SQL baseline) reports tps without its connection time and has no warm-up.
#   * Rounds interleaved: each round runs every system once per size, in an order rotated by
#     one each round, so drift in the shared machine's load spreads over all systems.
#   * The timed runs hold /tmp/bench.lock (flock), from the first to the last, so the
#     machine's benchmarks never time at once; they are not niced; the builds before are.
# Each run's row count is checked against the table afterwards (a failed enqueue fails here).
#
# Usage: bash benchmarks/enqueue/run.sh
#   ROUNDS=5 TXS1=1000 TXS1000=20 SIZES="1 1000"
#   TXS1000_SQL=2: transactions of the "sql" baseline at 1,000 rows (1,000 calls of
#   queuebox_enqueue per transaction take seconds; the result says how many it ran)
#   SYSTEMS="queuebox-rust queuebox-go queuebox-python queuebox-ts sql sql-many river pg-boss"
#   ENQ_PREBUILT=1: no cargo builds (release artifacts already in the target dir)
#   OUT=benchmarks/results/enqueue-<UTC date>.json
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
ROUNDS="${ROUNDS:-5}" TXS1="${TXS1:-1000}" TXS1000="${TXS1000:-20}" SIZES="${SIZES:-1 1000}"
TXS1000_SQL="${TXS1000_SQL:-2}"
SYSTEMS="${SYSTEMS:-queuebox-rust queuebox-go queuebox-python queuebox-ts sql sql-many river pg-boss}"
OUT="${OUT:-benchmarks/results/enqueue-$(date -u +%F).json}"
source scripts/postgres.sh start >/dev/null
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"
[ -x /usr/local/go/bin/go ] && export PATH="/usr/local/go/bin:$PATH"
work="$CARGO_TARGET_DIR/enqueue-bench"; mkdir -p "$work"
rel="$CARGO_TARGET_DIR/release"
b() { nice -n 19 "$@"; }  # builds share the machine with benchmarks: lowest priority

# --- builds (release; niced) ---------------------------------------------------------------
# ENQ_PREBUILT=1 builds and copies nothing: it times the programs run.sh built last time in
# $work (on a shared tree, another session's uncommitted change to the C ABI or a wrapper can
# stop a rebuild halfway; the result's versions name the commit).
py="$work/py" ts="$work/ts" venv="$root/.venv/python-client"
if [ -z "${ENQ_PREBUILT:-}" ]; then
  b cargo build --quiet --release -p queuebox-c -p queuebox-node
  # The Python extension as maturin builds it (no libpython link), copied below.
  b cargo build --quiet --release -p queuebox-python --features queuebox-python/extension-module
  # Its own lock file, so its own target dir (sharing one would rebuild either's dependencies).
  b cargo build --quiet --release --manifest-path benchmarks/enqueue/rust/Cargo.toml --target-dir benchmarks/enqueue/rust/target
  cp benchmarks/enqueue/rust/target/release/queuebox-enqueue-bench "$work/"
  (cd benchmarks/enqueue/go && CGO_ENABLED=1 CGO_LDFLAGS="-L$rel -Wl,-rpath,$rel" b go build -o "$work/enqueue-go" .)
  # Python: a private copy of the package beside the release extension (the shared venv's
  # editable install stays the test suite's debug build).
  rm -rf "$py"; mkdir -p "$py/queuebox_inbox"
  cp clients/python/queuebox_inbox/*.py clients/python/queuebox_inbox/py.typed "$py/queuebox_inbox/"
  cp "$rel/lib_native.so" "$py/queuebox_inbox/_native.abi3.so"
  "$venv/bin/python" -c "import psycopg" 2>/dev/null || b "$venv/bin/pip" install -q "psycopg[binary]>=3.1"
  # TypeScript: a private build of the wrapper (clients/typescript/dist stays the tests'),
  # over the release addon.
  rm -rf "$ts"; mkdir -p "$ts"
  (cd clients/typescript && cp -r src scripts tsconfig.json tsconfig.cjs.json package.json "$ts/" && mkdir -p "$ts/native" && cp native/loader.cjs native/loader.d.cts "$ts/native/")
  [ -d clients/typescript/node_modules ] || (cd clients/typescript && b npm ci --no-audit --no-fund --loglevel=error)
  ln -s "$root/clients/typescript/node_modules" "$ts/node_modules"
  (cd "$ts" && b node scripts/build.mjs >/dev/null)
  cp "$rel/libqueuebox_node.so" "$work/queuebox.node"
fi
for f in queuebox-enqueue-bench enqueue-go queuebox.node py/queuebox_inbox/_native.abi3.so ts/dist/cjs/index.js; do
  [ -e "$work/$f" ] || { echo "enqueue: $work/$f is missing (run without ENQ_PREBUILT)" >&2; exit 1; }
done
export QUEUEBOX_NATIVE_PATH="$work/queuebox.node" QB_TS_DIST="$ts/dist/cjs/index.js"
# pg-boss and pg, pinned in benchmarks/enqueue/node/package-lock.json (a directory of its own:
# benchmarks/peers/run.sh reinstalls its node_modules when it runs).
(cd benchmarks/enqueue/node && b npm ci --no-audit --no-fund --loglevel=error)
export NODE_PATH="$root/benchmarks/enqueue/node/node_modules"

# --- databases: one per system family, made fresh ----------------------------------------
port="${QB_PG_PORT:-55432}"
pg() { psql -h 127.0.0.1 -p "$port" -U postgres -X -q -v ON_ERROR_STOP=1 "$@"; }
url() { echo "postgres://postgres@127.0.0.1:$port/$1"; }
dbs=(qb_enqueue_queuebox qb_enqueue_river qb_enqueue_pgboss)
for d in "${dbs[@]}"; do pg -c "DROP DATABASE IF EXISTS $d WITH (FORCE)" -c "CREATE DATABASE $d"; done
trap 'for d in "${dbs[@]}"; do pg -c "DROP DATABASE IF EXISTS $d WITH (FORCE)" >/dev/null 2>&1 || true; done' EXIT
"$work/queuebox-enqueue-bench" migrate "$(url qb_enqueue_queuebox)"
"$work/enqueue-go" river-migrate "$(url qb_enqueue_river)" 0 0
node benchmarks/enqueue/node/enqueue.js pg-boss-migrate "$(url qb_enqueue_pgboss)"

db_of() { case $1 in river) echo qb_enqueue_river ;; pg-boss) echo qb_enqueue_pgboss ;; *) echo qb_enqueue_queuebox ;; esac; }
table_of() { case $1 in river) echo river_job ;; pg-boss) echo pgboss.job ;; *) echo inbox ;; esac; }

# pgbench scripts of the SQL baseline: one row is queuebox_enqueue; 1,000 rows are either
# queuebox_enqueue once per row in one statement ("sql", what a trigger or a procedure
# writes) or queuebox_enqueue_many over an array the server builds ("sql-many", the function
# the wrappers' statement calls, without a client's 1,000-message parameter).
sqldir="$work/sql"; mkdir -p "$sqldir"
printf '%s\n' '\set n random(1, 1000000000)' 'BEGIN;' \
  "SELECT * FROM queuebox_enqueue('bench', NULL, jsonb_build_object('n', :n::int));" 'COMMIT;' > "$sqldir/sql-1.sql"
cp "$sqldir/sql-1.sql" "$sqldir/sql-many-1.sql"
printf '%s\n' 'BEGIN;' \
  "SELECT count(*) FROM (SELECT queuebox_enqueue('bench', NULL, jsonb_build_object('n', g)) FROM generate_series(1, 1000) g) s;" \
  'COMMIT;' > "$sqldir/sql-1000.sql"
printf '%s\n' 'BEGIN;' \
  "SELECT count(*) FROM queuebox_enqueue_many((SELECT jsonb_agg(jsonb_build_object('source', 'bench', 'payload', jsonb_build_object('n', g)) ORDER BY g) FROM generate_series(1, 1000) g));" \
  'COMMIT;' > "$sqldir/sql-many-1000.sql"

run_system() {  # run_system SYSTEM ROWS TXS: prints the program's JSON line
  local s=$1 rows=$2 txs=$3 u; u=$(url "$(db_of "$1")")
  case $s in
    queuebox-rust) "$work/queuebox-enqueue-bench" "$u" "$rows" "$txs" ;;
    queuebox-go | river) "$work/enqueue-go" "$s" "$u" "$rows" "$txs" ;;
    queuebox-python) PYTHONPATH="$py" "$venv/bin/python" benchmarks/enqueue/python/enqueue.py "$u" "$rows" "$txs" ;;
    queuebox-ts | pg-boss) node benchmarks/enqueue/node/enqueue.js "$s" "$u" "$rows" "$txs" ;;
    sql | sql-many)
      local o tps
      o=$(pgbench -h 127.0.0.1 -p "$port" -U postgres -n -M prepared -c 1 -t "$txs" -f "$sqldir/$s-$rows.sql" "$(db_of "$s")" 2>&1) \
        || { echo "$o" >&2; return 1; }
      tps=$(sed -n 's/^tps = \([0-9.]*\) (without initial connection time)/\1/p' <<<"$o")
      [ -n "$tps" ] || { echo "$o" >&2; return 1; }
      python3 -c 'import json,sys; s,r,t,tps=sys.argv[1],int(sys.argv[2]),int(sys.argv[3]),float(sys.argv[4]); print(json.dumps({"system":s,"rows_per_tx":r,"txs":t,"rows":r*t,"seconds":t/tps,"rows_per_s":r*tps}))' "$s" "$rows" "$txs" "$tps" ;;
    *) echo "unknown system $s" >&2; return 1 ;;
  esac
}
export -f run_system db_of url pg
export work py venv sqldir port

timed() {  # timed SYSTEM ROWS TXS: prepare the table, then run
  local s=$1 d t; d=$(db_of "$s"); t=$(table_of "$s")
  pg -d "$d" -c "TRUNCATE $t" -c "VACUUM ANALYZE $t" && run_system "$s" "$2" "$3"
}

samples="$work/samples.jsonl"; : > "$samples"
# The benchmark lock, held from the first timed run to the last: the machine's benchmarks never
# time at once, and the rounds stay interleaved with nobody else's runs between them (flock
# is not first-come-first-served, so per-run locking could leave a round half done for as
# long as another benchmark runs).
echo "enqueue: waiting for /tmp/bench.lock" >&2
exec 9>"${ENQ_LOCK:-/tmp/bench.lock}"
flock 9
echo "enqueue: holding /tmp/bench.lock from $(date -u +%T)" >&2
LOAD_START=$(cat /proc/loadavg)
read -r -a sys <<<"$SYSTEMS"
for ((r = 0; r < ROUNDS; r++)); do
  for rows in $SIZES; do
    for ((i = 0; i < ${#sys[@]}; i++)); do
      s=${sys[$(((i + r) % ${#sys[@]}))]}
      txs=$TXS1; [ "$rows" = 1 ] || txs=$TXS1000
      if [ "$s" = sql ] && [ "$rows" != 1 ]; then txs=$TXS1000_SQL; fi
      load=$(cut -d' ' -f1-3 /proc/loadavg)
      line=$(timed "$s" "$rows" "$txs")
      got=$(pg -d "$(db_of "$s")" -Atc "SELECT count(*) FROM $(table_of "$s")")
      [ "$got" = "$((rows * txs))" ] || { echo "enqueue: $s stored $got rows, expected $((rows * txs))" >&2; exit 1; }
      echo "round $((r + 1)) rows/tx $rows $s: $line (load $load)" >&2
      python3 -c 'import json,sys; d=json.loads(sys.argv[1]); d.update(round=int(sys.argv[2]), loadavg=sys.argv[3]); print(json.dumps(d))' "$line" "$((r + 1))" "$load" >> "$samples"
    done
  done
done
LOAD_END=$(cat /proc/loadavg)
flock -u 9
echo "enqueue: released /tmp/bench.lock at $(date -u +%T)" >&2

versions=$(
  echo "postgres=$(pg -Atc 'SHOW server_version')"
  echo "settings=$(pg -Atc "SELECT string_agg(name || '=' || setting, ' ' ORDER BY name) FROM pg_settings WHERE name IN ('synchronous_commit','fsync','shared_buffers','wal_level','full_page_writes')")"
  echo "river=$(cd benchmarks/enqueue/go && go list -m -f '{{.Version}}' github.com/riverqueue/river)"
  echo "pgx=$(cd benchmarks/enqueue/go && go list -m -f '{{.Version}}' github.com/jackc/pgx/v5)"
  echo "pg-boss=$(node -p "require('$NODE_PATH/pg-boss/package.json').version")"
  echo "node-postgres=$(node -p "require('$NODE_PATH/pg/package.json').version")"
  echo "psycopg=$("$venv/bin/python" -c 'import psycopg; print(psycopg.__version__)')"
  echo "sqlx=$(grep -A1 '^name = "sqlx"$' benchmarks/enqueue/rust/Cargo.lock | sed -n 's/version = "\(.*\)"/\1/p')"
  echo "go=$(go env GOVERSION) node=$(node --version) python=$("$venv/bin/python" -c 'import platform; print(platform.python_version())') rustc=$(rustc --version | cut -d' ' -f2) pgbench=$(pgbench --version | cut -d' ' -f3)"
  echo "queuebox=$(git rev-parse --short HEAD)"
)
python3 benchmarks/enqueue/report.py "$samples" "$OUT" "$ROUNDS" "$TXS1" "$TXS1000" "$LOAD_START" "$LOAD_END" "$versions"
echo "wrote $OUT" >&2
