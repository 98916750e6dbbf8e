"""Renders benchmarks/peers.md from a peers-<date>.json (run.sh calls it). Everything from the
line "## Settings per system" on in an existing peers.md is kept (hand-written analysis)."""
import json
import os
import sys

src, dst = sys.argv[1], sys.argv[2]
r = json.load(open(src))
QB = "queuebox-rust"
peers = []
for sec in ("drain", "latency", "crash"):
    peers += [s for s in r.get(sec, {}) if s != QB and s not in peers]
names = [QB] + peers


def f(v, d=0):
    return "—" if v is None else f"{v:.{d}f}"


def ratio(a, b, d=2):
    return "—" if not a or not b else f"{a / b:.{d}f}"


def drain_of(s, c):
    """The median round of system s at concurrency c (rows/s), with the spread of all rounds."""
    xs = sorted((x for x in r["drain"].get(s, []) if x["concurrency"] == c and x.get("rows_per_s")),
                key=lambda x: x["rows_per_s"])
    if not xs:
        errs = [x for x in r["drain"].get(s, []) if x["concurrency"] == c]
        return errs[0] if errs else {}
    n = len(xs)
    med = xs[n // 2]["rows_per_s"] if n % 2 else (xs[n // 2 - 1]["rows_per_s"] + xs[n // 2]["rows_per_s"]) / 2
    return {"rows_per_s": med, "min": xs[0]["rows_per_s"], "max": xs[-1]["rows_per_s"], "n": n,
            "partial": any(x.get("partial") for x in xs)}


L = []
m, pg = r["machine"], r["postgres"]
L.append("# QueueBox vs PostgreSQL-backed queues (pg-boss, graphile-worker, River, procrastinate) and the bare-SQL ceiling\n")
L.append(f"`bash benchmarks/peers/run.sh` — {r['started']} to {r['finished']}; raw data: "
         f"`benchmarks/results/{os.path.basename(src)}`.\n")
la = m["loadavg_1m_samples"]
L.append(f"**Machine:** {m['nproc']} CPUs, {m['mem_total_gib']} GiB RAM. 1-min loadavg during the run "
         f"{la['min']}–{la['max']} (mean {la['mean']} over {la['n']} samples; start `{m['loadavg_at_start']}`)"
         + (f"; {m['note']}" if m.get("note") else "") + ". "
         + ("The loadavg counts the benchmarked processes themselves (up to 32 handlers plus PostgreSQL backends on 2 cores); "
            "each system's process and PostgreSQL share the same 2 cores, as on a small production box.\n"
            if m.get("note") else
            "The machine was shared with other work, so absolute rates are depressed and noisy; compare ratios within this run.\n"))
L.append(f"**PostgreSQL:** {pg['server_version']}, one local cluster (scripts/postgres.sh), a fresh database per system and scenario; "
         f"fsync={pg['fsync']}, synchronous_commit={pg['synchronous_commit']}, full_page_writes={pg['full_page_writes']}, "
         f"shared_buffers={pg['shared_buffers']}, max_connections={pg['max_connections']}; autovacuum={pg['autovacuum']} "
         f"(naptime {pg['autovacuum_naptime']}, vacuum_threshold {pg['autovacuum_vacuum_threshold']}, scale_factor "
         f"{pg['autovacuum_vacuum_scale_factor']}, insert_threshold {pg['autovacuum_vacuum_insert_threshold']}).\n")
v = r["versions"]
L.append("**Versions:** " + ", ".join(f"{k} {val}" for k, val in v.items()) + ".\n")
w = r["workload"]
L.append("## Results\n")
L.append("Ratios are **QueueBox (Rust core Worker) / peer**. Throughput: > 1 means QueueBox is faster. "
         "Latency: < 1 means QueueBox picks up sooner. Bloat: < 1 means QueueBox leaves fewer dead tuples.\n")
rounds = w.get("drain_rounds", 1)
L.append(f"### 1. Drain {w['drain_rows']} pre-inserted no-op messages (rows/s"
         + (f", median of {rounds} rounds (min–max); ratios of medians" if rounds > 1 else "") + ")\n")
L.append(f"Rows inserted in bulk before the clock starts (each system's bulk API or SQL); timed from worker start to the "
         f"last handler call. A run still going after {w['drain_timeout_s']:.0f} s of processing is killed and scored as "
         "completed rows in the database / elapsed (marked *partial*). For queuebox-go and queuebox-ts (the Go and "
         "TypeScript wrappers over the same core) QB/peer is the Rust core's rate over the wrapper's: the wrapper's cost.\n")
hdr = "| system | " + " | ".join(f"c={c} rows/s | QB/peer" for c in w["drain_concurrency"]) + " |"
L.append(hdr)
L.append("|" + "---|" * (1 + 2 * len(w["drain_concurrency"])))
for s in [n for n in names if n in r["drain"]]:
    cells = []
    for c in w["drain_concurrency"]:
        x, q = drain_of(s, c), drain_of(QB, c)
        val = f(x.get("rows_per_s")) + (f" ({x['min']:.0f}–{x['max']:.0f})" if x.get("n", 1) > 1 else "") \
            + (" *partial*" if x.get("partial") else "") + (" error" if x.get("error") else "")
        cells += [val, ratio(q.get("rows_per_s"), x.get("rows_per_s")) if s != QB else "1.00"]
    L.append(f"| {s} | " + " | ".join(cells) + " |")
L.append("")
# Issue 21's drain targets, from the medians above: >= 2x River (FetchCooldown 1 ms) and
# graphile-worker, >= 0.5 of the bare-SQL ceiling (ceiling-sql: same table, batch, concurrency).
TARGETS = [("river-cooldown1ms", 2.0, "≥ 2"), ("graphile-worker", 2.0, "≥ 2"), ("ceiling-sql", 0.5, "≥ 0.5")]
if any(t in r["drain"] for t, _, _ in TARGETS) and QB in r["drain"]:
    L.append("**Issue 21 drain targets** (QueueBox Rust worker's median / the other's median, same run; "
             "the ratio of the worst and best rounds in brackets: min/max and max/min):\n")
    L.append("| QueueBox / | target | " + " | ".join(f"c={c}" for c in w["drain_concurrency"]) + " |")
    L.append("|---|---|" + "---|" * len(w["drain_concurrency"]))
    for t, goal, label in TARGETS:
        if t not in r["drain"]:
            continue
        cells = []
        for c in w["drain_concurrency"]:
            x, q = drain_of(t, c), drain_of(QB, c)
            if not x.get("rows_per_s") or not q.get("rows_per_s"):
                cells.append("—")
                continue
            v = q["rows_per_s"] / x["rows_per_s"]
            spread = f" ({q['min'] / x['max']:.2f}–{q['max'] / x['min']:.2f})" if q.get("n", 1) > 1 and x.get("n", 1) > 1 else ""
            cells.append(f"{v:.2f}{spread} {'met' if v >= goal else '**missed**'}")
        L.append(f"| {t} | {label} | " + " | ".join(cells) + " |")
    L.append("")
lw = w["latency"]
L.append(f"### 2. Steady load: {lw['rate_per_s']} msg/s for {lw['seconds']} s, concurrency {lw['concurrency']} — pickup latency insert → handler (ms)\n")
L.append("One message per insert statement (each system's normal enqueue call) from the worker's own process, the insert "
         "time carried in the payload.\n")
L.append("| system | offered msg/s | handled | p50 | p95 | p99 | max | QB/peer p50 | QB/peer p99 |")
L.append("|---|---|---|---|---|---|---|---|---|")
q = r["latency"].get(QB, {})
for s in [n for n in names if n in r["latency"]]:
    x = r["latency"][s]
    L.append(f"| {s} | {f(x.get('offered_per_s'))} | {x.get('n', '—')}/{x.get('expected', '—')} | {f(x.get('p50'), 1)} | "
             f"{f(x.get('p95'), 1)} | {f(x.get('p99'), 1)} | {f(x.get('max'), 1)} | "
             f"{ratio(q.get('p50'), x.get('p50')) if s != QB else '1.00'} | {ratio(q.get('p99'), x.get('p99')) if s != QB else '1.00'} |"
             + (f" error: {x['error'][:80]}" if x.get("error") else ""))
L.append("")
cw = w["crash"]
if r.get("crash"):
    L.append(f"### 3. Crash recovery: SIGKILL a worker with messages in flight\n")
    L.append(f"{cw['jobs']} jobs, concurrency {cw['concurrency']}, handler sleeps {cw['handler_ms']} ms and logs start/done lines "
             f"(unbuffered, so they survive SIGKILL). Worker A is killed once {2 * cw['concurrency']} jobs are done; worker B starts "
             f"at once; we wait up to {cw['wait_s']:.0f} s ({cw.get('wait_s_tuned_variants', cw['wait_s'])} s for the *-expire30s / *-rescue30s "
             "variants, which set the peer's stuck-job timeout to 30 s like QueueBox's lease). *recovery* = kill → last in-flight job done again in B. "
             "*completed twice* = handler ran to the end twice for one job (at-least-once duplicates).\n")
    L.append("| system | in flight at kill | recovered | first re-run (s) | recovery (s) | not done at end | completed twice | QB/peer recovery |")
    L.append("|---|---|---|---|---|---|---|---|")
    qc = r["crash"].get(QB, {})
    for s in [n for n in names if n in r["crash"]]:
        x = r["crash"][s]
        if x.get("error"):
            L.append(f"| {s} | error: {x['error'][:100]} |||||||")
            continue
        L.append(f"| {s} | {x['in_flight_at_kill']} | {x['in_flight_recovered']} | {f(x['first_rerun_s'], 1)} | "
                 f"{f(x['recovery_s'], 1) if x['recovery_s'] is not None else 'not within ' + str(int(x['wait_after_kill_s'])) + ' s'} | "
                 f"{x['not_done_at_end']} | {x['completed_twice']} | {ratio(qc.get('recovery_s'), x['recovery_s']) if s != QB else '1.00'} |")
    L.append("")
L.append("### 4. Dead tuples after scenario 2 (pg_stat_user_tables, all tables of the system's database)\n")
L.append("| system | messages | dead tuples | dead / message | row versions written / message | live tuples | autovacuums during run | QB/peer dead |")
L.append("|---|---|---|---|---|---|---|---|")
qb = r["bloat"].get(QB, {})
for s in [n for n in names if n in r["bloat"]]:
    x = r["bloat"][s]
    av = sum(t["autovacuum_count"] for t in x["tables"])
    L.append(f"| {s} | {x['messages']} | {x['dead_tuples']} | {x['dead_tuples_per_message']:.2f} | {x['row_versions_per_message']:.2f} | "
             f"{x['live_tuples']} | {av} | {ratio(qb.get('dead_tuples'), x['dead_tuples']) if s != QB else '1.00'} |")
L.append("")
L.append("Per table: " + "; ".join(
    f"{s}: " + ", ".join(f"`{t['table']}` dead {t['n_dead_tup']} (ins {t['n_tup_ins']}, upd {t['n_tup_upd']}, hot {t['n_tup_hot_upd']}, del {t['n_tup_del']})"
                         for t in r["bloat"][s]["tables"] if t["n_dead_tup"] or t["n_tup_upd"] or t["n_tup_del"])
    for s in names if s in r["bloat"]) + "\n")
if r.get("per_row"):
    pr = r["per_row"]
    any_ = next(iter(pr.values()))
    L.append(f"### Work per message (drain of {any_['rows']} rows, concurrency {any_['concurrency']}; pg_stat_database deltas / rows)\n")
    L.append("Transactions ≈ statements (autocommit); background work (renewals, maintenance, heartbeats) included.\n")
    L.append("| system | transactions / row | tuples updated / row | inserted / row | deleted / row | tuples returned (scanned) / row | fetched / row |")
    L.append("|---|---|---|---|---|---|---|")
    for s in [n for n in names if n in pr]:
        x = pr[s]
        L.append(f"| {s} | {x['xact_commit_per_row']} | {x['tup_updated_per_row']} | {x['tup_inserted_per_row']} | "
                 f"{x['tup_deleted_per_row']} | {x['tup_returned_per_row']} | {x['tup_fetched_per_row']} |")
    L.append("")
tail = ""
if os.path.exists(dst):
    old = open(dst).read()
    if "\n## Settings per system" in old:
        tail = old[old.index("\n## Settings per system") + 1:]
open(dst, "w").write("\n".join(L) + "\n" + tail)
print("wrote", dst)
