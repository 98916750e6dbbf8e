#!/usr/bin/env bash
# SQL Server backend (queuebox-core feature `sqlserver`). No SQL Server runs here, so this part
# builds the backend, runs its unit tests (URL parsing, parameter binding and row decoding with
# tiberius types, the migration plan), the T-SQL syntax checks of every statement and migration
# (tests/sqlserver_syntax.rs, sqlparser's MsSqlDialect), and the backend-parameterised store
# contract suite (tests/store_contract.rs) on PostgreSQL; its SQL Server half (tests marked
# #[ignore]) runs when QUEUEBOX_TEST_MSSQL_URL names a server (e.g.
# sqlserver://sa:Passw0rd!@127.0.0.1:1433/master?trust_server_certificate=true): this script
# then passes --include-ignored. Without it cargo's summary counts them as ignored (not run).
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${QUEUEBOX_TEST_DATABASE_URL:?run through scripts/test.sh (it starts PostgreSQL)}"
cargo build -p queuebox-core --features sqlserver --quiet
# backend: the factory's SQL Server arm (database.username / database.password as the login).
cargo test -p queuebox-core --features sqlserver --quiet --lib -- store::sqlserver backend
cargo test -p queuebox-core --features sqlserver --quiet --test sqlserver_syntax
ignored=()
if [ -n "${QUEUEBOX_TEST_MSSQL_URL:-}" ]; then
  ignored=(--include-ignored)
else
  echo "11-sqlserver: QUEUEBOX_TEST_MSSQL_URL is not set; the SQL Server half of the store contract is NOT RUN (cargo counts it as ignored)"
fi
cargo test -p queuebox-core --features sqlserver --quiet --test store_contract -- --test-threads=4 "${ignored[@]}"
