"""The ledger of one chaos run (an SQLite file) and the checks made on it.

Everything the harness sees is written here as it happens, by several threads:

- `sent`        each message once: number, idempotency key, style, digest of its JSON value
- `attempts`    every try to hand it over and its answer (`202`, `200`, `503`, `error:…`, `confirm`)
- `acks`        the first acknowledgement of each message (an HTTP 202/200, a broker confirm)
- `deliveries`  every copy a real receiver got, with the digest of the received value and the
                outbox message id; `ok = 0` when the receiver itself refused it (a 500 it
                answered on purpose), which is a failed delivery, not a delivery
- `kills`       each fault: a SIGKILL (target = the process) or a SIGSTOP past the lease
                (target = `pause:<process>`), when it struck and when the process was back
- `claims_lost` the last `queuebox_claims_lost_total` scrape of each relay process life
- `stored`      the inbox rows at the end (one line per row: key, state, digest of the payload)
- `stuck`       inbox/outbox rows still `pending`/`processing` after the leases expired
- `rolled_back` messages published in an application transaction that rolled back: they
                must never be delivered (path `publish-rabbit`)
- `in_doubt`    messages whose publisher died before its COMMIT answered: delivered or not,
                both are right, so neither a loss nor a phantom

`check()` reads only the ledger, so a failed run can be re-checked from its file alone
(`python3 tests/chaos/chaos.py --check <ledger.sqlite>`).
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field

import payloads

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS sent (n INTEGER PRIMARY KEY, key TEXT NOT NULL, style TEXT NOT NULL, digest TEXT NOT NULL, at REAL NOT NULL, raw BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS attempts (n INTEGER NOT NULL, at REAL NOT NULL, outcome TEXT NOT NULL, deliberate_repeat INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS acks (n INTEGER PRIMARY KEY, at REAL NOT NULL, how TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS deliveries (n INTEGER, key TEXT, at REAL NOT NULL, digest TEXT NOT NULL, message_id TEXT, ok INTEGER NOT NULL, raw BLOB);
CREATE TABLE IF NOT EXISTS kills (i INTEGER PRIMARY KEY AUTOINCREMENT, at REAL NOT NULL, target TEXT NOT NULL, pid INTEGER, restarted_at REAL);
CREATE TABLE IF NOT EXISTS claims_lost (at REAL NOT NULL, pid INTEGER, component TEXT NOT NULL, value REAL NOT NULL);
CREATE TABLE IF NOT EXISTS stored (key TEXT NOT NULL, state TEXT NOT NULL, digest TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS stuck (tbl TEXT NOT NULL, id TEXT NOT NULL, state TEXT NOT NULL, detail TEXT);
CREATE TABLE IF NOT EXISTS rolled_back (n INTEGER PRIMARY KEY, at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS in_doubt (n INTEGER PRIMARY KEY, at REAL NOT NULL);
"""

# A kill explains a duplicate when it falls between the two copies (the first copy may be
# recorded by the receiver up to this many seconds after the relay sent it and died).
KILL_SLACK_S = 1.0


