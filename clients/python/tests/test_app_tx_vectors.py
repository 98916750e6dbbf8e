"""The conformance vectors of the application-transaction statements
(proto-docs/vectors/completion_statement.json, publish_statement.json) say exactly what a
wrapper runs. test_options_and_vectors.py checks the core renders them; here each PostgreSQL
case in a style this package's drivers use runs on the real driver (percent → psycopg,
colon → SQLAlchemy text()) inside a transaction that is rolled back, and does what it says."""

import json
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import psycopg
import pytest
from sqlalchemy import create_engine, text

VECTORS = Path(__file__).resolve().parents[3] / "proto-docs" / "vectors"


def cases(kind: str) -> list:
    return json.loads((VECTORS / f"{kind}.json").read_text())["cases"]


@pytest.fixture(scope="module")
def url(database_url: str) -> str:
    return database_url


@contextmanager
def psycopg_tx(url: str) -> Iterator[Any]:
    """(run, rows) on a psycopg transaction that is rolled back."""
    with psycopg.connect(url) as conn:
        try:
            yield (lambda sql, params: conn.execute(sql, params).rowcount, lambda sql, params: conn.execute(sql, params).fetchall())
        finally:
            conn.rollback()


@contextmanager
def sqlalchemy_tx(url: str) -> Iterator[Any]:
    """(run, rows) on a SQLAlchemy connection's transaction that is rolled back; `:p1`, `:p2` bind by name."""
    engine = create_engine("postgresql+psycopg://" + url.split("://", 1)[1])
    named = lambda params: {f"p{i}": v for i, v in enumerate(params, 1)}  # noqa: E731
    try:
        with engine.connect() as conn:
            try:
                yield (
                    lambda sql, params: conn.execute(text(sql), named(params)).rowcount,
                    lambda sql, params: conn.execute(text(sql), named(params)).fetchall(),
                )
            finally:
                conn.rollback()
    finally:
        engine.dispose()


DRIVERS = {"percent": ("psycopg", psycopg_tx, "%s"), "colon": ("sqlalchemy", sqlalchemy_tx, ":p{}")}


def marker(style: str, n: int) -> str:
    return DRIVERS[style][2].format(n)


def test_every_postgres_completion_vector_in_a_psycopg_or_sqlalchemy_style_completes_its_claimed_row(url):
    ran = []
    for c in cases("completion_statement"):
        style = c["input"]["placeholder"]
        if c["input"]["backend"] != "postgres" or style not in DRIVERS:
            continue
        name, tx, _ = DRIVERS[style]
        with tx(url) as (run, rows):
            # The row the vector's id and token name, claimed with a live lease.
            run(
                "INSERT INTO inbox (id, source, idempotency_key, payload, consumption, state, claim_token, claimed_at, lease_expires_at)"
                f" VALUES (CAST({marker(style, 1)} AS uuid), 'vectors', 'k', '{{}}', 'pull', 'processing',"
                f" CAST({marker(style, 2)} AS uuid), now(), now() + interval '1 minute')",
                [c["input"]["id"], c["input"]["token"]],
            )
            assert run(c["expected"]["sql"], c["expected"]["params"]) == 1, f"{c['name']} on {name}"
            assert rows(f"SELECT state, claim_token FROM inbox WHERE id = CAST({marker(style, 1)} AS uuid)", [c["input"]["id"]]) == [("processed", None)]
            # The same statement again: the fence no longer matches (the claim is gone).
            assert run(c["expected"]["sql"], c["expected"]["params"]) == 0
        ran.append(f"{c['name']} ({name})")
    assert len(ran) >= 2, f"a percent and a colon case ran: {ran}"


def test_every_postgres_publish_vector_in_a_psycopg_or_sqlalchemy_style_inserts_its_rows_with_its_ids(url):
    ran = []
    for c in cases("publish_statement"):
        style = c["input"]["placeholder"]
        if c["input"]["backend"] != "postgres" or style not in DRIVERS or "sql" not in c["expected"]:
            continue
        name, tx, _ = DRIVERS[style]
        ids = c["expected"]["ids"]
        with tx(url) as (run, rows):
            assert run(c["expected"]["sql"], c["expected"]["params"]) == len(ids), c["name"]
            got = rows(
                f"SELECT id::text, topic, payload, state FROM outbox WHERE id = ANY(CAST({marker(style, 1)} AS uuid[])) ORDER BY sequence",
                ["{" + ",".join(ids) + "}"],
            )
            assert [tuple(r) for r in got] == [(ids[i], m["topic"], m["payload"], "pending") for i, m in enumerate(c["input"]["messages"])], c["name"]
        ran.append(f"{c['name']} ({name})")
    assert ran, "at least one case ran"
