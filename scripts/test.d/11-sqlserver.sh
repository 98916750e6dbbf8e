#!/usr/bin/env bash
# SQL Server backend (queuebox-core feature `sqlserver`) against a live server. No SQL Server
# can run here; everything that needs none already ran in 10-rust, whose workspace build
# compiles the core with `sqlserver` (the relay's default features turn it on): the backend's
# unit tests (URL parsing, parameter binding and row decoding with tiberius types, the
# migration plan), the T-SQL syntax checks of every statement and migration
# (tests/sqlserver_syntax.rs, sqlparser's MsSqlDialect), and the PostgreSQL half of the store
# contract suite (tests/store_contract.rs). Its SQL Server half (modules `sqlserver` and
# `relay_sqlserver`, marked #[ignore], so cargo counts them as ignored) runs here when
# QUEUEBOX_TEST_MSSQL_URL names a server (e.g.
# sqlserver://sa:Passw0rd!@127.0.0.1:1433/master?trust_server_certificate=true). Without one
# this part exits 77, which scripts/test.sh reports as NOT RUN (not as passed).
# The cargo command selects the same packages as 10-rust's, so cargo resolves the same
# features and reuses its build instead of compiling the core a second time.
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${QUEUEBOX_TEST_DATABASE_URL:?run through scripts/test.sh (it starts PostgreSQL)}"
if [ -z "${QUEUEBOX_TEST_MSSQL_URL:-}" ]; then
  echo "11-sqlserver: NOT RUN: QUEUEBOX_TEST_MSSQL_URL is not set, so the SQL Server half of the store contract cannot run (its syntax checks and unit tests ran in 10-rust)"
  exit 77
fi
cargo test --workspace --exclude queuebox-acceptance --quiet --test store_contract -- \
  --include-ignored --test-threads=4 sqlserver::
