//! `sources.<name>.rateLimit.requestsPerMinute` (proto-docs/ingest.md): one bucket per HTTP
//! source, shared by every client, holding `requestsPerMinute` requests and filled up again
//! every 60 s from start-up (whole refills at fixed instants, not a trickle). A request that
//! finds the bucket empty is refused with 429 before its body is read; `Retry-After` is the
//! number of seconds until the next refill, rounded up.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use queuebox_config::{Config, SourceKind};

/// How often a bucket is filled up again.
const PERIOD: Duration = Duration::from_secs(60);

/// The buckets of the sources that have a rate limit, by source name.
#[derive(Default)]
pub struct RateLimits {
    buckets: HashMap<String, Bucket>,
}

struct Bucket {
    capacity: u32,
    state: Mutex<BucketState>,
}

struct BucketState {
    tokens: u32,
    next_refill: Instant,
}

impl RateLimits {
    pub fn from_config(cfg: &Config, now: Instant) -> RateLimits {
        let buckets = cfg
            .sources
            .values()
            .filter_map(|s| match &s.kind {
                SourceKind::Http(h) => h.rate_limit.as_ref().map(|r| {
                    let bucket = Bucket {
                        capacity: r.requests_per_minute,
                        state: Mutex::new(BucketState {
                            tokens: r.requests_per_minute,
                            next_refill: now + PERIOD,
                        }),
                    };
                    (s.name.clone(), bucket)
                }),
                _ => None,
            })
            .collect();
        RateLimits { buckets }
    }

    /// Takes one request from `source`'s bucket; `Err(seconds)` to wait (at least 1) when it
    /// is empty. A source without a limit always passes.
    pub fn take(&self, source: &str, now: Instant) -> Result<(), u64> {
        let Some(bucket) = self.buckets.get(source) else {
            return Ok(());
        };
        let mut st = bucket.state.lock().unwrap_or_else(|e| e.into_inner());
        if now >= st.next_refill {
            // Whole periods since the last refill: the refill instants stay on the same grid.
            let behind = (now - st.next_refill).as_nanos() / PERIOD.as_nanos();
            st.next_refill += PERIOD * (behind as u32 + 1);
            st.tokens = bucket.capacity;
        }
        if st.tokens > 0 {
            st.tokens -= 1;
            return Ok(());
        }
        let wait = st.next_refill - now;
        let rounded_up = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
        Err(rounded_up.max(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(rpm: u32, now: Instant) -> RateLimits {
        let yaml = format!(
            "database:\n  url: postgres://localhost/x\nsources:\n  s:\n    path: /s\n    idempotencyKeyPath: $.id\n    topic: t\n    rateLimit:\n      requestsPerMinute: {rpm}\n"
        );
        let cfg = queuebox_config::from_yaml_with_env(&yaml, &[]).expect("config");
        RateLimits::from_config(&cfg, now)
    }

    #[test]
    fn the_bucket_empties_and_fills_up_at_the_next_minute() {
        let t0 = Instant::now();
        let l = limits(3, t0);
        for _ in 0..3 {
            assert_eq!(l.take("s", t0), Ok(()));
        }
        assert_eq!(l.take("s", t0 + Duration::from_millis(500)), Err(60));
        assert_eq!(l.take("s", t0 + Duration::from_secs(59)), Err(1));
        // The refill is whole: three more at 60 s, then empty again until 120 s.
        for _ in 0..3 {
            assert_eq!(l.take("s", t0 + PERIOD), Ok(()));
        }
        assert_eq!(l.take("s", t0 + Duration::from_secs(90)), Err(30));
        assert_eq!(l.take("other", t0), Ok(()), "a source without a limit");
        // Long idle: the grid stays on whole minutes from start-up.
        assert_eq!(l.take("s", t0 + Duration::from_secs(610)), Ok(()));
        assert_eq!(l.take("s", t0 + Duration::from_secs(610)), Ok(()));
        assert_eq!(l.take("s", t0 + Duration::from_secs(610)), Ok(()));
        assert_eq!(l.take("s", t0 + Duration::from_secs(610)), Err(50));
    }
}
