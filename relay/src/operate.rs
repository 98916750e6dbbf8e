//! The operator commands: `queuebox inspect <message-id|source:key>` (a message's journey,
//! inbox row → outbox rows), `queuebox dead list|replay|delete` (dead rows by filter) and
//! `queuebox cancel inbox|outbox` (pending rows by id, key or aggregate), `queuebox
//! pause|resume source|destination|topic <name>` and `queuebox paused`.
//! The SQL lives in the store (`RelayStore::find_dead`, `journey`, …); an outbox replay is
//! the admin API's own `replay_outbox`, restricted to the listed dead rows.

use clap::{Args, Subcommand, ValueEnum};
use queuebox_core::backend::{self, DatabaseSettings};
use queuebox_core::store::relay::{
    CancelTarget, Cancelled, DeadFilter, DeadRow, DeadTable, Journey, JourneyRow, JourneyTarget,
    PauseKind, RelayStore, ReplayFilter,
};
use serde_json::json;
use uuid::Uuid;

/// How the commands reach the database (the same rules as `migrate`).
#[derive(Args)]
pub struct Database {
    /// Database URL; else $QUEUEBOX_DATABASE_URL, else the configuration's database.url
    #[arg(long)]
    database_url: Option<String>,
    /// Print JSON (for scripts) instead of a table
    #[arg(long)]
    json: bool,
}

#[derive(Subcommand)]
pub enum DeadCommand {
    /// List dead rows (newest first)
    List {
        #[command(flatten)]
        filter: FilterArgs,
    },
    /// Move dead rows back to pending with attempt 0 (outbox rows are delivered again,
    /// inbox rows forwarded or claimed again)
    Replay {
        #[command(flatten)]
        filter: FilterArgs,
        #[command(flatten)]
        change: ChangeArgs,
    },
    /// Delete dead rows
    Delete {
        #[command(flatten)]
        filter: FilterArgs,
        #[command(flatten)]
        change: ChangeArgs,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum Table {
    Inbox,
    Outbox,
}

#[derive(Args)]
pub struct FilterArgs {
    /// Which table's dead rows
    #[arg(long, value_enum, default_value = "outbox")]
    table: Table,
    /// Only rows of this source (outbox: the x-source header)
    #[arg(long)]
    source: Option<String>,
    /// Only outbox rows of this topic
    #[arg(long)]
    topic: Option<String>,
    /// At most this many rows (1..=10000)
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=10000))]
    limit: u32,
    /// Only rows created longer ago than this: 90s, 15m, 2h, 7d
    #[arg(long, value_name = "AGE", value_parser = parse_age)]
    older_than: Option<std::time::Duration>,
    #[command(flatten)]
    db: Database,
}

impl DeadCommand {
    /// Argument combinations clap cannot express: `--topic` filters outbox rows only, so with
    /// `--table inbox` it is a usage mistake (exit 2), not a failure found in the database.
    pub fn usage_error(&self) -> Option<String> {
        let (DeadCommand::List { filter }
        | DeadCommand::Replay { filter, .. }
        | DeadCommand::Delete { filter, .. }) = self;
        (matches!(filter.table, Table::Inbox) && filter.topic.is_some()).then(|| {
            "--topic filters outbox rows; it cannot be used with --table inbox (use --source)"
                .to_string()
        })
    }
}

/// A change needs the rows named (ids) or `--yes`, so a bare command changes nothing.
#[derive(Args)]
pub struct ChangeArgs {
    /// Only these rows (ids as `dead list` prints them)
    ids: Vec<Uuid>,
    /// Change every row the filters match (required when no ids are given)
    #[arg(long, required_unless_present = "ids")]
    yes: bool,
}

