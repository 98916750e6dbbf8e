//! `queuebox`: the relay binary. `queuebox [--config FILE] [run]` starts the relay
//! (HTTP sources, inbox relay, outbox relay, retention, metrics, health, admin);
//! `check-config` prints the resolved configuration with secrets redacted; `migrate`
//! applies the database migrations; `inspect`, `dead list|replay|delete` and `cancel` are the
//! operator's look at one message, at dead rows and at pending rows (`operate`).

#![forbid(unsafe_code)]

mod admin;
mod app;
mod app_name;
mod batch_size;
mod destinations;
mod inbox_relay;
mod listener_tls;
mod liveness;
mod logging;
mod metrics;
mod operate;
mod outbox;
mod outbox_limits;
mod paused;
mod relay_loop;
mod relay_owner;
mod retention;
mod sources;
mod state;
mod telemetry;
mod transforms;
mod warn_limit;

use std::path::PathBuf;

use clap::{Parser, Subcommand};
use queuebox_config as config;
use queuebox_core::backend::{self, DatabaseSettings};

/// mimalloc instead of glibc's malloc: the relay allocates per message (rows, payloads,
/// headers, futures); an outbox drain to NATS spent 11 % less CPU per row with it
/// (benchmarks/outbox.md, "The allocator").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "queuebox",
    version,
    about = "QueueBox: a safe inbox and outbox in your own database"
)]
struct Cli {
    /// The YAML configuration file (else $QUEUEBOX_CONFIG_FILE).
    #[arg(long, global = true)]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Start the relay (the default).
    Run,
    /// Validate the configuration and print it resolved, secrets redacted.
    CheckConfig,
    /// Apply the database migrations (idempotent; safe from several replicas at once).
    Migrate {
        /// Database URL: postgres://user:pass@localhost:5432/app, jdbc:postgresql://…, or SQL Server
        /// (sqlserver://user:pass@host:1433/app, jdbc:sqlserver://…, ADO.NET Server=…;…); else the
        /// configuration's database.url
        #[arg(long)]
        database_url: Option<String>,
        /// For tables applied by hand (no migration history): record this version and every
        /// one before it as applied without running them, then apply the later ones. Refused,
        /// changing nothing, when the database has a history already
        #[arg(long, value_name = "VERSION")]
        baseline: Option<i32>,
    },
    /// Print a message's journey: its inbox row, then the outbox rows made from it (state,
    /// attempts, last error, timestamps).
    Inspect {
        /// An inbox or outbox row id, or SOURCE:IDEMPOTENCY_KEY
        #[arg(value_parser = operate::parse_target, value_name = "MESSAGE_ID|SOURCE:KEY")]
        target: queuebox_core::store::relay::JourneyTarget,
        #[command(flatten)]
        db: operate::Database,
    },
    /// List, replay or delete dead rows (replay and delete need ids or --yes).
    Dead {
        #[command(subcommand)]
        command: operate::DeadCommand,
    },
    /// Cancel pending or scheduled rows by id, key or aggregate (rows being handled finish
    /// normally and are counted as in flight).
    Cancel {
        #[command(subcommand)]
        command: operate::CancelCommand,
    },
    /// Pause a source (its workers or the inbox relay stop taking its rows), an outbox
    /// destination or an outbox topic, for every replica and worker within a second; new
    /// messages are still received and stored
    Pause {
        #[command(flatten)]
        args: operate::PauseArgs,
    },
    /// Resume what `pause` paused
    Resume {
        #[command(flatten)]
        args: operate::PauseArgs,
    },
    /// List what is paused
    Paused {
        #[command(flatten)]
        db: operate::Database,
    },
}

/// Exit code of a usage mistake (0 success, 1 failure, 2 usage: docs/migrations.md).
const USAGE: u8 = 2;

/// Parses the command line. An unknown argument prints "Unknown arguments: …" and the usage
/// text on stderr and exits 2; help, version and other mistakes are clap's own (also 2).
fn parse_cli() -> Result<Cli, std::process::ExitCode> {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    match Cli::try_parse() {
        Ok(Cli {
            command: Some(Command::Dead { command }),
            ..
        }) if command.usage_error().is_some() => {
            let mut cmd = <Cli as clap::CommandFactory>::command();
            let message = command.usage_error().unwrap_or_default();
            cmd.error(ErrorKind::ArgumentConflict, message).exit()
        }
        Ok(cli) => Ok(cli),
        Err(e)
            if matches!(
                e.kind(),
                ErrorKind::UnknownArgument | ErrorKind::InvalidSubcommand
            ) =>
        {
            let unknown = match e.get(ContextKind::InvalidArg) {
                Some(ContextValue::String(s)) => s.clone(),
                Some(ContextValue::Strings(v)) => v.join(" "),
                _ => String::new(),
            };
            let mut cmd = <Cli as clap::CommandFactory>::command();
            eprintln!("Unknown arguments: {unknown}\n\n{}", cmd.render_help());
            Err(std::process::ExitCode::from(USAGE))
        }
        Err(e) => e.exit(),
    }
}

