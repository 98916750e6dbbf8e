#!/usr/bin/env python3
"""Regression test of a fixed bug: valid JSON numbers were acknowledged with 202 and then stored
— and delivered — as different numbers (fixed by serde_json's arbitrary_precision, 79c4fba).

    .venv/chaos/bin/python tests/chaos/repro/number_payload.py   # exit 1 if the bug comes back

Starts the real relay with one HTTP source, POSTs one message per case, and compares the value
stored in `inbox.payload` with the value sent (exact decimal values: payloads.canonical).
Seen on 2026-12-03 with the relay of commit 52ace26:

| case          | sent                              | stored                          |
|---------------|-----------------------------------|---------------------------------|
| beyond u64    | 123456789012345678901234567890    | 123456789012345680000000000000  |
| long decimal  | 3.141592653589793238462643383279  | 3.141592653589793               |
| 17-digit f64  | 0.9784987278375255                | 0.9784987278375256              |

The last is the one that matters most: 0.9784987278375255 is the exact shortest text of an f64
(what JSON.stringify, Python's repr or Java's Double.toString write), and the relay stores the
neighbouring f64. The relay parses the body into serde_json's `Value` and re-encodes it;
serde_json without its `float_roundtrip` feature may round a 17-digit double one ULP off, and
without `arbitrary_precision` it turns every number beyond u64/i64 into an f64. A fix keeps the
exact value (those features, or storing the received text after validating it) or refuses the
body with a 400 naming the number — never a 202 and a different value.

Runs in scripts/test.d/45-chaos.sh; the chaos ledger and the fuzzer include these numbers
with QB_CHAOS_KNOWN_BUGS=1.
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
CASES = {
    "beyond u64": "123456789012345678901234567890",
    "long decimal": "3.141592653589793238462643383279",
    "17-digit f64": "0.9784987278375255",
}


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
    failed = 0
    try:
        relay.start()
        with psycopg.connect(db) as c:
            for i, (case, number) in enumerate(CASES.items()):
                body = f'{{"id": "num-{i}", "x": {number}}}'.encode()
                req = urllib.request.Request(relay.url("/inbox/orders"), body, {"content-type": "application/json"})
                with urllib.request.urlopen(req) as r:
                    status = r.status
                (stored,) = c.execute("SELECT payload->>'x' FROM inbox WHERE idempotency_key = %s", (f"num-{i}",)).fetchone()
                same = payloads.digest(stored) == payloads.digest(number)
                failed += not same
                print(f"{'PASS' if same else 'FAIL'}  {case:<13} answer {status}  sent {number}  stored {stored}")
    finally:
        relay.stop()
        drop_database(db)
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"number_payload: {len(CASES) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
