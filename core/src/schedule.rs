//! Periodic schedules: a cron expression in a time zone, or a fixed interval, that enqueues
//! one pull row per tick. The relay (`schedules:` in its configuration) and every worker
//! (`WorkerOptions::schedule`) run this one module, so they agree on every tick.
//!
//! **Exactly one row per tick, however many processes run.** Every process computes the same
//! ticks from the schedule alone (cron ticks from the expression and its zone; interval ticks
//! are multiples of the interval counted from the Unix epoch, not from a process's start), and
//! the tick's scheduled time is in the row's idempotency key,
//! `schedule:<name>:<tick as RFC 3339 UTC with milliseconds>`. The enqueue is the core's one
//! enqueue statement (`app_tx::enqueue_statement_native`), so the database's unique
//! `(source, idempotency_key)` turns every process's enqueue of a tick but the first into a
//! duplicate that inserts nothing. No lock, no leader, no clock agreement beyond the tick
//! itself: a process whose clock is a little late enqueues a tick a little late, or finds it
//! stored already.
//!
//! **Missed ticks** (while no process ran the schedule, or one was suspended): never a flood.
//! At start, and whenever a running process finds itself more than [`MAX_CATCH_UP`] ticks
//! behind, the schedule's [`Missed`] policy decides: `latest` (the default) enqueues the most
//! recent tick at or before now, once (a duplicate if another process stored it), and drops
//! the older ones; `skip` enqueues nothing until the next tick. A process that is merely a few
//! ticks late (a slow enqueue, a database blip) enqueues each of them in order, so a running
//! schedule loses none.
//!
//! **Time zones and daylight saving** are the cron crate's (`croner`, which follows the Open
//! Cron Pattern Specification): a wall-clock time skipped by a spring-forward runs at the
//! first instant after the gap; a wall-clock time repeated by a fall-back runs once, at its
//! first occurrence, while patterns that fire every hour or more often keep firing through
//! both halves of the repeated hour (they measure elapsed time, not wall time).

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, TimeZone, Utc};
use chrono_tz::Tz;
use croner::Cron;
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use crate::app_tx::{enqueue_statement_native, EnqueueMessage};
use crate::error::{Error, Result};
use crate::store::{Backend, SqlValue, Store};

/// A running process that is more than this many ticks behind applies the missed-ticks
/// policy instead of enqueueing each tick (a laptop woken after a day on a one-second
/// schedule must not enqueue 86,400 rows).
pub const MAX_CATCH_UP: u64 = 10;

/// The shortest interval: below it the enqueue statement itself would be most of the period.
pub const MIN_INTERVAL: Duration = Duration::from_millis(100);

/// The longest interval, 3,650 days: tick times are milliseconds since the epoch in an `i64`,
/// and a far longer interval would overflow them into a schedule that never ticks, silently.
/// Calendar periods (monthly, yearly) are `cron`'s.
pub const MAX_INTERVAL: Duration = Duration::from_secs(3650 * 24 * 3600);

/// The longest schedule name: the key `schedule:<name>:<tick>` must fit the 255-character key.
pub const MAX_NAME_CHARS: usize = 200;

/// What to do with ticks that passed while nothing ran the schedule.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Missed {
    /// Enqueue the most recent missed tick once; drop the older ones.
    #[default]
    Latest,
    /// Enqueue none; wait for the next tick.
    Skip,
}

impl FromStr for Missed {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "latest" => Ok(Missed::Latest),
            "skip" => Ok(Missed::Skip),
            other => Err(format!(
                "`{other}` is not a missed-ticks policy (latest or skip)"
            )),
        }
    }
}

/// When a schedule ticks.
#[derive(Debug, Clone, PartialEq)]
pub enum Timing {
    /// A cron expression (five fields, or six with seconds first) read in a time zone.
    Cron { cron: Box<Cron>, zone: Tz },
    /// Every `Duration`, at the multiples of it since the Unix epoch.
    Every(Duration),
}