fn load(path: Option<&std::path::Path>) -> anyhow::Result<config::Config> {
    load_with_origin(path).map(|(cfg, _)| cfg)
}

fn load_with_origin(
    path: Option<&std::path::Path>,
) -> anyhow::Result<(config::Config, config::Origin)> {
    config::load_with_origin(path)
        .map_err(|e| anyhow::anyhow!("QueueBox could not read its configuration. {e}"))
}

/// Says where the running configuration came from; the packaged demo at warn level, since a
/// production relay running it is almost always a missing file or variable.
fn log_origin(origin: &config::Origin) {
    match origin {
        config::Origin::File(p) => tracing::info!(file = %p.display(), "configuration loaded"),
        config::Origin::Environment => {
            tracing::info!("configuration loaded from QUEUEBOX_* variables (no file)")
        }
        config::Origin::Packaged => tracing::warn!(
            "no configuration file (--config, QUEUEBOX_CONFIG_FILE, {}) and no QUEUEBOX_* variable: running the packaged demo configuration (sources stripe and github); `queuebox check-config` prints it",
            config::DEFAULT_CONFIG_FILE
        ),
    }
}

/// A failed command's error with passwords masked, every line of it: a start-up or
/// configuration error lists one problem a line, and all of them are printed (`redact_error`
/// cuts one text at `MAX_ERROR_CHARS`, a bound meant for a row's `last_error`, so it is
/// applied to each line, not to the list).
fn fatal_text(text: &str) -> String {
    text.lines()
        .map(|l| queuebox_core::headers::redact_error(l, &[]))
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    // One rustls provider for every TLS client of the process (see queuebox_core::tls).
    queuebox_core::tls::install_provider();
    let cli = match parse_cli() {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    let command = cli.command.unwrap_or(Command::Run);
    // `run` reads its configuration before the subscriber exists, so `logging.format`
    // applies from the first record; the other commands follow QUEUEBOX_LOGGING_FORMAT.
    let run_config = match command {
        Command::Run => Some(load_with_origin(cli.config.as_deref())),
        _ => None,
    };
    let log_format = match &run_config {
        Some(Ok((c, _))) => c.logging.format,
        _ => logging::format_from_env(),
    };
    logging::init(log_format);
    let result: anyhow::Result<()> = match command {
        Command::Run => {
            let loaded = run_config.unwrap_or_else(|| load_with_origin(cli.config.as_deref()));
            async {
                let (cfg, origin) = loaded?;
                log_origin(&origin);
                // Off the runtime: the exporter's blocking HTTP client owns a thread of its own.
                let otlp = cfg.tracing.otlp.clone();
                let exporter =
                    tokio::task::spawn_blocking(move || telemetry::init(&otlp)).await??;
                let result = app::run(cfg).await;
                if let Some(e) = exporter {
                    let _ = tokio::task::spawn_blocking(move || e.shutdown()).await;
                }
                result
            }
            .await
        }
        Command::CheckConfig => {
            async {
                let cfg = load(cli.config.as_deref())?;
                // The start-up check of `run` (http.blockPrivateAddresses), so a destination
                // `run` would refuse is refused here too.
                destinations::address_guard::refuse_blocked(&cfg).await?;
                print!("{}", cfg.to_redacted_yaml());
                Ok(())
            }
            .await
        }
        Command::Migrate {
            database_url,
            baseline,
        } => {
            async {
                // QUEUEBOX_DATABASE_URL is database.url in the configuration's environment mapping.
                let settings =
                    match database_url.or_else(|| std::env::var("QUEUEBOX_DATABASE_URL").ok()) {
                        Some(u) => DatabaseSettings::new(u),
                        None => load(cli.config.as_deref())?.database_settings(),
                    };
                let db = backend::connect(&settings.pool_size(2)).await?;
                let report = match baseline {
                    Some(version) => db.migrate_from_baseline(version).await,
                    None => db.migrate().await,
                };
                db.close().await;
                let report = report.map_err(|e| anyhow::anyhow!("The migration failed. {e}"))?;
                for m in &report.applied {
                    println!("applied {m}");
                }
                println!(
                    "schema is at version {} ({} applied now, {} already applied)",
                    db.latest_version(),
                    report.applied.len(),
                    report.already_applied.len()
                );
                Ok(())
            }
            .await
        }
        Command::Inspect { target, db } => {
            operate::inspect(target, db, cli.config.as_deref()).await
        }
        Command::Dead { command } => operate::dead(command, cli.config.as_deref()).await,
        Command::Cancel { command } => operate::cancel(command, cli.config.as_deref()).await,
        Command::Pause { args } => operate::pause(args, true, cli.config.as_deref()).await,
        Command::Resume { args } => operate::pause(args, false, cli.config.as_deref()).await,
        Command::Paused { db } => operate::list_paused(db, cli.config.as_deref()).await,
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            logging::fatal(log_format, &fatal_text(&e.to_string()));
            std::process::ExitCode::FAILURE
        }
    }
}
