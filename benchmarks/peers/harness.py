"""Drives every adapter of benchmarks/peers/ through the same scenarios on one PostgreSQL, in
one run, and writes benchmarks/results/peers-<date>.json (the report is rendered from it by
report.py). Started by run.sh, which installs and builds the adapters first.

Every adapter has the same CLI:  drain URL N CONC | latency URL RATE SECS CONC |
enqueue URL N | work URL CONC SLEEP_MS LOG  (see node/common.js, river/benchcli,
queuebox/src/main.rs, procrastinate/adapter.py, python/queuebox_py.py: drain and enqueue).
Each scenario run gets a fresh database.

The same terms for every system (issue 39): a drain's rows are inserted by the adapter's own
`enqueue`, then the harness runs VACUUM ANALYZE, then the adapter opens its connections and
only then starts its clock (drain_bounded); rounds are interleaved; the ceiling is the best
of a batch x clients sweep (ceiling_sweep). The only exception to the timer boundary is
queuebox-ts: the TypeScript Worker has no public connect, so it connects inside run().
"""
import datetime
import json
import os
import signal
import subprocess
import sys
import time

SERVER = os.environ["QUEUEBOX_TEST_DATABASE_URL"].rsplit("/", 1)[0]
HERE = os.path.dirname(os.path.abspath(__file__))
ROWS = int(os.environ.get("DRAIN_ROWS", "20000"))
CONCS = [int(c) for c in os.environ.get("DRAIN_CONCS", "1 8 32").split()]
DRAIN_TIMEOUT = float(os.environ.get("DRAIN_TIMEOUT", "60"))
ROUNDS = int(os.environ.get("ROUNDS", "1"))  # drain rounds; the report shows the median
RATE, SECS, LAT_CONC = int(os.environ.get("LAT_RATE", "200")), int(os.environ.get("LAT_SECS", "20")), 8
CRASH_JOBS, CRASH_CONC, CRASH_SLEEP = 200, 8, 500
CRASH_WAIT = float(os.environ.get("CRASH_WAIT", "45"))
CRASH_WAIT_TUNED = float(os.environ.get("CRASH_WAIT_TUNED", "90"))  # rescuers run on their own timers
TUNED_CRASH = {"pg-boss-expire30s", "river-rescue30s"}
BIN = os.environ["PEERS_BIN"]
ONLY = os.environ.get("PEERS_ONLY", "").split()
SCENARIOS = os.environ.get("PEERS_SCENARIOS", "dlc")  # d = drain (and the ceiling's sweep), l = latency + bloat, c = crash
CEILING_BATCHES = os.environ.get("CEILING_BATCHES", "64 256 1024")
CEILING_CLIENTS = os.environ.get("CEILING_CLIENTS", "1 2 4 8 16 32")

