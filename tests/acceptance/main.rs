//! QueueBox's feature table (tests/acceptance/README.md) as a black-box acceptance suite.
//!
//! Every row of the table is one entry of [`rows::ALL`], numbered as in the table and named after the
//! behaviour. A row's test drives the real `queuebox` binary from outside only: its config
//! file or environment, HTTP, SQL on a real PostgreSQL database of its own, real brokers, a
//! real HTTP receiver. A row ends *passed*, *failed* (its test panicked or timed out) or *not
//! run* with the reason (a feature not built yet, a missing prerequisite such as the SQL
//! Server URL) — never passed without running.
//!
//! Modules: `rows` (the table and one module per area of it), `harness` (runs rows in
//! parallel, prints the table, checks README.md's copy of it) and `common` (the relay's
//! test helpers — receiver, relay child process, databases — shared, not copied).
//!
//! `cargo test -p queuebox-acceptance -- [row numbers]` runs all rows or the ones named;
//! scripts/test.d/25-acceptance.sh runs it in CI.

#[path = "../../relay/tests/common/mod.rs"]
mod common;
mod harness;
mod rows;

fn main() -> std::process::ExitCode {
    harness::main()
}
