//! Retry backoff: exponential with a cap and jitter. One function serves the relay, the pull
//! worker and every language wrapper, so a schedule is the same everywhere. It has two
//! formulas, each a named [`RetryPolicy`]:
//!
//! - [`RetryPolicy::default`], the client retry policy of pull workers:
//!   `min(base × 2^attempt, max)`, then ±`jitter` (±20 %, up to 5 min by default);
//! - [`RetryPolicy::relay_default`], the server formula of the outbox relay
//!   (proto-docs/states.md#outbox):
//!   `exp = base × 2^min(attempt, 20)`, plus a uniform integer in `[0, max(exp × jitter, 1)]`
//!   ms (+0–25 %), then capped at 60 s.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// When to give up and how long to wait between attempts.
///
/// `attempt` counts failed deliveries so far, starting at 0. While `attempt < max_attempts`
/// a failure schedules another delivery, so a row gets `max_attempts + 1` deliveries and a
/// dead row shows `attempt == max_attempts` (kept on purpose: `attempt` then reads as
/// "failures so far" in every state).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RetryPolicy {
    pub max_attempts: u32,
    // The aliases accept the client option names (`retry.baseDelayMs`) that the vectors
    // in proto-docs/vectors/backoff.json and every wrapper use.
    #[serde(with = "millis", alias = "baseDelayMs")]
    pub base_delay: Duration,
    #[serde(with = "millis", alias = "maxDelayMs")]
    pub max_delay: Duration,
    /// Fraction of the delay added (server formula) or added or removed (client formula) at
    /// random, in `[0, 1]`.
    pub jitter: f64,
    /// Which of the two schedules this is; a wrapper's options never set it (client).
    #[serde(default)]
    pub formula: Formula,
}

/// How the exponential delay, the jitter and the cap combine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Formula {
    /// Pull workers: `min(base × 2^min(attempt, 30), max) × (1 + jitter × (2u − 1))`, rounded.
    /// The cap applies before the jitter, so a delay can exceed `max` by `jitter`.
    #[default]
    Client,
    /// The relay's outbox deliveries: `exp = base × 2^min(attempt, 20)`, plus a uniform integer
    /// in `[0, max(⌊exp × jitter⌋, 1)]` ms (none at all when `jitter` is 0), then
    /// `min(…, max)`: never shorter than `exp`, never longer than `max`.
    Server,
}

/// What to do with a failed row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Retry(Duration),
    Dead,
}

impl Default for RetryPolicy {
    /// The pull worker's default: 5 retries, 1 s doubling to at most 5 min, ±20 %.
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 5,
            base_delay: Duration::from_secs(1),
            max_delay: Duration::from_secs(300),
            jitter: 0.2,
            formula: Formula::Client,
        }
    }
}

impl RetryPolicy {
    /// The relay's default for outbox deliveries, the server formula (proto-docs/states.md#outbox):
    /// 1 s doubling, +0–25 % jitter, never above 60 s (`outbox.retryBaseDelayMs` sets the base).
    pub fn relay_default() -> Self {
        RetryPolicy {
            max_delay: Duration::from_secs(60),
            jitter: 0.25,
            formula: Formula::Server,
            ..Self::default()
        }
    }

    /// Rejects a policy that cannot work, naming the field.
    pub fn validate(&self) -> Result<()> {
        if self.base_delay.is_zero() {
            return Err(Error::config("retry.baseDelayMs", "must be greater than 0"));
        }
        if self.max_delay < self.base_delay {
            return Err(Error::config(
                "retry.maxDelayMs",
                "must not be less than retry.baseDelayMs",
            ));
        }
        if !(0.0..=1.0).contains(&self.jitter) || self.jitter.is_nan() {
            return Err(Error::config("retry.jitter", "must be between 0 and 1"));
        }
        Ok(())
    }

    /// The delay before the delivery that follows failed attempt number `attempt`, with
    /// `u` a uniform sample in `[0, 1]`. Deterministic in `u`, so vectors can pin it.
    pub fn delay(&self, attempt: u32, u: f64) -> Duration {
        let u = u.clamp(0.0, 1.0);
        match self.formula {
            Formula::Client => {
                let base = self.base_delay.as_millis() as f64;
                let cap = self.max_delay.as_millis() as f64;
                let exp = (base * 2f64.powi(attempt.min(30) as i32)).min(cap);
                let factor = 1.0 + self.jitter * (2.0 * u - 1.0);
                Duration::from_millis((exp * factor).round().max(0.0) as u64)
            }
            Formula::Server => {
                let base = u64::try_from(self.base_delay.as_millis()).unwrap_or(u64::MAX);
                let exp = base.saturating_mul(1 << attempt.min(20));
                let span = if self.jitter > 0.0 {
                    ((exp as f64 * self.jitter).floor() as u64).max(1)
                } else {
                    0
                };
                // A uniform integer in [0, span]; u = 1 is the upper edge.
                let jitter = ((u * (span as f64 + 1.0)).floor() as u64).min(span);
                let cap = u64::try_from(self.max_delay.as_millis()).unwrap_or(u64::MAX);
                Duration::from_millis(exp.saturating_add(jitter).min(cap))
            }
        }
    }

