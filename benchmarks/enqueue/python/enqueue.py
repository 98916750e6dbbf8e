"""The Python side of benchmarks/enqueue/run.sh: QueueBox's Python wrapper (enqueue /
enqueue_many from queuebox_inbox) on one synchronous psycopg 3 connection.

    python enqueue.py URL ROWS_PER_TX TXS

PYTHONPATH finds queuebox_inbox (run.sh puts a private copy beside the release extension).
Timer boundary, the same in every program of run.sh: the connection is open and two
transactions of the same shape have run and rolled back before the clock starts; it stops
when the last COMMIT has returned. Each transaction is BEGIN, one enqueue call, COMMIT
(psycopg sends the BEGIN before the first statement of a transaction)."""

import json
import sys
import time

import psycopg

from queuebox_inbox import enqueue, enqueue_many


def main() -> None:
    url, rows, txs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    conn = psycopg.connect(url)  # autocommit off: each transaction ends with commit/rollback

    def one(first: int, commit: bool) -> None:
        if rows == 1:
            enqueue(conn, "bench", {"n": first})
        else:
            enqueue_many(conn, [{"source": "bench", "payload": {"n": first + i}} for i in range(rows)])
        if commit:
            conn.commit()
        else:
            conn.rollback()

    for _ in range(2):
        one(0, False)
    t0 = time.perf_counter()
    for i in range(txs):
        one(i * rows + 1, True)
    secs = time.perf_counter() - t0
    print(json.dumps({"system": "queuebox-python", "rows_per_tx": rows, "txs": txs, "rows": rows * txs,
                      "seconds": secs, "rows_per_s": rows * txs / secs}))


if __name__ == "__main__":
    main()
