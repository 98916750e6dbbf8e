"""Work per message: pg_stat_database counters (transactions ≈ statements in autocommit,
tuples inserted/updated/deleted/returned) of each system's database across one drain of
ROWS rows at concurrency CONC, after a migrate-only `enqueue URL 0`. Run by run.sh after
harness.py (same env); writes the "per_row" section into the results JSON."""
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

ROWS, CONC = int(os.environ.get("PER_ROW_ROWS", "2000")), 8
KEYS = ["xact_commit", "xact_rollback", "tup_returned", "tup_fetched", "tup_inserted", "tup_updated", "tup_deleted"]


def counters(db):
    harness.psql(db, "SELECT pg_stat_force_next_flush()")
    line = harness.psql("postgres", f"SELECT {', '.join(KEYS)} FROM pg_stat_database WHERE datname = '{db}'")
    return dict(zip(KEYS, map(int, line.split("\t"))))


out = {}
for s in harness.SYSTEMS:
    if "l" not in harness.SYSTEMS[s][3]:  # the peers and queuebox-rust, at their latency settings
        continue
    db, url = harness.fresh(f"{s}_perrow")
    _, err = harness.run(s, ["enqueue", url, "0"], 120, expect_json=False)
    time.sleep(1.2)
    before = counters(db)
    res, err = harness.run(s, ["drain", url, str(ROWS), str(CONC)], 300)
    time.sleep(1.2)  # exited backends flush their counters
    after = counters(db)
    d = {k: after[k] - before[k] for k in KEYS}
    out[s] = {"rows": ROWS, "concurrency": CONC, "error": err, **{f"{k}_per_row": round(d[k] / ROWS, 2) for k in KEYS}}
    harness.log(f"per-row {s}: {out[s]}")
    harness.drop(db)
path = os.environ["PEERS_OUT"]
r = json.load(open(path))
r["per_row"] = out
open(path, "w").write(json.dumps(r, indent=2) + "\n")
