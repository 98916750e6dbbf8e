"""The paths a chaos run drives, one class each: how a message is sent and acknowledged, how
the relay is configured, and where a real receiver picks the delivery up.

| path            | acknowledgement            | relay config              | delivery seen by          |
|-----------------|----------------------------|---------------------------|---------------------------|
| `http`          | HTTP 202 / 200 duplicate   | http source → http dest   | `relay.HttpReceiver`      |
| `rabbit-kafka`  | RabbitMQ publisher confirm | rabbitmq source → kafka   | a Kafka consumer          |
| `kafka-nats`    | Kafka producer ack (all)   | kafka source → nats (JS)  | a JetStream consumer      |
| `nats-pull`     | JetStream publish ack      | nats source, pull rows    | tests/chaos/worker (Rust) |
| `publish-rabbit`| the application's COMMIT   | outbox → rabbitmq dest    | a RabbitMQ consumer       |

Each class has `setup()` (database, relay, receiver), `send(bodies)` (blocks until every
message is acknowledged or given up), `killables()` (what the killer may SIGKILL) and
`teardown()`. A path whose broker is not configured (`QUEUEBOX_TEST_*` unset) is *not run*.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import logging
import os
import random
import shutil
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import payloads
from relay import HttpReceiver, Relay, fresh_database

# Relay settings that make a crash heal fast: short leases (a killed relay's claims expire in
# CLAIM_MS), fast polling, enough attempts that a delivery refused during a kill is retried
# rather than dead-lettered.
CLAIM_MS = 2000

# librdkafka's own log lines (a connection refused every 50 ms while a broker restarts) are
# noise here: the ledger says what happened.
QUIET = logging.getLogger("chaos.librdkafka")
QUIET.addHandler(logging.NullHandler())
QUIET.propagate = False


def base_config(db_url: str) -> str:
    return f"""server:
  httpPort: {{port}}
  bindAddress: 127.0.0.1
  drainTimeoutMs: 1000
database:
  url: {db_url}
  connectionTimeoutMs: 2000
  startupTimeoutMs: 30000
outbox:
  pollIntervalMs: 20
  retryBaseDelayMs: 50
  claimTimeoutMs: {CLAIM_MS}
  maxAttempts: 50
  shutdownTimeoutMs: 1000
inbox:
  relay:
    pollIntervalMs: 20
    claimTimeoutMs: {CLAIM_MS}