impl Timing {
    /// Parses `expression` in the IANA zone `zone` (`UTC` when `None`). Errors name `at`
    /// (`schedules[2].cron`, `schedules[2].timeZone`).
    pub fn cron(expression: &str, zone: Option<&str>, at: &str) -> Result<Timing> {
        let cron = Cron::from_str(expression.trim()).map_err(|e| Error::Config {
            path: format!("{at}.cron"),
            reason: format!("`{expression}` is not a cron expression: {e}"),
        })?;
        let zone = match zone {
            None => Tz::UTC,
            Some(z) => z.trim().parse::<Tz>().map_err(|_| Error::Config {
                path: format!("{at}.timeZone"),
                reason: format!(
                    "`{z}` is not an IANA time zone name (such as Europe/Paris or UTC)"
                ),
            })?,
        };
        Ok(Timing::Cron {
            cron: Box::new(cron),
            zone,
        })
    }

    /// A fixed interval between [`MIN_INTERVAL`] and [`MAX_INTERVAL`]; errors name
    /// `{at}.every` (the Rust, Go, C# and Python field).
    pub fn every(interval: Duration, at: &str) -> Result<Timing> {
        Timing::every_at_field(interval, &format!("{at}.every"))
    }

    /// [`Timing::every`] for a caller whose field has another name (the relay's YAML and the
    /// TypeScript options call it `everyMs`): errors name `field`, the whole path.
    pub fn every_at_field(interval: Duration, field: &str) -> Result<Timing> {
        if interval > MAX_INTERVAL {
            return Err(Error::Config {
                path: field.to_string(),
                reason: format!(
                    "{} ms is longer than the longest interval, {} ms (3,650 days; use `cron` for calendar dates)",
                    interval.as_millis(),
                    MAX_INTERVAL.as_millis()
                ),
            });
        }
        if interval < MIN_INTERVAL {
            return Err(Error::Config {
                path: field.to_string(),
                reason: format!(
                    "{} ms is shorter than the shortest interval, {} ms",
                    interval.as_millis(),
                    MIN_INTERVAL.as_millis()
                ),
            });
        }
        Ok(Timing::Every(interval))
    }

    /// The first tick strictly after `t`.
    pub fn next_after(&self, t: DateTime<Utc>) -> Option<DateTime<Utc>> {
        match self {
            Timing::Cron { cron, zone } => cron
                .find_next_occurrence(&t.with_timezone(zone), false)
                .ok()
                .map(|d| d.with_timezone(&Utc)),
            Timing::Every(d) => {
                let p = d.as_millis() as i64;
                let n = t.timestamp_millis().div_euclid(p) + 1;
                Utc.timestamp_millis_opt(n * p).single()
            }
        }
    }

    /// The latest tick at or before `t`.
    pub fn latest_at(&self, t: DateTime<Utc>) -> Option<DateTime<Utc>> {
        match self {
            Timing::Cron { cron, zone } => cron
                .find_previous_occurrence(&t.with_timezone(zone), true)
                .ok()
                .map(|d| d.with_timezone(&Utc)),
            Timing::Every(d) => {
                let p = d.as_millis() as i64;
                Utc.timestamp_millis_opt(t.timestamp_millis().div_euclid(p) * p)
                    .single()
            }
        }
    }
}

/// One schedule: its name (unique: it is in every row's key), when it ticks, and the pull row
/// each tick enqueues.
#[derive(Debug, Clone, PartialEq)]
pub struct Schedule {
    pub name: String,
    pub timing: Timing,
    /// The pull source whose workers claim the rows.
    pub source: String,
    pub payload: Value,
    pub priority: i16,
    pub headers: Map<String, Value>,
    pub missed: Missed,
}

impl Schedule {
    /// A schedule with priority 0, no headers and the default missed-ticks policy; `validate`
    /// before running it.
    pub fn new(
        name: impl Into<String>,
        timing: Timing,
        source: impl Into<String>,
        payload: Value,
    ) -> Self {
        Schedule {
            name: name.into(),
            timing,
            source: source.into(),
            payload,
            priority: 0,
            headers: Map::new(),
            missed: Missed::default(),
        }
    }

