#!/usr/bin/env bash
# Rows/s of a no-op handler through the TypeScript and Python clients (over their native
# addons) against the Rust core's Worker::run (bindings/c's bench_core example, the same
# baseline benchmarks/ffi_bench.sh uses), on the same database in the same run: release
# builds; ROWS rows per run, batch BATCH (0, the default: unset, the core's adaptive batch
# as users get it), at each concurrency of CONCS; ROUNDS rounds in
# rotating order, each run on fresh rows of its own source.
#
# "Before" rows: the clients' own code as of BEFORE_REF (the per-row loop: next() ->
# handler -> complete() per row), run over the same native builds as "after" (the addons
# keep next()/complete()), so before and after differ in the client loop alone.
#
# Writes benchmarks/results/nodepy-<UTC date>.json and benchmarks/nodepy.md.
# Usage: bash benchmarks/nodepy_bench.sh   (ROWS=20000 BATCH=0 CONCS="1 8 32" ROUNDS=3;
# IMPLS="rust node node_before" for a subset, rust always included for the ratios;
# python3.12 and python3.13 run the Python client on that interpreter: eager handler tasks)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
ROWS="${ROWS:-20000}" BATCH="${BATCH:-0}" CONCS="${CONCS:-1 8 32}" ROUNDS="${ROUNDS:-3}"
BEFORE_REF="${BEFORE_REF:-2a51b98}"
source scripts/postgres.sh start >/dev/null
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"
out="$CARGO_TARGET_DIR/nodepy-bench"; mkdir -p "$out"

# Release builds: the Rust baseline, the Node addon (plain cargo build, copied to a .node
# file), the TypeScript outputs, and the Python extension (maturin develop --release).
# NODEPY_PREBUILT=1 builds nothing with cargo and uses the release artifacts already in the
# target dir (bench_core, libqueuebox_node.so, and lib_native.so, the Python extension a
# release `maturin build` leaves there, beside a copy of clients/python's package): on a
# shared machine another session's release build can hold the target dir's lock for an hour.
# Check that they are newer than the last change to core/ and bindings/ before using it.
venv="$root/.venv/python-client"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
pypath=""
if [ -n "${NODEPY_PREBUILT:-}" ]; then
  pypath="$out/py-release"; rm -rf "$pypath"; mkdir -p "$pypath/queuebox_inbox"
  cp clients/python/queuebox_inbox/*.py clients/python/queuebox_inbox/py.typed "$pypath/queuebox_inbox/"
  cp "$CARGO_TARGET_DIR/release/lib_native.so" "$pypath/queuebox_inbox/_native.abi3.so"
  ls -l --time-style=+%FT%T "$CARGO_TARGET_DIR/release/examples/bench_core" "$CARGO_TARGET_DIR/release/libqueuebox_node.so" \
    "$CARGO_TARGET_DIR/release/lib_native.so" >&2
else
  cargo build --quiet --release -p queuebox-c --example bench_core
  cargo build --quiet --release -p queuebox-node
  [ -x "$venv/bin/maturin" ] || "$venv/bin/pip" install -q --disable-pip-version-check "maturin>=1.5,<2" pytest
  (cd clients/python && VIRTUAL_ENV="$venv" PATH="$venv/bin:$PATH" maturin develop --release --quiet)
fi
cp "$CARGO_TARGET_DIR/release/libqueuebox_node.so" "$out/queuebox.node"
export QUEUEBOX_NATIVE_PATH="$out/queuebox.node"
(cd clients/typescript && { [ -d node_modules ] || npm ci --no-audit --no-fund --loglevel=error; } && npm run --silent build:ts)

# The clients as of BEFORE_REF, beside the same native builds.
before="$out/before"; rm -rf "$before"; mkdir -p "$before"
git archive "$BEFORE_REF" clients/typescript/src clients/typescript/native/loader.cjs clients/typescript/native/loader.d.cts \
  clients/typescript/scripts clients/typescript/tsconfig.json clients/typescript/tsconfig.cjs.json clients/typescript/package.json \
  clients/python/queuebox_inbox | tar -x -C "$before"
ln -s "$root/clients/typescript/node_modules" "$before/clients/typescript/node_modules"
(cd "$before/clients/typescript" && node scripts/build.mjs >/dev/null)
cp "${pypath:-clients/python}"/queuebox_inbox/_native*.so "$before/clients/python/queuebox_inbox/"

pg() { psql -h 127.0.0.1 -p "${QB_PG_PORT:-55432}" -U postgres -X -q "$@"; }
db="qb_nodepy_bench_$$"
pg -c "CREATE DATABASE $db"
trap 'pg -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true' EXIT
url="postgres://postgres@127.0.0.1:${QB_PG_PORT:-55432}/$db"
node -e 'require(process.env.QUEUEBOX_NATIVE_PATH).migrate(process.argv[1]).then(() => {}, (e) => { console.error(e); process.exit(1); })' "$url"

other_python() {  # other_python 3.12: that interpreter's path, or fail naming it
  local v=$1 p
  # pyenv's own install first: its python3.12 shim on PATH refuses unless 3.12 is selected.
  for p in $(ls -d "${PYENV_ROOT:-$HOME/.pyenv}"/versions/"$v".*/bin/python 2>/dev/null) "$(command -v "python$v")"; do
    [ -x "$p" ] && "$p" -c "" 2>/dev/null && { echo "$p"; return; }
  done
  echo "nodepy_bench: no working python$v here (pyenv's versions or PATH)" >&2
  exit 2
}