"""


class Context:
    """What a path needs from the harness."""

    def __init__(self, *, ledger, binary, worker_binary, server_url, workdir, run, rng: random.Random, replicas=2, pg=None, nats=None, rabbit=None, kafka=None, rate=None, concurrency=8):
        self.ledger, self.binary, self.worker_binary, self.server_url, self.workdir = ledger, binary, worker_binary, server_url, workdir
        self.replicas = replicas
        self.pg = pg  # a PgCluster the faults may crash or pause, or None
        self.nats = nats  # a NatsServer the NATS pull paths use and the faults may restart, or None
        # ScriptBrokers (a RabbitMQ, a Kafka) of the run that the paths using them restart, or None
        self.rabbit, self.kafka = rabbit, kafka
        # Messages per second the senders keep to (--rate), or None: as fast as they can. The
        # faults strike at delivery counts, so a paced run spreads them over its traffic.
        self.rate = rate
        self.run, self.rng, self.concurrency = run, rng, concurrency


class ChaosPath:
    name = "?"
    optional = False  # True: a run that cannot do it (a client not built) skips it even with --require-all
    needs: tuple[str, ...] = ()  # environment variables naming the brokers it uses
    # Brokers that --broker-faults replaces with the run's own and restarts (Context attributes)
    own_brokers: tuple[str, ...] = ()
    # Variables of `needs` that the run's own brokers stand in for (set with --broker-faults)
    provided_by_run: frozenset[str] = frozenset()
    # With --broker-faults and no --rate: messages per second the sender keeps to, so that the
    # broker restart (struck at the first delivery thresholds) falls inside the traffic. Unpaced,
    # the relays had delivered all 500 messages before a restart took effect.
    broker_fault_rate: float | None = None
    http_bodies = False  # may a body be sent chunked?

    def __init__(self, ctx: Context):
        self.ctx = ctx
        self.db_url = ""
        self.relays: list[Relay] = []

    @classmethod
    def missing(cls) -> list[str]:
        return [v for v in cls.needs if not os.environ.get(v) and v not in ChaosPath.provided_by_run]

    def setup(self):
        raise NotImplementedError

    def send(self, bodies):
        raise NotImplementedError

    def killables(self) -> list:
        return list(self.relays) + self._own_brokers()

    def _own_brokers(self) -> list:
        """The run's own brokers this path uses (--broker-faults): restarted by the faults."""
        return [b for b in (getattr(self.ctx, k) for k in self.own_brokers) if b is not None]

    def _amqp_url(self) -> str:
        if self.ctx.rabbit:
            self.ctx.rabbit.wait_ready()
            return self.ctx.rabbit.amqp_url()
        return os.environ["QUEUEBOX_TEST_AMQP_URL"]

    def _kafka_brokers(self) -> str:
        if self.ctx.kafka:
            self.ctx.kafka.wait_ready()
            return self.ctx.kafka.bootstrap()
        return os.environ["QUEUEBOX_TEST_KAFKA_BROKERS"]

    def teardown(self):
        for r in self.relays:
            r.stop()

    def _due(self, n: int) -> float | None:
        """With --rate: when message `n` may be sent (epoch seconds; the clock starts at the
        first call), else None."""
        if not self.ctx.rate:
            return None
        if getattr(self, "_t0", None) is None:
            self._t0 = time.time()
        return self._t0 + n / self.ctx.rate

    def _pace(self, n: int):
        """With --rate, holds message `n` back until it is due."""
        due = self._due(n)
        if due is not None and due > time.time():
            time.sleep(due - time.time())

    def _relay(self, extra_yaml: str):
        """A fresh database and `ctx.replicas` relays on it, each on its own port."""
        self.db_url = fresh_database(self.ctx.server_url, self.name.replace("-", "_"))
        for i in range(self.ctx.replicas):
            r = Relay(self.ctx.binary, base_config(self.db_url) + extra_yaml, self.ctx.workdir, f"{self.name}-relay{i + 1}")
            r.start()
            self.relays.append(r)


def _retrying(ledger, body, try_once, give_up_s=90.0, deliberate_repeat=False):
    """Hands `body` over until acknowledged; `try_once()` returns an outcome string and
    whether it is an acknowledgement. Returns False if it gave up."""
    deadline = time.time() + give_up_s
    while time.time() < deadline:
        outcome, acked = try_once()
        ledger.attempt(body.n, outcome, deliberate_repeat)
        if acked:
            ledger.ack(body.n, outcome)
            return True
        if outcome.startswith("http:4"):
            return False  # a final answer: the sender must fix the request, retrying is pointless
        time.sleep(0.05 + random.random() * 0.15)
    return False


# ---------------------------------------------------------------- HTTP → push → HTTP
class HttpToHttp(ChaosPath):
    """A webhook sender POSTs to the relay and retries until it hears 202 (stored) or 200
    (already stored); the relay forwards to a local HTTP receiver that misbehaves on some
    first tries (500, a closed connection, an answer slower than the lease, a hang past the
    destination's 5 s timeout — see `HttpReceiver`). One message in ten is sent again after
    its acknowledgement, as senders do, and must be answered 200 duplicate."""

    name = "http"
    http_bodies = True

    def setup(self):
        self.receiver = HttpReceiver(self.ctx.ledger)
        self._relay(f"""destinations:
  rx:
    type: http
    baseUrl: {self.receiver.url()}
    path: /hooks
    timeoutMs: 5000
routes:
  - topicPattern: '**'
    destination: rx
sources:
  orders:
    path: /orders
    idempotencyKeyPath: $.id
    topic: orders
""")

    def killables(self):
        # With --pg-faults the database itself crashes (pg_ctl stop -m immediate, restart) or
        # freezes (every server process SIGSTOPped past the lease) too.
        return self.relays + ([self.ctx.pg] if self.ctx.pg else [])

    def _post(self, body) -> tuple[str, bool]:
        # Any replica, as a load balancer would pick; a dead or paused one costs a retry.
        conn = http.client.HTTPConnection("127.0.0.1", random.choice(self.relays).port, timeout=5)
        try:
            headers = {"Content-Type": "application/json", "X-Chaos-N": str(body.n)}
            # An iterator body makes http.client send Transfer-Encoding: chunked, piece by piece.
            conn.request("POST", "/inbox/orders", body=iter(body.chunks) if body.chunks else body.raw, headers=headers)
            r = conn.getresponse()
            r.read()
            return f"http:{r.status}", r.status in (200, 202)
        except (OSError, http.client.HTTPException) as e:
            return f"error:{type(e).__name__}", False
        finally:
            conn.close()

    def send(self, bodies):
        ledger = self.ctx.ledger
        repeat = {b.n for b in bodies if self.ctx.rng.random() < 0.1}

        def one(body):
            self._pace(body.n)
            ledger.sent(body)
            if _retrying(ledger, body, lambda: self._post(body)) and body.n in repeat:
                _retrying(ledger, body, lambda: self._post(body), deliberate_repeat=True)

        with ThreadPoolExecutor(self.ctx.concurrency) as pool:
            list(pool.map(one, bodies))

    def teardown(self):
        super().teardown()
        self.receiver.close()


