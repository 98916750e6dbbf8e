#!/usr/bin/env bash
# Chaos ledger (tests/chaos/README.md): drives the real `queuebox` binary from outside with a
# real PostgreSQL and real brokers, SIGKILLs the relay at seeded moments, and checks the
# ledger: every acknowledged message delivered, every duplicate explained, no row stuck, no
# payload changed. The http path also crashes and pauses a PostgreSQL of the run's own
# (--pg-faults), and every broker path runs on brokers of the run's own (--broker-faults: a
# NATS server, a RabbitMQ and a Kafka on ports of the run, started by chaos.py through
# scripts/brokers.sh) which its faults restart: the shared cluster and brokers are never
# stopped, nor needed. Then the bounded fuzzer of the HTTP inbox endpoint. Numbered after the
# Node (40) and Python (41) parts, whose built clients its TypeScript and Python pull-worker
# paths and its application-publish path (publish-rabbit) use when present (reported NOT RUN
# otherwise).
# Short by default (500 messages, 3 kills per path); QB_CHAOS=long for 20,000 and 20 kills.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
venv="$root/.venv/chaos"
if [ ! -x "$venv/bin/python" ]; then
  mkdir -p "$root/.venv"
  if ! python3 -m venv "$venv" 2>/dev/null; then
    echo "45-chaos: installing python3-venv from Debian's packages"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq python3-venv python3-pip >/dev/null
    rm -rf "$venv"; python3 -m venv "$venv"
  fi
fi
if ! "$venv/bin/python" -c "import psycopg, pika, confluent_kafka, nats" 2>/dev/null; then
  "$venv/bin/pip" install -q --disable-pip-version-check -r tests/chaos/requirements.txt
fi
# The brokers' packages and Kafka's jars (the run starts its own brokers from them).
bash scripts/brokers.sh install
cargo build -p queuebox --bins --quiet
# The pull worker: a crate outside the workspace (tests/chaos/worker), built with the
# workspace's lock file and target directory so the compiled core is reused.
cp Cargo.lock tests/chaos/worker/Cargo.lock
CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}" cargo build --quiet --manifest-path tests/chaos/worker/Cargo.toml
export QB_CHAOS_WORKER="${CARGO_TARGET_DIR:-$root/target}/debug/queuebox-chaos-worker"
export QB_CHAOS_BINARY="${CARGO_TARGET_DIR:-$root/target}/debug/queuebox"
# The Go pull worker (optional path nats-pull-go): cgo over libqueuebox, when Go is there.
# Without it the path is reported NOT RUN, never passed.
debug="${CARGO_TARGET_DIR:-$root/target}/debug"
export QB_CHAOS_GO_WORKER="$debug/queuebox-chaos-worker-go"
rm -f "$QB_CHAOS_GO_WORKER"
[ -x /usr/local/go/bin/go ] && export PATH="/usr/local/go/bin:$PATH"
if command -v go >/dev/null 2>&1; then
  cargo build --quiet -p queuebox-c \
    && (cd tests/chaos/workers/go && CGO_ENABLED=1 CGO_LDFLAGS="-L$debug -Wl,-rpath,$debug" go build -o "$QB_CHAOS_GO_WORKER" .) \
    || echo "45-chaos: the Go worker did not build; path nats-pull-go will be NOT RUN" >&2
fi
# The C# pull worker (optional path nats-pull-csharp): QueueBox.Inbox built from source with
# mono's mcs (as 32-csharp does) and P/Invoke over libqueuebox. Without mono: NOT RUN.
cs_out="$debug/chaos-csharp"
export QB_CHAOS_CSHARP_WORKER="$cs_out/queuebox-chaos-worker-csharp.exe"
rm -f "$QB_CHAOS_CSHARP_WORKER"
if command -v mcs >/dev/null 2>&1 && command -v mono >/dev/null 2>&1; then
  mkdir -p "$cs_out"
  { cargo build --quiet -p queuebox-c \
    && mcs -nologo -target:library -r:System.Data.dll -out:"$cs_out/QueueBox.Inbox.dll" clients/csharp/src/QueueBox.Inbox/*.cs \
    && mcs -nologo -warnaserror+ -out:"$QB_CHAOS_CSHARP_WORKER" -r:"$cs_out/QueueBox.Inbox.dll" -r:Mono.Posix.dll -r:System.Data.dll \
         tests/chaos/workers/csharp/ChaosWorker.cs; } \
    || echo "45-chaos: the C# worker did not build; path nats-pull-csharp will be NOT RUN" >&2
fi
# mono finds libqueuebox.so (P/Invoke "queuebox") on the library path.
export LD_LIBRARY_PATH="$debug${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

# No shared broker: with --broker-faults every broker path runs on the run's own (a broker
# that cannot start fails its paths, and --require-all fails a path that cannot run).

status=0
# The checks themselves first: each broken promise, written by hand, is caught.
"$venv/bin/python" -m unittest tests/chaos/test_ledger.py || status=1
"$venv/bin/python" tests/chaos/chaos.py --require-all --pg-faults --broker-faults || status=1
# Numbers the relay once changed after a 202 (fixed by serde_json's arbitrary_precision): a
# regression test now.
"$venv/bin/python" tests/chaos/repro/number_payload.py || status=1
# The fuzzer of the HTTP inbox endpoint: bounded in requests and seconds.
"$venv/bin/python" tests/chaos/fuzz.py --requests "${QB_FUZZ_REQUESTS:-1500}" --seconds "${QB_FUZZ_SECONDS:-60}" || status=1
exit $status
