"""clients/python's README quick start, run from a clean virtualenv where the wheel from
dist/python was installed with pip (tests/install/python/run.sh):

    python quickstart.py migrate URL   applies the schema
    python quickstart.py work URL      handles one row of source "orders", then stops
"""
import asyncio
import sys

import queuebox_inbox
from queuebox_inbox import Retry, Worker


async def main(mode: str, url: str) -> None:
    print("queuebox_inbox from", queuebox_inbox.__file__)
    if mode == "migrate":
        print("migrated:", await queuebox_inbox.migrate(url))
        return
    stop = asyncio.Event()
    handled = []

    async def handle(message, tx):
        if message.payload.get("total") is None:
            raise Retry("total not known yet", delay=5.0)
        # Same transaction as the completion: both commit, or neither does.
        await tx.execute(
            "INSERT INTO orders_seen (id, total) VALUES ($1::uuid, $2)",
            [message.id, message.payload["total"]],
        )
        handled.append(message.id)
        asyncio.get_running_loop().call_later(0.2, stop.set)  # one row is the whole test

    async with Worker(url, "orders", concurrency=4) as worker:
        await asyncio.wait_for(worker.run(handle, stop=stop), timeout=60)
    if not handled:
        sys.exit("no row was handled")


asyncio.run(main(sys.argv[1], sys.argv[2]))
