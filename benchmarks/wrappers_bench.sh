#!/usr/bin/env bash
# Wrappers vs the Rust worker (issue 21: "every wrapper >= 0.8x the Rust worker, no-op
# handler, same run"): rows/s of a no-op handler through the Go and C# wrappers and the
# Rust core's Worker::run, same database, same run, at each concurrency of CONCS (BATCH: 0,
# the default, leaves it unset, so every worker runs on the core's adaptive batch as users
# get it; runs before 2026-12-04 used max(10, c)), ROUNDS rounds in rotating order, medians.
# BEFORE_REF (a commit) adds the wrappers as they were at that commit, built from its
# clients/ sources against today's library, so before/after ratios come from one run too.
# Besides rows/s it records the CPU time (user + system) the worker process spent per row
# and its context switches per row (/usr/bin/time): on a loaded machine rows/s swings with
# the neighbours, the process's own CPU per row much less.
# Writes benchmarks/results/wrappers-<date>.json; the write-up is benchmarks/wrappers.md.
# Usage: bash benchmarks/wrappers_bench.sh   (env: ROWS CONCS ROUNDS BATCH BEFORE_REF IMPLS REUSE_BUILD TAG)
# TAG names the results file (default: the date): benchmarks/results/wrappers-<TAG>.json.
set -euo pipefail
cd "$(dirname "$0")/.."
ROWS="${ROWS:-10000}" CONCS="${CONCS:-1 8 32}" ROUNDS="${ROUNDS:-3}" BEFORE_REF="${BEFORE_REF:-}"
BATCH="${BATCH:-0}"
source scripts/postgres.sh start >/dev/null
export QB_FFI_PROFILE=release
source bindings/c/tests/ffi-env.sh
[ -x /usr/local/go/bin/go ] && export PATH="/usr/local/go/bin:$PATH"
ffi_need_apt mcs mono-devel

# REUSE_BUILD=1 keeps the release library and bench_core already built (on a shared
# machine another session's edit to the core would otherwise rebuild them for minutes).
if [ "${REUSE_BUILD:-0}" != 1 ]; then
  ffi_build_native
  cargo build --quiet --release -p queuebox-c --example bench_core
fi
rust_bin="$QB_NATIVE_DIR/examples/bench_core"
out="$QB_CARGO_TARGET/wrappers-bench"; rm -rf "$out"; mkdir -p "$out"
export CGO_LDFLAGS="-L$QB_NATIVE_DIR -Wl,-rpath,$QB_NATIVE_DIR"

