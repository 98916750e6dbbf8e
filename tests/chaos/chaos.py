#!/usr/bin/env python3
"""Chaos ledger: sends N numbered messages through each path of the real `queuebox` binary
(two replicas), strikes the relays, the pull worker and (with --pg-faults) the database at
seeded moments — SIGKILL and restart, SIGSTOP past the lease, crash and recovery — records
every acknowledgement, store and delivery in a ledger, and checks that nothing acknowledged
was lost, every duplicate has a cause, no row is left stuck and no payload changed.

    python3 tests/chaos/chaos.py [--paths http,rabbit-kafka,...] [--seed N]
    QB_CHAOS=long python3 tests/chaos/chaos.py      # 20,000 messages and 20 faults per path
    python3 tests/chaos/chaos.py --check LEDGER      # re-check a kept ledger file

Modules: `payloads` (bodies and the canonical JSON compare), `ledger` (the SQLite ledger and
its checks), `relay` (the binary, the databases, the HTTP receiver), `paths` (one class per
path, the pull workers), `fuzz` (the ingest fuzzer, a separate entry point). See
tests/chaos/README.md.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import payloads  # noqa: E402
from ledger import Ledger, Summary, check  # noqa: E402
from paths import CLAIM_MS, PATHS, ChaosPath, Context  # noqa: E402
from relay import NatsServer, PgCluster, ScriptBroker, drop_database, free_port  # noqa: E402

PROFILES = {
    # name: (messages per path, faults per path, seconds without a new delivery before the
    # wait for the last deliveries gives up — the relay may be far behind the senders, and a
    # backlog that still moves is not a loss)
    "ci": (500, 3, 60),
    "long": (20_000, 20, 180),
}
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


class Killer(threading.Thread):
    """Each time the number of delivered messages crosses one of `thresholds` (drawn from the
    run's seed), strikes one of the path's processes with a fault drawn from the seed:

    - `kill`: SIGKILL, then a restart after a random 50–600 ms;
    - `pause`: SIGSTOP for longer than a lease (CLAIM_MS + 0.5 s), then SIGCONT — the
      process wakes up holding claims another replica may have taken over, so its late
      writes must be fenced off and counted in `queuebox_claims_lost_total`. The run's own
      PostgreSQL (--pg-faults) is paused whole: the postmaster and every backend.

    With --broker-faults the NATS pull paths run on a NATS server of the run's own, and the
    RabbitMQ and Kafka paths on a RabbitMQ and a Kafka of the run's own (scripts/brokers.sh on
    ports of the run), which a `kill` restarts (an orderly stop, then the same ports and data).

    Before each fault it scrapes `queuebox_claims_lost_total`, whose value dies with the
    process (a pause keeps it; the later scrapes of the same process supersede it)."""

    def __init__(self, path, ledger, thresholds, rng, pause_share=0.3, redraw_slow=True):
        super().__init__(daemon=True)
        self.path, self.ledger, self.thresholds, self.rng = path, ledger, list(thresholds), rng
        self.pause_share = pause_share
        # False: a target whose restart is slow (a RabbitMQ or Kafka of the run, 10-15 s) gets
        # only its first fault, and the random ones are drawn among the others.
        self.redraw_slow = redraw_slow
        self.done = threading.Event()
        self.error: Exception | None = None
        self.kills = 0

    def run(self):
        try:
            # The run's own database and broker get each of their faults once first (`first_faults`),
            # in an order drawn from the seed, so that the short profile strikes them too; the
            # rest is drawn at random.
            first = [(t, f) for t in self.path.killables() for f in getattr(t, "first_faults", ())]
            self.rng.shuffle(first)
            for t in self.thresholds:
                while self.ledger.delivered_count() < t:
                    if self.done.wait(0.01):
                        return
                if first:
                    target, fault = first.pop(0)
                else:
                    drawn = [t for t in self.path.killables() if self.redraw_slow or not getattr(t, "slow", False)]
                    target = self.rng.choice(drawn)
                    pausable = getattr(target, "pausable", True)
                    fault = "pause" if pausable and self.rng.random() < self.pause_share else "kill"
                lost = target.claims_lost()
                if lost is not None:
                    self.ledger.claims_lost(target.pid, lost)
                self.kills += 1
                if fault == "pause":
                    fault_id = self.ledger.kill(f"pause:{target.name}", target.pid)
                    # A target made of several processes (PostgreSQL) pauses them all itself.
                    pause = getattr(target, "pause", lambda: os.kill(target.pid, signal.SIGSTOP))
                    resume = getattr(target, "resume", lambda: os.kill(target.pid, signal.SIGCONT))
                    pause()
                    time.sleep(CLAIM_MS / 1000 + 0.5)
                    resume()
                else:
                    fault_id = self.ledger.kill(target.name, target.pid)
                    target.kill()
                    time.sleep(self.rng.uniform(0.05, 0.6))
                    target.start()
                self.ledger.restarted(fault_id)
        except Exception as e:  # reported as a harness problem, never swallowed
            self.error = e


def wait_for_deliveries(ledger: Ledger, stall_s: float) -> bool:
    """Waits until every acknowledged message was delivered, as long as deliveries still
    arrive: gives up after `stall_s` seconds without a new one."""
    last, last_change = -1, time.time()
    while not ledger.acked() <= ledger.delivered():
        count = ledger.delivered_count()
        if count != last:
            last, last_change = count, time.time()
        elif time.time() - last_change > stall_s:
            return False
        time.sleep(0.1)
    return True


def wait_for(what, timeout, cond, step=0.1) -> bool:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if cond():
            return True
        time.sleep(step)
    return False


UNFINISHED_SQL = """
SELECT 'inbox', id::text, state, format('consumption=%s attempt=%s lease_expires_at=%s last_error=%s', consumption, attempt, lease_expires_at, left(last_error, 200))
  FROM inbox WHERE state <> 'processed'