    /// Retry or dead for a row that has failed `attempt` times before this failure.
    pub fn decide(&self, attempt: u32, u: f64) -> Decision {
        if attempt >= self.max_attempts {
            Decision::Dead
        } else {
            Decision::Retry(self.delay(attempt, u))
        }
    }

    /// [`RetryPolicy::decide`] with a fresh random sample.
    pub fn decide_now(&self, attempt: u32) -> Decision {
        self.decide(attempt, rand::random::<f64>())
    }
}

mod millis {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;
    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(d.as_millis() as u64)
    }
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        Ok(Duration::from_millis(u64::deserialize(d)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_server_formula_adds_no_jitter_when_jitter_is_zero() {
        let p = RetryPolicy {
            jitter: 0.0,
            ..RetryPolicy::relay_default()
        };
        for u in [0.0, 0.5, 1.0] {
            assert_eq!(p.delay(1, u), Duration::from_secs(2), "u = {u}");
        }
    }

    #[test]
    fn a_policy_round_trips_through_json_in_milliseconds() {
        let p = RetryPolicy {
            base_delay: Duration::from_millis(1500),
            max_delay: Duration::from_millis(90_000),
            ..RetryPolicy::relay_default()
        };
        let text = serde_json::to_string(&p).unwrap();
        assert!(text.contains("\"baseDelay\":1500"), "{text}");
        assert_eq!(serde_json::from_str::<RetryPolicy>(&text).unwrap(), p);
    }

    #[test]
    fn validate_refuses_each_unworkable_policy_naming_its_field() {
        let ms = Duration::from_millis;
        let with = |base: u64, max: u64, jitter: f64| RetryPolicy {
            base_delay: ms(base),
            max_delay: ms(max),
            jitter,
            ..Default::default()
        };
        for (p, field) in [
            (with(0, 10, 0.2), "retry.baseDelayMs"),
            (with(10, 9, 0.2), "retry.maxDelayMs"),
            (with(10, 10, -0.1), "retry.jitter"),
            (with(10, 10, 1.5), "retry.jitter"),
            (with(10, 10, f64::NAN), "retry.jitter"),
        ] {
            let e = p.validate().unwrap_err().to_string();
            assert!(e.contains(field), "{p:?}: {e}");
        }
        // The edges are allowed: max equal to base, jitter 0 and 1; and both defaults.
        for p in [
            with(10, 10, 0.0),
            with(10, 11, 1.0),
            RetryPolicy::default(),
            RetryPolicy::relay_default(),
        ] {
            assert!(p.validate().is_ok(), "{p:?}");
        }
    }

    #[test]
    fn dead_once_attempts_reach_the_ceiling() {
        let p = RetryPolicy {
            max_attempts: 2,
            ..Default::default()
        };
        assert!(matches!(p.decide(0, 0.5), Decision::Retry(_)));
        assert!(matches!(p.decide(1, 0.5), Decision::Retry(_)));
        assert_eq!(p.decide(2, 0.5), Decision::Dead);
    }

    #[test]
    fn delay_doubles_then_caps_and_jitter_stays_in_band() {
        let p = RetryPolicy::default();
        assert_eq!(p.delay(0, 0.5), Duration::from_secs(1));
        assert_eq!(p.delay(3, 0.5), Duration::from_secs(8));
        assert_eq!(p.delay(40, 0.5), Duration::from_secs(300));
        assert_eq!(p.delay(0, 0.0), Duration::from_millis(800));
        assert_eq!(p.delay(0, 1.0), Duration::from_millis(1200));
    }

    #[test]
    fn relay_delay_adds_up_to_a_quarter_and_never_exceeds_60_s() {
        let p = RetryPolicy::relay_default();
        assert_eq!(p.delay(0, 0.0), Duration::from_millis(1000));
        assert_eq!(p.delay(0, 1.0), Duration::from_millis(1250));
        assert_eq!(p.delay(3, 0.0), Duration::from_millis(8000));
        assert_eq!(p.delay(3, 0.9999), Duration::from_millis(10_000));
        assert_eq!(p.delay(5, 1.0), Duration::from_millis(40_000));
        assert_eq!(p.delay(6, 0.0), Duration::from_secs(60), "64 s is capped");
        assert_eq!(
            p.delay(u32::MAX, 1.0),
            Duration::from_secs(60),
            "the exponent saturates"
        );
        // The smallest jitter span is 1 ms.
        let tiny = RetryPolicy {
            base_delay: Duration::from_millis(1),
            ..p
        };
        assert_eq!(
            (tiny.delay(0, 0.0), tiny.delay(0, 1.0)),
            (Duration::from_millis(1), Duration::from_millis(2))
        );
    }
}