# ---------------------------------------------------------------- RabbitMQ → push → Kafka
class RabbitToKafka(ChaosPath):
    """A RabbitMQ publisher with confirms (a message counts as acknowledged once the broker
    confirmed it) into a durable queue the relay consumes; the relay publishes to a Kafka
    topic that a Kafka consumer reads from the beginning."""

    name = "rabbit-kafka"
    broker_fault_rate = 25.0
    needs = ("QUEUEBOX_TEST_AMQP_URL", "QUEUEBOX_TEST_KAFKA_BROKERS")
    own_brokers = ("rabbit", "kafka")

    def setup(self):
        import pika
        from confluent_kafka.admin import AdminClient, NewTopic

        # With --broker-faults: the run's own RabbitMQ and Kafka, which the faults restart.
        self.amqp = self._amqp_url()
        self.kafka = self._kafka_brokers()
        self.queue = f"chaos-{self.ctx.run}"
        self.topic = f"chaos-{self.ctx.run}-out"
        with pika.BlockingConnection(pika.URLParameters(self.amqp)) as c:
            c.channel().queue_declare(self.queue, durable=True)
        admin = AdminClient({"bootstrap.servers": self.kafka})
        for f in admin.create_topics([NewTopic(self.topic, num_partitions=1, replication_factor=1)]).values():
            f.result(30)
        self.consumer = KafkaReader(self.kafka, self.topic, self.ctx.ledger)
        self._relay(f"""destinations:
  out:
    type: kafka
    bootstrapServers: {self.kafka}
    topic: {self.topic}
    timeoutMs: 5000
routes:
  - topicPattern: '**'
    destination: out
sources:
  orders:
    type: rabbitmq
    queueName: {self.queue}
    connectionUrl: {self.amqp}
    prefetchCount: 20
""")

    def send(self, bodies):
        # One connection per publisher thread: a confirm for a persistent message waits for
        # the broker's disk, so one publisher alone manages only a few messages a second.
        import pika

        ledger = self.ctx.ledger
        local = threading.local()
        opened = []

        def publish(body):
            try:
                if getattr(local, "conn", None) is None or local.conn.is_closed:
                    local.conn = pika.BlockingConnection(pika.URLParameters(self.amqp))
                    opened.append(local.conn)
                    local.ch = local.conn.channel()
                    local.ch.confirm_delivery()
                local.ch.basic_publish("", self.queue, body.raw, pika.BasicProperties(delivery_mode=2, content_type="application/json"), mandatory=True)
                return "confirm", True
            except Exception as e:  # nack, unroutable, connection lost: publish again
                local.conn = None
                return f"error:{type(e).__name__}", False

        def one(body):
            self._pace(body.n)
            ledger.sent(body)
            _retrying(ledger, body, lambda: publish(body))

        with ThreadPoolExecutor(self.ctx.concurrency) as pool:
            list(pool.map(one, bodies))
        for c in opened:
            # A connection whose broker a fault restarted after its last publish still says
            # is_open until it touches the socket; closing it then raises StreamLostError.
            # It is gone either way, and every publish on it was confirmed or retried.
            try:
                if c.is_open:
                    c.close()
            except (pika.exceptions.AMQPError, OSError):
                pass

    def teardown(self):
        super().teardown()
        self.consumer.close()
        import pika

        with pika.BlockingConnection(pika.URLParameters(self.amqp)) as c:
            c.channel().queue_delete(self.queue)


