#!/usr/bin/env python3
"""The chaos ledger's pull worker in Python, on the `queuebox_inbox` client (clients/python,
built by scripts/test.d/41-python.sh into .venv/python-client): the twin of tests/chaos/worker
(Rust). One line per handler call on stdout — `{"id", "key", "attempt"}`, a tab, the payload
as JSON — then the row is completed. Stops on SIGTERM.

    .venv/python-client/bin/python tests/chaos/workers/python_worker.py <database-url> <source> <lease-ms>
"""

import json
import signal
import sys
import threading

from queuebox_inbox import Worker


def main() -> None:
    url, source, lease_ms = sys.argv[1:4]
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    out = threading.Lock()

    def handle(message, tx):
        meta = json.dumps({"id": str(message.id), "key": message.idempotency_key, "attempt": message.attempt})
        line = meta + "\t" + json.dumps(message.payload, ensure_ascii=False, separators=(",", ":"))
        with out:  # one whole line at a time, flushed: a line read is a call that happened
            sys.stdout.write(line + "\n")
            sys.stdout.flush()

    worker = Worker(url, source, batch_size=20, concurrency=4, lease=int(lease_ms) / 1000, poll_interval=0.1, shutdown_grace=2.0)
    worker.run_blocking(handle, stop=stop)


if __name__ == "__main__":
    main()
