"""The real parts a chaos run drives: the `queuebox` binary, a PostgreSQL database of its own,
and a local HTTP receiver.

`Relay` runs the binary as a child process (`queuebox --config <file> run`), kills it with
SIGKILL and starts it again on the same port, and scrapes `/metrics`. `fresh_database()`
creates an empty database on the test server (the relay migrates it at start-up).
`HttpReceiver` is the far end of an HTTP destination: it records every request it gets in
the ledger and can refuse a few first tries with a 500, as a flaky real receiver would.
"""

from __future__ import annotations

import glob
import http.server
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
import uuid

import payloads


_handed_out: set[int] = set()


def free_port() -> int:
    """A port nothing listens on, never one this process handed out before: a port is free
    only until its server binds it, and a RabbitMQ and a Kafka of the run are given nine
    before either starts (the kernel once gave RabbitMQ's amqps port to Kafka's SASL_SSL)."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _handed_out:
            _handed_out.add(port)
            return port


def fresh_database(server_url: str, tag: str) -> str:
    """Creates database `qb_chaos_<tag>_<random>` on the server of `server_url`; returns its URL."""
    import psycopg

    name = f"qb_chaos_{tag}_{uuid.uuid4().hex[:8]}"
    base = server_url.rsplit("/", 1)[0]
    with psycopg.connect(f"{base}/postgres", autocommit=True) as c:
        c.execute(f"CREATE DATABASE {name}")
    return f"{base}/{name}"


def drop_database(url: str):
    import psycopg

    base, name = url.rsplit("/", 1)
    with psycopg.connect(f"{base}/postgres", autocommit=True) as c:
        c.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


class PgCluster:
    """A PostgreSQL cluster of the chaos run alone (scripts/postgres.sh on its own port and
    data directory), so that a fault can crash and restart "the database" without touching the
    shared test server. `kill()` is `pg_ctl stop -m immediate` — every backend dies at once,
    as in a crash — and `start()` recovers from the WAL. `pause()` SIGSTOPs the postmaster and
    then every process it forked (backends, WAL writer, checkpointer): the whole server freezes
    with its connections open, as a stalled disk or a VM pause would, and `resume()` SIGCONTs
    them. Commits are synchronous here (the script's default is off, which would make a crash
    forget acknowledged commits and blame QueueBox for it)."""

    first_faults = ("kill", "pause")  # each struck once before the random faults (chaos.Killer)

    def __init__(self, port: int, datadir: str):
        self.port, self.dir, self.name = port, datadir, "postgres"
        self.env = {**os.environ, "QB_PG_PORT": str(port), "QB_PG_DIR": datadir}
        root = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
        self.script = os.path.join(root, "scripts", "postgres.sh")
        self.bin = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda d: int(d.split("/")[-2]))[-1] if glob.glob("/usr/lib/postgresql/*/bin") else ""

    def url(self) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/queuebox"

    def _pg_ctl(self, *args):
        cmd = [os.path.join(self.bin, "pg_ctl"), "-D", self.dir, *args]
        if os.getuid() == 0:
            cmd = ["runuser", "-u", "postgres", "--"] + cmd
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def create(self):
        subprocess.run(["bash", self.script, "start"], env=self.env, check=True, stdout=subprocess.DEVNULL)
        self.bin = self.bin or sorted(glob.glob("/usr/lib/postgresql/*/bin"))[-1]
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as c:
            c.execute("ALTER SYSTEM SET synchronous_commit = on")
            c.execute("SELECT pg_reload_conf()")

    @property
    def pid(self) -> int:
        try:
            with open(os.path.join(self.dir, "postmaster.pid")) as f:
                return int(f.readline())
        except (OSError, ValueError):
            return -1

    def alive(self) -> bool:
        return self.pid > 0

    def kill(self):
        self._pg_ctl("-m", "immediate", "stop")

    def start(self):
        self._pg_ctl("-l", os.path.join(self.dir, "server.log"), "-w", "-t", "60", "start")

    def pause(self):
        # The postmaster first, so it forks no new backend while its children are listed.
        pm = self.pid
        os.kill(pm, signal.SIGSTOP)
        self._paused = [pm] + children(pm)
        for pid in self._paused[1:]:
            try:
                os.kill(pid, signal.SIGSTOP)
            except ProcessLookupError:
                pass

    def resume(self):
        for pid in reversed(getattr(self, "_paused", [])):
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
        self._paused = []

    def claims_lost(self):
        return None

    def stop(self):
        subprocess.run(["bash", self.script, "stop"], env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def destroy(self):
        subprocess.run(["bash", self.script, "stop"], env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        shutil.rmtree(self.dir, ignore_errors=True)


def children(pid: int) -> list[int]:
    """The processes whose parent is `pid` (from /proc)."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                # "pid (comm) state ppid ...": comm may hold spaces and parentheses.
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if ppid == pid:
            out.append(int(d))
    return out


