//! Retry backoff: exponential with a cap and symmetric jitter. One function serves the
//! relay, the pull worker and every language wrapper, so a schedule is the same everywhere.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// When to give up and how long to wait between attempts.
///
/// `attempt` counts failed deliveries so far, starting at 0. While `attempt < max_attempts`
/// a failure schedules another delivery, so a row gets `max_attempts + 1` deliveries and a
/// dead row shows `attempt == max_attempts` (the reference product's rule, kept on purpose).
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
    /// Fraction of the delay added or removed at random, in `[0, 1]`.
    pub jitter: f64,
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
        RetryPolicy { max_attempts: 5, base_delay: Duration::from_secs(1), max_delay: Duration::from_secs(300), jitter: 0.2 }
    }
}

impl RetryPolicy {
    /// The relay's default for outbox deliveries: the same shape capped at 60 s.
    pub fn relay_default() -> Self {
        RetryPolicy { max_delay: Duration::from_secs(60), ..Self::default() }
    }

    /// Rejects a policy that cannot work, naming the field.
    pub fn validate(&self) -> Result<()> {
        if self.base_delay.is_zero() {
            return Err(Error::config("retry.baseDelayMs", "must be greater than 0"));
        }
        if self.max_delay < self.base_delay {
            return Err(Error::config("retry.maxDelayMs", "must not be less than retry.baseDelayMs"));
        }
        if !(0.0..=1.0).contains(&self.jitter) || self.jitter.is_nan() {
            return Err(Error::config("retry.jitter", "must be between 0 and 1"));
        }
        Ok(())
    }

    /// The delay before the delivery that follows failed attempt number `attempt`, with
    /// `u` a uniform sample in `[0, 1)`. Deterministic in `u`, so vectors can pin it.
    pub fn delay(&self, attempt: u32, u: f64) -> Duration {
        let base = self.base_delay.as_millis() as f64;
        let cap = self.max_delay.as_millis() as f64;
        let exp = (base * 2f64.powi(attempt.min(30) as i32)).min(cap);
        let factor = 1.0 + self.jitter * (2.0 * u.clamp(0.0, 1.0) - 1.0);
        Duration::from_millis((exp * factor).round().max(0.0) as u64)
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
    fn dead_once_attempts_reach_the_ceiling() {
        let p = RetryPolicy { max_attempts: 2, ..Default::default() };
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
}
