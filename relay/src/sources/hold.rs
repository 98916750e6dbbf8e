//! `initialDelay` and publish-time order (docs/relay.md, "Holding new rows"): how long a new inbox row is held
//! before any claim (push or pull) may take it.
//!
//! A source with `initialDelay: D` holds each row until receipt + D. With
//! `scheduledAtHeader` / `scheduledAtPath` as well, the hold ends at
//! `min(publish time, receipt) + D`, so two messages stored in the reverse of their publish
//! order still leave the claim (which orders by `scheduled_at`) in publish order, as long as
//! the later one arrives within D. The publish time is read from the header
//! (case-insensitive), then the body path, then the broker's own time (AMQP `timestamp`,
//! Kafka record timestamp, JetStream message time), else receipt. A value that is not a
//! time is skipped with one warn line naming the source.
//!
//! The store inserts `scheduled_at = receipt + delay`, so the publish time becomes a shorter
//! delay here: `D - (now - publish time)`, never negative and never longer than D. Receipt
//! is the database's clock and `now` the relay's; a skew between the two shifts every row
//! of a source alike and keeps their order.

use std::collections::HashMap;
use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};
use queuebox_config::{parse_duration, Config};
use queuebox_core::keys::{self, JsonPath};
use serde_json::Value;

/// Integers below this are seconds since 1970, at or above it milliseconds:
/// 100 000 000 000 s is the year 5138, 100 000 000 000 ms is 1973).
const SECONDS_BELOW: i64 = 100_000_000_000;

/// One source's hold.
struct Hold {
    delay: Duration,
    header: Option<String>,
    /// The path's text (for the warn line) and the path.
    path: Option<(String, JsonPath)>,
}

/// The holds of the sources that have `initialDelay`, by source name.
#[derive(Default)]
pub struct Holds {
    by_source: HashMap<String, Hold>,
}

/// What a source knows about a message's publish time.
#[derive(Default)]
pub struct PublishClues<'a> {
    pub headers: &'a [(String, String)],
    /// The parsed body, when it is JSON.
    pub json: Option<&'a Value>,
    /// The broker's own time of the message, in milliseconds since 1970.
    pub broker_time_ms: Option<i64>,
}

impl Holds {
    /// Built once from a validated configuration (its durations and paths parse).
    pub fn from_config(cfg: &Config) -> Holds {
        let by_source = cfg
            .sources
            .values()
            .filter_map(|s| {
                let c = &s.common;
                let delay = parse_duration(c.initial_delay.as_deref()?)?;
                let path = c
                    .scheduled_at_path
                    .as_deref()
                    .and_then(|p| Some((p.to_string(), JsonPath::parse(p).ok()?)));
                let hold = Hold {
                    delay,
                    header: c.scheduled_at_header.clone(),
                    path,
                };
                Some((s.name.clone(), hold))
            })
            .collect();
        Holds { by_source }
    }

    /// How long to hold `source`'s new row after receipt; `None` when the source has no
    /// `initialDelay`.
    pub fn delay(&self, source: &str, clues: &PublishClues<'_>) -> Option<Duration> {
        let hold = self.by_source.get(source)?;
        if hold.header.is_none() && hold.path.is_none() {
            return Some(hold.delay);
        }
        let Some(published) = publish_time(source, hold, clues) else {
            return Some(hold.delay);
        };
        let age = (Utc::now() - published).to_std().unwrap_or(Duration::ZERO);
        Some(hold.delay.saturating_sub(age))
    }
}

/// The first publish time the chain yields: header → body path → broker time.
fn publish_time(source: &str, hold: &Hold, clues: &PublishClues<'_>) -> Option<DateTime<Utc>> {
    let from_header = hold.header.as_deref().and_then(|name| {
        let raw = keys::header(clues.headers, name)?;
        parsed(source, &format!("header {name}"), &Value::String(raw))
    });
    let from_path = || {
        let (text, path) = hold.path.as_ref()?;
        let v = path.select(clues.json?)?;
        parsed(source, &format!("body path {text}"), v)
    };
    from_header
        .or_else(from_path)
        .or_else(|| clues.broker_time_ms.and_then(from_millis))
}

/// A value that should be a publish time; warns once (naming the source and where the
/// value came from) when it is not one.
fn parsed(source: &str, place: &str, v: &Value) -> Option<DateTime<Utc>> {
    let t = parse_publish_time(v);
    if t.is_none() {
        tracing::warn!(
            source = %source,
            value = %v,
            "the publish time in the {place} is not an ISO-8601 time with offset or a number of seconds/milliseconds since 1970 between 1970 and 9999; held from receipt instead"
        );
    }
    t
}

/// ISO-8601 with an offset (`2026-12-03T10:00:00Z`, `…+02:00`), or an integer (a JSON
/// number or digits in a string): below 100 000 000 000 seconds, otherwise milliseconds.
/// Negative, before 1970 or after 9999-12-31: `None`.
pub fn parse_publish_time(v: &Value) -> Option<DateTime<Utc>> {
    let t = match v {
        Value::Number(n) => from_integer(n.as_i64()?)?,
        Value::String(s) => {
            let s = s.trim();
            match s.parse::<i64>() {
                Ok(n) => from_integer(n)?,
                Err(_) => DateTime::parse_from_rfc3339(s).ok()?.with_timezone(&Utc),
            }
        }
        _ => return None,
    };
    let last = Utc.with_ymd_and_hms(9999, 12, 31, 23, 59, 59).single()?;
    (t.timestamp() >= 0 && t <= last).then_some(t)
}