class NatsServer:
    """A NATS server with JetStream of the chaos run alone (its own port and store directory),
    so that a fault can restart "the broker" without touching the shared one of
    scripts/brokers.sh that other tests use. `kill()` stops it the way an operator's restart
    does (SIGTERM: it finishes writing the stream files; a SIGKILL would also test NATS's own
    durability, which is not QueueBox's promise), and `start()` brings it back on the same
    port with the same store, so streams and durable consumers survive."""

    pausable = False  # restarts only: a SIGSTOPped broker looks like one that is restarting
    first_faults = ("kill",)  # struck once before the random faults (chaos.Killer)

    def __init__(self, port: int, store: str, workdir: str):
        self.port, self.store, self.name = port, store, "nats"
        self.log = os.path.join(workdir, "nats-server.log")
        self.proc: subprocess.Popen | None = None

    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        return self.proc.pid if self.proc else -1

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self, timeout: float = 30.0):
        exe = shutil.which("nats-server") or "/usr/sbin/nats-server"
        with open(self.log, "a") as log:
            self.proc = subprocess.Popen([exe, "-a", "127.0.0.1", "-p", str(self.port), "-js", "-sd", self.store],
                                         stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.time() + timeout
        while time.time() < deadline:
            with open(self.log, errors="replace") as f:
                # Each start appends "Server is ready"; count them against the starts so far.
                ready = f.read().count("Server is ready")
            self._starts = getattr(self, "_starts", 0)
            if ready > self._starts:
                self._starts = ready
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise RuntimeError(f"nats-server did not start on {self.port}; see {self.log}")

    def kill(self):
        if self.alive():
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def claims_lost(self):
        return None

    def stop(self):
        self.kill()


class ScriptBroker:
    """A RabbitMQ or a Kafka of the chaos run alone, started by scripts/brokers.sh — the same
    configuration as the shared test brokers — on ports and in a folder of its own
    (`QB_BROKERS_DIR`, `QB_AMQP_PORT`, `QB_KAFKA_PORT`, …), so that a fault can restart "the
    broker" without touching the shared one other tests use (as `NatsServer` does for NATS).
    `kill()` is `brokers.sh stop`, an operator's restart: `rabbitmqctl stop`, or SIGTERM to the
    Kafka JVM (a controlled shutdown). `start()` is `brokers.sh start` on the same ports and data,
    so durable queues, topics, committed offsets and consumer groups survive. Both brokers take
    5–15 s to start here, so the first start runs in the background (`start_async`; one broker
    after the other, so that two installs or JVM start-ups do not fight over the machine) while
    the run's earlier paths go on, and a path waits for it in its setup (`wait_ready`)."""

    pausable = False  # restarts only: a SIGSTOPped broker looks like one that is restarting
    first_faults = ("kill",)  # struck once before the random faults (chaos.Killer)
    slow = True  # drawn again among the random faults in the long profile only (chaos.Killer)
    PORTS = {
        "rabbitmq": ("QB_AMQP_PORT", "QB_AMQPS_PORT", "QB_RABBIT_DIST_PORT", "QB_EPMD_PORT"),
        "kafka": ("QB_KAFKA_PORT", "QB_KAFKA_CONTROLLER_PORT", "QB_KAFKA_SSL_PORT", "QB_KAFKA_SASL_SSL_PORT", "QB_KAFKA_SSL_OTHER_HOST_PORT"),
    }

    def __init__(self, kind: str, workdir: str):
        self.kind = self.name = kind
        self.dir = os.path.join(workdir, f"{kind}-broker")
        self.log = os.path.join(workdir, f"{kind}-broker.log")
        self.ports = {var: free_port() for var in self.PORTS[kind]}
        self.env = {**os.environ, "QB_BROKERS_DIR": self.dir, **{k: str(v) for k, v in self.ports.items()}}
        self.script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "brokers.sh")
        self._thread: threading.Thread | None = None
        self._error: Exception | None = None

    def amqp_url(self) -> str:
        return f"amqp://guest:guest@127.0.0.1:{self.ports['QB_AMQP_PORT']}/%2f"

    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.ports['QB_KAFKA_PORT']}"

    def _script(self, verb: str):
        with open(self.log, "a") as log:
            log.write(f"\n==== {verb} at {time.strftime('%H:%M:%S')}\n")
            log.flush()
            r = subprocess.run(["bash", self.script, verb, self.kind], env=self.env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        if r.returncode != 0:
            raise RuntimeError(f"scripts/brokers.sh {verb} {self.kind} failed ({r.returncode}); see {self.log}")

    def start(self):
        self._script("start")

    def start_async(self, after: "ScriptBroker | None" = None):
        before = after._thread if after else None

        def run():
            try:
                if before:
                    before.join()
                self.start()
            except Exception as e:
                self._error = e

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()

    def wait_ready(self, timeout: float = 300.0):
        if self._thread:
            self._thread.join(timeout)
            if self._thread.is_alive():
                raise RuntimeError(f"{self.kind} of the run did not start within {timeout}s; see {self.log}")
            self._thread = None
        if self._error:
            raise self._error

    @property
    def pid(self) -> int:
        try:
            with open(os.path.join(self.dir, self.kind, "server.pid")) as f:
                return int(f.read().strip())
        except (OSError, ValueError):
            return -1

    def alive(self) -> bool:
        pid = self.pid
        if pid <= 0:
            return False
        try:
            os.kill(pid, 0)
            return True
        except ProcessLookupError:
            return False

    def kill(self):
        self._script("stop")

    def claims_lost(self):
        return None

    def stop(self):
        if self._thread:
            self._thread.join(300)
        try:
            self._script("stop")
        except RuntimeError as e:
            print(f"chaos: {e}", file=sys.stderr)

    def destroy(self):
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


class RelayDied(RuntimeError):
    pass


class Relay:
    """One `queuebox run` process, restartable on the same port with the same config."""

    def __init__(self, binary: str, config_yaml: str, workdir: str, name: str = "relay"):
        self.binary, self.workdir, self.name = binary, workdir, name
        self.port = free_port()
        self.config_path = os.path.join(workdir, f"{name}.yml")
        with open(self.config_path, "w") as f:
            f.write(config_yaml.replace("{port}", str(self.port)))
        self.log_path = os.path.join(workdir, f"{name}.log")
        self.proc: subprocess.Popen | None = None
        self.starts = 0

    def url(self, path: str = "") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def start(self, timeout: float = 60.0):
        env = {k: v for k, v in os.environ.items() if not k.startswith("QUEUEBOX_")}
        env.setdefault("RUST_LOG", "warn")
        env["NO_COLOR"] = "1"
        log = open(self.log_path, "a")
        log.write(f"\n==== start {self.starts} at {time.strftime('%H:%M:%S')}\n")
        log.flush()
        self.proc = subprocess.Popen([self.binary, "--config", self.config_path, "run"], stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env)
        log.close()
        self.starts += 1
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RelayDied(f"{self.name} exited with {self.proc.returncode} at start-up; see {self.log_path}")
            try:
                with urllib.request.urlopen(self.url("/health/live"), timeout=1) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.05)
        raise RelayDied(f"{self.name} did not answer /health/live within {timeout}s; see {self.log_path}")

    @property
    def pid(self) -> int:
        return self.proc.pid if self.proc else -1

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self):
        """SIGKILL: no drain, no goodbye — what a crash or an OOM kill does."""
        if self.alive():
            os.kill(self.proc.pid, signal.SIGKILL)
        if self.proc:
            self.proc.wait()

    def stop(self, timeout: float = 15.0):
        """SIGTERM, the graceful stop; SIGKILL if it does not exit in time."""
        if not self.alive():
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()

    def metrics(self) -> dict[str, float]:
        """Every series of `/metrics`, by its full name with labels ({} if unreachable)."""
        try:
            with urllib.request.urlopen(self.url("/metrics"), timeout=2) as r:
                text = r.read().decode()
        except OSError:
            return {}
        out = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                series, _, value = line.rpartition(" ")
                try:
                    out[series] = float(value)
                except ValueError:
                    pass
        return out

    def claims_lost(self) -> dict[str, float] | None:
        """`queuebox_claims_lost_total` by component, or None when /metrics did not answer."""
        m = self.metrics()
        if not m:
            return None
        found = {}
        for series, v in m.items():
            hit = re.fullmatch(r'queuebox_claims_lost_total\{component="([^"]+)"\}', series)
            if hit:
                found[hit.group(1)] = v
        return found