/// `queuebox cancel`: pending rows become `cancelled` (proto-docs/states.md); a row being
/// handled is left to finish and counted as in flight.
#[derive(Subcommand)]
pub enum CancelCommand {
    /// Cancel pending pull inbox rows: one by --id, or within --source by --key (idempotency
    /// key) or --aggregate (every pending row of the aggregate). Push rows are never cancelled
    #[command(group(clap::ArgGroup::new("which").required(true).multiple(false)))]
    Inbox {
        /// The inbox source (required with --key or --aggregate)
        #[arg(long, required_unless_present = "id")]
        source: Option<String>,
        /// An inbox row id
        #[arg(long, group = "which")]
        id: Option<Uuid>,
        /// An idempotency key of --source
        #[arg(long, group = "which")]
        key: Option<String>,
        /// An aggregate id of --source
        #[arg(long, group = "which")]
        aggregate: Option<String>,
        #[command(flatten)]
        db: Database,
    },
    /// Cancel pending outbox rows: one by --id, or every pending row of a --key (the
    /// ordering key), optionally of one --topic
    #[command(group(clap::ArgGroup::new("which").required(true).multiple(false)))]
    Outbox {
        /// Only rows of this topic
        #[arg(long)]
        topic: Option<String>,
        /// An outbox row id
        #[arg(long, group = "which")]
        id: Option<Uuid>,
        /// The outbox key
        #[arg(long, group = "which")]
        key: Option<String>,
        #[command(flatten)]
        db: Database,
    },
}

pub async fn cancel(cmd: CancelCommand, config: Option<&std::path::Path>) -> anyhow::Result<()> {
    let (target, db_args) = match cmd {
        CancelCommand::Inbox {
            source,
            id,
            key,
            aggregate,
            db,
        } => (CancelTarget::inbox(source, id, key, aggregate)?, db),
        CancelCommand::Outbox { topic, id, key, db } => (CancelTarget::outbox(topic, id, key)?, db),
    };
    let db = connect(&db_args, config).await?;
    let result = db.relay_store().cancel(&target).await;
    db.close().await;
    let r = result?;
    if db_args.json {
        println!("{}", serde_json::to_string(&r)?);
    } else {
        print_cancelled(&r);
    }
    Ok(())
}

fn print_cancelled(r: &Cancelled) {
    println!("cancelled {} row(s)", r.cancelled);
    if r.in_flight > 0 {
        println!(
            "{} row(s) in flight (being handled): not cancelled, they finish or fail normally",
            r.in_flight
        );
    }
    if r.finished > 0 {
        println!("{} row(s) already finished: unchanged", r.finished);
    }
    if r.push > 0 {
        println!(
            "{} push row(s): not cancelled (the relay forwards push rows, not workers)",
            r.push
        );
    }
    if *r == Cancelled::default() {
        println!("no row matches");
    }
}

/// What `queuebox pause` and `resume` name (docs/operations.md, "Pausing").
#[derive(Clone, Copy, ValueEnum)]
pub enum PauseWhat {
    /// An inbox source: a pull source's workers (every language) claim nothing of it, a push
    /// source's rows are not forwarded; its messages are still received and stored
    Source,
    /// An outbox destination: the rows of the topics routed to it stay pending
    Destination,
    /// One outbox topic, whatever its route
    Topic,
}

impl PauseWhat {
    fn kind(self) -> PauseKind {
        match self {
            PauseWhat::Source => PauseKind::Source,
            PauseWhat::Destination => PauseKind::Destination,
            PauseWhat::Topic => PauseKind::Topic,
        }
    }
}

/// `queuebox pause|resume <source|destination|topic> <name>`.
#[derive(Args)]
pub struct PauseArgs {
    #[arg(value_enum)]
    kind: PauseWhat,
    /// The source's, destination's or topic's name, as in the configuration
    name: String,
    #[command(flatten)]
    db: Database,
}

/// Pauses (`pause`) or resumes what `args` names, stored in the database: every relay
/// replica and every worker obeys within a second, without a restart. The name is checked
/// against the configuration (`--config`, $QUEUEBOX_CONFIG_FILE; not the packaged demo) and,
/// for a source, the inbox's rows (`paused::check_name`).
pub async fn pause(
    args: PauseArgs,
    pause: bool,
    config: Option<&std::path::Path>,
) -> anyhow::Result<()> {
    let cfg = match crate::load_with_origin(config)? {
        (_, queuebox_config::Origin::Packaged) => None,
        (cfg, _) => Some(cfg),
    };
    let db = connect(&args.db, config).await?;
    let kind = args.kind.kind();
    let result = crate::paused::set(
        cfg.as_ref(),
        db.relay_store().as_ref(),
        kind,
        &args.name,
        pause,
    )
    .await;
    db.close().await;
    let changed = result?;
    let (word, already) = if pause {
        ("paused", "was paused already")
    } else {
        ("resumed", "was not paused")
    };
    if args.db.json {
        println!(
            "{}",
            json!({ "kind": kind.as_str(), "name": args.name, word: changed })
        );
    } else if changed {
        println!("{word} {} '{}'", kind.as_str(), args.name);
    } else {
        println!("{} '{}' {already}", kind.as_str(), args.name);
    }
    Ok(())
}