fn from_integer(n: i64) -> Option<DateTime<Utc>> {
    if n < 0 {
        return None;
    }
    if n < SECONDS_BELOW {
        Utc.timestamp_opt(n, 0).single()
    } else {
        from_millis(n)
    }
}

fn from_millis(ms: i64) -> Option<DateTime<Utc>> {
    Utc.timestamp_millis_opt(ms).single()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    #[test]
    fn publish_times_parse_by_the_reference_rules() {
        let t = at("2026-12-03T10:00:00Z");
        assert_eq!(parse_publish_time(&json!("2026-12-03T10:00:00Z")), Some(t));
        assert_eq!(
            parse_publish_time(&json!("2026-12-03T12:00:00+02:00")),
            Some(t)
        );
        assert_eq!(parse_publish_time(&json!(t.timestamp())), Some(t));
        assert_eq!(parse_publish_time(&json!(t.timestamp_millis())), Some(t));
        assert_eq!(
            parse_publish_time(&json!(t.timestamp_millis().to_string())),
            Some(t)
        );
        // The boundary: 99 999 999 999 is seconds (year 5138), 100 000 000 000 is ms (1973).
        assert_eq!(
            parse_publish_time(&json!(99_999_999_999_i64))
                .unwrap()
                .timestamp(),
            99_999_999_999
        );
        assert_eq!(
            parse_publish_time(&json!(100_000_000_000_i64))
                .unwrap()
                .timestamp_millis(),
            100_000_000_000
        );
        for bad in [
            json!("yesterday"),
            json!(-5),
            json!("1969-12-31T23:59:59Z"),
            json!("2026-12-03T10:00:00"), // no offset
            json!(1.5),
            json!(null),
            json!({"t": 1}),
            json!(i64::MAX),
        ] {
            assert_eq!(parse_publish_time(&bad), None, "{bad}");
        }
    }

    fn holds(yaml_source: &str) -> Holds {
        let yaml = format!("database:\n  url: postgres://x@127.0.0.1/x\nsources:\n  s:\n    path: /s\n    topic: t\n{yaml_source}");
        Holds::from_config(&queuebox_config::from_yaml_with_env(&yaml, &[]).expect("config"))
    }

    #[test]
    fn the_publish_time_shortens_the_hold_and_never_lengthens_it() {
        let h = holds("    initialDelay: 30s\n    scheduledAtPath: $.time\n    scheduledAtHeader: X-Sent-At\n");
        let ten_ago = json!({"time": (Utc::now() - chrono::Duration::seconds(10)).to_rfc3339()});
        let d = h
            .delay(
                "s",
                &PublishClues {
                    json: Some(&ten_ago),
                    ..Default::default()
                },
            )
            .unwrap();
        assert!((19..=20).contains(&d.as_secs()), "{d:?}");
        let future = json!({"time": (Utc::now() + chrono::Duration::hours(1)).to_rfc3339()});
        let d = h
            .delay(
                "s",
                &PublishClues {
                    json: Some(&future),
                    ..Default::default()
                },
            )
            .unwrap();
        assert_eq!(d, Duration::from_secs(30));
        let old = json!({"time": "2020-01-01T00:00:00Z"});
        let d = h
            .delay(
                "s",
                &PublishClues {
                    json: Some(&old),
                    ..Default::default()
                },
            )
            .unwrap();
        assert_eq!(d, Duration::ZERO);
        // The header comes before the path, the broker time after it.
        let hdr = vec![("x-sent-at".to_string(), "2020-01-01T00:00:00Z".to_string())];
        let d = h
            .delay(
                "s",
                &PublishClues {
                    headers: &hdr,
                    json: Some(&future),
                    ..Default::default()
                },
            )
            .unwrap();
        assert_eq!(d, Duration::ZERO);
        let broker = (Utc::now() - chrono::Duration::seconds(10)).timestamp_millis();
        let d = h
            .delay(
                "s",
                &PublishClues {
                    json: Some(&json!({"time": "yesterday"})),
                    broker_time_ms: Some(broker),
                    ..Default::default()
                },
            )
            .unwrap();
        assert!((19..=20).contains(&d.as_secs()), "{d:?}");
        assert_eq!(h.delay("other", &PublishClues::default()), None);
    }

    #[test]
    fn without_publish_time_keys_the_broker_time_is_not_used() {
        let h = holds("    initialDelay: 30s\n");
        let old = Utc::now().timestamp_millis() - 20_000;
        let d = h
            .delay(
                "s",
                &PublishClues {
                    broker_time_ms: Some(old),
                    ..Default::default()
                },
            )
            .unwrap();
        assert_eq!(d, Duration::from_secs(30));
    }
}
