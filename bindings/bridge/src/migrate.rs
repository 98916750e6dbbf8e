//! The embedded migrations as every binding runs them.

use queuebox_core::backend::{self, DatabaseSettings};
use queuebox_core::migrate::MigrationReport;
use queuebox_core::Result;

/// Applies the embedded migrations to `database_url` (what `queuebox migrate` does), on the
/// backend the URL names (`queuebox_core::backend`: PostgreSQL, or SQL Server in a build with
/// the core `sqlserver` feature). The future is `Send`, so a binding may spawn it.
pub async fn migrate(database_url: String) -> Result<MigrationReport> {
    let db = backend::connect(&DatabaseSettings::new(database_url).pool_size(2)).await?;
    let report = db.migrate().await;
    db.close().await;
    report
}