    /// Checks the name and the row a tick would enqueue (the enqueue's own validation, so a
    /// bad source or payload is refused at start, not at the first tick). Errors name `at`.
    pub fn validate(&self, at: &str) -> Result<()> {
        let name = self.name.trim();
        if name.is_empty()
            || name.chars().count() > MAX_NAME_CHARS
            || name.chars().any(char::is_control)
        {
            return Err(Error::Config {
                path: format!("{at}.name"),
                reason: format!(
                    "a schedule needs a name of 1 to {MAX_NAME_CHARS} characters without control characters"
                ),
            });
        }
        let sample = self.message(Utc::now());
        // The enqueue's errors start with the field's path (`schedules[1].payload is …`):
        // kept as the path of a configuration error.
        sample.validate(at).map_err(|e| match e {
            Error::InvalidInput(reason) => match reason.split_once(' ') {
                Some((path, rest)) if path.starts_with(at) => Error::Config {
                    path: path.to_string(),
                    reason: rest.to_string(),
                },
                _ => Error::Config {
                    path: at.to_string(),
                    reason,
                },
            },
            other => other,
        })
    }

    /// The idempotency key of `tick`'s row: the same in every process.
    pub fn key(&self, tick: DateTime<Utc>) -> String {
        format!(
            "schedule:{}:{}",
            self.name.trim(),
            tick.to_rfc3339_opts(SecondsFormat::Millis, true)
        )
    }

    /// The pull row `tick` enqueues.
    pub fn message(&self, tick: DateTime<Utc>) -> EnqueueMessage {
        let mut m = EnqueueMessage::new(self.source.clone(), self.payload.clone())
            .idempotency_key(self.key(tick))
            .priority(self.priority);
        m.headers = self.headers.clone();
        m
    }

    /// Which ticks to enqueue now, given the last tick this process handled (`None` at
    /// start) and the time: each tick after `last` up to `now` when at most [`MAX_CATCH_UP`]
    /// of them, otherwise the missed-ticks policy (the latest, or none).
    pub fn due(&self, last: Option<DateTime<Utc>>, now: DateTime<Utc>) -> Vec<DateTime<Utc>> {
        let by_policy = || match self.missed {
            Missed::Latest => self.timing.latest_at(now).into_iter().collect(),
            Missed::Skip => Vec::new(),
        };
        let Some(last) = last else {
            return by_policy();
        };
        let mut out = Vec::new();
        let mut t = last;
        while let Some(next) = self.timing.next_after(t) {
            if next > now {
                break;
            }
            if out.len() as u64 == MAX_CATCH_UP {
                return by_policy();
            }
            out.push(next);
            t = next;
        }
        out
    }
}

