"""The worker through a real PgBouncer (Debian's ``pgbouncer``, started here in front of the
test PostgreSQL).

In session mode (with ``ignore_startup_parameters = extra_float_digits``, as
docs/operations.md says) the worker claims and completes rows, and a row enqueued while it
waits is claimed at once: its ``LISTEN`` works through the pool. In transaction and statement
mode the worker and ``migrate`` are refused with a ``ConfigError`` naming PgBouncer's
``pool_mode`` and what to set, and the waiting row is left untouched. Without pgbouncer the
tests fail saying NOT RUN (scripts/test.d/41-python.sh installs it)."""

import asyncio
import contextlib
import os
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
from urllib.parse import urlsplit

import pytest

from conftest import ADMIN_URL, _create, _drop, count_state, states, url_for, wait_for
from queuebox_inbox import ConfigError, Database, Worker, migrate


def _pgbouncer_binary() -> str:
    for p in (shutil.which("pgbouncer"), "/usr/sbin/pgbouncer"):
        if p and os.path.exists(p):
            return p
    pytest.fail("NOT RUN: pgbouncer is not installed (apt-get install pgbouncer; scripts/test.d/41-python.sh installs it)")


@contextlib.contextmanager
def pgbouncer(databases):
    """A pgbouncer serving ``{alias: (database, pool_mode)}``; yields the URL of an alias."""
    binary = _pgbouncer_binary()
    server = urlsplit(ADMIN_URL)
    user = server.username or "postgres"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tempfile.TemporaryDirectory() as d:
        # Run as root, pgbouncer switches to `nobody`, which must still read its files.
        os.chmod(d, 0o755)
        lines = ["[databases]"]
        for alias, (db, mode) in databases.items():
            lines.append(f"{alias} = host={server.hostname} port={server.port or 5432} dbname={db} pool_mode={mode}")
        lines += [
            "[pgbouncer]",
            "listen_addr = 127.0.0.1",
            f"listen_port = {port}",
            "unix_socket_dir =",
            "auth_type = trust",
            f"auth_file = {d}/users.txt",
            "pool_mode = session",
            "default_pool_size = 40",
            "ignore_startup_parameters = extra_float_digits",
        ]
        for name, text in (("users.txt", f'"{user}" ""\n'), ("pgbouncer.ini", "\n".join(lines) + "\n")):
            with open(os.path.join(d, name), "w") as f:
                f.write(text)
            os.chmod(os.path.join(d, name), 0o644)
        log = open(os.path.join(d, "pgbouncer.log"), "w+")
        args = [binary] + (["-u", "nobody"] if os.geteuid() == 0 else []) + [os.path.join(d, "pgbouncer.ini")]
        proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        try:
            deadline = time.monotonic() + 10
            while True:
                if proc.poll() is not None:
                    log.seek(0)
                    pytest.fail(f"pgbouncer exited ({proc.returncode}): {log.read()}")
                with socket.socket() as s:
                    if s.connect_ex(("127.0.0.1", port)) == 0:
                        break
                assert time.monotonic() < deadline, "pgbouncer did not listen"
                time.sleep(0.01)
            yield lambda alias: f"postgres://{user}@127.0.0.1:{port}/{alias}"
        finally:
            proc.kill()
            proc.wait()
            log.close()


@pytest.fixture
def database():
    name = f"qb_py_pgb_{secrets.token_hex(4)}"
    asyncio.run(_create(name, schema=True))
    yield name
    asyncio.run(_drop(name))


def test_session_mode_worker_completes_rows_and_is_woken_by_listen(database):
    with pgbouncer({"qb": (database, "session")}) as url_of:

        async def go():
            direct = await Database.connect(url_for(database))
            for i in range(3):
                await direct.enqueue("py_pgb", f"k{i}", {"n": i})
            handled = []

            async def handler(m, tx):
                handled.append(m.id)

            stop = asyncio.Event()
            # Polling every 60 s: a row enqueued while the worker waits is claimed within
            # seconds only if its LISTEN, through pgbouncer, hears the insert.
            async with Worker(url_of("qb"), "py_pgb", poll_interval=60) as w:
                t = asyncio.ensure_future(w.run(handler, stop=stop))
                await wait_for(
                    lambda: _is(count_state(direct, "py_pgb", "processed"), 3), what="the first three rows processed"
                )
                await direct.enqueue("py_pgb", "late", {"n": 3})
                await wait_for(
                    lambda: _is(count_state(direct, "py_pgb", "processed"), 4),
                    timeout=10,
                    what="the row enqueued while the worker waited, processed (LISTEN)",
                )
                stop.set()
                await t
            assert len(handled) == 4 and len(set(handled)) == 4, handled
            await direct.close()

        asyncio.run(asyncio.wait_for(go(), 60))


async def _is(count, n: int) -> bool:
    return (await count) == n


def test_transaction_and_statement_modes_are_refused_and_the_row_is_untouched(database):
    with pgbouncer({"qb_txn": (database, "transaction"), "qb_stmt": (database, "statement")}) as url_of:

        async def go():
            direct = await Database.connect(url_for(database))
            row = (await direct.enqueue("py_pgb", "j1", {"n": 1}))["id"]
            for alias in ("qb_txn", "qb_stmt"):
                with pytest.raises(ConfigError, match="pool_mode = session") as refused:
                    async with Worker(url_of(alias), "py_pgb"):
                        pass
                assert "transaction or statement mode" in str(refused.value), refused.value
                with pytest.raises(ConfigError, match="pool_mode = session"):
                    await migrate(url_of(alias))
            got = (await states(direct, "py_pgb"))[row]
            assert (got["state"], got["attempt"], got["claim_token"]) == ("pending", 0, None), got
            await direct.close()

        asyncio.run(asyncio.wait_for(go(), 60))
