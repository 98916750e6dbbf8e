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


def rounds_of(s, c):
    """{round: rows/s} of system s at concurrency c (the ceiling's sweep: every c)."""
    out = {}
    for x in r["drain"].get(s, []):
        if x.get("rows_per_s") and (s == CEIL or x.get("concurrency") == c):
            out[x["round"]] = x["rows_per_s"]
    return out


def median(v):
    v = sorted(v)
    n = len(v)
    return None if not n else (v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2)


def paired(a, b, c):
    """QB-side system a over b at concurrency c: the ratio of their medians, and the min and
    max of the per-round ratios (both ran in the same round, interleaved)."""
    ra, rb = rounds_of(a, c), rounds_of(b, c)
    both = sorted(set(ra) & set(rb))
    if not both:
        return None
    per = [ra[k] / rb[k] for k in both]
    return {"ratio": median(ra.values()) / median(rb.values()), "min": min(per), "max": max(per), "n": len(per)}


def verdict(p, goal):
    """met: every round's ratio reaches the goal; missed: none does; otherwise within noise."""
    if p is None:
        return "—"
    if p["min"] >= goal:
        return "met"
    if p["max"] < goal:
        return "**missed**"
    return "*within noise (unproven)*"


def fmt_ratio(p):
    return "—" if p is None else f"{p['ratio']:.2f} ({p['min']:.2f}–{p['max']:.2f})"


CEIL = "ceiling-sql"
L = []

m, pg = r["machine"], r["postgres"]
L.append("# QueueBox vs PostgreSQL-backed queues (pg-boss, graphile-worker, River, procrastinate), the bare-SQL ceiling, and its wrappers\n")
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
concs = w["drain_concurrency"]
if r.get("settings"):
    L.append("### Systems and settings\n")
    L.append("| system | version | settings |")
    L.append("|---|---|---|")
    vers = {"queuebox": f"queuebox {v.get('queuebox')}", "river": f"River {v.get('river')}",
            "graphile": f"graphile-worker {v.get('graphile-worker')}", "pg-boss": f"pg-boss {v.get('pg-boss')}",
            "procrastinate": f"procrastinate {v.get('procrastinate')}", "ceiling": f"PostgreSQL {pg['server_version'].split()[0]}"}
    for s_, text in r["settings"].items():
        if s_ in r["drain"] or s_ in r.get("latency", {}) or s_ in r.get("crash", {}):
            ver_ = next((val for k, val in vers.items() if s_.startswith(k)), "")
            L.append(f"| {s_} | {ver_} | {text} |")
    L.append("")
L.append(f"### 1. Drain {w['drain_rows']} pre-inserted no-op messages (rows/s, median of {rounds} rounds (min–max))\n")
L.append("Every drain, every system: the rows are inserted by the system's own bulk API or SQL (the adapter's `enqueue`, "
         "a process of its own), then the harness runs `VACUUM ANALYZE` on the database, then the adapter opens its "
         "connections, and only then does its clock start; it stops at the last handler call. "
         + (f"Timer boundary: {w['timer']}. " if w.get("timer") else "") + "Rounds are interleaved: each round runs every system at every c, in an order that "
         f"rotates per round. A run still going after {w['drain_timeout_s']:.0f} s of processing is killed and scored as "
         "completed rows in the database / elapsed (marked *partial*). QB/peer = the Rust worker's median / the peer's "
         "median, with the lowest and highest per-round ratio in brackets (both systems ran in the same round).\n")
hdr = "| system | " + " | ".join(f"c={c} rows/s | QB/peer" for c in concs) + " |"
L.append(hdr)
L.append("|" + "---|" * (1 + 2 * len(concs)))
for s in [n for n in names if n in r["drain"] and n != CEIL]:
    cells = []
    for c in concs:
        x = drain_of(s, c)
        val = f(x.get("rows_per_s")) + (f" ({x['min']:.0f}–{x['max']:.0f})" if x.get("n", 1) > 1 else "") \
            + (" *partial*" if x.get("partial") else "") + (" error" if x.get("error") else "")
        cells += [val, fmt_ratio(paired(QB, s, c)) if s != QB else "1.00"]
    L.append(f"| {s} | " + " | ".join(cells) + " |")