impl Schedule {
    /// A schedule from the JSON object every language's worker options carry, with the keys
    /// of the relay's `schedules[<n>]`: `name`, `source`, `cron` or `everyMs`, `timeZone`,
    /// `payload`, `priority`, `headers` (strings), `missed` (`latest` or `skip`). Errors name
    /// the key under `at`; the result is validated.
    pub fn from_json(v: &Value, at: &str) -> Result<Schedule> {
        let bad = |key: &str, reason: &str| Error::Config {
            path: format!("{at}.{key}"),
            reason: reason.to_string(),
        };
        let obj = v.as_object().ok_or_else(|| Error::Config {
            path: at.to_string(),
            reason: "must be an object".into(),
        })?;
        let text = |key: &str| -> Result<Option<String>> {
            match obj.get(key) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(s)) => Ok(Some(s.clone())),
                Some(_) => Err(bad(key, "must be a string")),
            }
        };
        for key in obj.keys() {
            if !matches!(
                key.as_str(),
                "name"
                    | "source"
                    | "cron"
                    | "everyMs"
                    | "timeZone"
                    | "payload"
                    | "priority"
                    | "headers"
                    | "missed"
            ) {
                return Err(bad(key, "is not a schedule option"));
            }
        }
        let zone = text("timeZone")?;
        let timing = match (text("cron")?, obj.get("everyMs").filter(|v| !v.is_null())) {
            (Some(c), None) => Timing::cron(&c, zone.as_deref(), at)?,
            (None, Some(ms)) => {
                if zone.is_some() {
                    return Err(bad(
                        "timeZone",
                        "applies to `cron` only (an interval is the same in every zone)",
                    ));
                }
                let ms = ms
                    .as_u64()
                    .ok_or_else(|| bad("everyMs", "must be a whole number of milliseconds"))?;
                Timing::every(Duration::from_millis(ms), at)?
            }
            _ => {
                return Err(Error::Config {
                    path: at.to_string(),
                    reason: "set exactly one of `cron` and `everyMs`".into(),
                })
            }
        };
        let mut s = Schedule::new(
            text("name")?.unwrap_or_default(),
            timing,
            text("source")?.unwrap_or_default(),
            obj.get("payload").cloned().unwrap_or(Value::Null),
        );
        if let Some(p) = obj.get("priority").filter(|v| !v.is_null()) {
            s.priority = p
                .as_i64()
                .and_then(|p| i16::try_from(p).ok())
                .ok_or_else(|| bad("priority", "must be a whole number from -32767 to 32767"))?;
        }
        match obj.get("headers") {
            None | Some(Value::Null) => {}
            Some(Value::Object(h)) => {
                if h.values().any(|v| !v.is_string()) {
                    return Err(bad("headers", "values must be strings"));
                }
                s.headers = h.clone();
            }
            Some(_) => return Err(bad("headers", "must be an object of strings")),
        }
        if let Some(m) = text("missed")? {
            s.missed = m.parse().map_err(|e: String| bad("missed", &e))?;
        }
        s.validate(at)?;
        Ok(s)
    }

    /// The JSON object [`Schedule::from_json`] reads back as this schedule.
    pub fn to_json(&self) -> Value {
        let mut o = Map::new();
        o.insert("name".into(), self.name.clone().into());
        o.insert("source".into(), self.source.clone().into());
        match &self.timing {
            Timing::Cron { cron, zone } => {
                o.insert("cron".into(), cron.as_str().into());
                o.insert("timeZone".into(), zone.name().into());
            }
            Timing::Every(d) => {
                o.insert("everyMs".into(), (d.as_millis() as u64).into());
            }
        }
        o.insert("payload".into(), self.payload.clone());
        o.insert("priority".into(), self.priority.into());
        if !self.headers.is_empty() {
            o.insert("headers".into(), Value::Object(self.headers.clone()));
        }
        let missed = match self.missed {
            Missed::Latest => "latest",
            Missed::Skip => "skip",
        };
        o.insert("missed".into(), missed.into());
        Value::Object(o)
    }
}

/// Enqueues `tick`'s row of `schedule` in a transaction of its own; `true` when this call
/// stored it, `false` when the row existed already (another process enqueued the tick).
pub async fn enqueue_tick(
    store: &dyn Store,
    backend: Backend,
    schedule: &Schedule,
    tick: DateTime<Utc>,
) -> Result<bool> {
    let msg = schedule.message(tick);
    let st = enqueue_statement_native(std::slice::from_ref(&msg), backend)?;
    let params: Vec<SqlValue> = st
        .params
        .iter()
        .map(|p| p.clone().map_or(SqlValue::Null, SqlValue::Text))
        .collect();
    let mut tx = store.begin().await?;
    let rows = tx.query(&st.sql, &params).await?;
    tx.commit().await?;
    // `duplicate` is a boolean on PostgreSQL and a BIT (0 or 1) on SQL Server.
    let duplicate = match rows.first().and_then(|r| r.get("duplicate")) {
        Some(Value::Bool(b)) => *b,
        Some(Value::Number(n)) => n.as_i64() == Some(1),
        _ => {
            return Err(Error::Database {
                operation: "schedule enqueue",
                message: format!("the enqueue returned no duplicate flag: {rows:?}"),
                code: None,
            })
        }
    };
    Ok(!duplicate)
}

