#!/usr/bin/env bash
# Rows/s of a no-op handler through the TypeScript and Python clients (over their native
# addons) against the Rust core's Worker::run (bindings/c's bench_core example, the same
# baseline benchmarks/ffi_bench.sh uses), on the same database in the same run: release
# builds; ROWS rows per run, batch BATCH, concurrency CONC; ROUNDS rounds in rotating order,
# each run on fresh rows of its own source. Writes benchmarks/results/nodepy.json and
# benchmarks/nodepy.md. Usage: bash benchmarks/nodepy_bench.sh
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
ROWS="${ROWS:-20000}" BATCH="${BATCH:-100}" CONC="${CONC:-4}" ROUNDS="${ROUNDS:-3}"
source scripts/postgres.sh start >/dev/null
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"
out="$CARGO_TARGET_DIR/nodepy-bench"; mkdir -p "$out"

# Release builds: the Rust baseline, the Node addon (plain cargo build, copied to a .node
# file), the TypeScript outputs, and the Python extension (maturin develop --release).
cargo build --quiet --release -p queuebox-c --example bench_core
cargo build --quiet --release -p queuebox-node
cp "$CARGO_TARGET_DIR/release/libqueuebox_node.so" "$out/queuebox.node"
export QUEUEBOX_NATIVE_PATH="$out/queuebox.node"
(cd clients/typescript && { [ -d node_modules ] || npm ci --no-audit --no-fund --loglevel=error; } && npm run --silent build:ts)
venv="$root/.venv/python-client"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
[ -x "$venv/bin/maturin" ] || "$venv/bin/pip" install -q --disable-pip-version-check "maturin>=1.5,<2" pytest
(cd clients/python && VIRTUAL_ENV="$venv" PATH="$venv/bin:$PATH" maturin develop --release --quiet)

pg() { psql -h 127.0.0.1 -p "${QB_PG_PORT:-55432}" -U postgres -X -q "$@"; }
db="qb_nodepy_bench_$$"
pg -c "CREATE DATABASE $db"
trap 'pg -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true' EXIT
url="postgres://postgres@127.0.0.1:${QB_PG_PORT:-55432}/$db"
node -e 'require(process.env.QUEUEBOX_NATIVE_PATH).migrate(process.argv[1]).then(() => {}, (e) => { console.error(e); process.exit(1); })' "$url"

run_one() {  # run_one <impl> <source>: prints rows/s
  pg -d "$db" -c "INSERT INTO inbox (source, idempotency_key, payload, consumption)
    SELECT '$2', 'k' || g, jsonb_build_object('n', g), 'pull' FROM generate_series(1, $ROWS) g"
  pg -d "$db" -c "VACUUM ANALYZE inbox" 2>/dev/null
  local line
  case "$1" in
    rust) line=$("$CARGO_TARGET_DIR/release/examples/bench_core" "$url" "$2" "$ROWS" "$BATCH" "$CONC") ;;
    node) line=$(node benchmarks/nodepy/bench.mjs "$url" "$2" "$ROWS" "$BATCH" "$CONC") ;;
    python) line=$("$venv/bin/python" benchmarks/nodepy/bench.py "$url" "$2" "$ROWS" "$BATCH" "$CONC") ;;
  esac
  local n; n=$(pg -d "$db" -tA -c "SELECT count(*) FROM inbox WHERE source = '$2' AND state = 'processed'")
  [ "$n" = "$ROWS" ] || { echo "$1: only $n of $ROWS rows processed" >&2; exit 1; }
  echo "${line#rows_per_sec=}" | cut -d' ' -f1
}

declare -A samples=([rust]="" [node]="" [python]="")
orders=("rust node python" "python node rust" "node rust python")
for r in $(seq 1 "$ROUNDS"); do
  for impl in ${orders[$(( (r - 1) % 3 ))]}; do
    v=$(run_one "$impl" "${impl}_$r")
    echo "round $r $impl: $v rows/s" >&2
    samples[$impl]="${samples[$impl]} $v"
  done
done

python3 benchmarks/nodepy/report.py "$ROWS" "$BATCH" "$CONC" "$ROUNDS" "${samples[rust]}" "${samples[node]}" "${samples[python]}"
