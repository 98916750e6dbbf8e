#!/usr/bin/env python3
"""Reproduction (fails today): a valid JSON number beyond u64 and f64 precision is acknowledged
with 202 and then stored and delivered as a different number.

    .venv/chaos/bin/python tests/chaos/repro/bignum_payload.py   # exit 1 while the bug stands

It starts the real relay with one HTTP source, POSTs
`{"id": "big-1", "n": 123456789012345678901234567890, "pi": 3.141592653589793238462643383279}`
and compares the value stored in `inbox.payload` with the value sent. Seen on 2026-12-03:
202, then `n` stored as 123456789012345680000000000000 and `pi` as 3.141592653589793
(the relay parses the body into serde_json's f64 and re-encodes it). Either the exact value
must be kept (serde_json's `arbitrary_precision`, or storing the received text) or the body
refused with a 400 that names the number — never a 202 and a different value.
Not part of scripts/test.sh, so CI stays green until the fix lands; the chaos ledger shows
the same with QB_CHAOS_BEYOND_F64=1.
"""
import os
import shutil
import sys
import tempfile
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import payloads  # noqa: E402
from relay import Relay, drop_database, fresh_database  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
BODY = b'{"id": "big-1", "n": 123456789012345678901234567890, "pi": 3.141592653589793238462643383279}'


def main() -> int:
    import psycopg

    binary = os.environ.get("QB_CHAOS_BINARY", os.path.join(ROOT, "target/debug/queuebox"))
    db = fresh_database(os.environ.get("QUEUEBOX_TEST_DATABASE_URL", "postgres://postgres@127.0.0.1:55432/queuebox"), "repro")
    workdir = tempfile.mkdtemp(prefix="qb-repro-")
    relay = Relay(binary, f"""server:
  httpPort: {{port}}
  bindAddress: 127.0.0.1
database:
  url: {db}
inbox:
  relay:
    enabled: false
sources:
  orders:
    path: /orders
    idempotencyKeyPath: $.id
    topic: orders
""", workdir)
    try:
        relay.start()
        req = urllib.request.Request(relay.url("/inbox/orders"), BODY, {"content-type": "application/json"})
        with urllib.request.urlopen(req) as r:
            status = r.status
        with psycopg.connect(db) as c:
            stored = c.execute("SELECT payload::text FROM inbox WHERE idempotency_key = 'big-1'").fetchone()[0]
    finally:
        relay.stop()
        drop_database(db)
        shutil.rmtree(workdir, ignore_errors=True)
    same = payloads.digest(stored) == payloads.digest(BODY)
    print(f"answer {status}\nsent   {BODY.decode()}\nstored {stored}")
    print("PASS: the stored value equals the value sent" if same else "FAIL: acknowledged, then stored a different value")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
