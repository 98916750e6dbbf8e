"""A handler's statements store exactly the values they were given, whatever kinds the same
statement text ran with before, through the real worker and the real PostgreSQL.

The core caches a prepared statement per connection; it used to bind a whole number as int8
and a fraction as float8 under one cached statement, so 4.25 after 3 stored
4616471093031469056. Parameters go to the core as JSON text (queuebox_inbox/_params.py):
``decimal.Decimal`` as its exact literal, ints of any size digit for digit. Each stored
``v::text`` is compared with what PostgreSQL itself makes of the value's literal
(``SELECT ($1::text)::numeric::text``), as core/tests/handler_statement_values.rs does.
"""

import asyncio
import logging
import math
import time
from decimal import Decimal

import pytest

from conftest import enqueue, states, wait_for
from queuebox_inbox import Database, Dead, InvalidInput, QueueBoxError, RetryPolicy, Worker

BIG = 123456789012345678901234567890
LONG = Decimal("0.1234567890123456789012345")

# Per column: (the Python value sent, its JSON literal: what PostgreSQL should make of it).
VALUES = {
    "numeric": [
        (3, "3"),
        (4.25, "4.25"),
        (12.5, "12.5"),
        (7, "7"),
        (0.5, "0.5"),
        (None, "null"),
        (BIG, "123456789012345678901234567890"),
        (LONG, "0.1234567890123456789012345"),
        (Decimal("12.50"), "12.50"),
        (Decimal("1E-400"), "1e-400"),
        (-9223372036854775808, "-9223372036854775808"),
        (18446744073709551616, "18446744073709551616"),
        (Decimal("2.5E+3"), "2.5E+3"),
    ],
    "float8": [(3, "3"), (4.25, "4.25"), (0.1, "0.1"), (7, "7"), (None, "null"), (1e300, "1e300"), (-0.5, "-0.5"), (Decimal("0.5"), "0.5")],
    "int8": [(3, "3"), (9223372036854775807, "9223372036854775807"), (None, "null"), (-7, "-7"), (0, "0"), (Decimal("12"), "12")],
    "text": [
        ("12.345", '"12.345"'),
        (3, "3"),
        (4.25, "4.25"),
        (True, "true"),
        (None, "null"),
        ("héllo", '"héllo"'),
        (LONG, "0.1234567890123456789012345"),
        ([1, "a"], '[1, "a"]'),
        ({"a": Decimal("1.50")}, '{"a": 1.50}'),
    ],
    "jsonb": [
        ({"a": 1}, '{"a": 1}'),
        ([1, 2.5, "x"], '[1, 2.5, "x"]'),
        (None, "null"),
        ({"big": BIG}, '{"big": 123456789012345678901234567890}'),
        ({"d": [LONG, Decimal("12.50")]}, '{"d": [0.1234567890123456789012345, 12.50]}'),
        ((1, None, True), "[1, null, true]"),
    ],
    "bool": [(True, "true"), (False, "false"), (None, "null")],
}


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 60))


def oracle_sql(column: str, value) -> str:
    """The query that makes PostgreSQL parse the literal as the value's own kind would be."""
    if isinstance(value, (dict, list, tuple)):
        return "SELECT ($1::text)::jsonb::text AS v"
    if column == "text":
        return "SELECT ($1::text)::bool::text AS v" if isinstance(value, bool) else "SELECT ($1::text)::numeric::text AS v"
    return f"SELECT ($1::text)::{column}::text AS v"


async def expected(q, column: str, value, literal: str):
    if value is None:
        return None
    if isinstance(value, str):
        return value
    return (await q(oracle_sql(column, value), [literal]))[0]["v"]


def test_one_handler_statement_stores_every_kind_of_value_exactly_in_any_order(database_url):
    async def go():
        db = await Database.connect(database_url)
        source = "py-statement-values"
        (mid,) = await enqueue(db, source, 1)
        wrong = []
        sent_counts = {}

        async def handler(m, tx):
            for column, forward in VALUES.items():
                sent = forward + forward[::-1]
                await tx.execute(f"CREATE TABLE t_{column} (n serial, v {column})")
                inserted = []
                # One text for every value: the statement the core prepares once on this connection.
                insert = f"INSERT INTO t_{column} (v) VALUES ($1)"
                for value, literal in sent:
                    try:
                        await tx.execute(insert, [value])
                        inserted.append((value, literal))
                    except QueueBoxError as e:
                        wrong.append(f"{column}: sent {literal}: {type(e).__name__}: {e}")
                        raise Dead("a statement failed") from e  # the transaction is aborted
                    except Exception as e:  # refused before reaching the database
                        wrong.append(f"{column}: sent {literal}: {type(e).__name__}: {e}")
                stored = await tx.query(f"SELECT v::text AS v FROM t_{column} ORDER BY n")
                for (value, literal), row in zip(inserted, stored):
                    want = await expected(tx.query, column, value, literal)
                    if row["v"] != want:
                        wrong.append(f"{column}: sent {literal}, stored {row['v']!r}, expected {want!r}")
                sent_counts[column] = len(sent)

        stop = asyncio.Event()
        t = asyncio.ensure_future(Worker(database_url, source, poll_interval=0.02, retry=RetryPolicy(max_attempts=0)).run(handler, stop=stop))

        async def finished():
            return (await states(db, source))[mid]["state"] in ("processed", "dead")

        await wait_for(finished, 30, "the message handled")
        stop.set()
        await t
        assert not wrong, "values stored wrongly:\n" + "\n".join(wrong)
        assert (await states(db, source))[mid]["state"] == "processed"
        # Committed with the completion: every value is there.
        for column, n in sent_counts.items():
            rows = await db.query(f"SELECT count(*)::int8 AS n FROM t_{column}")
            assert rows[0]["n"] == n, column
        assert set(sent_counts) == set(VALUES)
        await db.close()

    run(go())


