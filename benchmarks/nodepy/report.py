"""Writes benchmarks/results/nodepy-<date>.json and benchmarks/nodepy.md from the samples of
benchmarks/nodepy_bench.sh: report.py ROWS BATCH ROUNDS BEFORE_REF SAMPLES_FILE..., where each
line of a SAMPLES_FILE is `<concurrency> <round> <impl> <rows/s>`. Each file is one run with
its own Rust baseline (ratios never pair runs); normally there is one. LOAD_START in the
environment: /proc/loadavg when the (first) run began; LOAD_END when the last ended, if not now."""

import collections
import datetime
import json
import os
import statistics
import sys

rows, batch, rounds = map(int, sys.argv[1:4])
before_ref, samples_files = sys.argv[4], sys.argv[5:]
IMPLS = ["rust", "node", "python", "python3.12", "python3.13", "node_before", "python_before"]
NAMES = {
    "rust": "Rust core `Worker::run` (bench_core)",
    "node": "TypeScript `Worker.run`, batch crossing",
    "node_before": f"TypeScript `Worker.run`, client as of {before_ref}",
    "python": "Python `Worker.run` (asyncio), batch crossing",
    "python_before": f"Python `Worker.run` (asyncio), client as of {before_ref}",
    "python3.12": "Python `Worker.run` (asyncio) on CPython 3.12 (eager handler tasks)",
    "python3.13": "Python `Worker.run` (asyncio) on CPython 3.13 (eager handler tasks)",
}


def summarize(path):
    """The medians and same-round ratios of one run, by concurrency."""
    samples = collections.defaultdict(lambda: collections.defaultdict(dict))  # [c][impl][round]
    for line in open(path):
        c, r, impl, v = line.split()
        samples[int(c)][impl][int(r)] = float(v)
    out = {}
    for c in sorted(samples):
        s = samples[c]
        med = {k: statistics.median(s[k].values()) for k in IMPLS if s[k]}
        out[str(c)] = {
            "rows_per_s": {k: {"samples": [s[k][r] for r in sorted(s[k])], "median": med[k]} for k in med},
            "ratio_vs_rust": {k: round(med[k] / med["rust"], 3) for k in med if k != "rust"},
            "ratio_vs_rust_per_round": {k: [round(s[k][r] / s["rust"][r], 3) for r in sorted(s[k])] for k in med if k != "rust"},
        }
    return out


now = datetime.datetime.now(datetime.timezone.utc)
# Batch 0: the programs leave it unset, so each worker runs on the core's adaptive batch.
batch_text = f"batch {batch}" if batch else "the core's adaptive batch (unset: 8 × concurrency, 64..10000)"
res = {
    "benchmark": "nodepy_noop_handler",
    "date": now.isoformat(timespec="seconds"),
    "rows_per_run": rows, "batch_size": batch, "rounds": rounds, "before_ref": before_ref,
    "machine": {"cpus": os.cpu_count(), "loadavg_start": os.environ.get("LOAD_START", ""), "loadavg_end": os.environ.get("LOAD_END") or open("/proc/loadavg").read().strip()},
    # A file given as PATH@ROWS@NOTE ran ROWS rows per run (default ROWS above), NOTE says how.
    "runs": [
        {"rows_per_run": int((f.split("@") + [rows])[1]), "note": (f.split("@") + ["", ""])[2], "by_concurrency": summarize(f.split("@")[0])}
        for f in samples_files
    ],
}
os.makedirs("benchmarks/results", exist_ok=True)
out = f"benchmarks/results/nodepy-{now.date().isoformat()}.json"
if os.path.exists(out):  # an earlier run of the same day keeps its file
    out = f"benchmarks/results/nodepy-{now.date().isoformat()}-{now.strftime('%H%M')}.json"
with open(out, "w") as f:
    json.dump(res, f, indent=2, sort_keys=True)
    f.write("\n")

fmt = lambda xs: ", ".join(f"{x:.0f}" for x in xs)
rnd = lambda xs: ", ".join(f"{x:.2f}" for x in xs)
table = ["| run | c | worker | median rows/s | samples (round order) | ratio of medians | ratio per round |", "|---|---|---|---|---|---|---|"]
for run, c, b in [(f"{i + 1} ({r['rows_per_run']} rows)", c, b) for i, r in enumerate(res["runs"]) for c, b in r["by_concurrency"].items()]:
    for k in IMPLS:
        if k not in b["rows_per_s"]:
            continue
        v = b["rows_per_s"][k]
        ratio = "1.00" if k == "rust" else f"{b['ratio_vs_rust'][k]:.2f}"
        per = "" if k == "rust" else rnd(b["ratio_vs_rust_per_round"][k])
        table.append(f"| {run} | {c} | {NAMES[k]} | {v['median']:.0f} | {fmt(v['samples'])} | {ratio} | {per} |")
table = "\n".join(table)
md = f"""# Node and Python clients vs the Rust core worker

No-op handler, {rows} pull rows per run, {batch_text}, concurrency 1, 8 and 32, {rounds} rounds
in rotating order on one database in one run (release builds; `bash benchmarks/nodepy_bench.sh`;
raw numbers in `{out}`). Machine: {os.cpu_count()} CPUs shared with PostgreSQL and with
other engineers' builds; load average at the start `{res['machine']['loadavg_start']}`, at the end
`{res['machine']['loadavg_end']}`, so absolute rows/s are noisy: compare the ratios to the Rust
worker measured in the same round.

{table}

Every run is checked: all {rows} rows of its source must end `processed`. The Rust baseline
is bindings/c's `bench_core` example, the same one benchmarks/ffi_bench.sh uses for Go and C#.

**Batch crossing** (issue 21): the core's slots are the batch size, so one
`nextBatch(batchSize)` / `next_batch(batch_size)` call (the core's `Worker::next_batch`) hands
the client every row the core has claimed, the messages as one JSON text parsed once; the
client runs at most `concurrency` handlers and asks again only when a handler slot is free
and nothing is queued (so it claims when the Rust worker would). The successes of one
event-loop turn go back in one `completeAll` / `complete_all` call (the core's
`Task::complete_all`: one batched statement, each task under its own fence); lease loss is
reported for the whole worker by one pending `nextCancelled` / `next_cancelled` instead of
a `cancelled()` Promise / awaitable per task. The Rust baseline hands out at most
`concurrency` tasks (its `Worker::run`), which is why a client can come out above 1.00.

**Per-row crossing** (the "before" rows): the clients' code as of {before_ref}, over the
same native builds: `next()` → handler → `complete()` per row, each a Promise / asyncio
future settled from the tokio runtime, plus one pending `cancelled()` per task.
"""
# Hand-written sections of an existing nodepy.md (from the first "## " heading on) are kept.
try:
    old = open("benchmarks/nodepy.md").read()
    md += old[old.index("\n## ") :] if "\n## " in old else ""
except FileNotFoundError:
    pass
with open("benchmarks/nodepy.md", "w") as f:
    f.write(md)
print(json.dumps([{c: b["ratio_vs_rust"] for c, b in r["by_concurrency"].items()} for r in res["runs"]]))
