#!/usr/bin/env python3
"""The chaos ledger's application publisher (path `publish-rabbit`), on the `queuebox_inbox`
client (clients/python) and psycopg 3: each message is one application transaction that
writes a business row (`chaos_orders`) and publishes the message to the outbox with
`queuebox_inbox.publish`, then commits — or, for the messages marked `rollback`, publishes
and then rolls back, so the outbox row must never be delivered.

Reads the messages to publish, one JSON object a line (`n`, `key`, `raw`, `rollback`, and
`at`: with the harness's --rate, the epoch second before which it must not begin), from
the file named by its second argument, and writes one line per step to stdout, flushed:
`begin N` before the transaction, `acked N` once COMMIT returned, `rolledback N` once the
rollback returned. A SIGKILL between `begin` and its answer leaves that publish in doubt.

    .venv/python-client/bin/python tests/chaos/workers/python_publisher.py <database-url> <messages.jsonl> <topic>
"""

import json
import sys
import time

import psycopg
from queuebox_inbox import publish


class Rollback(Exception):
    """Raised inside the transaction block: psycopg rolls the transaction back."""


def say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def main() -> None:
    url, messages, topic = sys.argv[1:4]
    with open(messages, encoding="utf-8") as f:
        todo = [json.loads(line) for line in f if line.strip()]
    with psycopg.connect(url) as conn:
        for m in todo:
            n = m["n"]
            if m.get("at"):
                time.sleep(max(0.0, m["at"] - time.time()))
            say(f"begin {n}")
            try:
                with conn.transaction():
                    conn.execute("INSERT INTO chaos_orders (n, body) VALUES (%s, %s)", (n, m["raw"]))
                    # The payload as the application holds it: a value parsed from the body.
                    # An application that expects its broker to restart gives its rows the
                    # attempts an outage needs (the publish default, 5, lasts 1.5 s on the
                    # chaos relays' 50 ms schedule; 30 last about 20 minutes).
                    publish(conn, topic, json.loads(m["raw"]), key=m["key"], headers={"x-chaos-n": str(n)}, max_attempts=30)
                    if m["rollback"]:
                        raise Rollback()
            except Rollback:
                say(f"rolledback {n}")
                continue
            say(f"acked {n}")


if __name__ == "__main__":
    main()