def test_database_execute_stores_a_fraction_after_an_integer_exactly(database_url):
    async def go():
        # Used one statement at a time, the pool reuses its idle connection: the statement
        # prepared there for the first values is the one the later ones find (before the
        # fix, 12.5 after 3 and 4.25 stored 4623226492472524800).
        db = await Database.connect(database_url, max_connections=1)
        await db.execute("CREATE TABLE db_numeric (n serial, v numeric)")
        for v in [3, 4.25, 12.5, 7, 0.5]:
            await db.execute("INSERT INTO db_numeric (v) VALUES ($1)", [v])
        rows = await db.query("SELECT v::text AS v FROM db_numeric ORDER BY n")
        assert [r["v"] for r in rows] == ["3", "4.25", "12.5", "7", "0.5"]
        for v in [LONG, BIG, 9]:
            await db.execute("INSERT INTO db_numeric (v) VALUES ($1)", [v])
        rows = await db.query("SELECT v::text AS v FROM db_numeric ORDER BY n")
        assert [r["v"] for r in rows][5:] == [str(LONG), str(BIG), "9"]
        await db.close()

    run(go())


def test_a_numeric_read_back_through_query_is_an_int_when_whole_else_the_nearest_float(database_url):
    """What json.loads makes of the core's exact numbers (decoding is left as it was: a float
    stays a float for existing code); ``v::text`` keeps every digit, for a Decimal."""

    async def go():
        db = await Database.connect(database_url, max_connections=1)
        await db.execute("CREATE TABLE money (n serial, v numeric)")
        await db.execute(f"INSERT INTO money (v) VALUES (4.25), (12.50), ({BIG}), ({LONG}), (100.00)")
        rows = await db.query("SELECT v, v::text AS t FROM money ORDER BY n")
        got = [r["v"] for r in rows]
        assert got == [4.25, 12.5, BIG, float(LONG), 100]
        assert [type(v) for v in got] == [float, float, int, float, int]
        assert got[3] != LONG  # the nearest double, not every digit
        assert [Decimal(r["t"]) for r in rows] == [Decimal("4.25"), Decimal("12.50"), BIG, LONG, Decimal("100.00")]
        assert rows[1]["t"] == "12.50"  # the column's own text keeps its scale
        await db.close()

    run(go())


@pytest.mark.parametrize(
    "params, where",
    [
        ([1, Decimal("NaN")], "parameter $2"),
        ([Decimal("-Infinity")], "parameter $1"),
        ([1, {"a": [0, Decimal("sNaN")]}], "parameter $2['a'][1]"),
        ([float("nan")], "parameter $1"),
        ([[float("inf")]], "parameter $1[0]"),
    ],
)
def test_a_number_with_no_json_literal_is_refused_naming_its_parameter(database_url, params, where):
    async def go():
        db = await Database.connect(database_url, max_connections=1)
        try:
            with pytest.raises(InvalidInput, match=r"not a finite number") as e:
                await db.execute("SELECT $1, $2", params)
            assert where in str(e.value), str(e.value)
        finally:
            await db.close()

    run(go())


class Captured(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def test_a_failing_handler_is_a_warning_of_the_package_logger_once_per_attempt(database_url):
    # The package logger as an application leaves it (no level set: WARNING, logging's default).
    package = logging.getLogger("queuebox_inbox")
    assert package.getEffectiveLevel() == logging.WARNING
    captured = Captured()
    package.addHandler(captured)
    source = "py-handler-fails"
    try:

        async def go():
            db = await Database.connect(database_url)
            (mid,) = await enqueue(db, source, 1)

            async def handler(m, tx):
                raise ValueError(f"card declined on attempt {m.attempt}")

            async def dead():
                return (await states(db, source))[mid]["state"] == "dead"

            stop = asyncio.Event()
            w = Worker(database_url, source, poll_interval=0.02, retry=RetryPolicy(max_attempts=2, base_delay=0.01, max_delay=0.02, jitter=0))
            t = asyncio.ensure_future(w.run(handler, stop=stop))
            await wait_for(dead, 15, "dead after two retries")
            stop.set()
            await t
            await db.close()
            return mid

        mid = run(go())
        # Records reach logging on the queuebox-logs thread: wait for the two retries' records.
        deadline = time.monotonic() + 10
        while True:
            failed = [r for r in captured.records if r.getMessage() == "handler failed; retry scheduled" and getattr(r, "source", None) == source]
            if len(failed) >= 2 or time.monotonic() > deadline:
                break
            time.sleep(0.02)
        time.sleep(0.2)  # and none more
        failed = [r for r in captured.records if r.getMessage() == "handler failed; retry scheduled" and getattr(r, "source", None) == source]
        assert [(r.levelno, r.message_id, r.attempt, r.error) for r in failed] == [
            (logging.WARNING, mid, 1, "card declined on attempt 0"),
            (logging.WARNING, mid, 2, "card declined on attempt 1"),
        ], [(r.levelname, r.getMessage(), getattr(r, "queuebox", None)) for r in captured.records]
    finally:
        package.removeHandler(captured)
