import asyncio
import json
import warnings
from datetime import timedelta
from pathlib import Path

import pytest

from queuebox_inbox import QueueBoxError, RetryPolicy, Worker, evaluate

URL = "postgres://nobody@127.0.0.1:1/none"
VECTORS = Path(__file__).resolve().parents[3] / "proto-docs" / "vectors"
DB_ONLY = {"transitions"}  # state transitions need a database; the Rust store tests run them


def test_missing_options_take_the_cores_defaults():
    o = Worker(URL, "orders").options
    assert (o.source, o.batch_size, o.concurrency, o.lease, o.poll_interval, o.shutdown_grace, o.listen) == (
        "orders", 1024, 1, timedelta(seconds=30), timedelta(seconds=1), timedelta(seconds=30), True)
    assert o.retry == RetryPolicy(max_attempts=5, base_delay=1, max_delay=300, jitter=0.2)


def test_an_unset_batch_size_is_the_cores_adapted_to_concurrency():
    # The core computes it (a hand-out worker's: 32 x concurrency, 1024..10000); the wrapper
    # only reads it back.
    assert [Worker(URL, "s", concurrency=c).options.batch_size for c in (1, 8, 32, 64, 400)] == [1024, 1024, 256, 256, 800]
    assert Worker(URL, "s", batch_size=10, concurrency=32).options.batch_size == 10


def test_given_options_are_kept():
    o = Worker(URL, "s", batch_size=100, concurrency=4, lease=0.9, retry=RetryPolicy(max_attempts=2)).options
    assert (o.batch_size, o.concurrency, o.lease) == (100, 4, timedelta(milliseconds=900))
    assert o.retry == RetryPolicy(2, base_delay=1, max_delay=300, jitter=0.2)
    assert Worker(URL, "s", retry={"max_attempts": 0, "jitter": 0}).options.retry == RetryPolicy(0, base_delay=1, max_delay=300, jitter=0.0)


def test_the_connected_worker_shows_the_options_resolve_options_shows(database_url):
    # Both are the core's effective options; neither names `handOut`, which the binding sets
    # on every worker and its users never do.
    async def go():
        w = Worker(database_url, "s", concurrency=4, lease=0.9)
        async with w:
            return json.loads(w._native.options_json()), json.loads(w._options_json)

    native, resolved = asyncio.run(go())
    assert native == resolved
    assert "handOut" not in native and native["batchSize"] == 1024


@pytest.mark.parametrize(
    "kwargs,name",
    [
        ({"source": ""}, "source"),
        ({"source": "s", "batch_size": 0}, "batch_size"),
        ({"source": "s", "concurrency": 0}, "concurrency"),
        ({"source": "s", "lease": 0.01}, "lease"),
        ({"source": "s", "poll_interval": 0}, "poll_interval"),
        ({"source": "s", "lease": -1}, "lease"),
        ({"source": "s", "shutdown_grace": float("inf")}, "shutdown_grace"),
        ({"source": "s", "poll_interval": "1s"}, "poll_interval"),
        ({"source": "s", "retry": {"base_delay": -0.5}}, "retry.base_delay"),
        ({"source": "s", "retry": {"max_delay": timedelta(seconds=-1)}}, "retry.max_delay"),
        ({"source": "s", "lease": 30, "lease_ms": 30000}, "lease"),
        ({"source": "s", "retry": {"jitter": 2}}, "retry.jitter"),
    ],
)
def test_invalid_options_raise_a_config_error_naming_the_option(kwargs, name):
    with pytest.raises(QueueBoxError) as e:
        Worker(URL, **kwargs)
    assert e.value.kind == "config"
    assert f"`{name}`" in str(e.value)


def test_an_unreachable_database_raises_a_connect_error_without_the_password():
    async def go():
        async with Worker("postgres://app:s3cret-pw@127.0.0.1:1/none", "s"):
            pass

    with pytest.raises(QueueBoxError) as e:
        asyncio.run(go())
    assert e.value.kind == "connect"
    assert "s3cret-pw" not in str(e.value)


def vector_files():
    files = sorted(VECTORS.glob("*.json"))
    assert files, f"no vectors in {VECTORS}"
    return files


def test_the_vector_directory_has_the_pure_kinds():
    kinds = {json.loads(f.read_text())["kind"] for f in vector_files()}
    assert {"backoff", "idempotency_key", "redact", "completion_statement", "publish_statement"} <= kinds


def pure_vector_files():
    return [f for f in vector_files() if json.loads(f.read_text())["kind"] not in DB_ONLY]


@pytest.mark.parametrize("path", pure_vector_files(), ids=lambda p: p.name)
def test_every_vector_case_matches_through_the_native_binding(path):
    doc = json.loads(path.read_text())
    assert doc["cases"]
    failures = []
    for case in doc["cases"]:
        try:
            got = evaluate(doc["kind"], case["input"])
        except QueueBoxError as e:
            got = {"raised": repr(e)}
        if json.dumps(got, sort_keys=True) != json.dumps(case["expected"], sort_keys=True):
            failures.append(f"{case['name']}: expected {case['expected']}, got {got}")
    assert failures == []


def test_an_unknown_vector_kind_is_an_invalid_input_error():
    with pytest.raises(QueueBoxError) as e:
        evaluate("no_such_kind", {})
    assert e.value.kind == "invalid_input"
