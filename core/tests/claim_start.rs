//! The pull claim's scan start on PostgreSQL (`store/postgres/claim_start.rs`): while a source
//! drains, a claim that follows a full one starts where that one stopped, so it does not walk
//! the dead entries the drain left at the head of the pending index; a claim from the head
//! still runs at least every `FULL_EVERY` (1 s) and finds what the started claims cannot:
//! rows whose insert committed late, expired leases. A release sends the next claim to the
//! head at once, so a released row keeps its turn.
//! And the start never skips a row the claim did not take (an aggregate's next row).

mod support;

use std::time::Duration;

use queuebox_core::{ClaimedRow, Store};

const LEASE: Duration = Duration::from_secs(30);

fn keys(rows: &[ClaimedRow]) -> Vec<String> {
    rows.iter()
        .map(|r| r.message.idempotency_key.clone())
        .collect()
}

fn range(a: usize, b: usize) -> Vec<String> {
    (a..b).map(|i| format!("k{i}")).collect()
}

#[tokio::test]
async fn a_row_released_behind_the_start_is_the_next_one_claimed() {
    let (store, _) = support::fresh_store("claim_start_release").await;
    support::insert_pull_rows(store.pool(), "s", 40, |_| None).await;
    let first = store.claim_pull("s", 10, LEASE).await.unwrap();
    assert_eq!(keys(&first), range(0, 10));

    // Right after a full claim the scan starts at k10.
    let started = store.claim_pull("s", 10, LEASE).await.unwrap();
    assert_eq!(
        keys(&started),
        range(10, 20),
        "the claim started after the last one"
    );

    // k0 goes back to its old place, behind that start: the release sends the next claim to
    // the head, so k0 keeps its turn instead of waiting behind newer rows.
    assert!(store.release_pull(&first[0].claim).await.unwrap());
    let next = store.claim_pull("s", 10, LEASE).await.unwrap();
    let mut expected = vec!["k0".to_string()];
    expected.extend(range(20, 29));
    assert_eq!(keys(&next), expected, "the released k0 is claimed first");
}

#[tokio::test]
async fn a_row_whose_insert_committed_late_is_claimed_within_the_interval() {
    let (store, _) = support::fresh_store("claim_start_late").await;
    // Its transaction starts first, so its scheduled_at (the transaction's time) and sequence
    // come before every other row's; it commits after the drain moved past that place.
    let mut late = store.pool().begin().await.unwrap();
    sqlx::query(
        "INSERT INTO inbox (source, idempotency_key, payload, consumption) VALUES ('s', 'late', '{}', 'pull')",
    )
    .execute(&mut *late)
    .await
    .unwrap();
    support::insert_pull_rows(store.pool(), "s", 40, |_| None).await;
    assert_eq!(
        keys(&store.claim_pull("s", 10, LEASE).await.unwrap()),
        range(0, 10)
    );
    late.commit().await.unwrap();

    let mut claimed = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(3);
    while !claimed.contains(&"late".to_string()) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "late row not claimed: {claimed:?}"
        );
        claimed.extend(keys(&store.claim_pull("s", 5, LEASE).await.unwrap()));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_ne!(claimed[0], "late", "a started claim ran first");
}

#[tokio::test]
async fn an_expired_lease_is_claimed_again_while_the_queue_drains() {
    let (store, _) = support::fresh_store("claim_start_expired").await;
    support::insert_pull_rows(store.pool(), "s", 200, |_| None).await;
    let lost = store
        .claim_pull("s", 10, Duration::from_millis(100))
        .await
        .unwrap();
    assert_eq!(keys(&lost), range(0, 10));
    // Full claims keep starting further on while the lease runs out. The first claim from the
    // head after it takes two expired rows and sees eight more it did not take, so the claims
    // after it run from the head too, until all ten are back: within the interval, not one
    // batch per interval.
    let mut claimed = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(3);
    while !claimed.contains(&"k0".to_string()) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "k0 not claimed again: {claimed:?}"
        );
        claimed = keys(&store.claim_pull("s", 2, LEASE).await.unwrap());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    for _ in 0..4 {
        claimed.extend(keys(&store.claim_pull("s", 2, LEASE).await.unwrap()));
    }
    assert_eq!(
        claimed,
        range(0, 10),
        "the expired rows, in five claims in a row"
    );
}

#[tokio::test]
async fn the_start_stays_at_an_aggregate_row_the_claim_skipped() {
    let (store, _) = support::fresh_store("claim_start_aggregate").await;
    // k0 and k1 share an aggregate; k1 waits for k0, and the claim takes 10 other rows past it.
    support::insert_pull_rows(store.pool(), "s", 30, |i| {
        (i < 2).then(|| "order-1".to_string())
    })
    .await;
    let first = store.claim_pull("s", 10, LEASE).await.unwrap();
    let mut expected = vec!["k0".to_string()];
    expected.extend(range(2, 11));
    assert_eq!(keys(&first), expected);
    assert!(store.complete_pull(&first[0].claim).await.unwrap());
    // At once, not after the interval: the next claim started at k1, the first row not taken.
    let next = store.claim_pull("s", 10, LEASE).await.unwrap();
    assert_eq!(keys(&next)[0], "k1", "{:?}", keys(&next));
}
