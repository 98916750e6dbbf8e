"""One short program for test_exit.py: starts live workers (or migrates) and lets the
interpreter exit at once, the moment at which the native runtime used to abort the process
now and then. Usage: exit_child.py URL SOURCE VARIANT."""

import asyncio
import sys
import threading
import time

import queuebox_inbox as q

url, source, variant = sys.argv[1:4]


def noop(message, tx):
    return None


if variant == "daemon":
    # A blocking worker on a daemon thread, still claiming and completing when the main
    # thread ends: nothing stops it before the interpreter exits.
    w = q.Worker(url, source, poll_interval=0.01, concurrency=2)
    threading.Thread(target=w.run_blocking, args=(noop,), daemon=True).start()
    time.sleep(0.05)
elif variant == "async":
    # Two asyncio workers; the program ends right after its last await, when the stopped
    # workers' final calls resolve (the case the install test hit with `migrate`).
    async def main():
        stop = asyncio.Event()
        runs = [asyncio.ensure_future(q.Worker(url, source, poll_interval=0.01).run(noop, stop=stop)) for _ in range(2)]
        await asyncio.sleep(0.05)
        stop.set()
        await asyncio.gather(*runs)

    asyncio.run(main())
elif variant == "cancel":
    # asyncio.run() cancels a worker that is still running when main returns.
    async def main():
        asyncio.ensure_future(q.Worker(url, source, poll_interval=0.01).run(noop))
        await asyncio.sleep(0.05)

    asyncio.run(main())
elif variant == "migrate":
    asyncio.run(q.migrate(url))
else:
    raise SystemExit(f"unknown variant {variant}")
