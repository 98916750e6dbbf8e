//! `queuebox migrate` on SQL Server: chosen when the URL is `sqlserver://`, `mssql://`,
//! `jdbc:sqlserver://` or an ADO.NET connection string. Built in with the cargo feature
//! `sqlserver`; without it such a URL fails with a message saying how to build it in.

#[cfg(feature = "sqlserver")]
pub use queuebox_core::store::sqlserver::is_sqlserver_url;

#[cfg(not(feature = "sqlserver"))]
pub fn is_sqlserver_url(url: &str) -> bool {
    let lower = url.trim().to_ascii_lowercase();
    ["sqlserver://", "mssql://", "jdbc:sqlserver://", "server=", "data source="].iter().any(|p| lower.starts_with(p))
}

#[cfg(feature = "sqlserver")]
pub async fn run(url: &str) -> anyhow::Result<()> {
    use queuebox_core::migrate;
    let store = queuebox_core::store::sqlserver::SqlServerStore::connect(url, 2).await?;
    let report = migrate::sqlserver::run(&store).await?;
    for m in &report.applied {
        println!("applied {m}");
    }
    println!(
        "schema is at version {} ({} applied now, {} already applied)",
        migrate::latest_version(migrate::SQLSERVER),
        report.applied.len(),
        report.already_applied.len()
    );
    Ok(())
}

#[cfg(not(feature = "sqlserver"))]
pub async fn run(_url: &str) -> anyhow::Result<()> {
    anyhow::bail!("this queuebox was built without SQL Server support; build it with `cargo build -p queuebox --features sqlserver`")
}