# build_wrappers <dir with clients/> <suffix>: the Go and C# benchmark programs of
# benchmarks/ffi_go and benchmarks/ffi_csharp against that tree's wrapper sources. The Go
# program is that tree's own too: it follows its wrapper's API (NewWorker took no ctx
# before 2026-12-07).
build_wrappers() {
  local src="$1" sfx="$2"
  mkdir -p "$out/go$sfx"
  cp "$src/benchmarks/ffi_go/main.go" "$out/go$sfx/"
  sed "s#=> ../../clients/go#=> $src/clients/go#" benchmarks/ffi_go/go.mod >"$out/go$sfx/go.mod"
  cp "$src/clients/go/go.sum" "$out/go$sfx/go.sum"
  (cd "$out/go$sfx" && go build -mod=mod -o "$out/ffi_go$sfx" .)
  mkdir -p "$out/cs$sfx"
  mcs -nologo -optimize+ -target:library -r:System.Data.dll -out:"$out/cs$sfx/QueueBox.Inbox.dll" "$src"/clients/csharp/src/QueueBox.Inbox/*.cs
  mcs -nologo -optimize+ -out:"$out/cs$sfx/Bench.exe" -r:"$out/cs$sfx/QueueBox.Inbox.dll" -r:System.Data.dll benchmarks/ffi_csharp/Bench.cs
}
build_wrappers "$PWD" ""
IMPLS="${IMPLS:-rust go csharp}"
if [ -n "$BEFORE_REF" ]; then
  mkdir -p "$out/before"
  git archive "$BEFORE_REF" clients/go clients/csharp benchmarks/ffi_go | tar -x -C "$out/before"
  build_wrappers "$out/before" "_before"
  # The wrappers IMPLS names, as they were at BEFORE_REF.
  for i in $IMPLS; do case $i in go|csharp) IMPLS="$IMPLS ${i}_before" ;; esac; done
fi

db=$(ffi_create_db wrappers); trap 'ffi_drop_db "$db"' EXIT
url=$(ffi_db_url "$db")
"$out/ffi_go" -migrate "$url"

run_one() {  # run_one <impl> <source> <concurrency>: prints "rows/s cpu_us_per_row switches_per_row"
  local batch=$BATCH
  psql "$url" -X -q -c "INSERT INTO inbox (source, idempotency_key, payload, consumption)
    SELECT '$2', 'k' || g, jsonb_build_object('n', g), 'pull' FROM generate_series(1, $ROWS) g"
  psql "$url" -X -q -c "VACUUM ANALYZE inbox" 2>/dev/null
  local line timed=(/usr/bin/time -f "%U %S %w %c" -o "$out/time.txt")
  # Committed transactions in the database before and after (each backend reports its
  # counts when it disconnects, so after the worker exited they are complete).
  local x0 x1; x0=$(psql "$url" -X -qtA -c "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()")
  case "$1" in
    rust) line=$("${timed[@]}" "$rust_bin" "$url" "$2" "$ROWS" "$batch" "$3" run) ;;
    go) line=$("${timed[@]}" "$out/ffi_go" "$url" "$2" "$ROWS" "$batch" "$3") ;;
    go_before) line=$("${timed[@]}" "$out/ffi_go_before" "$url" "$2" "$ROWS" "$batch" "$3") ;;
    csharp) line=$(LD_LIBRARY_PATH="$QB_NATIVE_DIR" "${timed[@]}" mono "$out/cs/Bench.exe" "$url" "$2" "$ROWS" "$batch" "$3") ;;
    csharp_before) line=$(LD_LIBRARY_PATH="$QB_NATIVE_DIR" "${timed[@]}" mono "$out/cs_before/Bench.exe" "$url" "$2" "$ROWS" "$batch" "$3") ;;
  esac
  local n; n=$(psql "$url" -X -qtA -c "SELECT count(*) FROM inbox WHERE source = '$2' AND state = 'processed'")
  [ "$n" = "$ROWS" ] || { echo "$1: only $n of $ROWS rows processed" >&2; exit 1; }
  sleep 0.5
  x1=$(psql "$url" -X -qtA -c "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()")
  local rate; rate=$(echo "${line#rows_per_sec=}" | cut -d' ' -f1)
  # user, system seconds; voluntary, involuntary context switches of the worker process
  read -r usr sys vol invol <"$out/time.txt"
  # The count includes the psql session that counts (1) and the worker's background work;
  # the claims and completion statements are nearly all of it.
  python3 -c "import sys; r,u,s,v,i,n,x=map(float,sys.argv[1:]); print(f'{r} {(u+s)*1e6/n:.1f} {(v+i)/n:.2f} {x/n:.3f}')" "$rate" "$usr" "$sys" "$vol" "$invol" "$ROWS" "$((x1 - x0))"
}

samples="$out/samples.tsv"; : >"$samples"
read -r -a impls <<<"$IMPLS"
for c in $CONCS; do
  for r in $(seq 1 "$ROUNDS"); do
    # Rotate the order each round so that no implementation always runs first or last.
    k=$(( (r - 1) % ${#impls[@]} ))
    order=("${impls[@]:$k}" "${impls[@]:0:$k}")
    for impl in "${order[@]}"; do
      load=$(cut -d' ' -f1 /proc/loadavg)
      read -r v cpu sw xa < <(run_one "$impl" "${impl}_c${c}_r$r" "$c")
      echo "c=$c round $r $impl: $v rows/s, $cpu us CPU/row, $sw switches/row, $xa transactions/row (load $load)" >&2
      printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$c" "$r" "$impl" "$v" "$load" "$cpu" "$sw" "$xa" >>"$samples"
    done
  done
done

date_tag="${TAG:-$(date -u +%Y-%m-%d)}"
python3 - "$samples" "$ROWS" "$ROUNDS" "$BEFORE_REF" "benchmarks/results/wrappers-$date_tag.json" "$BATCH" <<'PY'
import json, statistics, sys, datetime, platform, os, collections
path, rows, rounds, before, dest, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5], int(sys.argv[6])
s = collections.defaultdict(lambda: collections.defaultdict(list))
cpu = collections.defaultdict(lambda: collections.defaultdict(list))
sw = collections.defaultdict(lambda: collections.defaultdict(list))
xa = collections.defaultdict(lambda: collections.defaultdict(list))
loads = []
for line in open(path):
    c, r, impl, v, load, u, x, t = line.rstrip("\n").split("\t")
    xa[int(c)][impl].append(float(t))
    s[int(c)][impl].append(float(v)); loads.append(float(load))
    cpu[int(c)][impl].append(float(u)); sw[int(c)][impl].append(float(x))
res = {
    "benchmark": "wrappers_vs_rust_worker_noop_handler",
    "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    "rows_per_run": rows, "rounds": rounds, "batch_size": batch or "unset: the core's adaptive batch (the Rust worker clamp(8 x concurrency, 64, 10000); hand-out wrappers clamp(32 x concurrency, 1024, 10000))",
    "before_ref": before or None,
    "machine": f"{os.cpu_count()} CPUs, {platform.machine()}, shared with other engineers' builds",
    "load_average_1m": {"min": min(loads), "median": statistics.median(loads), "max": max(loads)},
    "by_concurrency": {},
}
for c in sorted(s):
    med = {k: statistics.median(v) for k, v in s[c].items()}
    res["by_concurrency"][str(c)] = {
        "rows_per_sec": {k: {"samples": v, "median": round(med[k], 1)} for k, v in s[c].items()},
        "ratio_vs_rust_worker": {k: round(med[k] / med["rust"], 3) for k in med if k != "rust"},
        "worker_process_cpu_us_per_row": {k: {"samples": v, "median": statistics.median(v)} for k, v in cpu[c].items()},
        "worker_process_context_switches_per_row": {k: {"samples": v, "median": statistics.median(v)} for k, v in sw[c].items()},
        "database_transactions_per_row": {k: {"samples": v, "median": statistics.median(v)} for k, v in xa[c].items()},
    }
open(dest, "w").write(json.dumps(res, indent=2) + "\n")
for c, v in res["by_concurrency"].items():
    print(f"c={c}", json.dumps(v["ratio_vs_rust_worker"]), "cpu us/row:", json.dumps({k: x["median"] for k, x in v["worker_process_cpu_us_per_row"].items()}))
print("load average (1 min) min/median/max:", res["load_average_1m"])
PY