run_one() {  # run_one <impl> <source> <concurrency>: prints rows/s
  pg -d "$db" -c "INSERT INTO inbox (source, idempotency_key, payload, consumption)
    SELECT '$2', 'k' || g, jsonb_build_object('n', g), 'pull' FROM generate_series(1, $ROWS) g"
  pg -d "$db" -c "VACUUM ANALYZE inbox" 2>/dev/null
  local line args=("$url" "$2" "$ROWS" "$BATCH" "$3")
  case "$1" in
    rust) line=$("$CARGO_TARGET_DIR/release/examples/bench_core" "${args[@]}") ;;
    node) line=$(node benchmarks/nodepy/bench.mjs "${args[@]}") ;;
    node_before) line=$(QB_TS_CLIENT="$before/clients/typescript/dist/esm/index.js" node benchmarks/nodepy/bench.mjs "${args[@]}") ;;
    python) line=$(PYTHONPATH="$pypath" "$venv/bin/python" benchmarks/nodepy/bench.py "${args[@]}") ;;
    python_before) line=$(PYTHONPATH="$before/clients/python" "$venv/bin/python" benchmarks/nodepy/bench.py "${args[@]}") ;;
    # The same client and abi3 extension on another CPython (3.12+ starts handler tasks
    # eagerly), found on PATH or among pyenv's versions.
    python3.*) line=$(PYTHONPATH="${pypath:-clients/python}" "$(other_python "${1#python}")" benchmarks/nodepy/bench.py "${args[@]}") ;;
  esac
  local n; n=$(pg -d "$db" -tA -c "SELECT count(*) FROM inbox WHERE source = '$2' AND state = 'processed'")
  [ "$n" = "$ROWS" ] || { echo "$1: only $n of $ROWS rows processed" >&2; exit 1; }
  echo "${line#rows_per_sec=}" | cut -d' ' -f1
}

export LOAD_START; LOAD_START=$(cat /proc/loadavg)
read -r -a impls <<< "${IMPLS:-rust node python node_before python_before}"
samples="$out/samples.txt"; : > "$samples"
for c in $CONCS; do
  for r in $(seq 1 "$ROUNDS"); do
    # Rotate the order so no implementation always runs first (or right after a vacuum).
    k=$(( (r - 1) % ${#impls[@]} ))
    for impl in "${impls[@]:k}" "${impls[@]:0:k}"; do
      v=$(run_one "$impl" "${impl}_c${c}_r$r" "$c")
      echo "c=$c round $r $impl: $v rows/s" >&2
      echo "$c $r $impl $v" >> "$samples"
    done
  done
done

python3 benchmarks/nodepy/report.py "$ROWS" "$BATCH" "$ROUNDS" "$BEFORE_REF" "$samples"
