//! Lease renewal, one rule for the pull worker (`worker`) and the relay's outbox claims:
//! every third of the lease, the claims still live are renewed in one statement on the pool
//! (never inside a handler's transaction); a claim the renewal matched no row for is lost
//! (the lease expired and the row was reclaimed), and its work is cancelled. What is live,
//! which statement renews and how a loss is cancelled and counted (exactly once) is the
//! caller's [`Leases`]; the renewal round itself is [`renew_once`].

use std::collections::HashSet;
use std::time::Duration;

use async_trait::async_trait;
use uuid::Uuid;

use crate::error::{Error, Result};
use crate::message::ClaimRef;

/// The claims one renewer keeps alive.
#[async_trait]
pub trait Leases: Send + Sync {
    /// The claims to renew now: those whose work has not finished.
    fn live(&self) -> Vec<ClaimRef>;
    /// Renews `claims` for `lease`, returning the ids whose claim still held.
    async fn renew(&self, claims: &[ClaimRef], lease: Duration) -> Result<Vec<Uuid>>;
    /// `claim` was lost: cancel its work if it is still running, and count the loss once
    /// (here, or where the cancelled work notices it, never both).
    fn lost(&self, claim: &ClaimRef);
    /// The renewal statement failed (e.g. the database is unreachable): the fenced writes
    /// still protect the rows; the next round tries again.
    fn failed(&self, claims: usize, error: &Error);
}

/// How often a lease is renewed: every third of it, so one missed round still leaves time.
pub fn renewal_interval(lease: Duration) -> Duration {
    lease / 3
}

/// One renewal round: renews the live claims and reports every claim that did not hold.
pub async fn renew_once(leases: &dyn Leases, lease: Duration) {
    let claims = leases.live();
    if claims.is_empty() {
        return;
    }
    match leases.renew(&claims, lease).await {
        Ok(renewed) => {
            let renewed: HashSet<Uuid> = renewed.into_iter().collect();
            for c in claims.iter().filter(|c| !renewed.contains(&c.id)) {
                leases.lost(c);
            }
        }
        Err(e) => leases.failed(claims.len(), &e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::sync::Mutex;

    /// Leases in memory: `held` are the claims a renewal still finds; every call is recorded.
    struct Fake {
        live: Vec<ClaimRef>,
        held: Option<Vec<Uuid>>,
        calls: Mutex<Vec<String>>,
    }

    #[async_trait]
    impl Leases for Fake {
        fn live(&self) -> Vec<ClaimRef> {
            self.live.clone()
        }
        async fn renew(&self, claims: &[ClaimRef], _: Duration) -> Result<Vec<Uuid>> {
            self.calls
                .lock()
                .unwrap()
                .push(format!("renew {}", claims.len()));
            self.held
                .clone()
                .ok_or_else(|| Error::InvalidInput("the database is gone".into()))
        }
        fn lost(&self, claim: &ClaimRef) {
            self.calls
                .lock()
                .unwrap()
                .push(format!("lost {}", claim.id));
        }
        fn failed(&self, claims: usize, _: &Error) {
            self.calls.lock().unwrap().push(format!("failed {claims}"));
        }
    }

    fn claim() -> ClaimRef {
        ClaimRef {
            id: Uuid::new_v4(),
            token: Uuid::new_v4(),
        }
    }

    #[tokio::test]
    async fn a_round_reports_lost_exactly_the_claims_the_renewal_did_not_find() {
        let (a, b) = (claim(), claim());
        let fake = Fake {
            live: vec![a, b],
            held: Some(vec![a.id]),
            calls: Mutex::default(),
        };
        renew_once(&fake, Duration::from_secs(30)).await;
        assert_eq!(
            *fake.calls.lock().unwrap(),
            ["renew 2".to_string(), format!("lost {}", b.id)]
        );
    }

    #[tokio::test]
    async fn a_failed_round_loses_nothing_and_an_empty_one_asks_nothing() {
        let failing = Fake {
            live: vec![claim(), claim()],
            held: None,
            calls: Mutex::default(),
        };
        renew_once(&failing, Duration::from_secs(30)).await;
        assert_eq!(*failing.calls.lock().unwrap(), ["renew 2", "failed 2"]);
        let idle = Fake {
            live: vec![],
            held: Some(vec![]),
            calls: Mutex::default(),
        };
        renew_once(&idle, Duration::from_secs(30)).await;
        assert!(idle.calls.lock().unwrap().is_empty());
    }

    #[test]
    fn a_lease_is_renewed_every_third_of_it() {
        assert_eq!(
            renewal_interval(Duration::from_secs(30)),
            Duration::from_secs(10)
        );
        assert_eq!(
            renewal_interval(Duration::from_millis(900)),
            Duration::from_millis(300)
        );
    }
}
