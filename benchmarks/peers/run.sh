#!/usr/bin/env bash
# Side-by-side benchmark of QueueBox against pg-boss, graphile-worker, River and procrastinate
# (each at its defaults and at its documented tuned settings), against the bare-SQL ceiling (a
# batch x clients sweep of a plain SKIP LOCKED claim + complete, queuebox/src/main.rs), and of
# QueueBox's Go, TypeScript and Python wrappers against the Rust worker at equal options, on
# the same local PostgreSQL, in one run, with the same workload (see benchmarks/peers.md).
# Every drain: rows inserted, then VACUUM ANALYZE, then the adapter connects, then its clock
# starts (harness.py, drain_bounded).
# Installs every peer from its registry at a pinned version, builds the QueueBox adapters,
# runs benchmarks/peers/harness.py, writes benchmarks/results/peers-<date>.json and
# benchmarks/peers.md.
#   bash benchmarks/peers/run.sh
#   env: DRAIN_ROWS (30000) DRAIN_CONCS ("1 8 32") DRAIN_TIMEOUT (60 s) ROUNDS (3) LAT_RATE (200)
#        LAT_SECS (20) CRASH_WAIT (45 s) PEERS_ONLY ("queuebox-rust river" ...; default all)
#        PEERS_DATE PEERS_SCENARIOS ("dlc": drain + ceiling sweep, latency + bloat, crash)
#        CEILING_BATCHES ("64 256 1024") CEILING_CLIENTS ("1 2 4 8 16 32") PEERS_PER_ROW (1:
#        also xacts_per_row.py) PEERS_MACHINE_NOTE
# A benchmark, not a test: not part of scripts/test.d.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
PEERS=$ROOT/benchmarks/peers
source scripts/postgres.sh start >/dev/null
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
[ -x /usr/local/go/bin/go ] && export PATH="/usr/local/go/bin:$PATH"
PEERS_VENV="${PEERS_VENV:-/tmp/queuebox-peers-venv}"
BIN="$CARGO_TARGET_DIR/peers-bench"; mkdir -p "$BIN"

# Pinned peer versions, the newest that run here (Node 20, Go 1.26, Python 3.11): graphile-worker
# 0.17.3 (0.18 needs Node >= 22.18), pg-boss 10.4.2 (11+ needs Node >= 22), River v0.51.2
# (river/go.mod), procrastinate below.
PROCRASTINATE_VERSION=3.10.0 PSYCOPG_VERSION=3.3.9 PSYCOPG_POOL_VERSION=3.3.3
command -v node >/dev/null || { apt-get update -qq && apt-get install -y -qq nodejs npm >/dev/null; }
(cd "$PEERS/node" && npm ci --no-audit --no-fund --loglevel=error)
if ! "$PEERS_VENV/bin/python" -c "import procrastinate" 2>/dev/null; then
  python3 -m venv "$PEERS_VENV"
fi
"$PEERS_VENV/bin/pip" install -q "procrastinate==$PROCRASTINATE_VERSION" "psycopg[binary]==$PSYCOPG_VERSION" "psycopg-pool==$PSYCOPG_POOL_VERSION"

# QueueBox: the Rust core Worker adapter and libqueuebox for the Go wrapper (release builds).
cargo build --quiet --release --manifest-path "$PEERS/queuebox/Cargo.toml"
cp "$CARGO_TARGET_DIR/release/queuebox-peers-bench" "$BIN/"
# The wrappers' adapters are built only when PEERS_ONLY selects them (or is unset); a name
# selects its variants too (queuebox-go: queuebox-go-brust, queuebox-go-b1024).
wanted() { [ -z "${PEERS_ONLY:-}" ] || [[ " $PEERS_ONLY " == *" $1"* ]]; }
NATIVE="$CARGO_TARGET_DIR/release"
if wanted queuebox-go; then
  cargo build --quiet --release -p queuebox-c
  (cd "$PEERS/queuebox-go" && CGO_LDFLAGS="-L$NATIVE -Wl,-rpath,$NATIVE" go build -o "$BIN/queuebox-go" .)
fi
(cd "$PEERS/river" && go build -o "$BIN/river" .)
# The Python wrapper: its native extension, a release build, into a venv of its own.
if wanted queuebox-py; then
  QB_PY_VENV="${QB_PY_VENV:-/tmp/queuebox-peers-py}"
  [ -x "$QB_PY_VENV/bin/maturin" ] || { python3 -m venv "$QB_PY_VENV" && "$QB_PY_VENV/bin/pip" install -q "maturin>=1.5,<2"; }
  (cd clients/python && VIRTUAL_ENV="$QB_PY_VENV" PATH="$QB_PY_VENV/bin:$PATH" maturin develop --release --quiet)
  export QB_PYTHON="$QB_PY_VENV/bin/python"
fi
# The TypeScript wrapper: the napi addon (release) and clients/typescript's compiled output.
if wanted queuebox-ts; then
  cargo build --quiet --release -p queuebox-node
  cp "$NATIVE/libqueuebox_node.so" "$BIN/queuebox.node"
  export QUEUEBOX_NATIVE_PATH="$BIN/queuebox.node"
  (cd clients/typescript && { [ -d node_modules ] || npm ci --no-audit --no-fund --loglevel=error; } && npm run --silent build:ts)
fi

ver() { node -p "require('$PEERS/node/node_modules/$1/package.json').version"; }
PEERS_VERSIONS=$(cat <<JSON
{"pg-boss": "$(ver pg-boss)", "graphile-worker": "$(ver graphile-worker)", "node": "$(node -v)",
 "river": "$(cd "$PEERS/river" && go list -m -f '{{.Version}}' github.com/riverqueue/river)",
 "riverpgxv5": "$(cd "$PEERS/river" && go list -m -f '{{.Version}}' github.com/riverqueue/river/riverdriver/riverpgxv5)",
 "go": "$(go env GOVERSION)",
 "procrastinate": "$("$PEERS_VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("procrastinate"))')",
 "python": "$("$PEERS_VENV/bin/python" -c 'import platform; print(platform.python_version())')",
 "queuebox": "${QB_COMMIT:-$(git rev-parse --short HEAD)}", "rustc": "$(rustc --version | cut -d' ' -f2)",
 "pgbench": "$(pgbench --version | cut -d' ' -f3)"}
JSON
)
DATE="${PEERS_DATE:-$(date -u +%F)}"
export DRAIN_ROWS="${DRAIN_ROWS:-30000}" ROUNDS="${ROUNDS:-3}"
export PEERS_BIN="$BIN" PEERS_VENV PEERS_VERSIONS PEERS_OUT="$ROOT/benchmarks/results/peers-$DATE.json"
python3 "$PEERS/harness.py"
[ -z "${PEERS_PER_ROW:-}" ] || python3 "$PEERS/xacts_per_row.py"
python3 "$PEERS/report.py" "$PEERS_OUT" "$ROOT/benchmarks/peers.md"
