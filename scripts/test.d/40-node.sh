#!/usr/bin/env bash
# Node.js / TypeScript client: installs Node (Debian) if missing, the npm dev dependencies
# (npm ci: @napi-rs/cli, typescript, and the drivers the application-transaction tests use,
# pg, knex, drizzle-orm, postgres (postgres.js), kysely and Prisma (prisma, @prisma/client,
# @prisma/adapter-pg: the tests generate a Prisma project's client, no engine binary), and the observability tests'
# prom-client and OpenTelemetry SDK, which the package itself only names as optional peers), builds the native addon from bindings/node with `napi build`,
# builds the ESM and CommonJS outputs, and runs `node --test` against the real PostgreSQL
# (each test file creates and migrates its own database), the worker's TLS test against a
# TLS-only PostgreSQL (scripts/postgres-tls.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
if ! command -v node >/dev/null 2>&1 || [ "$(node -p 'process.versions.node.split(".")[0]')" -lt 20 ] || ! command -v npm >/dev/null 2>&1; then
  echo "40-node: installing Node.js from Debian's packages"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq nodejs npm >/dev/null
fi
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"
cd clients/typescript
if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund --loglevel=error
fi
npm run --silent build
# delivery.test.mjs runs the relay binary (publish -> HTTP delivery); the same build as
# 32-csharp's, so a no-op after it.
cargo build --quiet -p queuebox --bin queuebox
export QUEUEBOX_BIN="$CARGO_TARGET_DIR/debug/queuebox"
# The worker's TLS test (test/worker-tls.test.mjs) needs a TLS-only PostgreSQL of its own.
export QB_PG_TLS_PORT="${QB_PG_TLS_PORT_NODE:-55438}"
trap "bash '$root/scripts/postgres-tls.sh' stop" EXIT
bash "$root/scripts/postgres-tls.sh" start
eval "$(bash "$root/scripts/postgres-tls.sh" env)"
npm test