RIVER = "SELECT count(*) FROM river_job WHERE state = 'completed'"
GRAPHILE = "SELECT {n} - count(*) FROM graphile_worker._private_jobs"
PGBOSS = "SELECT count(*) FROM pgboss.job WHERE name = 'bench' AND state = 'completed'"
QB = "SELECT count(*) FROM inbox WHERE state = 'processed'"
PY = os.environ.get("QB_PYTHON", "python3")  # an interpreter with the queuebox_inbox client (run.sh)
# name -> (argv prefix, extra env, SQL counting completed jobs (given N), scenarios, settings).
# QB_BATCH "rust-default" is replaced per concurrency by the Rust worker's default batch
# (`queuebox-peers-bench batch C`), so a wrapper runs at exactly the Rust worker's options.
SYSTEMS = {
    "queuebox-rust": ([f"{BIN}/queuebox-peers-bench"], {}, QB, "dlc",
                      "Rust core Worker, default options but concurrency (adaptive batch max(clamp(8192/c, 256, 1024), 2c))"),
    "river": ([f"{BIN}/river"], {}, RIVER, "dlc",
              "defaults: FetchCooldown 100 ms, FetchPollInterval 1 s, LISTEN, async completer; MaxWorkers c; pgx pool 40"),
    "river-tuned": ([f"{BIN}/river"], {"RIVER_FETCH_COOLDOWN_MS": "1", "RIVER_FETCH_POLL_MS": "10"}, RIVER, "dl",
                    "FetchCooldown 1 ms (its minimum), FetchPollInterval 10 ms; MaxWorkers c; pgx pool 40"),
    "river-cooldown1ms": ([f"{BIN}/river"], {"RIVER_FETCH_COOLDOWN_MS": "1"}, RIVER, "d",
                          "FetchCooldown 1 ms (its minimum), FetchPollInterval 1 s (default); MaxWorkers c; pgx pool 40"),
    "graphile-worker": (["node", f"{HERE}/node/graphile.js"], {}, GRAPHILE, "dlc",
                        "defaults: no local queue, no batched completion, pollInterval 2 s, LISTEN; concurrency c; pool max(10, c + 2)"),
    "graphile-worker-tuned": (["node", f"{HERE}/node/graphile.js"], {"GRAPHILE_TUNED": "1"}, GRAPHILE, "dl",
                              "its documented performance preset: localQueue.size 500, completeJobBatchDelay 0, failJobBatchDelay 0; concurrency c; pool max(10, c + 2)"),
    "pg-boss-tuned": (["node", f"{HERE}/node/pgboss.js"], {}, PGBOSS, "dlc",
                      "c work() subscriptions, batchSize 500 (batch fetch, one complete call per batch), pollingIntervalSeconds 0.5 (its minimum); pool max(10, c + 2). Defaults (batchSize 1, 2 s) not run: 0.5 jobs/s per subscription"),
    # Crash-only variants with a stuck-job timeout comparable to QueueBox's 30 s lease.
    "pg-boss-expire30s": (["node", f"{HERE}/node/pgboss.js"], {"PGBOSS_EXPIRE_S": "30"}, PGBOSS, "c", "crash only"),
    "river-rescue30s": ([f"{BIN}/river"], {"RIVER_RESCUE_AFTER_S": "30"}, RIVER, "c", "crash only"),
    "procrastinate": ([f"{os.environ.get('PEERS_VENV', '')}/bin/python", f"{HERE}/procrastinate/adapter.py"], {},
                      "SELECT count(*) FROM procrastinate_jobs WHERE status = 'succeeded'", "dlc",
                      "defaults: LISTEN, fetch_job_polling_interval 5 s, no batch fetch; concurrency c; pool max(10, c + 2)"),
    # The bare-SQL ceiling: a sweep of batch x clients (ceiling_sweep), once per round.
    "ceiling-sql": ([f"{BIN}/queuebox-peers-bench"], {}, QB, "s",
                    "plain SKIP LOCKED claim + one completing UPDATE per batch, autocommit, on QueueBox's inbox; best of the batch x clients sweep, connections opened before timing"),
    # Wrapper overhead (issue 39 item 3): the wrappers at their defaults (the same adaptive
    # batch as the Rust worker's), and every language at an explicit, equal batch.
    "queuebox-go": ([f"{BIN}/queuebox-go"], {}, QB, "d", "Go wrapper, default options but concurrency"),
    "queuebox-ts": (["node", f"{HERE}/node/queuebox-ts.js"], {}, QB, "d", "TypeScript wrapper, default options but concurrency"),
    "queuebox-py": ([PY, f"{HERE}/python/queuebox_py.py"], {}, QB, "d", "Python wrapper, default options but concurrency"),
}
for lang, prefix in (("rust", SYSTEMS["queuebox-rust"][0]), ("go", SYSTEMS["queuebox-go"][0]),
                     ("ts", SYSTEMS["queuebox-ts"][0]), ("py", SYSTEMS["queuebox-py"][0])):
    for tag, b, what in (("brust", "rust-default", "the Rust worker's default batch for c, explicit"),
                         ("b1024", "1024", "batch 1024 explicit (the default up to c=8)")):
        SYSTEMS[f"queuebox-{lang}-{tag}"] = (prefix, {"QB_BATCH": b}, QB, "d", f"{lang} at {what}, concurrency c")
