"""The README's examples run as written against a real database (only the URL is swapped)."""

import asyncio
import re
import threading
import time
from pathlib import Path

import psycopg

from conftest import wait_for
from test_django import dj  # noqa: F401  (the minimal Django project, a fixture)
from queuebox_inbox import Database

README = Path(__file__).resolve().parents[1] / "README.md"
URL = "postgres://app@localhost/app"


def examples():
    return re.findall(r"```python\n(.*?)```", README.read_text(), re.S)


def load(code: str, database_url: str, last_line: str) -> dict:
    """Executes an example without its last line (the one that runs forever); returns its names."""
    assert URL in code and code.rstrip().endswith(last_line), last_line
    code = code.rstrip()[: -len(last_line)]
    code = code.replace("postgresql+psycopg://app@localhost/app", "postgresql+psycopg://" + database_url.split("://", 1)[1])
    code = code.replace(URL, database_url)
    ns: dict = {}
    exec(compile(code, str(README), "exec"), ns)
    return ns


def fresh_tables(database_url: str) -> None:
    with psycopg.connect(database_url, autocommit=True) as c:
        c.execute("DROP TABLE IF EXISTS orders_seen, orders")
        c.execute("CREATE TABLE orders_seen (id uuid PRIMARY KEY, total int8 NOT NULL)")
        c.execute("CREATE TABLE orders (id bigserial PRIMARY KEY, total int8 NOT NULL)")


def rows(database_url: str, sql: str, *params):
    with psycopg.connect(database_url, autocommit=True) as c:
        return c.execute(sql, params).fetchall()


def test_the_readme_has_the_four_examples():
    codes = examples()
    assert len(codes) == 4
    assert "transaction.atomic()" in codes[0] and "enqueue(connection," in codes[0]
    assert "complete_in(conn, message)" in codes[1] and "publish(conn," in codes[1]
    assert "complete_in(session, message)" in codes[2] and "publish(session," in codes[2]
    assert "tx.execute" in codes[3]


def test_the_django_example_commits_together_and_handles_the_typed_job(database_url, dj):
    code = examples()[0].replace("from shop.models import Order", "from djangoproject.shop.models import Order")
    last = 'Worker("postgres://app@localhost/app", "receipts", payload_type=Receipt, lease=timedelta(seconds=30)).run_blocking(send_receipt)'
    ns = load(code, database_url, last)
    published = "SELECT key, payload FROM outbox WHERE topic = 'orders.created' AND key LIKE 'order-%%' ORDER BY created_at"
    before = rows(database_url, published)
    order = ns["place_order"]("9.50")
    w = ns["Worker"](database_url, "receipts", payload_type=ns["Receipt"], lease=30, poll_interval=0.02)
    t = threading.Thread(target=w.run_blocking, args=(ns["send_receipt"],), daemon=True)
    t.start()
    deadline = time.monotonic() + 15
    while dj.objects.get(pk=order.pk).note != "receipt sent":
        assert time.monotonic() < deadline, "the README's Django worker handled the job"
        time.sleep(0.02)
    w.stop()
    t.join(10)
    assert rows(database_url, published)[len(before):] == [(f"order-{order.pk}", {"order": order.pk})]
    assert rows(database_url, "SELECT state FROM inbox WHERE source = 'receipts' AND idempotency_key = %s", f"receipt-{order.pk}") == [("processed",)]


def test_the_psycopg_quick_start_consumes_and_publishes_in_the_applications_transaction(database_url):
    fresh_tables(database_url)
    ns = load(examples()[1], database_url, "asyncio.run(main())")

    async def go():
        db = await Database.connect(database_url)
        r = await db.enqueue("orders", "readme-psycopg", {"total": 42})
        t = asyncio.ensure_future(ns["main"]())
        await wait_for(lambda: _processed(db, r["id"]), 15, "the quick start processed the row")
        order_event = await ns["place_order"](7)
        t.cancel()
        await asyncio.gather(t, return_exceptions=True)
        await db.close()
        return r["id"], order_event

    async def _processed(db, inbox_id):
        return await db.query("SELECT 1 FROM inbox WHERE id = $1::uuid AND state = 'processed'", [inbox_id])

    inbox_id, event_id = asyncio.run(asyncio.wait_for(go(), 60))
    assert rows(database_url, "SELECT id::text, total FROM orders_seen") == [(inbox_id, 42)]
    assert rows(database_url, "SELECT total FROM orders") == [(7,)]
    assert rows(database_url, "SELECT topic, key, payload FROM outbox WHERE id = %s::uuid", event_id) == [("orders.created", "customer-7", {"total": 7})]


def test_the_sqlalchemy_example_completes_and_publishes_in_the_session(database_url):
    fresh_tables(database_url)
    ns = load(examples()[2], database_url, 'Worker("postgres://app@localhost/app", "orders").run_blocking(handle)   # until Ctrl-C or stop=')

    async def enqueue():
        db = await Database.connect(database_url)
        r = await db.enqueue("orders", "readme-sqlalchemy", {"total": 5})
        await db.close()
        return r["id"]

    inbox_id = asyncio.run(enqueue())
    stop = threading.Event()

    def watch():
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not rows(database_url, "SELECT 1 FROM inbox WHERE id = %s::uuid AND state = 'processed'", inbox_id):
            time.sleep(0.02)
        stop.set()

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        ns["Worker"](database_url, "orders", poll_interval=0.02).run_blocking(ns["handle"], stop=stop)
    finally:
        stop.set()
        watcher.join()
        ns["engine"].dispose()
    assert rows(database_url, "SELECT id::text, total FROM orders_seen") == [(inbox_id, 5)]
    assert rows(database_url, "SELECT payload FROM outbox WHERE topic = 'orders.seen'") == [({"id": inbox_id},)]