/// `queuebox paused`: what is paused now.
pub async fn list_paused(
    db_args: Database,
    config: Option<&std::path::Path>,
) -> anyhow::Result<()> {
    let db = connect(&db_args, config).await?;
    let rows = db.relay_store().list_paused().await;
    db.close().await;
    let rows = rows?;
    if db_args.json {
        println!("{}", json!({ "paused": rows }));
        return Ok(());
    }
    println!("{:<12}  {:<40}  PAUSED SINCE", "KIND", "NAME");
    for p in &rows {
        println!(
            "{:<12}  {:<40}  {}",
            p.kind.as_str(),
            clip(&p.name, 40),
            p.paused_at.format("%Y-%m-%d %H:%M:%S")
        );
    }
    println!("({} paused)", rows.len());
    Ok(())
}

/// `90s`, `15m`, `2h`, `7d`.
fn parse_age(s: &str) -> Result<std::time::Duration, String> {
    let bad = || format!("`{s}` is not an age like 90s, 15m, 2h or 7d");
    let split = s.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
    let n: u64 = s[..split].parse().map_err(|_| bad())?;
    let unit = match &s[split..] {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86400,
        _ => return Err(bad()),
    };
    n.checked_mul(unit)
        .map(std::time::Duration::from_secs)
        .ok_or_else(bad)
}

/// `inspect`'s argument: a row id, else `source:key` (the key may hold colons).
pub fn parse_target(s: &str) -> Result<JourneyTarget, String> {
    if let Ok(id) = Uuid::parse_str(s) {
        return Ok(JourneyTarget::Id(id));
    }
    match s.split_once(':') {
        Some((source, key)) if !source.is_empty() && !key.is_empty() => {
            Ok(JourneyTarget::SourceKey {
                source: source.into(),
                key: key.into(),
            })
        }
        _ => Err(format!(
            "`{s}` is neither a message id (UUID) nor source:key"
        )),
    }
}

async fn connect(
    db: &Database,
    config: Option<&std::path::Path>,
) -> anyhow::Result<std::sync::Arc<dyn backend::Database>> {
    let settings = match db
        .database_url
        .clone()
        .or_else(|| std::env::var("QUEUEBOX_DATABASE_URL").ok())
    {
        Some(u) => DatabaseSettings::new(u),
        None => crate::load(config)?.database_settings(),
    };
    Ok(backend::connect(&settings.pool_size(2)).await?)
}

pub async fn dead(cmd: DeadCommand, config: Option<&std::path::Path>) -> anyhow::Result<()> {
    let (filter, change, verb) = match cmd {
        DeadCommand::List { filter } => (filter, None, "list"),
        DeadCommand::Replay { filter, change } => (filter, Some(change), "replay"),
        DeadCommand::Delete { filter, change } => (filter, Some(change), "delete"),
    };
    let db = connect(&filter.db, config).await?;
    let store = db.relay_store();
    let result = run_dead(store.as_ref(), &filter, change, verb).await;
    db.close().await;
    result
}

