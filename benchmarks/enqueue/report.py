"""Summarises benchmarks/enqueue/run.sh's samples into the raw result JSON.

    report.py SAMPLES.jsonl OUT.json ROUNDS TXS1 TXS1000 LOAD_START LOAD_END VERSIONS

Per system and rows per transaction: every round's rows/s, the median, min and max; the
ratio of the median to River's and pg-boss's medians of the same size, and the range of the
per-round ratios (system / peer of the same round), since rounds are interleaved."""

import json
import statistics
import sys
from collections import defaultdict

TIMER = (
    "one connection per run, opened before the clock; two transactions of the same shape run "
    "and roll back before it (statements prepared); the clock runs from the first BEGIN to the "
    "return of the last COMMIT; each transaction is BEGIN, one enqueue call, COMMIT. pgbench "
    "(sql, sql-many): its tps without initial connection time, no warm-up"
)
PEERS = ("river", "pg-boss")


def main() -> None:
    samples_path, out, rounds, txs1, txs1000, load_start, load_end, versions = sys.argv[1:9]
    samples = [json.loads(line) for line in open(samples_path) if line.strip()]
    by = defaultdict(dict)  # (system, rows) -> round -> rows/s
    loads = []
    for s in samples:
        by[(s["system"], s["rows_per_tx"])][s["round"]] = s["rows_per_s"]
        loads.append(float(s["loadavg"].split()[0]))
    results = defaultdict(dict)
    for (system, rows), per_round in sorted(by.items()):
        v = [per_round[r] for r in sorted(per_round)]
        cell = {
            "rounds_rows_per_s": [round(x, 1) for x in v],
            "median": round(statistics.median(v), 1),
            "min": round(min(v), 1),
            "max": round(max(v), 1),
        }
        for peer in PEERS:
            p = by.get((peer, rows))
            if not p or peer == system:
                continue
            common = sorted(set(per_round) & set(p))
            per = [per_round[r] / p[r] for r in common]
            cell[f"over_{peer}"] = {
                "median_ratio": round(statistics.median(v) / statistics.median(p.values()), 3),
                "per_round_min": round(min(per), 3),
                "per_round_max": round(max(per), 3),
            }
        results[str(rows)][system] = cell
    doc = {
        "benchmark": "enqueue-in-transaction",
        "command": "bash benchmarks/enqueue/run.sh",
        "issue": 38,
        "rounds": int(rounds),
        "transactions": {"1": int(txs1), "1000": int(txs1000)},
        "timer_boundary": TIMER,
        "table_preparation": "TRUNCATE the system's job table, then VACUUM ANALYZE it, before every timed run",
        "order": "rounds interleaved: every system once per size per round, order rotated by one each round",
        "machine": {
            "cpus": 2,
            "loadavg_start": load_start,
            "loadavg_end": load_end,
            "loadavg_1m_during_runs": {"min": min(loads), "max": max(loads)},
            "note": "shared machine; the timed section (all rounds) held /tmp/bench.lock",
        },
        "versions": dict(line.split("=", 1) for line in versions.splitlines() if "=" in line and " " not in line.split("=", 1)[0]),
        "versions_raw": versions.splitlines(),
        "results_by_rows_per_tx": results,
        "samples": samples,
    }
    with open(out, "w") as f:
        json.dump(doc, f, indent=2, sort_keys=False)
        f.write("\n")
    for rows, cells in results.items():
        print(f"rows/tx {rows}:", file=sys.stderr)
        for system, c in cells.items():
            ratios = "  ".join(
                f"/{p} {c[f'over_{p}']['median_ratio']} ({c[f'over_{p}']['per_round_min']}-{c[f'over_{p}']['per_round_max']})"
                for p in PEERS
                if f"over_{p}" in c
            )
            print(f"  {system:16} {c['median']:>10.0f} rows/s ({c['min']:.0f}-{c['max']:.0f})  {ratios}", file=sys.stderr)


if __name__ == "__main__":
    main()
