#!/usr/bin/env bash
# Python client: a venv under .venv/python-client (ignored) with maturin, builds the pyo3
# extension from bindings/python into clients/python with `maturin develop --extras test`
# (which also installs the package's `test` extra from PyPI: pytest and the drivers the
# application-transaction tests use: psycopg 3, SQLAlchemy 2, asyncpg), and runs pytest
# against the real PostgreSQL (the suite creates and migrates its own databases), and the
# worker against a TLS-only PostgreSQL (scripts/postgres-tls.sh, tests/test_worker_tls.py).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"
venv="$root/.venv/python-client"
if [ ! -x "$venv/bin/python" ]; then
  mkdir -p "$root/.venv"
  if ! python3 -m venv "$venv" 2>/dev/null; then
    echo "41-python: installing python3-venv from Debian's packages"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq python3-venv python3-pip >/dev/null
    rm -rf "$venv"; python3 -m venv "$venv"
  fi
fi
if ! "$venv/bin/python" -c "import pytest" 2>/dev/null || [ ! -x "$venv/bin/maturin" ]; then
  "$venv/bin/pip" install -q --disable-pip-version-check "maturin>=1.5,<2" pytest
fi
(cd clients/python && VIRTUAL_ENV="$venv" PATH="$venv/bin:$PATH" maturin develop --quiet --extras test)
# Fail here, clearly, if the build or the drivers did not install.
"$venv/bin/python" -c "import queuebox_inbox._native, psycopg, psycopg_pool, sqlalchemy.ext.asyncio, greenlet, asyncpg"
# tests/test_delivery.py runs the relay binary (publish -> HTTP delivery); the same build as
# 32-csharp's, so a no-op after it.
cargo build --quiet -p queuebox --bin queuebox
export QUEUEBOX_BIN="$CARGO_TARGET_DIR/debug/queuebox"
# tests/test_pgbouncer.py starts Debian's pgbouncer (session, transaction and statement mode)
# in front of the test PostgreSQL; without it that test fails saying NOT RUN.
if [ ! -x /usr/sbin/pgbouncer ] && ! command -v pgbouncer >/dev/null 2>&1; then
  echo "41-python: installing pgbouncer from Debian's packages"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq pgbouncer >/dev/null
fi
# The worker's TLS test (tests/test_worker_tls.py) needs a TLS-only PostgreSQL of its own.
export QB_PG_TLS_PORT="${QB_PG_TLS_PORT_PYTHON:-55437}"
trap "bash '$root/scripts/postgres-tls.sh' stop" EXIT
bash scripts/postgres-tls.sh start
eval "$(bash scripts/postgres-tls.sh env)"
cd clients/python
"$venv/bin/python" -m pytest -q