# A QueueBox build to compare with in the same rounds (a before/after of a core change):
# PEERS_BASELINE_BIN is a queuebox-peers-bench built from the other commit, PEERS_BASELINE_NOTE
# says which (benchmarks/peers.md, "Method").
if os.environ.get("PEERS_BASELINE_BIN"):
    SYSTEMS["queuebox-rust-baseline"] = ([os.environ["PEERS_BASELINE_BIN"]], {}, QB, "dlc",
                                         os.environ.get("PEERS_BASELINE_NOTE", "Rust core Worker of the baseline build"))
if ONLY:
    SYSTEMS = {k: v for k, v in SYSTEMS.items() if k in ONLY}

loadavg_samples = []


def log(*a):
    print(time.strftime("%H:%M:%S"), *a, file=sys.stderr, flush=True)


def loadavg():
    v = float(open("/proc/loadavg").read().split()[0])
    loadavg_samples.append(v)
    return v


def psql(db, sql):
    out = subprocess.run(["psql", f"{SERVER}/{db}", "-X", "-qtA", "-F", "\t", "-c", sql],
                         check=True, capture_output=True, text=True).stdout.strip()
    return out


def fresh(name):
    db = f"peers_{name.replace('-', '_')}"
    psql("postgres", f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
    psql("postgres", f"CREATE DATABASE {db}")
    return db, f"{SERVER}/{db}"


def drop(db):
    psql("postgres", f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")


_rust_batch = {}


def env_of(sysname, conc):
    env = dict(SYSTEMS[sysname][1])
    if env.get("QB_BATCH") == "rust-default":
        if conc not in _rust_batch:
            _rust_batch[conc] = subprocess.run([f"{BIN}/queuebox-peers-bench", "batch", str(conc)], check=True,
                                               capture_output=True, text=True).stdout.strip()
        env["QB_BATCH"] = _rust_batch[conc]
    return {**os.environ, **env}


def run(sysname, argv, timeout, expect_json=True, conc=1, extra_env=None):
    prefix = SYSTEMS[sysname][0]
    p = subprocess.Popen(prefix + argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env={**env_of(sysname, conc), **(extra_env or {})}, start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        return None, "timeout"
    lines = [l for l in out.splitlines() if l.startswith("{")]
    if p.returncode != 0 or (expect_json and not lines):
        return None, f"exit {p.returncode}: {err.strip()[-400:]}"
    return (json.loads(lines[-1]) if lines else {}), None


def drain_bounded(sysname, conc):
    """One drain of ROWS rows at concurrency conc, on the same terms for every system:
    the rows are inserted by the adapter's own `enqueue` (each system's bulk API or SQL) in a
    process of its own, then the harness runs a database-wide VACUUM ANALYZE (the same
    maintenance for all), then `drain` (told by PEERS_PREENQUEUED not to insert) opens its
    connections and starts its clock only once they are open, stopping it at the last handler
    call. A run slower than DRAIN_TIMEOUT is killed and scored as the completed rows in the
    database over DRAIN_TIMEOUT (marked partial)."""
    db, url = fresh(f"{sysname}_d{conc}")
    _, _, done_sql, _, _ = SYSTEMS[sysname]
    out = {"concurrency": conc, "rows": ROWS}
    t_enq = time.time()
    _, err = run(sysname, ["enqueue", url, str(ROWS)], 300, expect_json=False, conc=conc)
    if err:
        drop(db)
        return {**out, "error": f"enqueue: {err}"}
    out["enqueue_s"] = round(time.time() - t_enq, 2)
    psql(db, "VACUUM ANALYZE")
    out["loadavg_1m_before"] = loadavg()
    p = subprocess.Popen(SYSTEMS[sysname][0] + ["drain", url, str(ROWS), str(conc)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env={**env_of(sysname, conc), "PEERS_PREENQUEUED": "1"},
                         start_new_session=True)
    deadline = time.time() + DRAIN_TIMEOUT + 60
    started = None
    while p.poll() is None and time.time() < deadline:
        time.sleep(0.25)
        if started is None:
            try:
                n = int(psql(db, done_sql.format(n=ROWS)) or 0)
            except subprocess.CalledProcessError:
                continue
            if n > 0:
                started = time.time()
        elif time.time() - started > DRAIN_TIMEOUT:
            break
    if p.poll() is None:
        done = int(psql(db, done_sql.format(n=ROWS)) or 0)
        elapsed = time.time() - started if started else DRAIN_TIMEOUT
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        out.update({"partial": True, "rows_per_s": done / elapsed, "handled": done, "seconds": elapsed,
                    "note": f"killed after {elapsed:.0f} s of processing; rows/s = completed rows in the database / elapsed"})
    else:
        so, se = p.communicate()
        lines = [l for l in so.splitlines() if l.startswith("{")]
        if p.returncode == 0 and lines:
            out.update(json.loads(lines[-1]))
        else:
            out["error"] = f"exit {p.returncode}: {se.strip()[-400:]}"
    out["loadavg_1m_after"] = loadavg()
    drop(db)
    return out


def ceiling_sweep():
    """The bare-SQL ceiling: `queuebox-peers-bench ceiling` drains ROWS rows once per
    (batch, clients) pair of the sweep, each on a freshly truncated, refilled and
    VACUUM ANALYZEd inbox, its clients connected and their statements prepared before the
    clock starts; the ceiling is the best pair."""
    db, url = fresh("ceiling")
    la = loadavg()
    res, err = run("ceiling-sql", ["ceiling", url, str(ROWS)], 900,
                   extra_env={"CEILING_BATCHES": CEILING_BATCHES, "CEILING_CLIENTS": CEILING_CLIENTS})
    drop(db)
    return {"rows": ROWS, "loadavg_1m_before": la, "loadavg_1m_after": loadavg(), **(res or {"error": err})}


def latency_and_bloat(sysname):
    db, url = fresh(f"{sysname}_lat")
    la = loadavg()
    res, err = run(sysname, ["latency", url, str(RATE), str(SECS), str(LAT_CONC)], SECS + 120, conc=LAT_CONC)
    out = {"rate": RATE, "seconds": SECS, "concurrency": LAT_CONC, "loadavg_1m_before": la}
    out.update(res or {"error": err})
    time.sleep(1)  # the adapter's backends flushed their statistics when they exited
    psql(db, "SELECT pg_stat_force_next_flush()")
    rows = psql(db, """SELECT schemaname || '.' || relname, n_live_tup, n_dead_tup, n_tup_ins, n_tup_upd,
                              n_tup_hot_upd, n_tup_del, autovacuum_count, vacuum_count
                         FROM pg_stat_user_tables WHERE n_tup_ins + n_tup_upd + n_tup_del > 0 ORDER BY 1""")
    tables = []
    for line in rows.splitlines():
        name, *nums = line.split("\t")
        k = ["n_live_tup", "n_dead_tup", "n_tup_ins", "n_tup_upd", "n_tup_hot_upd", "n_tup_del", "autovacuum_count", "vacuum_count"]
        tables.append({"table": name, **dict(zip(k, map(int, nums)))})
    n = (res or {}).get("n") or 1
    bloat = {"tables": tables,
             "dead_tuples": sum(t["n_dead_tup"] for t in tables),
             "row_versions_written": sum(t["n_tup_ins"] + t["n_tup_upd"] + t["n_tup_del"] for t in tables),
             "live_tuples": sum(t["n_live_tup"] for t in tables),
             "messages": n}
    bloat["dead_tuples_per_message"] = bloat["dead_tuples"] / n
    bloat["row_versions_per_message"] = bloat["row_versions_written"] / n
    drop(db)
    return out, bloat


def read_log(path):
    ev = []
    if os.path.exists(path):
        for line in open(path):
            parts = line.split()
            if len(parts) == 3:
                ev.append((parts[0], int(parts[1]), float(parts[2])))
    return ev


def crash(sysname):
    db, url = fresh(f"{sysname}_crash")
    prefix, env = SYSTEMS[sysname][0], env_of(sysname, CRASH_CONC)
    tmp = os.path.join(HERE, "..", "results", "tmp")
    os.makedirs(tmp, exist_ok=True)
    la_, lb_ = os.path.join(tmp, f"{sysname}-A.log"), os.path.join(tmp, f"{sysname}-B.log")
    for f in (la_, lb_):
        if os.path.exists(f):
            os.remove(f)
    res, err = run(sysname, ["enqueue", url, str(CRASH_JOBS)], 120, expect_json=False)
    if err:
        drop(db)
        return {"error": f"enqueue: {err}"}
    spawn = lambda logf: subprocess.Popen(prefix + ["work", url, str(CRASH_CONC), str(CRASH_SLEEP), logf],
                                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env,
                                          start_new_session=True)
    a = spawn(la_)
    deadline = time.time() + 60
    while time.time() < deadline and sum(1 for e in read_log(la_) if e[0] == "D") < 2 * CRASH_CONC:
        time.sleep(0.1)
    os.killpg(a.pid, signal.SIGKILL)
    t_kill = time.time() * 1000
    a.wait()
    b = spawn(lb_)
    ea = read_log(la_)
    started_a = {n for k, n, _ in ea if k == "S"}
    done_a = {n for k, n, _ in ea if k == "D"}
    in_flight = started_a - done_a
    end = time.time() + (CRASH_WAIT_TUNED if sysname in TUNED_CRASH else CRASH_WAIT)
    while time.time() < end:
        eb = read_log(lb_)
        done_b = {n for k, n, _ in eb if k == "D"}
        if len(done_a | done_b) >= CRASH_JOBS and in_flight <= done_b:
            break
        time.sleep(0.25)
    time.sleep(1.5)  # let B finish anything it started, to see duplicates
    os.killpg(b.pid, signal.SIGKILL)
    b.wait()
    eb = read_log(lb_)
    done_b = [n for k, n, _ in eb if k == "D"]
    all_done = [n for k, n, _ in ea + eb if k == "D"]
    rec = [t for k, n, t in eb if k == "D" and n in in_flight]
    recovered = {n for k, n, _ in eb if k == "D" and n in in_flight}
    out = {"jobs": CRASH_JOBS, "concurrency": CRASH_CONC, "handler_ms": CRASH_SLEEP, "wait_after_kill_s": CRASH_WAIT_TUNED if sysname in TUNED_CRASH else CRASH_WAIT,
           "done_before_kill": len(done_a), "in_flight_at_kill": len(in_flight),
           "in_flight_recovered": len(recovered),
           "recovery_s": (max(rec) - t_kill) / 1000 if recovered == in_flight and in_flight else None,
           "first_rerun_s": (min(t for k, n, t in eb if k == "S" and n in in_flight) - t_kill) / 1000
           if any(k == "S" and n in in_flight for k, n, _ in eb) else None,
           "not_done_at_end": CRASH_JOBS - len(set(all_done)),
           "completed_twice": sum(1 for n in set(all_done) if all_done.count(n) > 1),
           "completed_twice_across_crash": len(done_a & set(done_b)),
           "loadavg_1m": loadavg()}
    drop(db)
    return out


def settings():
    keys = ["server_version", "fsync", "synchronous_commit", "full_page_writes", "shared_buffers", "max_connections",
            "autovacuum", "autovacuum_naptime", "autovacuum_vacuum_threshold", "autovacuum_vacuum_scale_factor",
            "autovacuum_vacuum_insert_threshold", "autovacuum_vacuum_cost_limit", "track_counts"]
    return {k: psql("postgres", f"SHOW {k}") for k in keys}


def main():
    mem = [l for l in open("/proc/meminfo") if l.startswith("MemTotal")][0].split()[1]
    result = {"benchmark": "peers", "started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "machine": {"nproc": os.cpu_count(), "mem_total_gib": round(int(mem) / 1024 / 1024, 1),
                          "loadavg_at_start": open("/proc/loadavg").read().strip(),
                          "note": os.environ.get("PEERS_MACHINE_NOTE", "")},
              "postgres": settings(), "versions": json.loads(os.environ.get("PEERS_VERSIONS", "{}")),
              "workload": {"drain_rows": ROWS, "drain_concurrency": CONCS, "drain_timeout_s": DRAIN_TIMEOUT, "drain_rounds": ROUNDS,
                           "latency": {"rate_per_s": RATE, "seconds": SECS, "concurrency": LAT_CONC},
                           "crash": {"jobs": CRASH_JOBS, "concurrency": CRASH_CONC, "handler_ms": CRASH_SLEEP, "wait_s": CRASH_WAIT,
                                     "wait_s_tuned_variants": CRASH_WAIT_TUNED}},
              "drain": {}, "latency": {}, "bloat": {}, "crash": {}}
    result["settings"] = {k: v[4] for k, v in SYSTEMS.items()}
    result["workload"]["timer"] = ("every adapter opens its connections before its clock starts (queuebox-ts excepted: "
                                   "its Worker connects inside run()); rows inserted and VACUUM ANALYZE run before that")
    result["workload"]["ceiling_sweep"] = {"batches": CEILING_BATCHES, "clients": CEILING_CLIENTS}
    path = os.environ["PEERS_OUT"]
    save = lambda: open(path, "w").write(json.dumps(result, indent=2) + "\n")
    names = list(SYSTEMS)

    def sweep(rnd):
        r = ceiling_sweep()
        r["round"] = rnd
        log(f"ceiling r{rnd}: {r.get('rows_per_s', 0):.0f} rows/s best {r.get('best')} {r.get('error', '')}")
        result["drain"].setdefault("ceiling-sql", []).append(r)
        save()

    # Each round visits every (concurrency, system) once; the system order alternates per
    # concurrency and rotates per round, so no system always runs first or right after another.
    # The ceiling's sweep (independent of c) runs once per round, first in odd rounds, last in even.
    k = 0
    for rnd in range(1, ROUNDS + 1):
        sweep_now = "ceiling-sql" in SYSTEMS and "d" in SCENARIOS
        if sweep_now and rnd % 2 == 1:
            sweep(rnd)
        for conc in CONCS:
            order = names if k % 2 == 0 else names[::-1]
            shift = (rnd - 1) % len(order)
            order = order[shift:] + order[:shift]
            k += 1
            for s in order:
                if "d" not in SYSTEMS[s][3] or "d" not in SCENARIOS:
                    continue
                r = drain_bounded(s, conc)
                r["round"] = rnd
                log(f"drain r{rnd} c={conc} {s}: {r.get('rows_per_s', 0):.0f} rows/s {r.get('error', '')}{' (partial)' if r.get('partial') else ''}")
                result["drain"].setdefault(s, []).append(r)
                save()
        if sweep_now and rnd % 2 == 0:
            sweep(rnd)
    for s in names[::-1]:
        if "l" not in SYSTEMS[s][3] or "l" not in SCENARIOS:
            continue
        lat, bloat = latency_and_bloat(s)
        log(f"latency {s}: p50 {lat.get('p50')} p99 {lat.get('p99')} n {lat.get('n')} dead {bloat['dead_tuples']} {lat.get('error', '')}")
        result["latency"][s], result["bloat"][s] = lat, bloat
        save()
    for s in names:
        if "c" not in SYSTEMS[s][3] or "c" not in SCENARIOS:
            continue
        c = crash(s)
        log(f"crash {s}: {c}")
        result["crash"][s] = c
        save()
    result["finished"] = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    loadavg()
    result["machine"]["loadavg_1m_samples"] = {"min": min(loadavg_samples), "max": max(loadavg_samples),
                                               "mean": round(sum(loadavg_samples) / max(1, len(loadavg_samples)), 2),
                                               "n": len(loadavg_samples)}
    result["machine"]["loadavg_at_end"] = open("/proc/loadavg").read().strip()
    save()
    log("wrote", path)


if __name__ == "__main__":
    main()
