//! Schema migrations, embedded in the binary from `core/migrations/<backend>/` (inside this
//! crate, so `cargo package` ships them), applied in version order and recorded with a checksum
//! in `queuebox_schema_history`. Applying twice is a no-op; an edited released file fails,
//! unless its old checksum is listed in [`POSTGRES_SUPERSEDED`] (a file fixed after release).
//!
//! # In a transaction, or online
//!
//! A migration runs in its own transaction, with its history row, unless the **first line of
//! its file** is exactly
//!
//! ```sql
//! -- queuebox:no-transaction
//! ```
//!
//! ([`NO_TRANSACTION`]; PostgreSQL only). Such a migration is what `CREATE INDEX CONCURRENTLY`
//! and `DROP INDEX CONCURRENTLY` need: they cannot run in a transaction block, and they let the
//! application go on writing to the table while the index builds, where a plain `CREATE INDEX`
//! or `DROP INDEX` blocks every insert and update of the table until it commits. Use it for any
//! index on `inbox` or `outbox`, which may hold millions of rows; keep every other change (new
//! tables, functions, columns) in a normal migration, which is all or nothing.
//!
//! The runner splits the file into statements (on `;` outside quotes, dollar quotes and
//! comments) and sends them one at a time, each its own transaction; the history row is written
//! after the last one. A run that is interrupted (killed, cancelled, a lost connection) leaves
//! some statements done and the version unrecorded, so the next run starts the file again from
//! its first statement. Every statement must therefore be safe to run again:
//!
//! - `CREATE [UNIQUE] INDEX CONCURRENTLY IF NOT EXISTS <name> ON …`: before it runs, the runner
//!   looks for an index called `<name>` that an interrupted concurrent build left INVALID (it
//!   exists, is maintained by writes, and is never used by a query) and drops it
//!   (`DROP INDEX CONCURRENTLY`), so it is built again rather than skipped by `IF NOT EXISTS`;
//! - `DROP INDEX CONCURRENTLY IF EXISTS <name>`;
//! - `ALTER INDEX IF EXISTS <temporary> RENAME TO <name>`: to replace an index under the same
//!   name without a moment where queries lack it, build the new one under a temporary name,
//!   drop the old one, rename (PostgreSQL ≥ 12 renames an index without blocking writes);
//! - replacing a CHECK constraint on a large table (0014): `ALTER TABLE <t> DROP CONSTRAINT IF
//!   EXISTS <new>, ADD CONSTRAINT <new> CHECK (…) NOT VALID` (one statement: a half-done new
//!   constraint is dropped before it is added again; NOT VALID reads no row, so the table's
//!   lock lasts a moment), then `ALTER TABLE <t> VALIDATE CONSTRAINT <new>` (reads the rows
//!   while writes go on), then `ALTER TABLE <t> DROP CONSTRAINT IF EXISTS <old>` and
//!   `ALTER TABLE <t> RENAME CONSTRAINT <new> TO <old>` (a rename is re-runnable because the
//!   earlier statements of the file make `<new>` again on every run).
//!
//! The unit test `online_migrations_only_hold_statements_that_can_run_again` checks every file
//! with the marker against this list; extend the list there (and here) with a form you have
//! checked is re-runnable. Use plain (unquoted) index names. A concurrent build waits for every
//! transaction that could see the table before it started: a long-running application
//! transaction delays it (it never blocks writes meanwhile).
//!
//! # Modules
//!
//! [`catalog`] holds what every backend shares: the embedded files, the statement splitter and
//! the baseline rules. The runners live with their stores, beside the statements they send:
//! `store::postgres::migrate` and `store::sqlserver::migrate`, named here as [`postgres`] and
//! [`sqlserver`] (each behind its backend's cargo feature). They read the catalog; nothing here
//! but these two names reads them, so the dependency runs one way.

pub mod catalog;

pub use catalog::*;

#[cfg(feature = "postgres")]
pub mod postgres {
    //! The PostgreSQL migration runner (`queuebox migrate` with a `postgres://` URL).
    pub use crate::store::postgres::migrate::{current_version, run, run_to, run_with_baseline};
}

#[cfg(feature = "sqlserver")]
pub mod sqlserver {
    //! The SQL Server migration runner (`queuebox migrate` with a `sqlserver://` URL).
    pub use crate::store::sqlserver::migrate::{current_version, plan, run, run_with_baseline};
}
