"""The README's example runs as written against a real database (only the URL is swapped)."""

import asyncio
import re
from pathlib import Path

from conftest import count_state, wait_for
from queuebox_inbox import Database

README = Path(__file__).resolve().parents[1] / "README.md"


def test_the_readme_example_processes_a_message_with_its_business_write(database_url):
    code = re.search(r"```python\n(.*?)```", README.read_text(), re.S).group(1)
    assert "postgres://app@localhost/app" in code and code.rstrip().endswith("asyncio.run(main())")
    code = code.replace("postgres://app@localhost/app", database_url).rstrip()[: -len("asyncio.run(main())")]
    ns: dict = {}
    exec(compile(code, str(README), "exec"), ns)

    async def go():
        db = await Database.connect(database_url)
        await db.execute("CREATE TABLE orders_seen (id uuid PRIMARY KEY, total int8 NOT NULL)")
        r = await db.enqueue("orders", "readme-1", {"total": 42})
        t = asyncio.ensure_future(ns["main"]())
        await wait_for(lambda: _processed(db), 15, "README example processed the row")
        t.cancel()
        await asyncio.gather(t, return_exceptions=True)
        assert await db.query("SELECT id::text AS id, total FROM orders_seen") == [{"id": r["id"], "total": 42}]
        await db.close()

    async def _processed(db):
        return await count_state(db, "orders", "processed") == 1

    asyncio.run(asyncio.wait_for(go(), 60))
