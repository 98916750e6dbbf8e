"""Publish → delivery end to end: a row published with psycopg in the application's
transaction reaches a real HTTP receiver through the real ``queuebox`` relay binary
(QUEUEBOX_BIN; 41-python.sh builds it) with X-Message-Id = the id publish returned; a
rolled-back publish is never delivered."""

import asyncio
import json
import os
import secrets
import socket
import subprocess
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import psycopg
import pytest

from conftest import _create, _drop, url_for
from queuebox_inbox import publish


@pytest.fixture
def database_url():
    """A database of its own: the relay delivers every pending row it finds."""
    name = f"qb_py_delivery_{secrets.token_hex(4)}"
    asyncio.run(_create(name, schema=True))
    yield url_for(name)
    asyncio.run(_drop(name))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait(check, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def test_a_committed_publish_is_delivered_with_its_id_and_a_rolled_back_one_never(database_url):
    binary = os.environ.get("QUEUEBOX_BIN")
    assert binary and Path(binary).exists(), f"NOT RUN: the queuebox binary is not built (QUEUEBOX_BIN={binary}; 41-python.sh builds it)"
    got = []

    class Receiver(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 (http.server's name)
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            got.append((self.headers["X-Message-Id"], self.headers["X-Message-Key"], self.headers["X-Topic"], json.loads(body)))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    receiver = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    with tempfile.TemporaryDirectory(prefix="qb-py-delivery-") as d:
        config = Path(d) / "queuebox.yaml"
        config.write_text(
            f"server:\n  httpPort: {free_port()}\n  bindAddress: 127.0.0.1\n  drainTimeoutMs: 2000\n"
            f"database:\n  url: {database_url}\n  startupTimeoutMs: 60000\n"
            "outbox:\n  pollIntervalMs: 20\n  retryBaseDelayMs: 50\n  claimTimeoutMs: 5000\n  maxAttempts: 2\n  shutdownTimeoutMs: 3000\n"
            f"destinations:\n  rx:\n    type: http\n    baseUrl: http://127.0.0.1:{receiver.server_address[1]}\n    path: /hooks\n    timeoutMs: 3000\n"
            "routes:\n  - topicPattern: '**'\n    destination: rx\n"
        )
        log = Path(d) / "relay.log"
        env = {k: v for k, v in os.environ.items() if not k.startswith("QUEUEBOX_")}
        env["RUST_LOG"] = "warn"
        with open(log, "wb") as out:
            relay = subprocess.Popen([binary, "--config", str(config), "run"], env=env, stdout=out, stderr=subprocess.STDOUT)
        try:
            with psycopg.connect(database_url) as conn:
                with conn.transaction(force_rollback=True):
                    rolled_back = publish(conn, "orders.rolled-back", {"n": 1})
                with conn.transaction():
                    committed = publish(conn, "orders.created", {"n": 2}, key="c-7")
            started = time.monotonic()
            wait(lambda: relay.poll() is not None or got, 30, "the committed row delivered")
            assert relay.poll() is None, f"the relay exited: {log.read_text()}"
            print(f"delivered {(time.monotonic() - started) * 1000:.0f} ms after the commit (relay poll interval 20 ms; informational)")

            def sent():
                with psycopg.connect(database_url, autocommit=True) as c:
                    return c.execute("SELECT state FROM outbox WHERE id = %s::uuid", (committed,)).fetchone() == ("sent",)

            wait(sent, 10, "the sent mark")
            time.sleep(0.5)  # a rolled-back row would be due as early as the committed one
            assert len(got) == 1, f"deliveries (the rolled-back publish {rolled_back} must never be sent): {got}"
            assert got[0] == (committed, "c-7", "orders.created", {"n": 2})
        finally:
            relay.terminate()
            relay.wait(10)
            receiver.shutdown()
            receiver.server_close()