class Ledger:
    """Thread-safe writer of one ledger file."""

    def __init__(self, path: str):
        self.path = path
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=OFF")
        self._db.executescript(SCHEMA)
        self._lock = threading.Lock()
        self._delivered: set[int] = set()
        self._acked: set[int] = set()

    def _exec(self, sql: str, args: tuple = ()):
        with self._lock:
            return self._db.execute(sql, args)

    def meta(self, **kv):
        for k, v in kv.items():
            self._exec("INSERT OR REPLACE INTO meta VALUES (?, ?)", (k, str(v)))

    def sent(self, body):
        self._exec("INSERT OR REPLACE INTO sent VALUES (?, ?, ?, ?, ?, ?)", (body.n, body.key, body.style, body.digest, time.time(), body.raw))

    def attempt(self, n: int, outcome: str, deliberate_repeat: bool = False):
        self._exec("INSERT INTO attempts VALUES (?, ?, ?, ?)", (n, time.time(), outcome, int(deliberate_repeat)))

    def ack(self, n: int, how: str):
        with self._lock:
            if n not in self._acked:
                self._acked.add(n)
                self._db.execute("INSERT OR IGNORE INTO acks VALUES (?, ?, ?)", (n, time.time(), how))

    def delivery(self, n: int | None, key: str | None, digest: str, message_id: str | None, ok: bool = True, raw: bytes = b""):
        with self._lock:
            self._db.execute("INSERT INTO deliveries VALUES (?, ?, ?, ?, ?, ?, ?)", (n, key, time.time(), digest, message_id, int(ok), raw))
            if ok and n is not None:
                self._delivered.add(n)

    def rolled_back(self, n: int):
        self._exec("INSERT OR IGNORE INTO rolled_back VALUES (?, ?)", (n, time.time()))

    def in_doubt(self, n: int):
        self._exec("INSERT OR IGNORE INTO in_doubt VALUES (?, ?)", (n, time.time()))

    def kill(self, target: str, pid: int) -> int:
        cur = self._exec("INSERT INTO kills (at, target, pid) VALUES (?, ?, ?)", (time.time(), target, pid))
        return cur.lastrowid

    def restarted(self, kill_id: int):
        self._exec("UPDATE kills SET restarted_at = ? WHERE i = ?", (time.time(), kill_id))

    def claims_lost(self, pid: int, values: dict[str, float]):
        for component, value in values.items():
            self._exec("INSERT INTO claims_lost VALUES (?, ?, ?, ?)", (time.time(), pid, component, value))

    def stored(self, rows):
        with self._lock:
            self._db.executemany("INSERT INTO stored VALUES (?, ?, ?)", rows)

    def stuck(self, rows):
        with self._lock:
            self._db.executemany("INSERT INTO stuck VALUES (?, ?, ?, ?)", rows)

    # Progress, read by the killer and the drain wait (kept in memory: no query per poll).
    def delivered_count(self) -> int:
        with self._lock:
            return len(self._delivered)

    def acked(self) -> set[int]:
        with self._lock:
            return set(self._acked)

    def delivered(self) -> set[int]:
        with self._lock:
            return set(self._delivered)

    def close(self):
        with self._lock:
            self._db.close()


@dataclass
class Summary:
    """What one run proved. `problems` lists every failed check in words."""

    path: str
    sent: int = 0
    acked: int = 0
    stored: int = 0
    delivered: int = 0
    deliveries: int = 0
    refused_by_receiver: int = 0
    duplicates: dict[str, int] = field(default_factory=dict)
    lost: int = 0
    rolled_back: int = 0
    in_doubt: int = 0  # publishes whose COMMIT never answered (publisher killed)
    phantoms: int = 0  # rolled-back messages delivered anyway
    corrupted: int = 0
    stuck: int = 0
    kills: int = 0
    pauses: int = 0
    claims_lost: float = 0
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.problems


def _sample(items, k=5) -> str:
    items = sorted(items)
    return ", ".join(map(str, items[:k])) + (f" … ({len(items)} in all)" if len(items) > k else "")


def first_difference(sent: bytes, got: bytes) -> str:
    """Where two JSON texts first differ as values, e.g. `$.numbers.pi_30: sent 3.14159…, got 3.141592653589793`."""
    try:
        a, b = payloads.parse(sent), payloads.parse(got)
    except ValueError:
        return f"received text is not JSON: {got[:80]!r}"

    def walk(x, y, at):
        if isinstance(x, dict) and isinstance(y, dict):
            for k in sorted(set(x) | set(y)):
                if k not in x or k not in y:
                    return f"{at}.{k}: {'missing' if k not in y else 'added'} in the delivery"
                d = walk(x[k], y[k], f"{at}.{k}")
                if d:
                    return d
            return None
        if isinstance(x, list) and isinstance(y, list) and len(x) == len(y):
            return next((d for i, (u, v) in enumerate(zip(x, y)) if (d := walk(u, v, f"{at}[{i}]"))), None)
        if payloads.canonical(x) != payloads.canonical(y):
            return f"{at}: sent {payloads.canonical(x)[:60]}, got {payloads.canonical(y)[:60]}"
        return None

    return walk(a, b, "$") or "values equal (digest mismatch in the ledger?)"


