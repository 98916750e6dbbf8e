//! `queuebox`: the relay binary. For now it carries `queuebox migrate`; the relay itself
//! (sources, inbox relay, outbox relay, destinations) lives in the modules beside this file.

mod destinations;
mod metrics;
mod sources;

use clap::{Parser, Subcommand};
use queuebox_core::migrate;
use queuebox_core::store::postgres::PgStore;

#[derive(Parser)]
#[command(name = "queuebox", version, about = "QueueBox: a safe inbox and outbox in your own database")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Apply the database migrations (idempotent; safe from several replicas at once).
    Migrate {
        /// PostgreSQL URL, e.g. postgres://user:pass@localhost:5432/app
        #[arg(long, env = "QUEUEBOX_DATABASE_URL")]
        database_url: String,
    },
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt().with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into())).with_writer(std::io::stderr).init();
    let cli = Cli::parse();
    let result: anyhow::Result<()> = match cli.command {
        Command::Migrate { database_url } => async {
            let store = PgStore::connect(&database_url, 2).await?;
            let report = migrate::postgres::run(&store).await?;
            for m in &report.applied {
                println!("applied {m}");
            }
            println!("schema is at version {} ({} applied now, {} already applied)", migrate::latest_version(migrate::POSTGRES), report.applied.len(), report.already_applied.len());
            Ok(())
        }
        .await,
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("queuebox: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