class KafkaReader:
    """Reads a topic's one partition from its beginning in a thread and records each record
    as a delivery.

    The partition is assigned, not subscribed to: a group member has to rejoin its group
    after a Kafka restart, and that rejoin once stalled past the drain window (seed 7: 166
    of the 505 records in the log read, none after the restart for 60 s). An assigned
    partition has no group to rejoin; librdkafka just fetches again from the next offset."""

    def __init__(self, brokers, topic, ledger):
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

        self.ledger, self.stop = ledger, threading.Event()
        self.c = Consumer({"bootstrap.servers": brokers, "group.id": f"{topic}-reader", "enable.auto.commit": False, "logger": QUIET})
        self.c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self):
        while not self.stop.is_set():
            m = self.c.poll(0.2)
            if m is None or m.error():
                continue
            record_delivery(self.ledger, m.value(), dict((k, v.decode("utf-8", "replace")) for k, v in (m.headers() or [])))

    def close(self):
        self.stop.set()
        self.thread.join(5)
        self.c.close()


def record_delivery(ledger, raw: bytes, headers: dict[str, str]):
    h = {k.lower(): v for k, v in headers.items()}
    try:
        dig, n = payloads.digest(raw), int(payloads.parse(raw)["n"])
    except Exception:
        dig, n = "not-json:" + raw[:60].decode("utf-8", "replace"), None
    ledger.delivery(n, h.get("x-idempotency-key"), dig, h.get("x-message-id"), True, raw)


# ---------------------------------------------------------------- Kafka → push → NATS
class NatsBox:
    """nats-py on an event loop of its own thread, so the harness's threads can call it."""

    def __init__(self, url):
        import nats

        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, daemon=True).start()
        async def quiet(_e):
            pass  # a broker restart (--broker-faults) is expected: nats-py reconnects by itself

        self.nc = self.call(nats.connect(url, max_reconnect_attempts=-1, error_cb=quiet))
        self.js = self.nc.jetstream()

    def call(self, coro, timeout=30):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self):
        try:
            self.call(self.nc.close(), 10)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)


class KafkaToNats(ChaosPath):
    """A Kafka producer with acks=all and idempotence (acknowledged on its delivery report)
    into a topic the relay consumes as a group; the relay publishes to a JetStream subject
    whose stream a JetStream consumer reads."""

    name = "kafka-nats"
    broker_fault_rate = 25.0
    needs = ("QUEUEBOX_TEST_KAFKA_BROKERS", "QUEUEBOX_TEST_NATS_URL")
    own_brokers = ("kafka",)

    def setup(self):
        from confluent_kafka.admin import AdminClient, NewTopic

        self.kafka = self._kafka_brokers()  # the run's own with --broker-faults
        self.topic = f"chaos-{self.ctx.run}-in"
        self.stream = f"CHAOS_{self.ctx.run}".replace("-", "_")
        self.subject = f"chaos.{self.ctx.run}.out"
        admin = AdminClient({"bootstrap.servers": self.kafka})
        for f in admin.create_topics([NewTopic(self.topic, num_partitions=3, replication_factor=1)]).values():
            f.result(30)
        # With --broker-faults the run's own NATS, not restarted on this path (its faults strike
        # Kafka and the relays; the NATS pull paths restart it).
        nats_url = self.ctx.nats.url() if self.ctx.nats else os.environ["QUEUEBOX_TEST_NATS_URL"]
        self.nats = NatsBox(nats_url)
        self.nats.call(self.nats.js.add_stream(name=self.stream, subjects=[self.subject]))

        async def on_msg(msg):
            record_delivery(self.ctx.ledger, msg.data, dict(msg.headers or {}))

        self.sub = self.nats.call(self.nats.js.subscribe(self.subject, cb=on_msg, ordered_consumer=True))
        self._relay(f"""destinations:
  out:
    type: nats
    servers: {nats_url}
    subject: {self.subject}
    timeoutMs: 5000
routes:
  - topicPattern: '**'
    destination: out
sources:
  orders:
    type: kafka
    bootstrapServers: {self.kafka}
    topics: [{self.topic}]
    groupId: chaos-{self.ctx.run}
    maxPollRecords: 50
""")

    def send(self, bodies):
        from confluent_kafka import Producer

        ledger = self.ctx.ledger
        p = Producer({"bootstrap.servers": self.kafka, "acks": "all", "enable.idempotence": True, "linger.ms": 5, "logger": QUIET})
        waiting = {}

        def report(err, msg, n):
            if err is None:
                ledger.attempt(n, "ack")
                ledger.ack(n, "ack")
                waiting.pop(n, None)
            else:
                ledger.attempt(n, f"error:{err.name()}")

        for attempt in range(5):
            todo = [b for b in bodies if b.n not in ledger.acked()]
            if not todo:
                break
            for b in todo:
                if attempt == 0:
                    self._pace(b.n)
                    ledger.sent(b)
                waiting[b.n] = b
                while True:
                    try:
                        p.produce(self.topic, b.raw, key=b.key.encode(), on_delivery=lambda err, msg, n=b.n: report(err, msg, n))
                        break
                    except BufferError:
                        p.poll(0.1)
                p.poll(0)
            # A restart of the run's Kafka (--broker-faults) holds reports back for its 5-15 s;
            # producing again what is merely in flight would only add source-side copies.
            deadline = time.time() + 120
            while len(p) and time.time() < deadline:
                p.flush(5)

    def teardown(self):
        super().teardown()
        try:
            self.nats.call(self.sub.unsubscribe(), 10)
            self.nats.call(self.nats.js.delete_stream(self.stream), 10)
        finally:
            self.nats.close()


