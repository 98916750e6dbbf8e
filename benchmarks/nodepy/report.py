"""Writes benchmarks/results/nodepy.json and benchmarks/nodepy.md from the samples of
benchmarks/nodepy_bench.sh: report.py ROWS BATCH CONC ROUNDS "rust..." "node..." "python..."
(samples in round order; the ratio of each round pairs runs made one after another)."""

import datetime
import json
import os
import statistics
import sys

rows, batch, conc, rounds = map(int, sys.argv[1:5])
s = {k: [float(x) for x in v.split()] for k, v in zip(["rust", "node", "python"], sys.argv[5:8])}
med = {k: statistics.median(v) for k, v in s.items()}
per_round = {k: [round(x / r, 3) for x, r in zip(s[k], s["rust"])] for k in ("node", "python")}
res = {
    "benchmark": "nodepy_noop_handler",
    "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    "rows_per_run": rows, "batch_size": batch, "concurrency": conc, "rounds": rounds,
    "machine": {"cpus": os.cpu_count(), "loadavg": open("/proc/loadavg").read().strip()},
    "rows_per_s": {k: {"samples": v, "median": med[k]} for k, v in s.items()},
    "ratio_vs_rust": {"node": round(med["node"] / med["rust"], 3), "python": round(med["python"] / med["rust"], 3)},
    "ratio_vs_rust_per_round": per_round,
}
os.makedirs("benchmarks/results", exist_ok=True)
with open("benchmarks/results/nodepy.json", "w") as f:
    json.dump(res, f, indent=2, sort_keys=True)
    f.write("\n")
r = res["ratio_vs_rust"]
fmt = lambda xs: ", ".join(f"{x:.0f}" for x in xs)
rnd = lambda xs: ", ".join(f"{x:.2f}" for x in xs)
md = f"""# Node and Python clients vs the Rust core worker

No-op handler, {rows} pull rows per run, batch {batch}, concurrency {conc}, {rounds} rounds in
rotating order on one database in one run (release builds; `bash benchmarks/nodepy_bench.sh`;
raw numbers in `benchmarks/results/nodepy.json`). Machine: {os.cpu_count()} CPUs shared with
PostgreSQL and with other builds; load average at the end `{res['machine']['loadavg']}`, so
single samples are noisy: compare the ratios, not the absolute rows/s.

| worker | median rows/s | samples (round order) | ratio of medians | ratio per round |
|---|---|---|---|---|
| Rust core `Worker::run` (bench_core) | {med['rust']:.0f} | {fmt(s['rust'])} | 1.00 | |
| TypeScript `Worker.run` (napi addon) | {med['node']:.0f} | {fmt(s['node'])} | {r['node']:.2f} | {rnd(per_round['node'])} |
| Python `Worker.run` (pyo3, asyncio) | {med['python']:.0f} | {fmt(s['python'])} | {r['python']:.2f} | {rnd(per_round['python'])} |

Every run is checked: all {rows} rows of its source must end `processed`. The clients pay two
crossings per row (`next()` hands a task to the language, `complete()` goes back), each a
Promise / asyncio future settled from the tokio runtime, plus the JSON encoding of the
message; the Rust worker stays on the runtime. The Rust baseline is bindings/c's
`bench_core` example, the same one benchmarks/ffi_bench.sh uses for Go and C#.
"""
with open("benchmarks/nodepy.md", "w") as f:
    f.write(md)
print(json.dumps({"ratio_vs_rust": r, "per_round": per_round}))
