"""The worker against a PostgreSQL that accepts TLS with a client certificate only
(scripts/postgres-tls.sh; scripts/test.d/41-python.sh starts it and exports
QUEUEBOX_TEST_TLS_DATABASE_URL: sslmode=verify-full, sslrootcert, sslcert, sslkey).

The package hands the URL to the Rust core as it is: ``migrate`` and the worker connect with
the URL alone, PostgreSQL's pg_stat_ssl shows the worker's sessions encrypted with the
client certificate, and a wrong CA or a missing client certificate is refused with the
core's wording. psql (libpq, the same URL parameters) sets up and looks; the package under
test does not."""

import asyncio
import os
import secrets
import subprocess

import pytest

from queuebox_inbox import ConnectError, Worker, migrate

BASE = os.environ.get("QUEUEBOX_TEST_TLS_DATABASE_URL", "")


def psql(url: str, sql: str) -> str:
    out = subprocess.run(
        ["psql", url, "-X", "-q", "-t", "-A", "-v", "ON_ERROR_STOP=1", "-c", sql],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, f"psql {sql!r}: {out.stderr}"
    return out.stdout.strip()


@pytest.fixture
def tls_url():
    if not BASE:
        pytest.fail(
            "NOT RUN: QUEUEBOX_TEST_TLS_DATABASE_URL is not set "
            "(scripts/test.d/41-python.sh starts scripts/postgres-tls.sh and sets it)"
        )
    name = f"qb_py_tls_{secrets.token_hex(4)}"
    admin = BASE.replace("/queuebox?", "/postgres?", 1)
    psql(admin, f"CREATE DATABASE {name}")
    yield BASE.replace("/queuebox?", f"/{name}?", 1)
    psql(admin, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def test_the_worker_connects_to_a_tls_only_postgres_with_the_url_alone(tls_url):
    async def go():
        await migrate(tls_url)
        psql(
            tls_url,
            "INSERT INTO inbox (source, idempotency_key, payload, consumption) "
            "VALUES ('tls_jobs', 'k1', '{\"n\": 1}', 'pull')",
        )
        sessions = {}

        async def handler(m, tx):
            # The worker's own sessions, seen by the server while it holds this row.
            sessions["seen"] = psql(
                tls_url,
                "SELECT string_agg(DISTINCT s.ssl || ' ' || s.version || ' ' || coalesce(s.client_dn, '-'), ', ') "
                "FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) "
                "WHERE a.datname = current_database() AND a.pid <> pg_backend_pid()",
            )

        stop = asyncio.Event()
        async with Worker(tls_url, "tls_jobs", poll_interval=0.05) as w:
            t = asyncio.ensure_future(w.run(handler, stop=stop))
            deadline = asyncio.get_running_loop().time() + 30
            while psql(tls_url, "SELECT state FROM inbox WHERE source = 'tls_jobs'") != "processed":
                assert asyncio.get_running_loop().time() < deadline, "the row was not processed over TLS"
                await asyncio.sleep(0.05)
            stop.set()
            await t
        assert sessions["seen"] == "true TLSv1.3 /CN=postgres", sessions

        # The core read sslrootcert and sslcert/sslkey from this URL: change them and it refuses.
        with pytest.raises(ConnectError, match="not signed by a CA QueueBox trusts"):
            async with Worker(tls_url.replace("/ca.crt", "/other-ca.crt", 1), "tls_jobs"):
                pass
        with pytest.raises(ConnectError, match="client certificate"):
            async with Worker(tls_url[: tls_url.index("&sslcert=")], "tls_jobs"):
                pass

    asyncio.run(asyncio.wait_for(go(), 60))