# ---------------------------------------------------------------- NATS → pull worker
class Worker:
    """A pull worker as a child process (`command` + database URL, source, lease) whose stdout
    lines — one per handler call — are recorded as deliveries. Killable and restartable like
    a relay."""

    def __init__(self, command: list[str], name, db_url, source, ledger, workdir, lease_ms=CLAIM_MS):
        self.args = [*command, db_url, source, str(lease_ms)]
        self.ledger, self.name = ledger, name
        self.log = os.path.join(workdir, f"{name}.log")
        self.proc: subprocess.Popen | None = None

    @property
    def pid(self) -> int:
        return self.proc.pid if self.proc else -1

    def start(self):
        err = open(self.log, "a")
        self.proc = subprocess.Popen(self.args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err, env={**os.environ, "RUST_LOG": "warn"})
        err.close()
        threading.Thread(target=self._read, args=(self.proc.stdout,), daemon=True).start()

    def _read(self, out):
        for line in out:  # `{"id", "key", "attempt"}` TAB payload
            if not line.endswith(b"\n"):
                continue  # cut by a SIGKILL mid-write: that handler never returned, the row comes back
            meta, _, raw = line.rstrip(b"\n").partition(b"\t")
            try:
                call = json.loads(meta)
            except ValueError:
                continue  # a line cut by SIGKILL: the row was not completed and comes back
            record_delivery(self.ledger, raw, {"x-idempotency-key": call["key"], "x-message-id": call["id"]})

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self):
        if self.alive():
            self.proc.kill()
        if self.proc:
            self.proc.wait()

    def stop(self):
        if self.alive():
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.kill()

    def claims_lost(self):
        return None  # the worker has no /metrics; its lost claims are in its log