class HttpReceiver:
    """A real HTTP endpoint for an HTTP destination, recording each request in the ledger.

    It misbehaves, on the first try of some messages only (by message number), as real
    receivers do:

    - n % 50 == 0: answers 500 (the relay retries);
    - n % 70 == 1: closes the connection without an answer;
    - n % 90 == 2: answers 200 only after `slow_s` — longer than the relay's lease, shorter than
      the destination's `timeoutMs` — so the relay must renew its claim while it waits, or
      another replica delivers the message again (a duplicate that only a counted lost claim
      may explain);
    - n % 150 == 3: hangs past the destination's `timeoutMs` (`hang_s`), then closes.

    (The residues make the four sets disjoint.)

    A refused, closed or hung try is recorded with `ok = 0`: it is not a delivery.
    `misbehave=False` answers 200 to everything.
    """

    def __init__(self, ledger, misbehave: bool = True, slow_s: float = 3.0, hang_s: float = 6.0):
        self.ledger, self.misbehave, self.slow_s, self.hang_s = ledger, misbehave, slow_s, hang_s
        self.tried: set[int] = set()
        self.lock = threading.Lock()
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                body = receiver._read_body(self)
                key = self.headers.get("x-idempotency-key")
                try:
                    dig = payloads.digest(body)
                    n = int(payloads.parse(body)["n"])
                except Exception:
                    dig, n = "not-json:" + body[:60].decode("utf-8", "replace"), None
                act = receiver._action(n)
                receiver.ledger.delivery(n, key, dig, self.headers.get("x-message-id"), act in ("ok", "slow"), body)
                if act in ("close", "hang"):
                    if act == "hang":
                        time.sleep(receiver.hang_s)
                    self.close_connection = True
                    return
                if act == "slow":
                    time.sleep(receiver.slow_s)
                self.send_response(500 if act == "500" else 200)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *a):
                pass

        class Server(http.server.ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request, client_address):
                # A relay SIGKILLed mid-request resets its connection: expected here, not news.
                if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
                    super().handle_error(request, client_address)

        self.server = Server(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def _action(self, n: int | None) -> str:
        if not self.misbehave or n is None:
            return "ok"
        with self.lock:
            first = n not in self.tried
            self.tried.add(n)
        if not first:
            return "ok"
        for every, residue, act in ((50, 0, "500"), (70, 1, "close"), (90, 2, "slow"), (150, 3, "hang")):
            if n % every == residue and n > 0:
                return act
        return "ok"

    @staticmethod
    def _read_body(h) -> bytes:
        if h.headers.get("transfer-encoding", "").lower() == "chunked":
            out = b""
            while True:
                size = int(h.rfile.readline().split(b";")[0], 16)
                if size == 0:
                    h.rfile.readline()
                    return out
                out += h.rfile.read(size)
                h.rfile.readline()
        return h.rfile.read(int(h.headers.get("content-length") or 0))

    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def close(self):
        self.server.shutdown()
        self.server.server_close()
