//! The reconnect backoff of broker clients: 200 ms doubling to 30 s, with ±20 % jitter so
//! several sources do not reconnect in lockstep; reset after a connection has worked.

use std::time::Duration;

use rand::Rng;

#[derive(Debug, Clone)]
pub struct Backoff {
    next: Duration,
    min: Duration,
    max: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff::new(Duration::from_millis(200), Duration::from_secs(30))
    }
}

impl Backoff {
    pub fn new(min: Duration, max: Duration) -> Self {
        Backoff {
            next: min,
            min,
            max,
        }
    }

    /// The delay before the next attempt; each call doubles the following one.
    pub fn next_delay(&mut self) -> Duration {
        let base = self.next;
        self.next = (self.next * 2).min(self.max);
        let jitter = rand::thread_rng().gen_range(0.8..1.2);
        base.mul_f64(jitter).min(self.max)
    }

    /// A connection worked: start again from the minimum.
    pub fn reset(&mut self) {
        self.next = self.min;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_to_the_ceiling_and_resets() {
        let mut b = Backoff::new(Duration::from_millis(100), Duration::from_secs(1));
        let d: Vec<_> = (0..6).map(|_| b.next_delay()).collect();
        assert!(d[0] >= Duration::from_millis(80) && d[0] <= Duration::from_millis(120));
        assert!(d[2] >= Duration::from_millis(320) && d[2] <= Duration::from_millis(480));
        assert!(d[5] <= Duration::from_secs(1));
        b.reset();
        assert!(b.next_delay() <= Duration::from_millis(120));
    }
}
