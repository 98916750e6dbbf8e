"""The blocking twins: migrate_blocking, BlockingDatabase and Worker.stop() /
`with Worker(...)`, used from plain functions with no event loop anywhere, as a Django or
Flask application would, against the real PostgreSQL."""

import secrets
import threading
import time

import pytest

from queuebox_inbox import BlockingDatabase, DatabaseError, Worker, migrate_blocking


def test_migrate_blocking_applies_the_schema_then_nothing(empty_database_url):
    applied = migrate_blocking(empty_database_url)
    assert applied, "a fresh database gets every migration"
    assert migrate_blocking(empty_database_url) == []
    with BlockingDatabase.connect(empty_database_url) as db:
        assert db.query("SELECT to_regclass('inbox')::text AS t") == [{"t": "inbox"}]


def test_blocking_database_enqueues_queries_and_closes(database_url):
    source = f"blk_{secrets.token_hex(3)}"
    with BlockingDatabase.connect(database_url, max_connections=2) as db:
        first = db.enqueue(source, "k1", {"n": 1}, headers={"x-a": "1"})
        again = db.enqueue(source, "k1", {"n": 2})
        assert (first["duplicate"], again) == (False, {"id": first["id"], "duplicate": True})
        assert db.execute("UPDATE inbox SET attempt = attempt WHERE source = $1", [source]) == 1
        assert db.query("SELECT payload FROM inbox WHERE id = $1::uuid", [first["id"]]) == [{"payload": {"n": 1}}]
        assert db.execute_script("SELECT 1; SELECT 2") >= 0
        with pytest.raises(DatabaseError):
            db.execute("SELECT * FROM no_such_table")
    with pytest.raises(Exception):
        db.query("SELECT 1")  # closed with the block


def test_a_blocking_worker_runs_on_a_thread_and_stops_from_another(database_url):
    source = f"blk_w_{secrets.token_hex(3)}"
    seen = []
    with BlockingDatabase.connect(database_url) as db:
        for i in range(5):
            db.enqueue(source, f"k{i}", {"n": i})

        def handle(message, tx):
            tx.execute("INSERT INTO seen (inbox_id, note) VALUES ($1::uuid, $2)", [message.id, "blocking twin"])
            seen.append(message.payload["n"])

        with Worker(database_url, source, poll_interval=0.02, concurrency=2) as worker:
            t = threading.Thread(target=worker.run_blocking, args=(handle,), daemon=True)
            t.start()
            deadline = time.monotonic() + 15
            while len(seen) < 5 and time.monotonic() < deadline:
                time.sleep(0.02)
            # Leaving the block stops the run (worker.stop()) and waits for its shutdown.
            assert t.is_alive()
        assert worker.stats() is None, "leaving `with Worker(...)` stopped the run and waited for its shutdown"
        t.join(2)  # what is left: run_blocking closing its own event loop
        assert not t.is_alive()
        assert sorted(seen) == [0, 1, 2, 3, 4]
        rows = db.query("SELECT count(*)::int8 AS n FROM inbox WHERE source = $1 AND state = 'processed'", [source])
        assert rows == [{"n": 5}]


def test_stop_before_the_run_ends_it_as_soon_as_it_started(database_url):
    w = Worker(database_url, f"blk_s_{secrets.token_hex(3)}", poll_interval=0.02)
    w.stop()
    started = time.monotonic()
    w.run_blocking(lambda m, tx: None)
    assert time.monotonic() - started < 5
    # The request was used up: a later run stops only when asked again.
    t = threading.Thread(target=w.run_blocking, args=(lambda m, tx: None,), daemon=True)
    t.start()
    time.sleep(0.3)
    assert t.is_alive()
    w.stop()
    t.join(10)
    assert not t.is_alive()
