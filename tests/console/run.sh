#!/usr/bin/env bash
# The console's browser test: installs playwright-core (npm ci; the driver only, no bundled
# browser: it drives Debian's chromium) and runs console.test.mjs with node's test runner
# against the relay binary and the test PostgreSQL. Expects chromium, node, the built
# binary (QUEUEBOX_BIN, default target/debug/queuebox) and QUEUEBOX_TEST_DATABASE_URL;
# scripts/test.d/48-console.sh provides them. Screenshots: $QB_CONSOLE_OUT (default
# target/console-test/).
set -euo pipefail
if [ -n "${QUEUEBOX_BIN:-}" ]; then export QUEUEBOX_BIN="$(realpath "$QUEUEBOX_BIN")"; fi
cd "$(dirname "$0")"
: "${QUEUEBOX_TEST_DATABASE_URL:?set QUEUEBOX_TEST_DATABASE_URL (source scripts/postgres.sh start)}"
if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund --loglevel=error
fi
node --test --test-reporter=spec console.test.mjs
