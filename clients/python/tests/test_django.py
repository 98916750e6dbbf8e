"""Django: publish, enqueue and complete_in inside `transaction.atomic()` on
Django's own PostgreSQL connection (psycopg 3 backend), in a minimal real project
(tests/djangoproject): committed with the business write, rolled back with it."""

import os
import secrets
import threading
import time

import pytest

import django  # noqa: E402  (in the package's `test` extra, which 41-python installs)

from queuebox_inbox import BlockingDatabase, InvalidInput, Worker, complete_in, enqueue, enqueue_many, publish  # noqa: E402


@pytest.fixture(scope="module")
def dj(database_url):
    os.environ["QB_DJANGO_DATABASE_URL"] = database_url
    os.environ["DJANGO_SETTINGS_MODULE"] = "djangoproject.settings"
    django.setup()
    from django.db import connection

    from djangoproject.shop.models import Order

    with connection.schema_editor() as editor:
        editor.create_model(Order)
    assert connection.vendor == "postgresql" and connection.Database.__name__ == "psycopg", "Django's psycopg 3 backend"
    yield Order
    with connection.schema_editor() as editor:
        editor.delete_model(Order)
    connection.close()


class Boom(Exception):
    pass


def test_publish_and_enqueue_commit_and_roll_back_with_the_business_write(dj, database_url):
    from django.db import connection, transaction

    Order = dj
    topic, source = f"dj.{secrets.token_hex(3)}", f"dj_{secrets.token_hex(3)}"
    with transaction.atomic():
        order = Order.objects.create(total="42.50")
        out_id = publish(connection, topic, {"order": order.pk}, key=f"order-{order.pk}")
        job = enqueue(connection, source, {"order": order.pk}, idempotency_key=f"order-{order.pk}", priority=2)
        again = enqueue_many(connection, [{"source": source, "payload": {}, "idempotency_key": f"order-{order.pk}"}])
    assert again[0].id == job.id and again[0].duplicate and not job.duplicate

    with pytest.raises(Boom):
        with transaction.atomic():
            gone = Order.objects.create(total="1.00")
            publish(connection, topic, {"order": gone.pk})
            enqueue(connection, source, {"order": gone.pk}, idempotency_key="gone")
            raise Boom()

    assert list(Order.objects.values_list("pk", flat=True)) == [order.pk]
    with BlockingDatabase.connect(database_url) as db:
        assert db.query("SELECT id::text AS id, payload FROM outbox WHERE topic = $1", [topic]) == [{"id": out_id, "payload": {"order": order.pk}}]
        assert db.query("SELECT id::text AS id, priority, consumption FROM inbox WHERE source = $1", [source]) == [
            {"id": job.id, "priority": 2, "consumption": "pull"}]


def test_complete_in_commits_with_the_handlers_django_write(dj, database_url):
    from django.db import connection, transaction

    Order = dj
    source = f"dj_w_{secrets.token_hex(3)}"
    with transaction.atomic():
        enqueue_many(connection, [{"source": source, "payload": {"total": f"{i}.25", "fail": i == 1}} for i in range(3)])
    done = []

    def handle(message, tx):
        # The worker's threads get Django connections of their own, as any thread does.
        try:
            with transaction.atomic():
                Order.objects.create(total=message.payload["total"], note=source)
                complete_in(connection, message)
                if message.payload["fail"]:
                    raise Boom("after complete_in: both roll back")
        finally:
            connection.close()
            done.append(message.payload["total"])

    w = Worker(database_url, source, poll_interval=0.02, retry={"max_attempts": 0})
    t = threading.Thread(target=w.run_blocking, args=(handle,), daemon=True)
    t.start()
    deadline = time.monotonic() + 15
    while len(done) < 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    w.stop()
    t.join(10)
    assert sorted(Order.objects.filter(note=source).values_list("total", flat=True)) == [pytest.approx(0.25), pytest.approx(2.25)]
    with BlockingDatabase.connect(database_url) as db:
        states = db.query("SELECT payload->>'total' AS total, state FROM inbox WHERE source = $1 ORDER BY 1", [source])
    assert states == [{"total": "0.25", "state": "processed"}, {"total": "1.25", "state": "dead"}, {"total": "2.25", "state": "processed"}]


def test_complete_in_outside_atomic_is_refused(dj):
    from django.db import connection

    with pytest.raises(InvalidInput, match="transaction.atomic"):
        complete_in(connection, object())