async fn run_dead(
    store: &dyn RelayStore,
    args: &FilterArgs,
    change: Option<ChangeArgs>,
    verb: &str,
) -> anyhow::Result<()> {
    let table = match args.table {
        Table::Inbox => DeadTable::Inbox,
        Table::Outbox => DeadTable::Outbox,
    };
    let filter = DeadFilter {
        table,
        ids: change
            .as_ref()
            .filter(|c| !c.ids.is_empty())
            .map(|c| c.ids.clone()),
        source: args.source.clone(),
        topic: args.topic.clone(),
        older_than: args.older_than,
        limit: args.limit,
    };
    let rows = store.find_dead(&filter).await?;
    if change.is_none() {
        if args.db.json {
            println!("{}", json!({ "rows": rows }));
        } else {
            print_dead(&rows);
        }
        return Ok(());
    }
    let ids: Vec<Uuid> = rows.iter().map(|r| r.id).collect();
    let changed = if ids.is_empty() {
        0
    } else {
        match (verb, table) {
            ("replay", DeadTable::Outbox) => {
                let f = ReplayFilter {
                    ids: Some(ids.clone()),
                    dead_only: true,
                    ..ReplayFilter::default()
                };
                store.replay_outbox(&f).await?
            }
            ("replay", DeadTable::Inbox) => store.requeue_dead_inbox(&ids).await?,
            _ => store.delete_dead(table, &ids).await?,
        }
    };
    let past = if verb == "replay" {
        "replayed"
    } else {
        "deleted"
    };
    if args.db.json {
        println!("{}", json!({ past: changed, "ids": ids }));
    } else {
        println!("{past} {changed} dead row(s)");
        for id in &ids {
            println!("  {id}");
        }
    }
    Ok(())
}

fn print_dead(rows: &[DeadRow]) {
    println!(
        "{:<36}  {:<24}  {:<20}  {:>7}  {:<20}  LAST ERROR",
        "ID", "TOPIC/SOURCE", "KEY", "ATTEMPT", "DEAD SINCE"
    );
    for r in rows {
        println!(
            "{:<36}  {:<24}  {:<20}  {:>7}  {:<20}  {}",
            r.id,
            clip(&r.topic_or_source, 24),
            clip(r.key.as_deref().unwrap_or("-"), 20),
            r.attempt,
            r.updated_at.format("%Y-%m-%d %H:%M:%S"),
            clip(r.last_error.as_deref().unwrap_or("-"), 80)
        );
    }
    println!("({} row(s))", rows.len());
}

fn clip(s: &str, max: usize) -> String {
    let one_line = s.replace('\n', " ");
    if one_line.chars().count() <= max {
        one_line
    } else {
        let cut: String = one_line.chars().take(max - 1).collect();
        format!("{cut}…")
    }
}

pub async fn inspect(
    target: JourneyTarget,
    db_args: Database,
    config: Option<&std::path::Path>,
) -> anyhow::Result<()> {
    let db = connect(&db_args, config).await?;
    let journey = db.relay_store().journey(&target).await;
    db.close().await;
    let journey = journey?;
    if journey.inbox.is_none() && journey.outbox.is_empty() {
        let what = match &target {
            JourneyTarget::Id(id) => id.to_string(),
            JourneyTarget::SourceKey { source, key } => format!("{source}:{key}"),
        };
        anyhow::bail!("No inbox or outbox row matches {what}");
    }
    if db_args.json {
        println!("{}", serde_json::to_string(&journey)?);
    } else {
        print_journey(&journey);
    }
    Ok(())
}

fn print_journey(j: &Journey) {
    let line = |table: &str, r: &JourneyRow| {
        println!(
            "{table:<6}  {}  {}  key={}  state={}  attempt={}  created={}  updated={}",
            r.id,
            r.topic_or_source,
            r.key.as_deref().unwrap_or("-"),
            r.state,
            r.attempt,
            r.created_at.format("%Y-%m-%d %H:%M:%S%.3f"),
            r.updated_at
                .map(|t| t.format("%Y-%m-%d %H:%M:%S%.3f").to_string())
                .unwrap_or_else(|| "-".into())
        );
        if let Some(e) = &r.last_error {
            println!("        last_error: {}", clip(e, 200));
        }
    };
    match &j.inbox {
        Some(r) => line("inbox", r),
        None => println!("inbox   (none: the row was published to the outbox directly)"),
    }
    if j.outbox.is_empty() {
        println!("  └─> outbox (no row yet)");
    }
    for r in &j.outbox {
        print!("  └─> ");
        line("outbox", r);
    }
}