def test_the_zero_setup_example_processes_a_message_with_its_business_write(database_url):
    fresh_tables(database_url)
    ns = load(examples()[3], database_url, "asyncio.run(main())")

    async def go():
        db = await Database.connect(database_url)
        r = await db.enqueue("orders", "readme-1", {"total": 42})
        t = asyncio.ensure_future(ns["main"]())
        await wait_for(lambda: _processed(db, r["id"]), 15, "README example processed the row")
        t.cancel()
        await asyncio.gather(t, return_exceptions=True)
        assert await db.query("SELECT id::text AS id, total FROM orders_seen") == [{"id": r["id"], "total": 42}]
        await db.close()

    async def _processed(db, inbox_id):
        return await db.query("SELECT 1 FROM inbox WHERE id = $1::uuid AND state = 'processed'", [inbox_id])

    asyncio.run(asyncio.wait_for(go(), 60))


ROOT_README = Path(__file__).resolve().parents[3] / "README.md"
QUICK_START_LAST_LINE = 'Worker(os.environ["DATABASE_URL"], "jobs").run_blocking(handle)  # until Ctrl-C'


def test_the_top_level_readme_quick_start_handles_a_job(database_url, monkeypatch):
    """The repository README's Python quick start, as written: its table, its source `jobs`,
    its handler; only its last line (which runs until Ctrl-C) is replaced by a run that stops
    once the job is processed."""
    blocks = re.findall(r"<!-- quick start: python[^>]*-->\n```python\n(.*?)```", ROOT_README.read_text(), re.S)
    assert len(blocks) == 1, "README.md has one marked Python quick start"
    code = blocks[0].rstrip()
    assert code.endswith(QUICK_START_LAST_LINE), "the quick start ends by running the worker"
    code = code[: -len(QUICK_START_LAST_LINE)]
    with psycopg.connect(database_url, autocommit=True) as c:
        # The README's own set-up line creates this table.
        c.execute("CREATE TABLE IF NOT EXISTS jobs_done (id uuid PRIMARY KEY)")
    monkeypatch.setenv("DATABASE_URL", database_url)
    ns: dict = {}
    exec(compile(code, str(ROOT_README), "exec"), ns)

    async def enqueue():
        db = await Database.connect(database_url)
        r = await db.enqueue("jobs", "readme-job-1", {"task": "resize"})
        await db.close()
        return r["id"]

    job_id = asyncio.run(enqueue())
    stop = threading.Event()

    def watch():
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not rows(database_url, "SELECT 1 FROM inbox WHERE id = %s::uuid AND state = 'processed'", job_id):
            time.sleep(0.02)
        stop.set()

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        ns["Worker"](database_url, "jobs", poll_interval=0.02).run_blocking(ns["handle"], stop=stop)
    finally:
        stop.set()
        watcher.join()
    assert rows(database_url, "SELECT id::text FROM jobs_done") == [(job_id,)]
    assert rows(database_url, "SELECT state FROM inbox WHERE id = %s::uuid", job_id) == [("processed",)]


def test_the_top_level_readme_publishes_in_plain_sql(database_url):
    """The repository README's "Publish in your transaction" SQL, as written: the order and
    its outbox row commit together."""
    blocks = re.findall(r"<!-- quick start: sql[^>]*-->\n```sql\n(.*?)```", ROOT_README.read_text(), re.S)
    assert len(blocks) == 1, "README.md has one marked SQL quick start"
    with psycopg.connect(database_url, autocommit=True) as c:
        c.execute("DROP TABLE IF EXISTS orders")
        c.execute(blocks[0])
    assert rows(database_url, "SELECT id, total::text FROM orders") == [(7, "42.5")]
    assert rows(database_url, "SELECT topic, payload, state FROM outbox WHERE key = 'order-7' AND topic = 'orders.created'") == [("orders.created", {"order": 7}, "pending")]


def test_the_top_level_readme_enqueues_in_plain_sql(database_url):
    """The repository README's "Enqueue a job in your transaction" SQL, as written: the
    business row and a pull job for `jobs` commit together; the same key again is a
    duplicate with the first row's id, and no second row."""
    blocks = re.findall(r"<!-- quick start: enqueue-sql[^>]*-->\n```sql\n(.*?)```", ROOT_README.read_text(), re.S)
    assert len(blocks) == 1, "README.md has one marked enqueue SQL block"
    with psycopg.connect(database_url, autocommit=True) as c:
        c.execute("DROP TABLE IF EXISTS invoices")
        c.execute("DELETE FROM inbox WHERE source = 'jobs' AND idempotency_key = 'invoice-7'")
        c.execute(blocks[0])
        (first_id,) = c.execute(
            "SELECT id FROM inbox WHERE source = 'jobs' AND idempotency_key = 'invoice-7'").fetchone()
        again = c.execute("SELECT * FROM queuebox_enqueue('jobs', 'invoice-7', '{\"order\": 8}')").fetchall()
    assert rows(database_url, "SELECT order_id FROM invoices") == [(7,)]
    assert rows(database_url,
                "SELECT consumption, state, priority, payload FROM inbox WHERE source = 'jobs' AND idempotency_key = 'invoice-7'"
                ) == [("pull", "pending", 5, {"order": 7})]
    assert again == [(first_id, True)]