L.append("")
if CEIL in r["drain"]:
    runs = [x for x in r["drain"][CEIL] if x.get("sweep")]
    sw = w.get("ceiling_sweep", {})
    L.append(f"### Bare-SQL ceiling: batch × clients sweep (rows/s, median of {len(runs)} rounds)\n")
    L.append("A plain `FOR UPDATE SKIP LOCKED` claim of a batch and one `UPDATE` completing it, each in autocommit, "
             "by every client until its claim comes back empty, on QueueBox's own inbox table and indexes (no lease, "
             "fence, owner or renewal); each cell on freshly inserted rows after `VACUUM ANALYZE`, its connections "
             "opened and statements prepared before the clock. The ceiling of a round is its best cell; the same "
             "ceiling is used at every c (it is what the database allows, whatever the worker's concurrency).\n")
    cells = {}
    for x in runs:
        for e in x["sweep"]:
            cells.setdefault((e["batch"], e["clients"]), []).append(e["rows_per_s"])
    bs = sorted({k[0] for k in cells})
    cs = sorted({k[1] for k in cells})
    L.append("| batch \\ clients | " + " | ".join(str(c) for c in cs) + " |")
    L.append("|---|" + "---|" * len(cs))
    for b_ in bs:
        L.append(f"| {b_} | " + " | ".join(f(median(cells.get((b_, c), [])) or None) for c in cs) + " |")
    bests = [f"round {x['round']}: {x['rows_per_s']:.0f} (batch {x['best']['batch']}, {x['best']['clients']} clients)" for x in runs]
    L.append("\nBest per round: " + "; ".join(bests) + ".\n")
# Issue 39's targets, paired per round.
PEERS_TUNED = ["river-tuned", "river-cooldown1ms", "graphile-worker-tuned", "pg-boss-tuned", "procrastinate"]
if QB in r["drain"]:
    L.append("### Targets (issue 39): QueueBox Rust worker at its defaults\n")
    L.append("Ratio of medians, (lowest–highest per-round ratio). **met** when every round reaches the target, "
             "**missed** when none does, *within noise (unproven)* otherwise.\n")
    L.append("| QueueBox / | target | " + " | ".join(f"c={c}" for c in concs) + " |")
    L.append("|---|---|" + "---|" * len(concs))
    for t, goal, label in [(p_, 2.0, "≥ 2") for p_ in PEERS_TUNED] + [(CEIL, 0.7, "≥ 0.7")]:
        if t not in r["drain"]:
            continue
        cells = []
        for c in concs:
            pr = paired(QB, t, c)
            cells.append(f"{fmt_ratio(pr)} {verdict(pr, goal)}")
        L.append(f"| {t} | {label} | " + " | ".join(cells) + " |")
    lq = r.get("latency", {}).get(QB)
    if lq and lq.get("p99") is not None:
        v99 = lq["p99"]
        L.append(f"| pickup p99 (ms) | < 10 | {v99:.1f} ms at {lq.get('offered_per_s', 0):.0f} msg/s, c={lq.get('concurrency')}: "
                 f"{'met' if v99 < 9 else ('**missed**' if v99 > 11 else '*within noise (unproven)*')} (one run) |" + " |" * (len(concs) - 1))
    L.append("")
# Issue 39 item 3: each wrapper against the Rust worker at the same options.
WR = [("go", "Go"), ("ts", "TypeScript"), ("py", "Python")]
if any(f"queuebox-{k}" in r["drain"] or f"queuebox-{k}-brust" in r["drain"] for k, _ in WR):
    L.append("### Wrapper overhead: each wrapper / the Rust worker at the same options\n")
    L.append("Same harness, same rounds. *at the Rust default batch*: both explicit at the Rust worker's default batch "
             "for c (64 / 64 / 256); *at batch 1024*: both explicit at 1024 (the wrappers' default size); "
             "*defaults*: each at the options users get (the Rust worker's adaptive batch, clamp(8c, 64, 10000); "
             "a wrapper's adaptive hand-out batch, clamp(32c, 1024, 10000)), not equal options. "
             "Ratio of medians (lowest–highest per-round ratio); target ≥ 0.9.\n")
    L.append("| wrapper | options | " + " | ".join(f"c={c}" for c in concs) + " |")
    L.append("|---|---|" + "---|" * len(concs))
    for k, name in WR:
        for tag, label, base in (("-brust", "at the Rust default batch", "queuebox-rust-brust"),
                                 ("-b1024", "at batch 1024", "queuebox-rust-b1024"), ("", "defaults (unequal)", QB)):
            sysn = f"queuebox-{k}{tag}"
            if sysn not in r["drain"] or base not in r["drain"]:
                continue
            cells = []
            for c in concs:
                pr = paired(sysn, base, c)
                cells.append(fmt_ratio(pr) + ("" if not tag else f" {verdict(pr, 0.9)}"))
            L.append(f"| {name} | {label} | " + " | ".join(cells) + " |")
    for tag, label in (("-brust", "Rust explicit at its default batch / Rust default"), ("-b1024", "Rust at 1024 / Rust default")):
        if f"queuebox-rust{tag}" in r["drain"]:
            L.append(f"| (Rust) | {label} | " + " | ".join(fmt_ratio(paired(f'queuebox-rust{tag}', QB, c)) for c in concs) + " |")
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