class NatsToPullWorker(ChaosPath):
    """A JetStream publisher (acknowledged on the stream's PubAck) into a stream the relay
    consumes with a durable consumer, storing pull rows; the Rust pull worker claims,
    handles and completes them. The killer SIGKILLs the relay or the worker."""

    name = "nats-pull"
    needs = ("QUEUEBOX_TEST_NATS_URL",)

    def worker_command(self) -> list[str]:
        return [self.ctx.worker_binary]

    def setup(self):
        # With --broker-faults: the run's own NATS server, which the faults restart.
        url = self.ctx.nats.url() if self.ctx.nats else os.environ["QUEUEBOX_TEST_NATS_URL"]
        self.stream = f"CHAOS_IN_{self.ctx.run}".replace("-", "_")
        self.subject = f"chaos.{self.ctx.run}.in"
        self.nats = NatsBox(url)
        self.nats.call(self.nats.js.add_stream(name=self.stream, subjects=[self.subject]))
        self._relay(f"""sources:
  orders:
    type: nats
    servers: {url}
    stream: {self.stream}
    durable: chaos-{self.ctx.run}
    consumption: pull
    ackWaitMs: 3000
    batchSize: 50
""")
        self.worker = Worker(self.worker_command(), f"{self.name}-worker", self.db_url, "orders", self.ctx.ledger, self.ctx.workdir)
        self.worker.start()

    def killables(self):
        return self.relays + [self.worker] + ([self.ctx.nats] if self.ctx.nats else [])

    def send(self, bodies):
        ledger = self.ctx.ledger

        def publish(body):
            try:
                self.nats.call(self.nats.js.publish(self.subject, body.raw, timeout=5), 10)
                return "puback", True
            except Exception as e:
                return f"error:{type(e).__name__}", False

        def one(body):
            self._pace(body.n)
            ledger.sent(body)
            _retrying(ledger, body, lambda: publish(body))

        with ThreadPoolExecutor(self.ctx.concurrency) as pool:
            list(pool.map(one, bodies))

    def teardown(self):
        self.worker.stop()
        super().teardown()
        try:
            self.nats.call(self.nats.js.delete_stream(self.stream), 10)
        finally:
            self.nats.close()


ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PYTHON_CLIENT = os.path.join(ROOT, ".venv", "python-client", "bin", "python")


class NatsToPythonWorker(NatsToPullWorker):
    """`nats-pull` with the Python client (queuebox_inbox over the Rust core) as the worker.
    Optional: it runs when scripts/test.d/41-python.sh has built the client into
    .venv/python-client, else it is reported NOT RUN (skipped, never passed)."""

    name = "nats-pull-python"
    optional = True

    @classmethod
    def missing(cls) -> list[str]:
        ok = os.path.exists(PYTHON_CLIENT) and subprocess.run([PYTHON_CLIENT, "-c", "import queuebox_inbox"], capture_output=True).returncode == 0
        return super().missing() + ([] if ok else ["queuebox_inbox in .venv/python-client (scripts/test.d/41-python.sh builds it)"])

    def worker_command(self) -> list[str]:
        return [PYTHON_CLIENT, os.path.join(os.path.dirname(os.path.abspath(__file__)), "workers", "python_worker.py")]


TS_CLIENT = os.path.join(ROOT, "clients", "typescript", "dist", "esm", "index.js")


class NatsToTypeScriptWorker(NatsToPullWorker):
    """`nats-pull` with the TypeScript client (@alternayte/queuebox-inbox over the Rust core,
    run by Node) as the worker. JavaScript reads JSON numbers as doubles, so deliveries are
    compared as doubles (ledger meta `numbers = doubles`); stored rows stay exact. Optional:
    runs when scripts/test.d/40-node.sh has built clients/typescript/dist, else NOT RUN."""

    name = "nats-pull-ts"
    optional = True

    @classmethod
    def missing(cls) -> list[str]:
        ok = os.path.exists(TS_CLIENT) and shutil.which("node") is not None
        return super().missing() + ([] if ok else ["node and clients/typescript/dist (scripts/test.d/40-node.sh builds it)"])

    def setup(self):
        self.ctx.ledger.meta(numbers="doubles")
        super().setup()

    def worker_command(self) -> list[str]:
        return ["node", os.path.join(os.path.dirname(os.path.abspath(__file__)), "workers", "ts_worker.mjs")]


GO_WORKER = os.environ.get("QB_CHAOS_GO_WORKER", os.path.join(ROOT, "target", "debug", "queuebox-chaos-worker-go"))


class NatsToGoWorker(NatsToPullWorker):
    """`nats-pull` with the Go client (clients/go, cgo over libqueuebox) as the worker
    (tests/chaos/workers/go). Optional: runs when scripts/test.d/45-chaos.sh could build it
    (Go and the C library present), else NOT RUN."""

    name = "nats-pull-go"
    optional = True

    @classmethod
    def missing(cls) -> list[str]:
        return super().missing() + ([] if os.access(GO_WORKER, os.X_OK) else [f"{GO_WORKER} (built by scripts/test.d/45-chaos.sh when Go and libqueuebox are there)"])

    def worker_command(self) -> list[str]:
        return [GO_WORKER]