/// How long to wait before retrying a failed enqueue (a database outage): the tick is kept
/// and retried, then caught up or dropped by the usual rule.
const RETRY: Duration = Duration::from_secs(1);

/// Runs `schedules` until `stop`: each on its own task, sleeping to its next tick and
/// enqueueing the due ticks. Returns when every task has stopped.
pub async fn run(
    store: Arc<dyn Store>,
    backend: Backend,
    schedules: Vec<Schedule>,
    stop: CancellationToken,
) {
    let tasks: Vec<_> = schedules
        .into_iter()
        .map(|s| tokio::spawn(run_one(store.clone(), backend, s, stop.clone())))
        .collect();
    for t in tasks {
        let _ = t.await;
    }
}

async fn run_one(
    store: Arc<dyn Store>,
    backend: Backend,
    schedule: Schedule,
    stop: CancellationToken,
) {
    // `None` until the first pass: `due(None, now)` applies the missed-ticks policy.
    let mut last: Option<DateTime<Utc>> = None;
    loop {
        let now = Utc::now();
        let mut failed = false;
        for tick in schedule.due(last, now) {
            match enqueue_tick(store.as_ref(), backend, &schedule, tick).await {
                Ok(inserted) => {
                    tracing::debug!(schedule = %schedule.name, tick = %tick, inserted, "schedule tick");
                    last = Some(tick);
                }
                Err(e) => {
                    tracing::warn!(schedule = %schedule.name, tick = %tick, error = %e, "schedule tick not enqueued; retrying");
                    failed = true;
                    break;
                }
            }
        }
        if !failed {
            // Every tick up to now is handled: enqueued, or dropped by the policy (which
            // would otherwise find the same ticks missed on every pass).
            last = schedule.timing.latest_at(now).or(last);
        }
        let wait = if failed {
            RETRY
        } else {
            match last
                .or(Some(now))
                .and_then(|l| schedule.timing.next_after(l))
            {
                Some(next) => (next - Utc::now()).to_std().unwrap_or(Duration::ZERO),
                None => {
                    tracing::info!(schedule = %schedule.name, "schedule has no further tick");
                    return;
                }
            }
        };
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(wait) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn utc(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    fn cron(expr: &str, zone: &str) -> Timing {
        Timing::cron(expr, Some(zone), "schedules[0]").unwrap()
    }

    fn ticks(t: &Timing, from: &str, n: usize) -> Vec<String> {
        let mut at = utc(from);
        (0..n)
            .map(|_| {
                at = t.next_after(at).unwrap();
                at.to_rfc3339_opts(SecondsFormat::Secs, true)
            })
            .collect()
    }

    #[test]
    fn daily_cron_in_a_zone_keeps_wall_time_across_dst() {
        // 09:00 in New York is 14:00 UTC in winter (EST) and 13:00 UTC in summer (EDT); the
        // spring-forward was on 2026-03-08.
        let t = cron("0 9 * * *", "America/New_York");
        assert_eq!(
            ticks(&t, "2026-03-06T00:00:00Z", 4),
            [
                "2026-03-06T14:00:00Z",
                "2026-03-07T14:00:00Z",
                "2026-03-08T13:00:00Z",
                "2026-03-09T13:00:00Z"
            ]
        );
    }

    #[test]
    fn a_wall_time_skipped_by_spring_forward_runs_once_after_the_gap() {
        // Europe/Berlin skipped 02:00–03:00 local on 2026-03-29 (01:00 UTC): 02:30 does not
        // exist that day and runs at 03:00 local (01:00 UTC), not twice, not never.
        let t = cron("30 2 * * *", "Europe/Berlin");
        assert_eq!(
            ticks(&t, "2026-03-27T12:00:00Z", 3),
            [
                "2026-03-28T01:30:00Z",
                "2026-03-29T01:00:00Z",
                "2026-03-30T00:30:00Z"
            ]
        );
    }

    #[test]
    fn a_wall_time_repeated_by_fall_back_runs_once() {
        // Europe/Berlin repeated 02:00–03:00 local on 2026-10-25: 02:30 happens at 00:30 UTC
        // and again at 01:30 UTC; a daily job runs at the first only.
        let t = cron("30 2 * * *", "Europe/Berlin");
        assert_eq!(
            ticks(&t, "2026-10-24T12:00:00Z", 2),
            ["2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"]
        );
    }

    #[test]
    fn utc_is_the_default_zone_and_seconds_are_optional() {
        let t = Timing::cron("*/20 * * * * *", None, "s").unwrap();
        assert_eq!(
            ticks(&t, "2026-01-01T00:00:05Z", 3),
            [
                "2026-01-01T00:00:20Z",
                "2026-01-01T00:00:40Z",
                "2026-01-01T00:01:00Z"
            ]
        );
    }

    #[test]
    fn intervals_are_multiples_of_the_interval_since_the_epoch() {
        let t = Timing::every(Duration::from_millis(200), "s").unwrap();
        let a = utc("2026-01-01T00:00:00.130Z");
        assert_eq!(t.next_after(a).unwrap(), utc("2026-01-01T00:00:00.200Z"));
        assert_eq!(t.latest_at(a).unwrap(), utc("2026-01-01T00:00:00Z"));
        // A tick is its own latest and not its own next: two processes starting at
        // different instants compute the same ticks.
        let tick = utc("2026-01-01T00:00:00.400Z");
        assert_eq!(t.latest_at(tick).unwrap(), tick);
        assert_eq!(t.next_after(tick).unwrap(), utc("2026-01-01T00:00:00.600Z"));
        let hourly = Timing::every(Duration::from_secs(3600), "s").unwrap();
        assert_eq!(
            hourly.next_after(utc("2026-05-05T10:59:59Z")).unwrap(),
            utc("2026-05-05T11:00:00Z")
        );
    }

    #[test]
    fn bad_expressions_zones_and_intervals_name_their_field() {
        let e = Timing::cron("61 * * * *", None, "schedules[1]").unwrap_err();
        assert!(
            matches!(&e, Error::Config { path, reason } if path == "schedules[1].cron" && reason.contains("61 * * * *")),
            "{e:?}"
        );
        let e = Timing::cron("every tuesday", None, "schedules[1]").unwrap_err();
        assert!(
            matches!(&e, Error::Config { path, .. } if path == "schedules[1].cron"),
            "{e:?}"
        );
        let e = Timing::cron("0 9 * * *", Some("Mars/Olympus"), "schedules[1]").unwrap_err();
        assert!(
            matches!(&e, Error::Config { path, reason } if path == "schedules[1].timeZone" && reason.contains("Mars/Olympus")),
            "{e:?}"
        );
        let e = Timing::every(Duration::from_millis(10), "schedules[1]").unwrap_err();
        assert!(
            matches!(&e, Error::Config { path, .. } if path == "schedules[1].every"),
            "{e:?}"
        );
        // An interval whose milliseconds overflow the tick arithmetic would never tick.
        for huge in [
            MAX_INTERVAL + Duration::from_millis(1),
            Duration::from_millis(u64::MAX),
        ] {
            let e = Timing::every(huge, "schedules[1]").unwrap_err();
            assert!(
                matches!(&e, Error::Config { path, reason } if path == "schedules[1].every" && reason.contains("longest")),
                "{e:?}"
            );
        }
        let longest = Timing::every(MAX_INTERVAL, "s").unwrap();
        let t = Utc::now();
        assert!(
            longest.next_after(t).is_some_and(|n| n > t),
            "the longest interval ticks"
        );
        let s = Schedule::new(
            "",
            Timing::every(Duration::from_secs(1), "s").unwrap(),
            "jobs",
            json!({}),
        );
        let e = s.validate("schedules[1]").unwrap_err();
        assert!(
            matches!(&e, Error::Config { path, .. } if path == "schedules[1].name"),
            "{e:?}"
        );
        let s = Schedule::new(
            "n",
            Timing::every(Duration::from_secs(1), "s").unwrap(),
            "jobs",
            Value::Null,
        );
        let e = s.validate("schedules[1]").unwrap_err();
        assert!(
            matches!(&e, Error::Config { path, .. } if path == "schedules[1].payload"),
            "{e:?}"
        );
    }

    #[test]
    fn the_key_holds_the_tick_in_utc() {
        let s = Schedule::new(
            "nightly",
            cron("0 2 * * *", "Europe/Paris"),
            "jobs",
            json!({"a": 1}),
        );
        let tick = s.timing.next_after(utc("2026-06-01T12:00:00Z")).unwrap();
        assert_eq!(s.key(tick), "schedule:nightly:2026-06-02T00:00:00.000Z");
        let m = s.message(tick);
        assert_eq!(
            m.idempotency_key.as_deref(),
            Some("schedule:nightly:2026-06-02T00:00:00.000Z")
        );
        assert_eq!(m.source, "jobs");
    }

    #[test]
    fn json_reads_back_and_names_bad_keys() {
        let v = json!({"name": "n", "source": "jobs", "cron": "0 9 * * 1-5",
            "timeZone": "Asia/Tokyo", "payload": {"a": 1}, "priority": 3,
            "headers": {"h": "v"}, "missed": "skip"});
        let s = Schedule::from_json(&v, "schedules[0]").unwrap();
        assert_eq!((s.priority, s.missed), (3, Missed::Skip));
        assert_eq!(Schedule::from_json(&s.to_json(), "x").unwrap(), s);
        let every = json!({"name": "n", "source": "jobs", "everyMs": 500, "payload": 1});
        let s = Schedule::from_json(&every, "x").unwrap();
        assert_eq!(s.timing, Timing::Every(Duration::from_millis(500)));
        assert_eq!(Schedule::from_json(&s.to_json(), "x").unwrap(), s);
        for (change, path) in [
            (json!({"everyMs": "1s"}), "schedules[2].everyMs"),
            (json!({"priority": 40000}), "schedules[2].priority"),
            (json!({"missed": "all"}), "schedules[2].missed"),
            (json!({"headers": {"h": 1}}), "schedules[2].headers"),
            (json!({"every": 5}), "schedules[2].every"),
            (json!({"timeZone": "UTC"}), "schedules[2].timeZone"),
            (json!({"source": ""}), "schedules[2].source"),
        ] {
            let mut v = every.clone();
            v.as_object_mut()
                .unwrap()
                .extend(change.as_object().unwrap().clone());
            let e = Schedule::from_json(&v, "schedules[2]").unwrap_err();
            assert!(
                matches!(&e, Error::Config { path: p, .. } if p == path),
                "{change}: {e:?}"
            );
        }
    }

    #[test]
    fn due_catches_up_a_few_ticks_and_applies_the_policy_beyond() {
        let every = || Timing::every(Duration::from_secs(1), "s").unwrap();
        let mut s = Schedule::new("n", every(), "jobs", json!({}));
        let now = utc("2026-01-01T00:00:10.500Z");
        // At start: the latest tick only, never the ten before it.
        assert_eq!(s.due(None, now), [utc("2026-01-01T00:00:10Z")]);
        // Three ticks late: all three, in order.
        assert_eq!(
            s.due(Some(utc("2026-01-01T00:00:07Z")), now),
            [
                utc("2026-01-01T00:00:08Z"),
                utc("2026-01-01T00:00:09Z"),
                utc("2026-01-01T00:00:10Z")
            ]
        );
        // Far behind: the policy.
        assert_eq!(
            s.due(Some(utc("2025-12-31T00:00:00Z")), now),
            [utc("2026-01-01T00:00:10Z")]
        );
        s.missed = Missed::Skip;
        assert!(s.due(None, now).is_empty());
        assert!(s.due(Some(utc("2025-12-31T00:00:00Z")), now).is_empty());
        assert_eq!(
            s.due(Some(utc("2026-01-01T00:00:09Z")), now),
            [utc("2026-01-01T00:00:10Z")]
        );
        assert_eq!("skip".parse::<Missed>(), Ok(Missed::Skip));
        assert!("all"
            .parse::<Missed>()
            .unwrap_err()
            .contains("latest or skip"));
    }
}
