#!/usr/bin/env bash
# The operator console (/console) in a real headless Chromium: installs Debian's chromium and
# Node.js if missing, builds the relay binary, then tests/console/run.sh drives the page
# against the real relay, the test PostgreSQL and a real HTTP receiver (dead rows, replay,
# delete, message view, cancel, pause and resume, escaping of attacker-controlled text, refusal
# without credentials).
# Screenshots of the three views land in target/console-test/.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=scripts/postgres.sh
source scripts/postgres.sh start  # a no-op when scripts/test.sh has started it
export QUEUEBOX_TEST_DATABASE_URL
missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v psql >/dev/null 2>&1 || missing+=(postgresql-client)
if ! command -v node >/dev/null 2>&1 || [ "$(node -p 'process.versions.node.split(".")[0]')" -lt 20 ] || ! command -v npm >/dev/null 2>&1; then
  missing+=(nodejs npm)
fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "48-console: installing ${missing[*]} from Debian's packages"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq "${missing[@]}" >/dev/null
fi
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
cargo build --quiet -p queuebox --bin queuebox  # the same build as 40-node's: a no-op after it
export QUEUEBOX_BIN="$CARGO_TARGET_DIR/debug/queuebox"
export QB_CONSOLE_OUT="$CARGO_TARGET_DIR/console-test"
bash tests/console/run.sh