def check(path: str, name: str) -> Summary:
    """Checks the ledger file at `path`; every broken promise becomes a line in `problems`."""
    db = sqlite3.connect(path)
    q = lambda sql, *a: db.execute(sql, a).fetchall()  # noqa: E731
    s = Summary(path=name)
    sent = {n: (key, digest) for n, key, digest in q("SELECT n, key, digest FROM sent")}
    by_key = {key: n for n, (key, _) in sent.items()}
    acks = {n: how for n, how in q("SELECT n, how FROM acks")}
    s.sent, s.acked = len(sent), len(acks)

    # Refusals: a valid message must never get a final 4xx, and a deliberate repeat of an
    # acknowledged message must be answered as a duplicate, never stored again.
    refused = {n for (n,) in q("SELECT DISTINCT n FROM attempts WHERE outcome LIKE 'http:4%'")}
    if refused:
        s.problems.append(f"valid messages refused with a 4xx: n = {_sample(refused)}")
    restored = {n for (n,) in q("SELECT n FROM attempts WHERE deliberate_repeat = 1 AND outcome = 'http:202'")}
    if restored:
        s.problems.append(f"a repeat of an acknowledged message was answered 202 (stored twice?): n = {_sample(restored)}")
    # A rolled-back publish is never acknowledged, and one whose publisher died before its
    # COMMIT answered may go either way.
    # (Ledgers written before these tables existed have neither.)
    tables = {t for (t,) in q("SELECT name FROM sqlite_master WHERE type = 'table'")}
    rolled_back = {n for (n,) in q("SELECT n FROM rolled_back")} if "rolled_back" in tables else set()
    in_doubt = {n for (n,) in q("SELECT n FROM in_doubt")} if "in_doubt" in tables else set()
    s.rolled_back, s.in_doubt = len(rolled_back), len(in_doubt)
    unacked = set(sent) - set(acks) - rolled_back - in_doubt
    if unacked:
        s.problems.append(f"sent but never acknowledged (the harness gave up retrying): n = {_sample(unacked)}")

    # Deliveries: every acknowledged message at least once, every copy the value sent. A path
    # whose receiver reads numbers as doubles (JavaScript) is compared as doubles.
    doubles = bool(q("SELECT 1 FROM meta WHERE key = 'numbers' AND value = 'doubles'"))
    if doubles:
        raw_sent = dict(q("SELECT n, raw FROM sent"))
        sent = {n: (key, payloads.digest(raw_sent[n], doubles=True)) for n, (key, _) in sent.items()}
    copies = defaultdict(list)
    for n, key, at, dig, mid, ok, raw in q("SELECT n, key, at, digest, message_id, ok, raw FROM deliveries ORDER BY at"):
        if n is None and key in by_key:
            n = by_key[key]
        if not ok:
            s.refused_by_receiver += 1
            continue
        if doubles and raw:
            try:
                dig = payloads.digest(raw, doubles=True)
            except ValueError:
                pass
        s.deliveries += 1
        if n not in sent:
            s.corrupted += 1
            s.problems.append(f"a delivery that matches no sent message (key {key!r}, digest {dig[:12]})")
            continue
        if dig != sent[n][1]:
            s.corrupted += 1
            if s.corrupted <= 5:
                sent_raw = q("SELECT raw FROM sent WHERE n = ?", n)[0][0]
                s.problems.append(f"message n={n} delivered with a changed payload: {first_difference(sent_raw, raw)}")
        copies[n].append((at, mid))
    s.delivered = len(copies)
    lost = set(acks) - set(copies)
    s.lost = len(lost)
    if lost:
        s.problems.append(f"LOST: acknowledged but never delivered: n = {_sample(lost)}")
    phantoms = rolled_back & set(copies)
    s.phantoms = len(phantoms)
    if phantoms:
        s.problems.append(f"ROLLED BACK but delivered: a publish whose transaction rolled back reached the broker: n = {_sample(phantoms)}")

    # Duplicates: each extra copy needs a cause — a kill between the two copies, else one
    # counted lost claim (queuebox_claims_lost_total, summed over every relay process life).
    # Two copies of one row (the same X-Message-Id / inbox id) are a redelivery of that row;
    # copies of two rows mean one inbox message was forwarded twice, which only a lost inbox
    # relay claim may explain.
    faults = q("SELECT at, COALESCE(restarted_at, at), target FROM kills ORDER BY at")
    s.kills = len(faults)
    s.pauses = sum(1 for _, _, t in faults if t.startswith("pause:"))
    lives = q("SELECT pid, component, MAX(value) FROM claims_lost GROUP BY pid, component")
    s.claims_lost = sum(v for _, _, v in lives)
    budget = {
        "same row": sum(v for _, c, v in lives if c != "inbox"),
        "two rows": sum(v for _, c, v in lives if c == "inbox"),
    }
    causes: dict[str, int] = defaultdict(int)
    unexplained = []
    for n, cs in copies.items():
        for (a, mid_a), (b, mid_b) in zip(cs, cs[1:]):
            kind = "same row" if mid_a == mid_b else "two rows"
            # The fault struck before the second copy and its process was not yet back (a
            # kill: restarted; a pause: continued) until after the first copy was sent.
            if any(start <= b and back + KILL_SLACK_S >= a for start, back, _ in faults):
                causes[f"after a kill or pause ({kind})"] += 1
            elif budget[kind] >= 1:
                budget[kind] -= 1
                causes[f"claim lost ({kind})"] += 1
            else:
                causes[f"UNEXPLAINED ({kind})"] += 1
                unexplained.append(n)
    s.duplicates = dict(causes)
    if unexplained:
        s.problems.append(f"duplicates with no kill between the copies and no lost claim counted: n = {_sample(unexplained)}")

    # Stored rows: exactly one per acknowledged key, holding the value sent.
    rows = defaultdict(list)
    for key, state, dig in q("SELECT key, state, digest FROM stored"):
        rows[key].append((state, dig))
    s.stored = sum(1 for k in rows if k in by_key)
    missing = [n for n in acks if sent[n][0] not in rows]
    # (A path whose messages start in the outbox — meta `source = outbox` — has no inbox rows.)
    outbox_source = bool(q("SELECT 1 FROM meta WHERE key = 'source' AND value = 'outbox'"))
    if missing and not outbox_source and q("SELECT 1 FROM meta WHERE key = 'stores_checked' AND value = '1'"):
        s.problems.append(f"acknowledged but no inbox row: n = {_sample(missing)}")
    doubled = [by_key[k] for k, r in rows.items() if k in by_key and len(r) > 1]
    if doubled:
        s.problems.append(f"more than one inbox row for one idempotency key: n = {_sample(doubled)}")
    exact = dict(q("SELECT n, digest FROM sent"))  # stored rows are compared exactly, always
    changed = [by_key[k] for k, r in rows.items() if k in by_key and any(d != exact[by_key[k]] for _, d in r)]
    if changed:
        s.corrupted += len(changed)
        s.problems.append(f"inbox rows whose payload differs from the JSON sent: n = {_sample(changed)}")

    stuck = q("SELECT tbl, id, state, detail FROM stuck")
    s.stuck = len(stuck)
    if stuck:
        s.problems.append(f"{len(stuck)} rows still pending/processing after the leases expired, e.g. {stuck[:3]}")
    for (reason,) in q("SELECT value FROM meta WHERE key = 'harness_problem'"):
        s.problems.append(reason)
    secs = q("SELECT value FROM meta WHERE key = 'seconds'")
    s.seconds = float(secs[0][0]) if secs else 0.0
    db.close()
    return s