CSHARP_WORKER = os.environ.get("QB_CHAOS_CSHARP_WORKER", os.path.join(ROOT, "target", "debug", "chaos-csharp", "queuebox-chaos-worker-csharp.exe"))


class NatsToCSharpWorker(NatsToPullWorker):
    """`nats-pull` with the C# client (QueueBox.Inbox, P/Invoke over libqueuebox, run by
    mono) as the worker (tests/chaos/workers/csharp). Optional: runs when
    scripts/test.d/45-chaos.sh could build it (mono's mcs and the C library present), else
    NOT RUN."""

    name = "nats-pull-csharp"
    optional = True

    @classmethod
    def missing(cls) -> list[str]:
        ok = os.path.exists(CSHARP_WORKER) and shutil.which("mono") is not None
        return super().missing() + ([] if ok else [f"mono and {CSHARP_WORKER} (built by scripts/test.d/45-chaos.sh when mcs and libqueuebox are there)"])

    def worker_command(self) -> list[str]:
        return ["mono", CSHARP_WORKER]


PUBLISHER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "workers", "python_publisher.py")


class PublishToRabbit(ChaosPath):
    """The application's side: `workers/python_publisher.py` (queuebox_inbox.publish on a
    psycopg 3 connection) writes each message in its own transaction with a business row; a
    message counts as acknowledged once its COMMIT returned. One message in ten is published
    and then rolled back and must never be delivered. The publisher is SIGKILLed once at a
    seeded point and restarted on the messages it had not begun; the one in flight is in
    doubt (delivered or not, both are right). Two relay replicas deliver the outbox to a
    RabbitMQ exchange whose bound queue a RabbitMQ consumer reads. Optional like the Python
    worker path: it needs the client built by scripts/test.d/41-python.sh."""

    name = "publish-rabbit"
    broker_fault_rate = 25.0
    optional = True
    needs = ("QUEUEBOX_TEST_AMQP_URL",)
    own_brokers = ("rabbit",)

    @classmethod
    def missing(cls) -> list[str]:
        ok = os.path.exists(PYTHON_CLIENT) and subprocess.run([PYTHON_CLIENT, "-c", "import queuebox_inbox, psycopg"], capture_output=True).returncode == 0
        return super().missing() + ([] if ok else ["queuebox_inbox and psycopg in .venv/python-client (scripts/test.d/41-python.sh builds it)"])

    def setup(self):
        import pika
        import psycopg

        self.amqp = self._amqp_url()  # the run's own with --broker-faults
        self.exchange = f"chaos-{self.ctx.run}-x"
        self.queue = f"chaos-{self.ctx.run}-out"
        with pika.BlockingConnection(pika.URLParameters(self.amqp)) as c:
            ch = c.channel()
            ch.exchange_declare(self.exchange, "topic", durable=True)
            ch.queue_declare(self.queue, durable=True)
            ch.queue_bind(self.queue, self.exchange, "#")
        # The row's max_attempts decides, not outbox.maxAttempts: the publisher gives its rows
        # 30 (the publish default of 5 lasts 1.5 s on the 50 ms schedule, which a RabbitMQ
        # restart outlasts; the relay then dead-letters them: proto-docs/states.md#outbox).
        self._relay(f"""destinations:
  bus:
    type: rabbitmq
    url: {self.amqp}
    exchange: {self.exchange}
routes:
  - topicPattern: '**'
    destination: bus
""")
        with psycopg.connect(self.db_url, autocommit=True) as c:
            c.execute("CREATE TABLE chaos_orders (n integer PRIMARY KEY, body text NOT NULL)")
        self.consumer = RabbitReader(self.amqp, self.queue, self.ctx.ledger)
        self.ctx.ledger.meta(source="outbox")  # no inbox rows to expect

    def send(self, bodies):
        ledger, rng = self.ctx.ledger, self.ctx.rng
        rollback = {b.n for b in bodies if rng.random() < 0.1}
        kill_after = rng.randrange(len(bodies) // 4, len(bodies) * 3 // 4)  # answers seen before the kill
        for b in bodies:
            ledger.sent(b)
        todo, answered, kills = list(bodies), 0, 0
        for life in range(3):  # the first life is killed; a later death is a harness problem
            if not todo:
                break
            spec = os.path.join(self.ctx.workdir, f"{self.name}-publisher{life}.jsonl")
            with open(spec, "w", encoding="utf-8") as f:
                for b in todo:
                    f.write(json.dumps({"n": b.n, "key": b.key, "raw": b.raw.decode("utf-8"), "rollback": b.n in rollback, "at": self._due(b.n)}) + "\n")
            err = open(os.path.join(self.ctx.workdir, f"{self.name}-publisher.log"), "a")
            proc = subprocess.Popen([PYTHON_CLIENT, PUBLISHER, self.db_url, spec, "chaos.orders"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err)
            err.close()
            begun, done = set(), set()
            for line in proc.stdout:
                if not line.endswith(b"\n"):
                    break  # cut by the SIGKILL
                what, n = line.decode().split()
                n = int(n)
                if what == "begin":
                    begun.add(n)
                    ledger.attempt(n, "begin")
                    continue
                done.add(n)
                ledger.attempt(n, what)
                if what == "acked":
                    ledger.ack(n, "commit")
                else:
                    ledger.rolled_back(n)
                answered += 1
                if kills == 0 and answered >= kill_after:
                    # Mid-run, between two lines: the next transaction may be anywhere.
                    time.sleep(rng.uniform(0, 0.005))
                    fault = ledger.kill(f"{self.name}-publisher", proc.pid)
                    proc.kill()
                    ledger.restarted(fault)
                    kills += 1
            code = proc.wait()
            for n in begun - done:
                ledger.in_doubt(n)  # its COMMIT may or may not have happened
            todo = [b for b in todo if b.n not in begun]
            if code != 0 and not (kills == 1 and life == 0):
                raise RuntimeError(f"the publisher exited with {code} (see {self.name}-publisher.log)")
        # The business rows committed with the publishes: one per acknowledged message, none
        # for a rolled-back one.
        import psycopg

        with psycopg.connect(self.db_url, autocommit=True) as c:
            rows = {n for (n,) in c.execute("SELECT n FROM chaos_orders")}
        acked = ledger.acked()
        if not acked <= rows or rows & rollback:
            raise RuntimeError(f"business rows disagree with the publishes: acknowledged without a row {sorted(acked - rows)[:5]}, rolled back with a row {sorted(rows & rollback)[:5]}")

    def teardown(self):
        super().teardown()
        self.consumer.close()
        import pika

        with pika.BlockingConnection(pika.URLParameters(self.amqp)) as c:
            ch = c.channel()
            ch.queue_delete(self.queue)
            ch.exchange_delete(self.exchange)


class RabbitReader:
    """Consumes a RabbitMQ queue in a thread (acking each message) and records each one as
    a delivery, with the outbox row id from the AMQP message id."""

    def __init__(self, url, queue, ledger):
        self.url, self.queue, self.ledger = url, queue, ledger
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self):
        import pika

        while not self.stop.is_set():
            try:
                with pika.BlockingConnection(pika.URLParameters(self.url)) as c:
                    ch = c.channel()
                    while not self.stop.is_set():
                        for method, props, body in ch.consume(self.queue, inactivity_timeout=0.2):
                            if method is None:
                                break
                            headers = {k: str(v) for k, v in (props.headers or {}).items()}
                            headers["x-message-id"] = props.message_id or ""
                            record_delivery(self.ledger, body, headers)
                            ch.basic_ack(method.delivery_tag)
                    ch.cancel()
            except (pika.exceptions.AMQPError, OSError):
                # The run's RabbitMQ restarted (--broker-faults): connect again; a message
                # recorded whose ack was lost comes back, a duplicate inside the fault's window.
                time.sleep(0.2)

    def close(self):
        self.stop.set()
        self.thread.join(10)


# In this order by default: the RabbitMQ and Kafka paths last, so that with --broker-faults the
# run's own RabbitMQ and Kafka (15-30 s to start) start while the first paths run.
PATHS = {p.name: p for p in (HttpToHttp, NatsToPullWorker, NatsToGoWorker, NatsToCSharpWorker, NatsToPythonWorker, NatsToTypeScriptWorker, RabbitToKafka, KafkaToNats, PublishToRabbit)}