UNION ALL
SELECT 'outbox', id::text, state, format('attempt=%s lease_expires_at=%s last_error=%s', attempt, lease_expires_at, left(last_error, 200))
  FROM outbox WHERE state <> 'sent'
"""


def snapshot(ledger: Ledger, db_url: str, settle_s: float):
    """Waits (up to `settle_s`) until every inbox row is processed and every outbox row sent,
    then writes the inbox rows and whatever is still unfinished into the ledger."""
    import psycopg

    with psycopg.connect(db_url, autocommit=True) as c:
        rows = []
        if not wait_for("rows finished", settle_s, lambda: not c.execute(UNFINISHED_SQL).fetchall(), 0.25):
            rows = c.execute(UNFINISHED_SQL).fetchall()
        ledger.stuck(rows)
        stored = []
        for key, state, payload in c.execute("SELECT idempotency_key, state, payload::text FROM inbox"):
            try:
                stored.append((key, state, payloads.digest(payload)))
            except ValueError:
                stored.append((key, state, "not-json"))
        ledger.stored(stored)
        ledger.meta(stores_checked=1)


def run_path(cls, *, messages, kills, drain_s, seed, binary, worker_binary, server_url, outdir, keep_db, known_bugs, replicas=2, pg=None, nats=None, rabbit=None, kafka=None, redraw_slow=True, rate=None) -> Summary:
    t0 = time.time()
    run = f"{seed}-{random.Random().randrange(16**6):06x}"
    rng = random.Random(f"{seed}:{cls.name}")
    ledger_path = os.path.join(outdir, f"{cls.name}.sqlite")
    for stale in (ledger_path, ledger_path + "-wal", ledger_path + "-shm"):
        if os.path.exists(stale):
            os.remove(stale)  # a ledger holds one run; an old one in the same folder would mix in
    ledger = Ledger(ledger_path)
    ledger.meta(path=cls.name, seed=seed, run=run, messages=messages, kills_planned=kills, binary=binary, rate=rate or "unpaced")
    ctx = Context(ledger=ledger, binary=binary, worker_binary=worker_binary, server_url=server_url, workdir=outdir, run=run, rng=rng, replicas=replicas, pg=pg, nats=nats, rabbit=rabbit, kafka=kafka, rate=rate)
    path = cls(ctx)
    problems = []
    killer = None
    try:
        path.setup()
        ledger.meta(database=path.db_url)
        bodies = [payloads.body_for(n, run, rng, http=cls.http_bodies, known_bugs=known_bugs) for n in range(messages)]
        thresholds = sorted(rng.sample(range(messages // 10, messages * 9 // 10), kills))
        killer = Killer(path, ledger, thresholds, random.Random(f"{seed}:{cls.name}:killer"), redraw_slow=redraw_slow)
        killer.start()
        path.send(bodies)
        if not wait_for_deliveries(ledger, drain_s):
            problems.append(f"deliveries stopped: none arrived for {drain_s}s while some acknowledged messages were still missing")
        killer.done.set()
        killer.join(30 + 5 * kills)  # faults still queued run to the end (a pause takes 2.5 s)
        if killer.error:
            problems.append(f"the killer failed: {killer.error!r}")
        if killer.kills < kills:
            problems.append(f"only {killer.kills} of {kills} planned faults happened (deliveries stalled?)")
        # Leases of the last killed process expire CLAIM_MS after its kill; give the live relay
        # that long and a margin to take its rows over before calling anything stuck.
        snapshot(ledger, path.db_url, settle_s=CLAIM_MS / 1000 * 3 + 10)
        for target in path.killables():
            lost = target.claims_lost()
            if lost is not None:
                ledger.claims_lost(target.pid, lost)
            if not target.alive():
                code = getattr(getattr(target, "proc", None), "returncode", None)
                problems.append(f"{target.name} is not running at the end" + (f" (exit code {code})" if code is not None else ""))
    except Exception as e:
        problems.append(f"harness error: {e!r}")
    finally:
        if killer:
            killer.done.set()
            # A fault under way ends with a restart: let it, so teardown stops the restarted
            # process rather than leaving it running (seen after a failing send()).
            killer.join(30)
        try:
            path.teardown()
        except Exception as e:
            problems.append(f"teardown failed: {e!r}")
    ledger.meta(seconds=f"{time.time() - t0:.1f}")
    if problems:
        ledger.meta(harness_problem="; ".join(problems))
    ledger.close()
    s = check(ledger_path, cls.name)
    if path.db_url and s.passed and not keep_db:
        drop_database(path.db_url)
    elif path.db_url:
        print(f"chaos: {cls.name}: database kept for inspection: {path.db_url}", file=sys.stderr)
    return s


def table(results: list[tuple[str, Summary | str]]):
    cols = ("path", "result", "sent", "acked", "stored", "delivered", "dups", "lost", "corrupt", "stuck", "kills+pauses", "claims lost", "time")
    rows = []
    for name, s in results:
        if isinstance(s, str):
            rows.append((name, s) + ("-",) * (len(cols) - 2))
        else:
            dups = sum(s.duplicates.values())
            rows.append((name, "passed" if s.passed else "FAILED", s.sent, s.acked, s.stored, s.delivered, dups, s.lost, s.corrupted, s.stuck, f"{s.kills - s.pauses}+{s.pauses}", int(s.claims_lost), f"{s.seconds:.1f}s"))
    widths = [max(len(str(r[i])) for r in rows + [cols]) for i in range(len(cols))]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    print(fmt.format(*cols))
    for r in rows:
        print(fmt.format(*map(str, r)))
    for name, s in results:
        if isinstance(s, Summary):
            if s.duplicates:
                print(f"  {name}: duplicates by cause: " + ", ".join(f"{k}: {v}" for k, v in sorted(s.duplicates.items())))
            if s.rolled_back or s.in_doubt:
                print(f"  {name}: {s.rolled_back} publishes rolled back ({s.phantoms} of them delivered), {s.in_doubt} in doubt (publisher killed before COMMIT answered)")
            if s.refused_by_receiver:
                print(f"  {name}: {s.refused_by_receiver} tries refused on purpose by the receiver (500, closed, hung) and retried")
            for p in s.problems:
                print(f"  {name}: FAILED: {p}")


def main() -> int:
    profile = os.environ.get("QB_CHAOS", "ci")
    if profile not in PROFILES:
        print(f"chaos: unknown QB_CHAOS={profile!r}; use one of {', '.join(PROFILES)}", file=sys.stderr)
        return 2
    n_default, kills_default, drain_default = PROFILES[profile]
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--paths", default=os.environ.get("QB_CHAOS_PATHS", ",".join(PATHS)))
    ap.add_argument("--seed", type=int, default=int(os.environ.get("QB_CHAOS_SEED", "18")))
    ap.add_argument("--messages", type=int, default=int(os.environ.get("QB_CHAOS_MESSAGES", n_default)))
    ap.add_argument("--kills", type=int, default=int(os.environ.get("QB_CHAOS_KILLS", kills_default)))
    ap.add_argument("--rate", type=float, default=float(os.environ.get("QB_CHAOS_RATE", "0")) or None,
                    help="messages per second each path's sender keeps to (default: as fast as it can); "
                         "the faults strike at delivery counts, so --messages / --rate sets how long the faults go on under traffic")
    ap.add_argument("--replicas", type=int, default=int(os.environ.get("QB_CHAOS_REPLICAS", "2")), help="relay replicas per path (default 2)")
    ap.add_argument("--binary", default=os.environ.get("QB_CHAOS_BINARY", os.path.join(ROOT, "target/debug/queuebox")))
    ap.add_argument("--worker-binary", default=os.environ.get("QB_CHAOS_WORKER", os.path.join(ROOT, "target/debug/queuebox-chaos-worker")))
    ap.add_argument("--out", default=os.environ.get("QB_CHAOS_OUT", f"/tmp/queuebox-chaos/{time.strftime('%Y%m%d-%H%M%S')}"))
    ap.add_argument("--require-all", action="store_true", help="a path that cannot run (broker not configured) fails the run")
    ap.add_argument("--keep-db", action="store_true")
    ap.add_argument("--pg-faults", action="store_true", default=os.environ.get("QB_CHAOS_PG_FAULTS") == "1",
                    help="run on a PostgreSQL cluster of the run's own and let the http path's faults crash and restart it, or pause it")
    ap.add_argument("--broker-faults", action="store_true", default=os.environ.get("QB_CHAOS_BROKER_FAULTS") == "1",
                    help="run the broker paths on a NATS server, a RabbitMQ and a Kafka of the run's own and let their faults restart them")
    ap.add_argument("--check", metavar="LEDGER", help="only re-check an existing ledger file")
    args = ap.parse_args()
    known_bugs = os.environ.get("QB_CHAOS_KNOWN_BUGS") == "1"

    if args.check:
        s = check(args.check, os.path.basename(args.check).removesuffix(".sqlite"))
        table([(s.path, s)])
        return 0 if s.passed else 1

    server_url = os.environ.get("QUEUEBOX_TEST_DATABASE_URL", "postgres://postgres@127.0.0.1:55432/queuebox")
    os.makedirs(args.out, exist_ok=True)
    pg = None
    if args.pg_faults:
        pg = PgCluster(free_port(), os.path.join(args.out, "pgdata"))
        pg.create()
        server_url = pg.url()
        print(f"chaos: PostgreSQL of this run at {server_url} (the http path's faults may crash and restart it)", flush=True)
    nats = None
    if args.broker_faults:
        nats = NatsServer(free_port(), os.path.join(args.out, "nats-store"), args.out)
        nats.start()
        print(f"chaos: NATS server of this run at {nats.url()} (the NATS pull paths' faults may restart it)", flush=True)
    own = {}
    if args.broker_faults:
        # Every broker path runs on brokers of the run's own: none of the shared ones is needed.
        ChaosPath.provided_by_run = frozenset({"QUEUEBOX_TEST_AMQP_URL", "QUEUEBOX_TEST_KAFKA_BROKERS", "QUEUEBOX_TEST_NATS_URL"})
        # A RabbitMQ and a Kafka for the paths that use them and will run; each takes 5-15 s to
        # start, so they start in the background, one after the other, while earlier paths run.
        wanted = [PATHS[p.strip()] for p in args.paths.split(",") if p.strip() in PATHS]
        previous = None
        for attr, kind in (("rabbit", "rabbitmq"), ("kafka", "kafka")):
            if any(attr in cls.own_brokers and not cls.missing() for cls in wanted):
                own[attr] = ScriptBroker(kind, args.out)
                own[attr].start_async(after=previous)
                previous = own[attr]
                print(f"chaos: {kind} of this run starting on port {next(iter(own[attr].ports.values()))} (the faults of {', '.join(c.name for c in wanted if attr in c.own_brokers)} may restart it)", flush=True)
    status = 1
    try:
        status = run_all(args, profile, server_url, pg, nats, drain_default, known_bugs, own)
        return status
    finally:
        if nats:
            nats.stop()
        for b in own.values():
            if status == 0 and not args.keep_db:
                b.destroy()
            else:
                b.stop()
                print(f"chaos: the run's {b.kind} is kept for inspection in {b.dir}")
        if pg and status == 0 and not args.keep_db:
            pg.destroy()
        elif pg:
            pg.stop()
            print(f"chaos: the run's PostgreSQL is kept for inspection: scripts/postgres.sh start with QB_PG_PORT={pg.port} QB_PG_DIR={pg.dir}")


def run_all(args, profile, server_url, pg, nats, drain_default, known_bugs, own) -> int:
    print(f"chaos: profile {profile}, seed {args.seed} (QB_CHAOS_SEED={args.seed} replays the same message styles and kill points), "
          f"{args.messages} messages, {args.replicas} relay replicas and {args.kills} faults (SIGKILL or SIGSTOP past the lease) per path, ledgers in {args.out}", flush=True)
    results: list[tuple[str, Summary | str]] = []
    # The short profile restarts each RabbitMQ and Kafka of the run once per path that uses it
    # (10-15 s each); the long profile also draws them among the random faults.
    redraw_slow = profile == "long" or os.environ.get("QB_CHAOS_REDRAW_BROKERS") == "1"
    for name in [p.strip() for p in args.paths.split(",") if p.strip()]:
        cls = PATHS.get(name)
        if cls is None:
            print(f"chaos: unknown path {name!r}; paths: {', '.join(PATHS)}", file=sys.stderr)
            return 2
        missing = cls.missing()
        if missing:
            results.append((name, f"NOT RUN (missing: {', '.join(missing)})" + (" optional" if cls.optional else "")))
            print(f"chaos: {name}: not run — missing {', '.join(missing)} (the brokers run in scripts/test.d/45-chaos.sh)", flush=True)
            continue
        print(f"chaos: {name}: running", flush=True)
        s = run_path(cls, messages=args.messages, kills=args.kills, drain_s=drain_default, seed=args.seed, binary=args.binary, worker_binary=args.worker_binary,
                     server_url=server_url, outdir=args.out, keep_db=args.keep_db, known_bugs=known_bugs, replicas=args.replicas, pg=pg, nats=nats,
                     rabbit=own.get("rabbit"), kafka=own.get("kafka"), redraw_slow=redraw_slow,
                     rate=args.rate or (cls.broker_fault_rate if args.broker_faults else None))
        results.append((name, s))
        print(f"chaos: {name}: {'passed' if s.passed else 'FAILED'} in {s.seconds:.1f}s", flush=True)
    print()
    table(results)
    passed = sum(1 for _, s in results if isinstance(s, Summary) and s.passed)
    failed = sum(1 for _, s in results if isinstance(s, Summary) and not s.passed)
    not_run = sum(1 for _, s in results if isinstance(s, str))
    required = sum(1 for _, s in results if isinstance(s, str) and not s.endswith(" optional"))
    if args.require_all and required:
        failed += required
        not_run -= required
        print(f"chaos: {required} path(s) could not run and --require-all is set: counted as failed")
    print(f"chaos: {passed} passed, {failed} failed" + (f", {not_run} skipped" if not_run else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    # SIGTERM unwinds like Ctrl-C, so every path's teardown stops the processes it started.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    sys.exit(main())
