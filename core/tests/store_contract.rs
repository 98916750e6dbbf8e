//! The behavioural contract of a [`Store`], written once and run against every backend:
//! PostgreSQL always (QUEUEBOX_TEST_DATABASE_URL), SQL Server when the crate is built with
//! `--features sqlserver`, QUEUEBOX_TEST_MSSQL_URL names a server and the ignored tests are
//! asked for (`-- --include-ignored`, as scripts/test.d/11-sqlserver.sh does when the variable
//! is set). Otherwise cargo counts each SQL Server test as ignored, never as passed; one asked
//! for without a server fails with `NOT RUN: <test>: <why>`. The relay
//! behaviours get their stores from the backend factory (`queuebox_core::backend`), as the
//! relay does.
//!
//! Each behaviour is one generic `async fn(Arc<dyn Store>, &dyn Harness)`; a [`Harness`] is
//! the small backend-specific part: a fresh migrated database, and the SQL text to inspect a
//! row and to make a business write. Each test process creates one database per backend and
//! every test uses its own source name, so tests run in parallel without seeing each other.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use queuebox_core::store::relay::{
    CancelTarget, Cancelled, ClaimedOutbox, Forwarded, NewOutboxRow, PauseKind, RelayStore,
    ReplayFilter,
};
use queuebox_core::store::{JsonRow, Store};
use queuebox_core::{ClaimRef, InsertOutcome, NewInboxMessage, SqlValue};
use serde_json::{json, Value};
use uuid::Uuid;

/// The backend-specific SQL the generic tests need (positional parameters in the backend's
/// own style: `$1` or `@P1`).
pub struct Dialect {
    /// One row of `state, attempt, last_error, claim_token` (text or null), `due_in_ms`
    /// (scheduled_at minus the database clock) and `lease_left_ms`, for id `p1`.
    pub row: &'static str,
    /// Inserts `p1` into the business table `contract_orders`.
    pub business_insert: &'static str,
    /// `n`: how many business rows have id `p1`.
    pub business_count: &'static str,
}

/// What a test needs from a backend beyond the [`Store`] itself.
pub trait Harness: Send + Sync {
    fn dialect(&self) -> &Dialect;
}

struct Sql(Dialect);
impl Harness for Sql {
    fn dialect(&self) -> &Dialect {
        &self.0
    }
}

/// A row as the tests inspect it.
#[derive(Debug, Clone, PartialEq)]
struct RowState {
    state: String,
    attempt: i64,
    last_error: Option<String>,
    claim_token: Option<Uuid>,
    due_in_ms: i64,
    lease_left_ms: Option<i64>,
}

async fn query_one(store: &Arc<dyn Store>, sql: &str, p1: &str) -> JsonRow {
    let mut tx = store.begin().await.expect("begin");
    let mut rows = tx
        .query(sql, &[SqlValue::Text(p1.to_string())])
        .await
        .expect("inspection query");
    tx.rollback().await.expect("rollback");
    assert_eq!(rows.len(), 1, "expected one row for {p1}");
    rows.remove(0)
}

async fn row(store: &Arc<dyn Store>, h: &dyn Harness, id: Uuid) -> RowState {
    let r = query_one(store, h.dialect().row, &id.to_string()).await;
    let int = |k: &str| r.get(k).and_then(Value::as_i64);
    RowState {
        state: r["state"].as_str().expect("state").to_string(),
        attempt: int("attempt").expect("attempt"),
        last_error: r["last_error"].as_str().map(str::to_string),
        claim_token: r["claim_token"]
            .as_str()
            .map(|t| t.parse().expect("token is a uuid")),
        due_in_ms: int("due_in_ms").expect("due_in_ms"),
        lease_left_ms: int("lease_left_ms"),
    }
}

async fn business_count(store: &Arc<dyn Store>, h: &dyn Harness, key: &str) -> i64 {
    query_one(store, h.dialect().business_count, key).await["n"]
        .as_i64()
        .expect("count")
}

fn source(test: &str) -> String {
    format!("{test}-{}", Uuid::new_v4().simple())
}

fn pull(source: &str, key: &str, aggregate: Option<&str>) -> NewInboxMessage {
    let mut m = NewInboxMessage::new(source, key, json!({ "key": key })).pull();
    m.aggregate_id = aggregate.map(str::to_string);
    m
}

async fn insert(store: &Arc<dyn Store>, m: NewInboxMessage) -> Uuid {
    match store.insert_inbox(&m).await.expect("insert") {
        InsertOutcome::Inserted(id) => id,
        other => panic!("expected a new row, got {other:?}"),
    }
}

const LEASE: Duration = Duration::from_secs(30);
/// Long enough that a loaded CI machine renews or completes within it; tests sleep past it.
const SHORT_LEASE: Duration = Duration::from_millis(1500);

fn stranger(c: &ClaimRef) -> ClaimRef {
    ClaimRef {
        id: c.id,
        token: Uuid::new_v4(),
    }
}

// ---------------------------------------------------------------------------------------
// The behaviours.

async fn insert_dedup_returns_duplicate_with_the_stored_id(store: Arc<dyn Store>, h: &dyn Harness) {
    let src = source("dedup");
    let mut m = pull(&src, "k1", Some("agg"));
    m.headers.insert("x-trace".into(), json!("abc"));
    let first = store.insert_inbox(&m).await.unwrap();
    let InsertOutcome::Inserted(id) = first else {
        panic!("first insert must insert, got {first:?}")
    };
    let mut again = m.clone();
    again.payload = json!({"different": true});
    assert_eq!(
        store.insert_inbox(&again).await.unwrap(),
        InsertOutcome::Duplicate(id)
    );
    // The same key in another source is a different message.
    let other = store
        .insert_inbox(&pull(&format!("{src}-other"), "k1", None))
        .await
        .unwrap();
    assert!(!other.is_duplicate() && other.id() != id);
    // The first payload and headers are what a claim hands out.
    let claimed = store.claim_pull(&src, 10, LEASE).await.unwrap();
    assert_eq!(claimed.len(), 1);
    assert_eq!(claimed[0].message.payload, json!({"key": "k1"}));
    assert_eq!(
        claimed[0].message.headers.get("x-trace"),
        Some(&json!("abc"))
    );
    assert_eq!(claimed[0].message.aggregate_id.as_deref(), Some("agg"));
    assert_eq!(row(&store, h, id).await.state, "processing");
}

async fn claim_returns_due_rows_in_order_one_per_aggregate(store: Arc<dyn Store>, h: &dyn Harness) {
    let src = source("order");
    let a1 = insert(&store, pull(&src, "a1", Some("A"))).await;
    let a2 = insert(&store, pull(&src, "a2", Some("A"))).await;
    let b1 = insert(&store, pull(&src, "b1", Some("B"))).await;
    let n1 = insert(&store, pull(&src, "n1", None)).await;
    let n2 = insert(&store, pull(&src, "n2", None)).await;
    let mut later = pull(&src, "later", None);
    later.delay = Some(Duration::from_secs(3600));
    let later = insert(&store, later).await;
    // A push row of the same source is never a pull claim's business.
    insert(
        &store,
        NewInboxMessage::new(src.as_str(), "push", json!({})),
    )
    .await;

    let claimed = store.claim_pull(&src, 10, LEASE).await.unwrap();
    let ids: Vec<Uuid> = claimed.iter().map(|c| c.message.id).collect();
    assert_eq!(
        ids,
        vec![a1, b1, n1, n2],
        "due rows in arrival order, only the head of aggregate A"
    );
    assert!(claimed
        .iter()
        .all(|c| c.message.attempt == 0 && c.message.source == src));
    assert_eq!(row(&store, h, a2).await.state, "pending");
    assert_eq!(row(&store, h, later).await.state, "pending");
    assert!(row(&store, h, later).await.due_in_ms > 3_000_000);

    // A2 waits while A1 holds a live lease, and follows once A1 is done.
    assert!(store.claim_pull(&src, 10, LEASE).await.unwrap().is_empty());
    assert!(store.complete_pull(&claimed[0].claim).await.unwrap());
    let next = store.claim_pull(&src, 10, LEASE).await.unwrap();
    assert_eq!(
        next.iter().map(|c| c.message.id).collect::<Vec<_>>(),
        vec![a2]
    );

    // The batch size bounds a claim.
    let src2 = source("batch");
    for i in 0..5 {
        insert(&store, pull(&src2, &format!("k{i}"), None)).await;
    }
    assert_eq!(store.claim_pull(&src2, 2, LEASE).await.unwrap().len(), 2);
    assert_eq!(store.claim_pull(&src2, 10, LEASE).await.unwrap().len(), 3);
}

async fn concurrent_claims_never_return_the_same_row(store: Arc<dyn Store>, _h: &dyn Harness) {
    let src = source("race");
    const ROWS: usize = 60;
    for i in 0..ROWS {
        // A third of the rows share aggregates: the head rule and the row locks race together.
        let agg = if i % 3 == 0 {
            Some(format!("g{}", i % 4))
        } else {
            None
        };
        insert(&store, pull(&src, &format!("k{i}"), agg.as_deref())).await;
    }
    let done = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut workers = Vec::new();
    for _ in 0..4 {
        let (store, src, done) = (store.clone(), src.clone(), done.clone());
        workers.push(tokio::spawn(async move {
            let mut mine = Vec::new();
            let mut rounds = 0;
            while done.load(std::sync::atomic::Ordering::SeqCst) < ROWS {
                rounds += 1;
                assert!(rounds < 5_000, "the rows were not drained");
                let batch = store.claim_pull(&src, 3, LEASE).await.expect("claim");
                for c in &batch {
                    // Completing lets the next row of an aggregate become claimable.
                    assert!(
                        store.complete_pull(&c.claim).await.expect("complete"),
                        "a fresh claim must complete"
                    );
                }
                done.fetch_add(batch.len(), std::sync::atomic::Ordering::SeqCst);
                mine.extend(batch.into_iter().map(|c| c.message.id));
                tokio::task::yield_now().await;
            }
            mine
        }));
    }
    let mut all = Vec::new();
    for w in workers {
        all.extend(w.await.unwrap());
    }
    let distinct: HashSet<Uuid> = all.iter().copied().collect();
    assert_eq!(distinct.len(), all.len(), "a row was claimed twice");
    assert_eq!(distinct.len(), ROWS, "every row is claimed once");
}

async fn fenced_writes_with_a_stale_token_change_nothing(store: Arc<dyn Store>, h: &dyn Harness) {
    let src = source("fence");
    let id = insert(&store, pull(&src, "k", None)).await;
    let claim = store
        .claim_pull(&src, 1, LEASE)
        .await
        .unwrap()
        .remove(0)
        .claim;
    let before = row(&store, h, id).await;
    assert_eq!(before.claim_token, Some(claim.token));
    let wrong = stranger(&claim);
    assert!(!store.complete_pull(&wrong).await.unwrap());
    assert!(!store.retry_pull(&wrong, Duration::ZERO, "x").await.unwrap());
    assert!(!store.dead_pull(&wrong, "x").await.unwrap());
    assert!(!store.release_pull(&wrong).await.unwrap());
    assert!(store.renew_pull(&[wrong], LEASE).await.unwrap().is_empty());
    let mut tx = store.begin().await.unwrap();
    assert!(!tx.complete_pull(&wrong).await.unwrap());
    tx.commit().await.unwrap();
    let after = row(&store, h, id).await;
    assert_eq!(
        (
            after.state.as_str(),
            after.attempt,
            &after.last_error,
            after.claim_token
        ),
        ("processing", 0, &None, Some(claim.token))
    );
    // A row id that does not exist is fenced out too.
    assert!(!store
        .complete_pull(&ClaimRef {
            id: Uuid::new_v4(),
            token: claim.token
        })
        .await
        .unwrap());
    assert!(store.complete_pull(&claim).await.unwrap());
    // Finished: the same token no longer matches.
    assert!(!store.complete_pull(&claim).await.unwrap());
    assert_eq!(row(&store, h, id).await.state, "processed");
}

async fn an_expired_lease_is_claimed_again_and_fences_the_old_token(
    store: Arc<dyn Store>,
    h: &dyn Harness,
) {
    let src = source("expiry");
    let id = insert(&store, pull(&src, "k", Some("A"))).await;
    let next = insert(&store, pull(&src, "k2", Some("A"))).await;
    let old = store.claim_pull(&src, 5, SHORT_LEASE).await.unwrap();
    assert_eq!(old.len(), 1);
    let old = old[0].claim;
    tokio::time::sleep(SHORT_LEASE + Duration::from_millis(700)).await;
    // The expired row is the head of its aggregate again; its successor still waits.
    let again = store.claim_pull(&src, 5, LEASE).await.unwrap();
    assert_eq!(
        again.iter().map(|c| c.message.id).collect::<Vec<_>>(),
        vec![id]
    );
    let new = again[0].claim;
    assert_ne!(new.token, old.token);
    assert_eq!(again[0].message.attempt, 0, "a reclaim spends no attempt");
    assert!(
        !store.complete_pull(&old).await.unwrap(),
        "the old token is fenced out"
    );
    assert!(!store
        .retry_pull(&old, Duration::ZERO, "late")
        .await
        .unwrap());
    assert!(store.renew_pull(&[old], LEASE).await.unwrap().is_empty());
    assert_eq!(row(&store, h, id).await.claim_token, Some(new.token));
    assert!(store.complete_pull(&new).await.unwrap());
    assert_eq!(row(&store, h, next).await.state, "pending");
    assert_eq!(
        store.claim_pull(&src, 5, LEASE).await.unwrap()[0]
            .message
            .id,
        next
    );
}

async fn an_expired_claim_cannot_complete_even_before_it_is_reclaimed(
    store: Arc<dyn Store>,
    h: &dyn Harness,
) {
    let src = source("lapsed");
    let id = insert(&store, pull(&src, "k", None)).await;
    let claim = store.claim_pull(&src, 1, SHORT_LEASE).await.unwrap()[0].claim;
    tokio::time::sleep(SHORT_LEASE + Duration::from_millis(700)).await;
    assert!(
        !store.complete_pull(&claim).await.unwrap(),
        "the fence compares the lease with the database clock"
    );
    assert_eq!(row(&store, h, id).await.state, "processing");
}

async fn retry_spends_an_attempt_and_moves_the_row_later(store: Arc<dyn Store>, h: &dyn Harness) {
    let src = source("retry");
    let id = insert(&store, pull(&src, "k", None)).await;
    let claim = store.claim_pull(&src, 1, LEASE).await.unwrap()[0].claim;
    assert!(store
        .retry_pull(&claim, Duration::from_secs(60), "boom 1")
        .await
        .unwrap());
    let r = row(&store, h, id).await;
    assert_eq!(
        (
            r.state.as_str(),
            r.attempt,
            r.last_error.as_deref(),
            r.claim_token
        ),
        ("pending", 1, Some("boom 1"), None)
    );
    assert!(
        r.due_in_ms > 55_000 && r.due_in_ms <= 60_000,
        "scheduled about 60 s ahead, got {} ms",
        r.due_in_ms
    );
    assert_eq!(r.lease_left_ms, None);
    assert!(
        store.claim_pull(&src, 1, LEASE).await.unwrap().is_empty(),
        "not due yet"
    );
    assert!(
        !store
            .retry_pull(&claim, Duration::ZERO, "again")
            .await
            .unwrap(),
        "the retried claim is over"
    );

    // With no delay the row is due at once, and the claim shows the attempts so far.
    let src2 = source("retry-now");
    let id2 = insert(&store, pull(&src2, "k", None)).await;
    let c = store.claim_pull(&src2, 1, LEASE).await.unwrap()[0].claim;
    assert!(store.retry_pull(&c, Duration::ZERO, "boom").await.unwrap());
    let again = store.claim_pull(&src2, 1, LEASE).await.unwrap();
    assert_eq!((again[0].message.id, again[0].message.attempt), (id2, 1));
    assert!(store
        .retry_pull(&again[0].claim, Duration::ZERO, "boom 2")
        .await
        .unwrap());
    let r = row(&store, h, id2).await;
    assert_eq!((r.attempt, r.last_error.as_deref()), (2, Some("boom 2")));
}

/// "A pull retry lets later messages pass" (proto-docs/sql-contract.md). A row waiting in retry backoff
/// is not in flight, so the next row of its aggregate is claimed meanwhile; one row per
/// aggregate still holds a live lease at a time, and the retried row comes back when it is
/// due and its aggregate is free.
async fn a_pull_row_in_retry_backoff_lets_later_rows_of_its_aggregate_pass(
    store: Arc<dyn Store>,
    h: &dyn Harness,
) {
    let src = source("retry-pass");
    let a1 = insert(&store, pull(&src, "a1", Some("A"))).await;
    let a2 = insert(&store, pull(&src, "a2", Some("A"))).await;
    let a3 = insert(&store, pull(&src, "a3", Some("A"))).await;
    let ids = |c: &[queuebox_core::ClaimedRow]| c.iter().map(|c| c.message.id).collect::<Vec<_>>();

    let first = store.claim_pull(&src, 10, LEASE).await.unwrap();
    assert_eq!(ids(&first), vec![a1], "one row of the aggregate in flight");
    const BACKOFF: Duration = Duration::from_millis(2500);
    assert!(store
        .retry_pull(&first[0].claim, BACKOFF, "boom")
        .await
        .unwrap());
    let r = row(&store, h, a1).await;
    assert_eq!((r.state.as_str(), r.attempt), ("pending", 1));
    assert!(r.due_in_ms > 0, "a1 waits in backoff");

    // a1 is in backoff: a2 passes it, and a3 still waits behind a2's live lease.
    let second = store.claim_pull(&src, 10, LEASE).await.unwrap();
    assert_eq!(
        ids(&second),
        vec![a2],
        "the row after the one in backoff is claimed"
    );
    assert!(
        store.claim_pull(&src, 10, LEASE).await.unwrap().is_empty(),
        "a2 holds the aggregate's live lease"
    );
    assert!(store.complete_pull(&second[0].claim).await.unwrap());
    let third = store.claim_pull(&src, 10, LEASE).await.unwrap();
    assert_eq!(ids(&third), vec![a3]);
    assert_eq!(
        row(&store, h, a1).await.state,
        "pending",
        "a1 is still not due"
    );

    // a1 falls due while a3 holds the lease: it waits; once a3 is done, it comes back.
    tokio::time::sleep(BACKOFF + Duration::from_millis(300)).await;
    assert!(row(&store, h, a1).await.due_in_ms <= 0);
    assert!(
        store.claim_pull(&src, 10, LEASE).await.unwrap().is_empty(),
        "a due row still waits for a live lease"
    );
    assert!(store.complete_pull(&third[0].claim).await.unwrap());
    let back = store.claim_pull(&src, 10, LEASE).await.unwrap();
    assert_eq!(ids(&back), vec![a1]);
    assert_eq!(back[0].message.attempt, 1);
}

async fn dead_sets_last_error_and_ends_the_row(store: Arc<dyn Store>, h: &dyn Harness) {
    let src = source("dead");
    let id = insert(&store, pull(&src, "k", Some("A"))).await;
    let next = insert(&store, pull(&src, "k2", Some("A"))).await;
    let claim = store.claim_pull(&src, 5, LEASE).await.unwrap()[0].claim;
    assert!(store
        .dead_pull(&claim, "poison: field `x` missing")
        .await
        .unwrap());
    let r = row(&store, h, id).await;
    assert_eq!(
        (
            r.state.as_str(),
            r.attempt,
            r.last_error.as_deref(),
            r.claim_token
        ),
        ("dead", 0, Some("poison: field `x` missing"), None)
    );
    // A dead row no longer blocks its aggregate, and is never claimed again.
    let claimed = store.claim_pull(&src, 5, LEASE).await.unwrap();
    assert_eq!(
        claimed.iter().map(|c| c.message.id).collect::<Vec<_>>(),
        vec![next]
    );

    // A message inserted as dead (a broker body that is not JSON) is never claimable.
    let mut bad = pull(&src, "bad", None);
    bad.dead_reason = Some("body is not JSON".into());
    let bad = insert(&store, bad).await;
    let r = row(&store, h, bad).await;
    assert_eq!(
        (r.state.as_str(), r.last_error.as_deref()),
        ("dead", Some("body is not JSON"))
    );
    assert!(store.claim_pull(&src, 5, LEASE).await.unwrap().is_empty());
}

/// Several rows stored in one call are each answered as [`Store::insert_inbox`] would answer
/// it, in order: a new key is `Inserted` (once per source: the same key in another source is
/// its own row), a stored key is a `Duplicate` of the stored id, and a key repeated within the
/// call is stored once, its later rows `Duplicate`s of the first.
async fn insert_many_answers_each_row_as_insert_would(store: Arc<dyn Store>, _h: &dyn Harness) {
    group_insert_answers_each_row_as_insert_would(&store, false).await;
    // The default, for a backend without a statement for groups: one insert per row.
    group_insert_answers_each_row_as_insert_would(&store, true).await;
}

async fn group_insert_answers_each_row_as_insert_would(store: &Arc<dyn Store>, default: bool) {
    let src = source("many");
    let other = source("many-other");
    let stored = insert(store, pull(&src, "stored", None)).await;
    let msgs = [
        pull(&src, "a", None),
        pull(&src, "stored", None),
        pull(&src, "a", None),
        pull(&other, "a", None),
        pull(&src, "b", None),
    ];
    let out = if default {
        queuebox_core::store::insert_inbox_each(&**store, &msgs).await
    } else {
        store.insert_inbox_many(&msgs).await
    };
    let out: Vec<InsertOutcome> = out
        .into_iter()
        .map(|r| r.expect("each row stored or found"))
        .collect();
    assert_eq!(out.len(), msgs.len(), "one outcome per row: {out:?}");
    let InsertOutcome::Inserted(a) = out[0] else {
        panic!("a new key is inserted: {out:?}");
    };
    assert_eq!(out[1], InsertOutcome::Duplicate(stored), "{out:?}");
    assert_eq!(out[2], InsertOutcome::Duplicate(a), "{out:?}");
    let (InsertOutcome::Inserted(other_a), InsertOutcome::Inserted(b)) = (out[3], out[4]) else {
        panic!("another source's key and a second new key are inserted: {out:?}");
    };
    assert_eq!(HashSet::from([stored, a, other_a, b]).len(), 4, "{out:?}");
    let ids = |rows: Vec<queuebox_core::ClaimedRow>| -> HashSet<Uuid> {
        rows.iter().map(|r| r.message.id).collect()
    };
    let claimed = ids(store.claim_pull(&src, 10, LEASE).await.unwrap());
    assert_eq!(
        claimed,
        HashSet::from([stored, a, b]),
        "each key stored once"
    );
    let claimed = ids(store.claim_pull(&other, 10, LEASE).await.unwrap());
    assert_eq!(claimed, HashSet::from([other_a]));
}

/// A pull worker's owner session holds a key of its own (never 0, never another session's)
/// while its connection lives; rows claimed under it expire at once when it ends, not after
/// their lease; a free key is taken back on reopening. A backend without owner sessions (SQL
/// Server) opens none and expires nothing: a dead worker's rows wait for their lease.
async fn owner_sessions_hold_their_keys_and_a_dead_owners_claims_expire_at_once(
    store: Arc<dyn Store>,
    _h: &dyn Harness,
) {
    let src = source("owner");
    let Some(mut first) = store.open_owner_session().await.unwrap() else {
        assert_eq!(store.expire_dead_owners(&src).await.unwrap(), 0);
        return;
    };
    let second = store
        .open_owner_session()
        .await
        .unwrap()
        .expect("a second session");
    let key = first.key();
    assert!(key != 0 && second.key() != 0 && key != second.key());
    first.check().await.expect("a live session");
    for k in ["o1", "o2"] {
        insert(&store, pull(&src, k, None)).await;
    }
    let claimed = store
        .claim_pull_owned(&src, 10, LEASE, Some(key))
        .await
        .unwrap();
    assert_eq!(claimed.len(), 2);
    assert_eq!(
        store.expire_dead_owners(&src).await.unwrap(),
        0,
        "the owner lives"
    );
    drop(first);
    // The lock goes with the connection, which closes in the background.
    let expired = std::cell::Cell::new(0);
    queuebox_testkit::wait_until(
        Duration::from_secs(20),
        "the ended session's rows expiring",
        || async {
            expired.set(store.expire_dead_owners(&src).await.unwrap());
            expired.get() > 0
        },
    )
    .await;
    assert_eq!(expired.get(), 2, "both rows of the ended session");
    let again = store.claim_pull(&src, 10, LEASE).await.unwrap();
    assert_eq!(again.len(), 2, "claimed again long before the 30 s lease");
    let back = store
        .reopen_owner_session(key)
        .await
        .unwrap()
        .expect("reopened");
    assert_eq!(back.key(), key, "a free key is taken back");
    // A session whose connection the server ended fails its check (PostgreSQL: the backend
    // holding the second session's advisory lock is terminated).
    let mut tx = store.begin().await.unwrap();
    tx.execute(
        "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' \
         AND objsubid = 1 AND ((classid::int8 << 32) | objid::int8) = $1::int8",
        &[SqlValue::Int(second.key())],
    )
    .await
    .unwrap();
    tx.commit().await.unwrap();
    // The backend ends on its own time after the signal: poll until the check sees it.
    let second = tokio::sync::Mutex::new(second);
    queuebox_testkit::wait_until(
        Duration::from_secs(20),
        "the ended session's check to fail",
        || async { second.lock().await.check().await.is_err() },
    )
    .await;
}

async fn release_returns_to_pending_without_spending_an_attempt(
    store: Arc<dyn Store>,
    h: &dyn Harness,
) {
    let src = source("release");
    let id = insert(&store, pull(&src, "k", None)).await;
    let claim = store.claim_pull(&src, 1, LEASE).await.unwrap()[0].claim;
    assert!(store.release_pull(&claim).await.unwrap());
    let r = row(&store, h, id).await;
    assert_eq!(
        (r.state.as_str(), r.attempt, r.last_error, r.claim_token),
        ("pending", 0, None, None)
    );
    assert!(r.due_in_ms <= 0, "due at once");
    let again = store.claim_pull(&src, 1, LEASE).await.unwrap();
    assert_eq!((again[0].message.id, again[0].message.attempt), (id, 0));
    assert!(
        !store.release_pull(&claim).await.unwrap(),
        "the released claim is over"
    );
}

async fn complete_inside_a_transaction_commits_or_rolls_back_with_the_business_write(
    store: Arc<dyn Store>,
    h: &dyn Harness,
) {
    let src = source("tx");
    let committed = insert(&store, pull(&src, "commit", None)).await;
    let rolled = insert(&store, pull(&src, "rollback", None)).await;
    let claims = store.claim_pull(&src, 2, LEASE).await.unwrap();
    let (c1, c2) = (claims[0].claim, claims[1].claim);
    assert_eq!((c1.id, c2.id), (committed, rolled));
    let (k1, k2) = (
        format!("order-{}", Uuid::new_v4()),
        format!("order-{}", Uuid::new_v4()),
    );

    let mut tx = store.begin().await.unwrap();
    assert_eq!(
        tx.execute(h.dialect().business_insert, &[SqlValue::Text(k1.clone())])
            .await
            .unwrap(),
        1
    );
    assert!(tx.complete_pull(&c1).await.unwrap());
    // Inside the transaction the write is visible to the handler itself.
    assert_eq!(
        tx.query(h.dialect().business_count, &[SqlValue::Text(k1.clone())])
            .await
            .unwrap()[0]["n"],
        json!(1)
    );
    tx.commit().await.unwrap();
    assert_eq!(row(&store, h, committed).await.state, "processed");
    assert_eq!(business_count(&store, h, &k1).await, 1);

    let mut tx = store.begin().await.unwrap();
    tx.execute(h.dialect().business_insert, &[SqlValue::Text(k2.clone())])
        .await
        .unwrap();
    assert!(tx.complete_pull(&c2).await.unwrap());
    tx.rollback().await.unwrap();
    let r = row(&store, h, rolled).await;
    assert_eq!(
        (r.state.as_str(), r.claim_token),
        ("processing", Some(c2.token)),
        "rollback keeps the claim as it was"
    );
    assert_eq!(business_count(&store, h, &k2).await, 0);

    // A transaction dropped without commit or rollback leaves nothing behind either.
    {
        let mut tx = store.begin().await.unwrap();
        tx.execute(h.dialect().business_insert, &[SqlValue::Text(k2.clone())])
            .await
            .unwrap();
        assert!(tx.complete_pull(&c2).await.unwrap());
    }
    assert_eq!(business_count(&store, h, &k2).await, 0);
    assert_eq!(row(&store, h, rolled).await.state, "processing");
    assert!(
        store.complete_pull(&c2).await.unwrap(),
        "the claim is still live after the rollbacks"
    );
}

async fn a_failed_statement_ends_the_transaction_without_completing(
    store: Arc<dyn Store>,
    h: &dyn Harness,
) {
    let src = source("txfail");
    let id = insert(&store, pull(&src, "k", None)).await;
    let claim = store.claim_pull(&src, 1, LEASE).await.unwrap()[0].claim;
    let key = format!("order-{}", Uuid::new_v4());
    let mut tx = store.begin().await.unwrap();
    tx.execute(h.dialect().business_insert, &[SqlValue::Text(key.clone())])
        .await
        .unwrap();
    // The same primary key again: the statement fails, and with it the transaction.
    assert!(tx
        .execute(h.dialect().business_insert, &[SqlValue::Text(key.clone())])
        .await
        .is_err());
    // A completion after the failure must not commit on its own.
    assert!(
        tx.complete_pull(&claim).await.is_err(),
        "completing in a failed transaction is an error"
    );
    tx.rollback().await.unwrap();
    let r = row(&store, h, id).await;
    assert_eq!(
        (r.state.as_str(), r.claim_token),
        ("processing", Some(claim.token))
    );
    assert_eq!(business_count(&store, h, &key).await, 0);
    assert!(store.complete_pull(&claim).await.unwrap());
}

async fn renew_extends_only_live_claims(store: Arc<dyn Store>, h: &dyn Harness) {
    let src = source("renew");
    let lapsing = insert(&store, pull(&src, "lapsing", None)).await;
    let kept = insert(&store, pull(&src, "kept", None)).await;
    let done = insert(&store, pull(&src, "done", None)).await;
    let claims = store.claim_pull(&src, 3, SHORT_LEASE).await.unwrap();
    let by_id = |id: Uuid| claims.iter().find(|c| c.message.id == id).unwrap().claim;
    let (c_lapsing, c_kept, c_done) = (by_id(lapsing), by_id(kept), by_id(done));
    // Renewed in time: one call for many claims.
    let renewed = store.renew_pull(&[c_kept, c_done], LEASE).await.unwrap();
    assert_eq!(
        renewed.into_iter().collect::<HashSet<_>>(),
        HashSet::from([kept, done])
    );
    assert!(store.complete_pull(&c_done).await.unwrap());
    tokio::time::sleep(SHORT_LEASE + Duration::from_millis(700)).await;
    // Now: `lapsing` expired, `done` is processed, `kept` is live, plus a stranger's token.
    let renewed = store
        .renew_pull(&[c_lapsing, c_kept, c_done, stranger(&c_kept)], LEASE)
        .await
        .unwrap();
    assert_eq!(renewed, vec![kept]);
    let left = row(&store, h, kept).await.lease_left_ms.unwrap();
    assert!(
        left > 25_000 && left <= 30_000,
        "lease renewed to about 30 s, got {left} ms"
    );
    assert_eq!(row(&store, h, lapsing).await.state, "processing");
    assert!(!store.complete_pull(&c_lapsing).await.unwrap());
    assert!(store.complete_pull(&c_kept).await.unwrap());
    assert!(store.renew_pull(&[], LEASE).await.unwrap().is_empty());
}

async fn complete_many_completes_only_live_claims_in_one_call(
    store: Arc<dyn Store>,
    h: &dyn Harness,
) {
    let src = source("many");
    let mut ids = Vec::new();
    for i in 0..4 {
        ids.push(insert(&store, pull(&src, &format!("k{i}"), None)).await);
    }
    let lapsing = insert(&store, pull(&format!("{src}-lapsing"), "k", None)).await;
    let claims: Vec<ClaimRef> = store
        .claim_pull(&src, 10, LEASE)
        .await
        .unwrap()
        .into_iter()
        .map(|c| c.claim)
        .collect();
    let lapsed = store
        .claim_pull(&format!("{src}-lapsing"), 1, SHORT_LEASE)
        .await
        .unwrap()[0]
        .claim;
    assert_eq!(claims.len(), 4);
    assert!(store.release_pull(&claims[3]).await.unwrap());
    tokio::time::sleep(SHORT_LEASE + Duration::from_millis(700)).await;
    // Live: 0 and 1. Fenced out: a stranger's token for 2, the released 3, the lapsed lease.
    let done = store
        .complete_pull_many(&[
            claims[0],
            claims[1],
            stranger(&claims[2]),
            claims[3],
            lapsed,
        ])
        .await
        .unwrap();
    assert_eq!(
        done.into_iter().collect::<HashSet<_>>(),
        HashSet::from([ids[0], ids[1]])
    );
    for (i, want) in [
        (0, "processed"),
        (1, "processed"),
        (2, "processing"),
        (3, "pending"),
    ] {
        assert_eq!(row(&store, h, ids[i]).await.state, want, "row {i}");
    }
    assert_eq!(row(&store, h, lapsing).await.state, "processing");
    assert!(store.complete_pull_many(&[]).await.unwrap().is_empty());
    assert_eq!(
        store.complete_pull_many(&[claims[2]]).await.unwrap(),
        vec![ids[2]]
    );
}

async fn handler_queries_return_rows_as_json(store: Arc<dyn Store>, h: &dyn Harness) {
    let src = source("json");
    let id = insert(&store, pull(&src, "k", None)).await;
    let r = query_one(&store, h.dialect().row, &id.to_string()).await;
    assert_eq!(r["state"], json!("pending"));
    assert_eq!(r["attempt"], json!(0));
    assert_eq!(r["last_error"], Value::Null);
    assert!(r["due_in_ms"].is_i64());
}

// ---------------------------------------------------------------------------------------
// The relay role ([`RelayStore`]). Its claims take rows of every source and topic, so each of
// these tests gets a fresh database of its own.

fn outbox_row(topic: &str, key: Option<&str>) -> NewOutboxRow {
    let mut headers = serde_json::Map::new();
    headers.insert("x-source".into(), json!("orders"));
    NewOutboxRow {
        topic: topic.into(),
        key: key.map(str::to_string),
        payload: json!({ "topic": topic }),
        headers,
        max_attempts: 3,
    }
}

fn outbox_ids(claimed: &[ClaimedOutbox]) -> Vec<Uuid> {
    claimed.iter().map(|c| c.row.id).collect()
}

// A claim fills its batch with every claimable row, however many rows wait behind the heads
// of their keys: with fewer keys than the batch, and with one hot key holding the oldest rows.
async fn outbox_claims_fill_the_batch_behind_a_hot_key_and_one_statement_marks_it_sent(
    relay: Arc<dyn RelayStore>,
    _store: &Arc<dyn Store>,
) {
    let mut hot = Vec::new();
    for _ in 0..12 {
        hot.push(
            relay
                .insert_outbox(&outbox_row("t", Some("hot")))
                .await
                .unwrap(),
        );
    }
    for k in ["a", "b", "c", "d", "e"] {
        for _ in 0..2 {
            relay
                .insert_outbox(&outbox_row("t", Some(k)))
                .await
                .unwrap();
        }
    }
    for _ in 0..2 {
        relay.insert_outbox(&outbox_row("t", None)).await.unwrap();
    }
    // Claimable now: the head of each of the 6 keys and the 2 unkeyed rows.
    let mut taken = Vec::new();
    for _ in 0..2 {
        let c = relay.claim_outbox(4, LEASE).await.unwrap();
        assert_eq!(c.len(), 4, "eight rows are claimable: a batch of 4 is full");
        taken.extend(c);
    }
    assert!(
        relay.claim_outbox(4, LEASE).await.unwrap().is_empty(),
        "every other row waits behind the head of its key"
    );
    let mut keys: Vec<Option<String>> = taken.iter().map(|c| c.row.key.clone()).collect();
    keys.sort();
    let some = |k: &str| Some(k.to_string());
    assert_eq!(
        keys,
        vec![
            None,
            None,
            some("a"),
            some("b"),
            some("c"),
            some("d"),
            some("e"),
            some("hot")
        ],
        "one row per key, and both unkeyed rows"
    );
    assert!(
        taken.iter().any(|c| c.row.id == hot[0]),
        "the hot key's head"
    );
    // One statement marks the batch sent, fenced per row: a stale token marks nothing.
    let mut claims: Vec<_> = taken.iter().map(|c| c.claim).collect();
    claims.push(stranger(&taken[0].claim));
    let mut marked = relay.mark_sent_many(&claims).await.unwrap();
    marked.sort();
    let mut expected: Vec<Uuid> = taken.iter().map(|c| c.row.id).collect();
    expected.sort();
    assert_eq!(
        marked, expected,
        "every live claim marked once, the stranger not"
    );
    assert!(
        relay.mark_sent_many(&claims).await.unwrap().is_empty(),
        "a claim ends with its first outcome"
    );
    assert!(relay.mark_sent_many(&[]).await.unwrap().is_empty());
    // Sending the heads makes each key's next row (and the hot key's second) claimable.
    let next = relay.claim_outbox(10, LEASE).await.unwrap();
    assert_eq!(next.len(), 6, "the second row of each of the six keys");
    assert!(next.iter().any(|c| c.row.id == hot[1]));
}

async fn outbox_claims_keep_the_key_head_rule_and_fence_every_outcome(
    relay: Arc<dyn RelayStore>,
    _store: &Arc<dyn Store>,
) {
    let a1 = relay
        .insert_outbox(&outbox_row("t", Some("k")))
        .await
        .unwrap();
    let a2 = relay
        .insert_outbox(&outbox_row("t", Some("k")))
        .await
        .unwrap();
    let n = relay.insert_outbox(&outbox_row("t", None)).await.unwrap();
    let e = relay
        .insert_outbox(&outbox_row("t", Some("")))
        .await
        .unwrap();
    let first = relay.claim_outbox(10, LEASE).await.unwrap();
    assert_eq!(
        outbox_ids(&first),
        vec![a1, n, e],
        "the second row of key k waits for the first; keyless rows do not"
    );
    let r = &first[0].row;
    assert_eq!(
        (
            r.topic.as_str(),
            r.key.as_deref(),
            r.attempt,
            r.max_attempts
        ),
        ("t", Some("k"), 0, 3)
    );
    assert_eq!(
        (r.payload.clone(), r.headers["x-source"].clone()),
        (json!({"topic": "t"}), json!("orders"))
    );
    assert!(
        relay.claim_outbox(10, LEASE).await.unwrap().is_empty(),
        "a2 waits while a1 is processing"
    );
    let renewed = relay
        .renew_outbox(&[first[1].claim, stranger(&first[2].claim)], LEASE)
        .await
        .unwrap();
    assert_eq!(renewed, vec![n], "a renewal extends live claims only");
    assert!(relay.renew_outbox(&[], LEASE).await.unwrap().is_empty());

    let c1 = first[0].claim;
    assert!(!relay.mark_sent(&stranger(&c1)).await.unwrap());
    assert!(!relay
        .retry_outbox(&stranger(&c1), Duration::ZERO, "x")
        .await
        .unwrap());
    assert!(!relay.dead_outbox(&stranger(&c1), "x").await.unwrap());
    assert!(relay.mark_sent(&c1).await.unwrap());
    assert!(
        !relay.mark_sent(&c1).await.unwrap(),
        "a claim ends with its first outcome"
    );

    let second = relay.claim_outbox(10, LEASE).await.unwrap();
    assert_eq!(outbox_ids(&second), vec![a2]);
    assert!(relay
        .retry_outbox(&second[0].claim, Duration::ZERO, "broker down")
        .await
        .unwrap());
    let third = relay.claim_outbox(10, LEASE).await.unwrap();
    assert_eq!(
        (outbox_ids(&third), third[0].row.attempt),
        (vec![a2], 1),
        "a retry spends an attempt"
    );
    assert!(relay.dead_outbox(&third[0].claim, "gave up").await.unwrap());
    let dead = relay.list_dead_outbox(10).await.unwrap();
    assert_eq!(dead.len(), 1);
    assert_eq!(
        (
            dead[0].id,
            dead[0].topic_or_source.as_str(),
            dead[0].key.as_deref()
        ),
        (a2, "t", Some("k"))
    );
    assert_eq!(
        (dead[0].attempt, dead[0].last_error.as_deref()),
        (1, Some("gave up"))
    );

    // A retry with a delay is not due yet.
    assert!(relay
        .retry_outbox(&first[1].claim, Duration::from_secs(60), "later")
        .await
        .unwrap());
    assert!(relay.claim_outbox(10, LEASE).await.unwrap().is_empty());

    let replay_t = ReplayFilter {
        topic: Some("t".into()),
        ..Default::default()
    };
    assert_eq!(
        relay.replay_outbox(&replay_t).await.unwrap(),
        2,
        "the sent a1 and the dead a2; the delayed n and the claimed e stay"
    );
    let replayed = relay.claim_outbox(10, LEASE).await.unwrap();
    assert_eq!(
        outbox_ids(&replayed),
        vec![a1],
        "the replay moved the sent a1 and the dead a2 back; a2 waits for a1"
    );
    assert_eq!(replayed[0].row.attempt, 0);
    assert!(relay.mark_sent(&replayed[0].claim).await.unwrap());
    let a2_again = relay.claim_outbox(10, LEASE).await.unwrap();
    assert_eq!(
        (outbox_ids(&a2_again), a2_again[0].row.attempt),
        (vec![a2], 0),
        "a replay resets the attempts"
    );
    assert_eq!(
        relay.delete_outbox(&[a1, a2]).await.unwrap(),
        1,
        "a row being delivered is not deleted"
    );
    assert!(relay.mark_sent(&a2_again[0].claim).await.unwrap());
    // Filters: the x-source header, dead only, ids.
    assert_eq!(
        relay
            .replay_outbox(&ReplayFilter {
                source: Some("other".into()),
                ..Default::default()
            })
            .await
            .unwrap(),
        0
    );
    assert_eq!(
        relay
            .replay_outbox(&ReplayFilter {
                source: Some("orders".into()),
                dead_only: true,
                ..Default::default()
            })
            .await
            .unwrap(),
        0
    );
    assert_eq!(
        relay
            .replay_outbox(&ReplayFilter {
                ids: Some(vec![n, a2]),
                ..Default::default()
            })
            .await
            .unwrap(),
        1,
        "n is pending"
    );
    assert_eq!(
        relay
            .replay_outbox(&ReplayFilter {
                source: Some("orders".into()),
                ..Default::default()
            })
            .await
            .unwrap(),
        0,
        "a2 is pending again"
    );
}

async fn push_claims_take_one_row_per_aggregate_and_forward_exactly_once(
    relay: Arc<dyn RelayStore>,
    store: &Arc<dyn Store>,
) {
    let src = source("push");
    let p1 = insert(
        store,
        NewInboxMessage::new(&src, "1", json!({"n": 1})).aggregate("agg"),
    )
    .await;
    let p2 = insert(
        store,
        NewInboxMessage::new(&src, "2", json!({"n": 2})).aggregate("agg"),
    )
    .await;
    let p3 = insert(store, NewInboxMessage::new(&src, "3", json!({"n": 3}))).await;
    insert(store, pull(&src, "4", None)).await; // a pull row is not the relay's
    let claimed = relay.claim_push(10, LEASE).await.unwrap();
    assert_eq!(
        claimed.iter().map(|c| c.message.id).collect::<Vec<_>>(),
        vec![p1, p3],
        "one row per aggregate, in order"
    );
    assert_eq!(claimed[0].message.aggregate_id.as_deref(), Some("agg"));
    assert!(
        relay.claim_push(10, LEASE).await.unwrap().is_empty(),
        "p2 waits while its aggregate is processing"
    );
    // The rows of a batch waiting for their forward are renewed in one statement, fenced.
    let mut renewed = relay
        .renew_push(
            &[
                claimed[0].claim,
                claimed[1].claim,
                stranger(&claimed[0].claim),
            ],
            LEASE,
        )
        .await
        .unwrap();
    renewed.sort();
    let mut both = vec![p1, p3];
    both.sort();
    assert_eq!(renewed, both, "live push claims renewed, a stale token not");

    let row = NewOutboxRow {
        topic: format!("{src}.out"),
        key: Some("agg".into()),
        payload: claimed[0].message.payload.clone(),
        headers: Default::default(),
        max_attempts: 5,
    };
    assert_eq!(
        relay
            .forward_push(&stranger(&claimed[0].claim), &row)
            .await
            .unwrap(),
        Forwarded::ClaimLost
    );
    let Forwarded::Done { outbox_id } = relay.forward_push(&claimed[0].claim, &row).await.unwrap()
    else {
        panic!("the live claim forwards")
    };
    assert_eq!(
        relay.forward_push(&claimed[0].claim, &row).await.unwrap(),
        Forwarded::ClaimLost,
        "a second forward inserts nothing"
    );
    let out = relay.claim_outbox(10, LEASE).await.unwrap();
    assert_eq!(
        outbox_ids(&out),
        vec![outbox_id],
        "exactly one outbox row, from the live forward"
    );
    assert_eq!(
        (
            out[0].row.topic.clone(),
            out[0].row.payload.clone(),
            out[0].row.max_attempts
        ),
        (format!("{src}.out"), json!({"n": 1}), 5)
    );

    assert!(!relay
        .dead_push(&stranger(&claimed[1].claim), "x")
        .await
        .unwrap());
    assert!(relay
        .dead_push(&claimed[1].claim, "no topic")
        .await
        .unwrap());
    let next = relay.claim_push(10, LEASE).await.unwrap();
    assert_eq!(
        next.iter().map(|c| c.message.id).collect::<Vec<_>>(),
        vec![p2],
        "the aggregate is free once p1 is processed"
    );
    let dead = relay.list_dead_inbox(10).await.unwrap();
    assert_eq!(dead.len(), 1);
    assert_eq!(
        (
            dead[0].id,
            dead[0].topic_or_source.as_str(),
            dead[0].key.as_deref(),
            dead[0].last_error.as_deref()
        ),
        (p3, src.as_str(), Some("3"), Some("no topic"))
    );
    let r = relay.inbox_row(p1).await.unwrap().expect("p1 exists");
    assert_eq!(
        (
            r.source.as_str(),
            r.idempotency_key.as_str(),
            r.payload.clone()
        ),
        (src.as_str(), "1", json!({"n": 1}))
    );
    assert!(relay.inbox_row(Uuid::new_v4()).await.unwrap().is_none());
}

async fn a_push_batch_forwards_its_live_claims_in_claim_order_and_fences_the_rest(
    relay: Arc<dyn RelayStore>,
    store: &Arc<dyn Store>,
) {
    let src = source("pushmany");
    for k in ["1", "2", "3", "4"] {
        insert(store, NewInboxMessage::new(&src, k, json!({ "k": k }))).await;
    }
    let claimed = relay.claim_push(10, LEASE).await.unwrap();
    assert_eq!(claimed.len(), 4);
    // The third claim is stale (another replica took the row): it alone is not forwarded.
    let rows: Vec<_> = claimed
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let claim = if i == 2 { stranger(&c.claim) } else { c.claim };
            let key = c.message.idempotency_key.clone();
            (claim, outbox_row(&format!("{src}.{key}"), Some("one-key")))
        })
        .collect();
    let out = relay.forward_push_many(&rows).await.unwrap();
    assert_eq!(out.len(), 4);
    assert_eq!(out[2], Forwarded::ClaimLost);
    let done: Vec<Uuid> = out
        .iter()
        .filter_map(|f| match f {
            Forwarded::Done { outbox_id } => Some(*outbox_id),
            Forwarded::ClaimLost => None,
        })
        .collect();
    assert_eq!(done.len(), 3);
    // One key: the outbox hands its rows out one at a time, in the batch's order.
    let mut topics = Vec::new();
    for _ in 0..4 {
        let batch = relay.claim_outbox(10, LEASE).await.unwrap();
        let Some(first) = batch.first() else { break };
        assert_eq!(batch.len(), 1, "one row per key at a time");
        topics.push((first.row.id, first.row.topic.clone()));
        assert!(relay.mark_sent(&first.claim).await.unwrap());
    }
    let expected: Vec<(Uuid, String)> = done
        .iter()
        .zip(["1", "2", "4"])
        .map(|(id, k)| (*id, format!("{src}.{k}")))
        .collect();
    assert_eq!(topics, expected, "forwarded rows only, in claim order");
    assert_eq!(
        relay.forward_push_many(&rows[..1]).await.unwrap(),
        vec![Forwarded::ClaimLost],
        "a second forward inserts nothing"
    );
    // The stale claim's row is still claimed by its real holder, who forwards it.
    assert!(matches!(
        relay
            .forward_push_many(&[(claimed[2].claim, outbox_row("late", None))])
            .await
            .unwrap()[..],
        [Forwarded::Done { .. }]
    ));
}

async fn expired_relay_leases_are_fenced_and_reclaimed_without_spending_an_attempt(
    relay: Arc<dyn RelayStore>,
    store: &Arc<dyn Store>,
) {
    let p = insert(store, NewInboxMessage::new(source("lease"), "1", json!({}))).await;
    let o = relay
        .insert_outbox(&outbox_row("lease", Some("k")))
        .await
        .unwrap();
    let push = relay.claim_push(1, SHORT_LEASE).await.unwrap();
    let out = relay.claim_outbox(1, SHORT_LEASE).await.unwrap();
    assert_eq!((push.len(), out.len()), (1, 1));
    assert_eq!(
        (
            relay.reclaim_push().await.unwrap(),
            relay.reclaim_outbox().await.unwrap()
        ),
        (0, 0),
        "live leases stay"
    );
    tokio::time::sleep(SHORT_LEASE + Duration::from_millis(500)).await;
    assert_eq!(
        relay
            .forward_push(&push[0].claim, &outbox_row("lost", None))
            .await
            .unwrap(),
        Forwarded::ClaimLost
    );
    assert!(
        !relay.mark_sent(&out[0].claim).await.unwrap(),
        "an expired lease fences the outcome"
    );
    assert_eq!(
        (
            relay.reclaim_push().await.unwrap(),
            relay.reclaim_outbox().await.unwrap()
        ),
        (1, 1)
    );
    let push2 = relay.claim_push(1, LEASE).await.unwrap();
    assert_eq!(push2[0].message.id, p);
    assert_ne!(push2[0].claim.token, push[0].claim.token);
    let out2 = relay.claim_outbox(10, LEASE).await.unwrap();
    assert_eq!(
        outbox_ids(&out2),
        vec![o],
        "the lost forward inserted nothing"
    );
    assert_eq!(out2[0].row.attempt, 0, "a reclaim spends no attempt");
}

async fn backlog_and_retention_count_and_delete_only_terminal_rows(
    relay: Arc<dyn RelayStore>,
    store: &Arc<dyn Store>,
) {
    let b = relay.outbox_backlog().await.unwrap();
    assert_eq!(
        (
            b.pending,
            b.oldest_pending_age,
            relay.inbox_backlog().await.unwrap().push_oldest_pending_age
        ),
        (0, 0.0, 0.0)
    );
    for _ in 0..4 {
        relay.insert_outbox(&outbox_row("r", None)).await.unwrap();
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let b = relay.outbox_backlog().await.unwrap();
    assert_eq!(b.pending, 4);
    assert!(b.oldest_pending_age >= 0.05, "{b:?}");
    let claimed = relay.claim_outbox(4, LEASE).await.unwrap();
    for c in &claimed[..3] {
        assert!(relay.mark_sent(&c.claim).await.unwrap());
    }
    assert!(relay.dead_outbox(&claimed[3].claim, "x").await.unwrap());
    assert_eq!(relay.outbox_backlog().await.unwrap().pending, 0);
    assert_eq!(
        relay
            .delete_old_outbox(Duration::from_secs(3600), 100)
            .await
            .unwrap(),
        0,
        "too young"
    );
    assert_eq!(
        relay.delete_excess_outbox(1, 1).await.unwrap(),
        1,
        "the batch bounds a delete"
    );
    assert_eq!(
        relay.delete_excess_outbox(1, 100).await.unwrap(),
        1,
        "the newest sent and dead rows stay"
    );
    assert_eq!(relay.delete_excess_outbox(1, 100).await.unwrap(), 0);
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(
        relay.delete_old_outbox(Duration::ZERO, 100).await.unwrap(),
        2
    );

    let src = source("retention");
    let done = insert(store, NewInboxMessage::new(&src, "1", json!({}))).await;
    let dead = insert(store, NewInboxMessage::new(&src, "2", json!({}))).await;
    let claimed = relay.claim_push(2, LEASE).await.unwrap();
    assert_eq!(claimed.len(), 2);
    for c in &claimed {
        if c.message.id == done {
            assert!(matches!(
                relay
                    .forward_push(&c.claim, &outbox_row("r", None))
                    .await
                    .unwrap(),
                Forwarded::Done { .. }
            ));
        } else {
            assert!(relay.dead_push(&c.claim, "x").await.unwrap());
        }
    }
    let waiting = insert(store, NewInboxMessage::new(&src, "3", json!({}))).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(relay.inbox_backlog().await.unwrap().push_oldest_pending_age >= 0.05);
    assert_eq!(
        relay
            .delete_old_inbox(Duration::from_secs(3600), 100)
            .await
            .unwrap(),
        0,
        "too young"
    );
    assert_eq!(
        relay.delete_old_inbox(Duration::ZERO, 100).await.unwrap(),
        2,
        "processed and dead rows go"
    );
    assert!(
        relay.inbox_row(done).await.unwrap().is_none()
            && relay.inbox_row(dead).await.unwrap().is_none()
    );
    assert!(
        relay.inbox_row(waiting).await.unwrap().is_some(),
        "a pending row stays"
    );
}

async fn the_inbox_backlog_ages_push_and_pull_rows_apart(
    relay: Arc<dyn RelayStore>,
    store: &Arc<dyn Store>,
) {
    let src = source("backlog");
    insert(store, pull(&src, "p1", None)).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let b = relay.inbox_backlog().await.unwrap();
    assert_eq!(
        b.push_oldest_pending_age, 0.0,
        "a waiting pull row is not the relay's backlog: {b:?}"
    );
    assert!(b.pull_oldest_pending_age >= 0.25, "{b:?}");
    insert(store, NewInboxMessage::new(&src, "s1", json!({}))).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let b = relay.inbox_backlog().await.unwrap();
    assert!(
        b.push_oldest_pending_age >= 0.05 && b.push_oldest_pending_age < b.pull_oldest_pending_age,
        "{b:?}"
    );
    // A claimed push row is no longer pending; the pull row still waits.
    assert_eq!(relay.claim_push(10, LEASE).await.unwrap().len(), 1);
    let b = relay.inbox_backlog().await.unwrap();
    assert_eq!(b.push_oldest_pending_age, 0.0, "{b:?}");
    assert!(b.pull_oldest_pending_age >= 0.35, "{b:?}");
}

// ---------------------------------------------------------------------------------------
// The backends.

/// One test per behaviour and backend: `$pg` and `$ms` name the test modules, `$setup` the
/// function of `pg` and `mssql` that returns the two arguments of each behaviour.
/// The statements an application runs in its own transaction (`queuebox_core::app_tx`), in
/// the backend's native parameter style, with every parameter bound as text as a wrapper
/// binds it: the fenced completion commits or rolls back with the business write and a
/// stale token matches nothing; the publish inserts every row with the core's ids.
async fn application_transaction_statements_complete_and_publish(
    store: Arc<dyn Store>,
    h: &dyn Harness,
) {
    use queuebox_core::app_tx::{self, OutboxMessage, Placeholder};
    use queuebox_core::store::{sql, Backend};
    // The templates rendered for QueueBox's own names, as the store renders them.
    let names = queuebox_core::store::names::Names::default();
    let (pg_complete, pg_publish) = (
        names.render(Backend::Postgres, sql::postgres::APP_COMPLETE),
        names.render(Backend::Postgres, sql::postgres::PUBLISH),
    );
    let (complete_sql, publish_sql, count_sql, style) = match store.backend() {
        Backend::Postgres => (
            pg_complete.as_str(),
            pg_publish.as_str(),
            "SELECT COUNT(*) AS n FROM outbox WHERE id = CAST($1 AS uuid) AND state = 'pending' AND max_attempts = 7",
            Placeholder::Dollar,
        ),
        Backend::SqlServer => (
            sql::sqlserver::APP_COMPLETE,
            sql::sqlserver::PUBLISH,
            "SELECT COUNT(*) AS n FROM outbox WHERE id = @P1 AND state = 'pending' AND max_attempts = 7",
            Placeholder::At,
        ),
    };
    let text = |v: &str| SqlValue::Text(v.to_string());
    let src = source("apptx");
    let id = insert(&store, pull(&src, "app", None)).await;
    let c = store.claim_pull(&src, 1, LEASE).await.unwrap()[0].claim;
    let key = format!("order-{}", Uuid::new_v4());

    let mut tx = store.begin().await.unwrap();
    tx.execute(h.dialect().business_insert, &[text(&key)])
        .await
        .unwrap();
    let stale = [text(&c.id.to_string()), text(&Uuid::new_v4().to_string())];
    assert_eq!(
        tx.execute(complete_sql, &stale).await.unwrap(),
        0,
        "a stale token matches nothing"
    );
    tx.rollback().await.unwrap();
    assert_eq!(business_count(&store, h, &key).await, 0);
    assert_eq!(row(&store, h, id).await.state, "processing");

    let mut tx = store.begin().await.unwrap();
    tx.execute(h.dialect().business_insert, &[text(&key)])
        .await
        .unwrap();
    let fence = [text(&c.id.to_string()), text(&c.token.to_string())];
    assert_eq!(tx.execute(complete_sql, &fence).await.unwrap(), 1);
    let messages = [
        OutboxMessage::new("apptx", json!({ "n": 1 })).max_attempts(7),
        OutboxMessage::new("apptx", json!("two"))
            .key(&key)
            .header("x-tenant", "t1")
            .max_attempts(7)
            .delay(Duration::from_secs(60)),
    ];
    let st = app_tx::publish_statement(&messages, style, store.backend()).unwrap();
    let param = st.params[0].clone().unwrap();
    assert_eq!(tx.execute(publish_sql, &[text(&param)]).await.unwrap(), 2);
    tx.commit().await.unwrap();
    assert_eq!(row(&store, h, id).await.state, "processed");
    assert_eq!(business_count(&store, h, &key).await, 1);
    for published in &st.ids {
        assert_eq!(
            query_one(&store, count_sql, &published.to_string()).await["n"],
            json!(1),
            "row {published} published"
        );
    }
}

// Cancel (PostgreSQL only, like the other operator commands: SQL Server's RelayStore refuses).

fn counts(cancelled: u64, in_flight: u64, finished: u64, push: u64) -> Cancelled {
    Cancelled {
        cancelled,
        in_flight,
        finished,
        push,
    }
}

async fn cancel_takes_pending_pull_rows_once_and_leaves_rows_in_flight(
    relay: Arc<dyn RelayStore>,
    store: &Arc<dyn Store>,
    h: &dyn Harness,
) {
    let src = source("cancel");
    let by_aggregate = |a: &str| CancelTarget::inbox(Some(src.clone()), None, None, Some(a.into()));
    let by_key = |k: &str| CancelTarget::inbox(Some(src.clone()), None, Some(k.into()), None);
    let a1 = insert(store, pull(&src, "a1", Some("A"))).await;
    let a2 = insert(store, pull(&src, "a2", Some("A"))).await;
    let mut scheduled = pull(&src, "sched", None);
    scheduled.delay = Some(Duration::from_secs(3600));
    let scheduled = insert(store, scheduled).await;
    let push = insert(store, NewInboxMessage::new(src.as_str(), "push", json!({}))).await;

    let claimed = store.claim_pull(&src, 1, LEASE).await.unwrap();
    assert_eq!(claimed[0].message.id, a1);
    // The claimed head of A is being handled: left alone and said so; the row behind it goes.
    let r = relay.cancel(&by_aggregate("A").unwrap()).await.unwrap();
    assert_eq!(r, counts(1, 1, 0, 0));
    assert_eq!(row(store, h, a2).await.state, "cancelled");
    assert_eq!(row(store, h, a1).await.state, "processing");
    assert!(
        store.complete_pull(&claimed[0].claim).await.unwrap(),
        "a row in flight finishes normally"
    );
    // Nothing is cancelled twice: both rows are now terminal.
    let r = relay.cancel(&by_aggregate("A").unwrap()).await.unwrap();
    assert_eq!(r, counts(0, 0, 2, 0));
    assert_eq!(row(store, h, a1).await.state, "processed");

    // A scheduled row, by idempotency key; a push row is never cancelled.
    assert_eq!(
        relay.cancel(&by_key("sched").unwrap()).await.unwrap(),
        counts(1, 0, 0, 0)
    );
    assert_eq!(row(store, h, scheduled).await.state, "cancelled");
    let r = relay
        .cancel(&CancelTarget::inbox(None, Some(push), None, None).unwrap())
        .await
        .unwrap();
    assert_eq!(r, counts(0, 0, 0, 1));
    assert_eq!(row(store, h, push).await.state, "pending");
    // Names that match nothing: an unknown key, an id under another source.
    assert_eq!(
        relay.cancel(&by_key("nope").unwrap()).await.unwrap(),
        counts(0, 0, 0, 0)
    );
    let elsewhere = CancelTarget::inbox(Some("other".into()), Some(a2), None, None).unwrap();
    assert_eq!(relay.cancel(&elsewhere).await.unwrap(), counts(0, 0, 0, 0));

    // A cancelled row does not hold its aggregate back, and is never claimed.
    let a3 = insert(store, pull(&src, "a3", Some("A"))).await;
    let next = store.claim_pull(&src, 10, LEASE).await.unwrap();
    assert_eq!(
        next.iter().map(|c| c.message.id).collect::<Vec<_>>(),
        vec![a3]
    );

    // Retention deletes cancelled rows like processed ones (the push row is still pending).
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(
        relay.delete_old_inbox(Duration::ZERO, 100).await.unwrap(),
        3
    );
    assert!(relay.inbox_row(a2).await.unwrap().is_none());
    assert!(relay.inbox_row(push).await.unwrap().is_some());

    // A cancel must name rows: an id, or a key or an aggregate within a source.
    for bad in [
        CancelTarget::inbox(Some(src.clone()), None, None, None),
        CancelTarget::inbox(None, None, Some("k".into()), None),
        CancelTarget::inbox(Some(src.clone()), Some(a1), Some("k".into()), None),
        CancelTarget::outbox(None, None, None),
    ] {
        assert!(bad.is_err(), "{bad:?}");
    }
}

async fn cancel_takes_pending_outbox_rows_by_id_or_key(
    relay: Arc<dyn RelayStore>,
    _store: &Arc<dyn Store>,
) {
    let k1 = relay
        .insert_outbox(&outbox_row("t", Some("K")))
        .await
        .unwrap();
    let _k2 = relay
        .insert_outbox(&outbox_row("t", Some("K")))
        .await
        .unwrap();
    let loose = relay.insert_outbox(&outbox_row("t", None)).await.unwrap();
    let claimed = relay.claim_outbox(1, LEASE).await.unwrap();
    assert_eq!(outbox_ids(&claimed), vec![k1]);

    let by_key = |topic: Option<&str>| {
        CancelTarget::outbox(topic.map(str::to_string), None, Some("K".into())).unwrap()
    };
    assert_eq!(
        relay.cancel(&by_key(Some("other"))).await.unwrap(),
        counts(0, 0, 0, 0)
    );
    assert_eq!(
        relay.cancel(&by_key(Some("t"))).await.unwrap(),
        counts(1, 1, 0, 0)
    );
    assert!(
        relay.mark_sent(&claimed[0].claim).await.unwrap(),
        "a row in flight is delivered normally"
    );
    let by_id = CancelTarget::outbox(None, Some(loose), None).unwrap();
    assert_eq!(relay.cancel(&by_id).await.unwrap(), counts(1, 0, 0, 0));
    assert_eq!(relay.cancel(&by_id).await.unwrap(), counts(0, 0, 1, 0));
    assert_eq!(
        relay.cancel(&by_key(None)).await.unwrap(),
        counts(0, 0, 2, 0)
    );
    // Nothing is left to deliver, and retention deletes the cancelled rows with the sent one.
    assert_eq!(relay.outbox_backlog().await.unwrap().pending, 0);
    assert!(relay.claim_outbox(10, LEASE).await.unwrap().is_empty());
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(
        relay.delete_old_outbox(Duration::ZERO, 100).await.unwrap(),
        3
    );
}

mod cancel_postgres {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn cancel_takes_pending_pull_rows_once_and_leaves_rows_in_flight() {
        let (relay, store) = super::pg::relay_setup().await;
        super::cancel_takes_pending_pull_rows_once_and_leaves_rows_in_flight(
            relay,
            &store,
            &super::Sql(super::pg::DIALECT),
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn cancel_takes_pending_outbox_rows_by_id_or_key() {
        let (relay, store) = super::pg::relay_setup().await;
        super::cancel_takes_pending_outbox_rows_by_id_or_key(relay, &store).await;
    }
}

// ---- pause and resume (migration 15) ----

async fn a_paused_pull_source_claims_nothing_until_resumed(
    relay: Arc<dyn RelayStore>,
    store: &Arc<dyn Store>,
    h: &dyn Harness,
) {
    let src = source("paused-pull");
    let other = source("running-pull");
    let held = insert(store, pull(&src, "held", None)).await;
    let claimed = store.claim_pull(&src, 1, SHORT_LEASE).await.unwrap();
    assert_eq!(claimed[0].message.id, held);
    let expired = insert(store, pull(&src, "expired", None)).await;
    let lapsed = store
        .claim_pull(&src, 1, Duration::from_millis(1))
        .await
        .unwrap();
    assert_eq!(lapsed[0].message.id, expired);

    assert!(relay.pause(PauseKind::Source, &src).await.unwrap());
    assert!(
        !relay.pause(PauseKind::Source, &src).await.unwrap(),
        "a second pause says it was paused already"
    );
    // New rows keep arriving and are stored; the other source is not held.
    let waiting = insert(store, pull(&src, "waiting", None)).await;
    let free = insert(store, pull(&other, "free", None)).await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert!(
        store.claim_pull(&src, 10, LEASE).await.unwrap().is_empty(),
        "a paused source claims neither due rows nor rows whose lease expired"
    );
    let running = store.claim_pull(&other, 10, LEASE).await.unwrap();
    assert_eq!(
        running.iter().map(|c| c.message.id).collect::<Vec<_>>(),
        vec![free]
    );
    assert_eq!(row(store, h, waiting).await.attempt, 0);
    assert_eq!(row(store, h, waiting).await.state, "pending");
    // A row held when the pause came finishes normally.
    assert!(store.complete_pull(&claimed[0].claim).await.unwrap());
    let listed = relay.list_paused().await.unwrap();
    assert!(
        listed
            .iter()
            .any(|p| p.kind == PauseKind::Source && p.name == src),
        "{listed:?}"
    );

    assert!(relay.resume(PauseKind::Source, &src).await.unwrap());
    assert!(!relay.resume(PauseKind::Source, &src).await.unwrap());
    let mut after: Vec<Uuid> = store
        .claim_pull(&src, 10, LEASE)
        .await
        .unwrap()
        .iter()
        .map(|c| c.message.id)
        .collect();
    after.sort();
    let mut want = vec![expired, waiting];
    want.sort();
    assert_eq!(after, want, "resumed: the waiting row and the lapsed one");
    assert!(relay.source_seen(&src).await.unwrap());
    assert!(!relay.source_seen("never-had-a-row").await.unwrap());
}

async fn a_paused_push_source_is_not_forwarded_and_others_are(
    relay: Arc<dyn RelayStore>,
    store: &Arc<dyn Store>,
) {
    let (src, other) = (source("paused-push"), source("running-push"));
    relay.pause(PauseKind::Source, &src).await.unwrap();
    let waiting = insert(store, NewInboxMessage::new(&src, "1", json!({}))).await;
    let free = insert(store, NewInboxMessage::new(&other, "1", json!({}))).await;
    let claimed = relay.claim_push(10, LEASE).await.unwrap();
    assert_eq!(
        claimed.iter().map(|c| c.message.id).collect::<Vec<_>>(),
        vec![free]
    );
    relay.resume(PauseKind::Source, &src).await.unwrap();
    let claimed = relay.claim_push(10, LEASE).await.unwrap();
    assert_eq!(
        claimed.iter().map(|c| c.message.id).collect::<Vec<_>>(),
        vec![waiting]
    );
}

async fn paused_topics_and_destinations_stay_pending_in_the_outbox(
    relay: Arc<dyn RelayStore>,
    _store: &Arc<dyn Store>,
) {
    use queuebox_core::store::relay::topics_pattern;
    let ids = |c: &[ClaimedOutbox]| {
        let mut v: Vec<String> = c.iter().map(|c| c.row.topic.clone()).collect();
        v.sort();
        v
    };
    for topic in [
        "orders.eu",
        "orders.us",
        "orders.us.x",
        "audit",
        "a+b",
        "ab",
        "misc",
    ] {
        relay.insert_outbox(&outbox_row(topic, None)).await.unwrap();
        // A keyed row of a paused topic still heads its key.
        relay
            .insert_outbox(&outbox_row(topic, Some(topic)))
            .await
            .unwrap();
    }
    // Routes in order: orders.eu (running) before orders.* (paused destination): a topic
    // goes by its first matching route, so orders.eu is delivered and orders.us is held;
    // orders.us.x matches neither `*` glob (no dot in `*`) and falls through to `**`.
    let routes = [("orders.eu", false), ("orders.*", true), ("**", false)];
    relay.exclude_outbox_topics(topics_pattern(&["audit", "a+b"], &routes));
    let claimed = relay.claim_outbox(100, LEASE).await.unwrap();
    assert_eq!(
        ids(&claimed),
        [
            "ab",
            "ab",
            "misc",
            "misc",
            "orders.eu",
            "orders.eu",
            "orders.us.x",
            "orders.us.x"
        ],
    );
    for c in &claimed {
        assert!(relay.mark_sent(&c.claim).await.unwrap());
    }
    assert_eq!(
        relay.outbox_backlog().await.unwrap().pending,
        6,
        "held rows stay pending"
    );
    assert!(relay.claim_outbox(100, LEASE).await.unwrap().is_empty());
    relay.exclude_outbox_topics(None);
    let claimed = relay.claim_outbox(100, LEASE).await.unwrap();
    assert_eq!(
        ids(&claimed),
        ["a+b", "a+b", "audit", "audit", "orders.us", "orders.us"]
    );
    assert!(
        claimed.iter().all(|c| c.row.attempt == 0),
        "nothing was attempted while paused"
    );
}

mod pause_postgres {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_paused_pull_source_claims_nothing_until_resumed() {
        let (relay, store) = super::pg::relay_setup().await;
        super::a_paused_pull_source_claims_nothing_until_resumed(
            relay,
            &store,
            &super::Sql(super::pg::DIALECT),
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_paused_push_source_is_not_forwarded_and_others_are() {
        let (relay, store) = super::pg::relay_setup().await;
        super::a_paused_push_source_is_not_forwarded_and_others_are(relay, &store).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn paused_topics_and_destinations_stay_pending_in_the_outbox() {
        let (relay, store) = super::pg::relay_setup().await;
        super::paused_topics_and_destinations_stay_pending_in_the_outbox(relay, &store).await;
    }
}

macro_rules! contract {
    ($pg:ident, $ms:ident, $setup:ident: $($name:ident),* $(,)?) => {
        mod $pg {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    let (a, b) = super::pg::$setup().await;
                    super::$name(a, &b).await;
                }
            )*
        }
        // Ignored, so cargo reports them as not run (never `ok`) unless asked for with
        // `--include-ignored`, which scripts/test.d/11-sqlserver.sh passes when
        // QUEUEBOX_TEST_MSSQL_URL names a server; asked for without a server, they fail.
        mod $ms {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                #[ignore = "needs a SQL Server: --features sqlserver and QUEUEBOX_TEST_MSSQL_URL"]
                async fn $name() {
                    match super::mssql::$setup().await {
                        Some((a, b)) => super::$name(a, &b).await,
                        None => panic!(
                            "NOT RUN: {}::{}: {}",
                            stringify!($ms),
                            stringify!($name),
                            super::mssql::SKIP_REASON
                        ),
                    }
                }
            )*
        }
    };
}

contract!(
    relay_postgres,
    relay_sqlserver,
    relay_setup:
    outbox_claims_keep_the_key_head_rule_and_fence_every_outcome,
    outbox_claims_fill_the_batch_behind_a_hot_key_and_one_statement_marks_it_sent,
    push_claims_take_one_row_per_aggregate_and_forward_exactly_once,
    a_push_batch_forwards_its_live_claims_in_claim_order_and_fences_the_rest,
    expired_relay_leases_are_fenced_and_reclaimed_without_spending_an_attempt,
    backlog_and_retention_count_and_delete_only_terminal_rows,
    the_inbox_backlog_ages_push_and_pull_rows_apart,
);

contract!(
    postgres,
    sqlserver,
    setup:
    insert_dedup_returns_duplicate_with_the_stored_id,
    insert_many_answers_each_row_as_insert_would,
    owner_sessions_hold_their_keys_and_a_dead_owners_claims_expire_at_once,
    claim_returns_due_rows_in_order_one_per_aggregate,
    concurrent_claims_never_return_the_same_row,
    fenced_writes_with_a_stale_token_change_nothing,
    an_expired_lease_is_claimed_again_and_fences_the_old_token,
    an_expired_claim_cannot_complete_even_before_it_is_reclaimed,
    retry_spends_an_attempt_and_moves_the_row_later,
    a_pull_row_in_retry_backoff_lets_later_rows_of_its_aggregate_pass,
    dead_sets_last_error_and_ends_the_row,
    release_returns_to_pending_without_spending_an_attempt,
    complete_inside_a_transaction_commits_or_rolls_back_with_the_business_write,
    renew_extends_only_live_claims,
    complete_many_completes_only_live_claims_in_one_call,
    a_failed_statement_ends_the_transaction_without_completing,
    handler_queries_return_rows_as_json,
    application_transaction_statements_complete_and_publish,
);

mod pg {
    use super::*;
    use queuebox_core::backend::{self, DatabaseSettings};
    use queuebox_core::migrate;
    use queuebox_core::store::postgres::PgStore;
    use tokio::sync::OnceCell;

    pub(super) const DIALECT: Dialect = Dialect {
        row: "SELECT state, attempt, last_error, claim_token::text AS claim_token,
                     (extract(epoch FROM scheduled_at - clock_timestamp()) * 1000)::int8 AS due_in_ms,
                     (extract(epoch FROM lease_expires_at - clock_timestamp()) * 1000)::int8 AS lease_left_ms
                FROM inbox WHERE id = $1::uuid",
        business_insert: "INSERT INTO contract_orders (id) VALUES ($1)",
        business_count: "SELECT count(*) AS n FROM contract_orders WHERE id = $1",
    };

    /// One fresh, migrated database for this test process.
    static DATABASE: OnceCell<String> = OnceCell::const_new();

    async fn database() -> String {
        let url = queuebox_testkit::fresh_database("contract").await;
        let store = PgStore::connect(&url, 2).await.expect("connect");
        migrate::postgres::run(&store).await.expect("migrate");
        sqlx::query("CREATE TABLE contract_orders (id TEXT PRIMARY KEY)")
            .execute(store.pool())
            .await
            .expect("business table");
        store.close().await;
        url
    }

    pub async fn setup() -> (Arc<dyn Store>, Sql) {
        let url = DATABASE.get_or_init(database).await;
        let store = PgStore::connect(url, 8).await.expect("connect");
        (Arc::new(store), Sql(DIALECT))
    }

    /// The relay role on a fresh database of its own, through the backend factory (what the
    /// relay calls): the relay store and the pull store of one [`Database`].
    pub async fn relay_setup() -> (Arc<dyn RelayStore>, Arc<dyn Store>) {
        let db = backend::connect(&DatabaseSettings::new(database().await).pool_size(8))
            .await
            .expect("connect");
        assert_eq!(
            db.schema_version().await.unwrap(),
            db.latest_version(),
            "migrated to this build's version"
        );
        (db.relay_store(), db.store())
    }
}

mod mssql {
    #[allow(unused_imports)]
    use super::*;

    #[cfg(not(feature = "sqlserver"))]
    pub const SKIP_REASON: &str =
        "built without the `sqlserver` feature (cargo test -p queuebox-core --features sqlserver)";
    #[cfg(feature = "sqlserver")]
    pub const SKIP_REASON: &str = "QUEUEBOX_TEST_MSSQL_URL is not set";

    #[cfg(not(feature = "sqlserver"))]
    pub async fn setup() -> Option<(Arc<dyn Store>, Sql)> {
        None
    }

    #[cfg(not(feature = "sqlserver"))]
    pub async fn relay_setup() -> Option<(Arc<dyn RelayStore>, Arc<dyn Store>)> {
        None
    }

    #[cfg(feature = "sqlserver")]
    pub use with_feature::{relay_setup, setup};

    #[cfg(feature = "sqlserver")]
    mod with_feature {
        use super::super::*;
        use queuebox_core::backend::{self, Database, DatabaseSettings};
        use tokio::sync::OnceCell;

        const DIALECT: Dialect = Dialect {
            row: "SELECT state, attempt, last_error, claim_token,
                         DATEDIFF_BIG(millisecond, SYSUTCDATETIME(), scheduled_at) AS due_in_ms,
                         DATEDIFF_BIG(millisecond, SYSUTCDATETIME(), lease_expires_at) AS lease_left_ms
                    FROM inbox WHERE id = @P1",
            business_insert: "INSERT INTO contract_orders (id) VALUES (@P1)",
            business_count: "SELECT COUNT(*) AS n FROM contract_orders WHERE id = @P1",
        };

        /// The URL of one fresh, migrated database, or None without a server.
        static DATABASE: OnceCell<Option<String>> = OnceCell::const_new();

        /// `url` (any SQL Server form) naming database `name` instead of its own: the path of
        /// a `sqlserver://` URL, else a `database=` key, which tiberius reads before
        /// `databaseName` and `Initial Catalog` (a repeated key keeps its last value).
        fn url_of_database(url: &str, name: &str) -> String {
            let lower = url.trim().to_ascii_lowercase();
            if lower.starts_with("sqlserver://") || lower.starts_with("mssql://") {
                let mut u = url::Url::parse(url.trim()).expect("QUEUEBOX_TEST_MSSQL_URL parses");
                u.set_path(&format!("/{name}"));
                u.to_string()
            } else {
                format!("{};database={name}", url.trim().trim_end_matches(';'))
            }
        }

        /// Connects `url` through the backend factory, as the relay and the bindings do.
        async fn connect(url: &str) -> Arc<dyn Database> {
            let db = backend::connect(&DatabaseSettings::new(url).pool_size(8))
                .await
                .expect("connect through backend::connect");
            assert_eq!(db.backend(), queuebox_core::store::Backend::SqlServer);
            db
        }

        async fn database() -> Option<String> {
            let url = std::env::var("QUEUEBOX_TEST_MSSQL_URL")
                .ok()
                .filter(|u| !u.trim().is_empty())?;
            let admin = connect(&url).await;
            let name = format!("qb_contract_{}", Uuid::new_v4().simple());
            // CREATE DATABASE cannot run inside a transaction: a script, outside one.
            admin
                .execute_script(&format!("CREATE DATABASE [{name}]"))
                .await
                .expect("create database");
            admin.close().await;
            let url = url_of_database(&url, &name);
            let db = connect(&url).await;
            let store = db.store();
            let mut tx = store.begin().await.expect("begin");
            let rows = tx
                .query("SELECT DB_NAME() AS name", &[])
                .await
                .expect("DB_NAME()");
            assert_eq!(
                rows[0]["name"],
                json!(name),
                "the URL names the fresh database"
            );
            tx.commit().await.expect("commit");
            db.migrate().await.expect("migrate");
            // Applying again is a no-op.
            let again = db.migrate().await.expect("migrate again");
            assert!(again.applied.is_empty());
            let mut tx = store.begin().await.expect("begin");
            tx.execute(
                "CREATE TABLE contract_orders (id NVARCHAR(100) NOT NULL PRIMARY KEY)",
                &[],
            )
            .await
            .expect("business table");
            tx.commit().await.expect("commit");
            Some(url)
        }

        pub async fn setup() -> Option<(Arc<dyn Store>, Sql)> {
            let url = DATABASE.get_or_init(database).await.clone()?;
            Some((connect(&url).await.store(), Sql(DIALECT)))
        }

        /// The relay role on a fresh database of its own, through the backend factory (what
        /// the relay calls): the relay store and the pull store of one [`Database`].
        pub async fn relay_setup() -> Option<(Arc<dyn RelayStore>, Arc<dyn Store>)> {
            let db = connect(&database().await?).await;
            assert_eq!(
                db.schema_version().await.unwrap(),
                db.latest_version(),
                "migrated to this build's version"
            );
            db.migrate()
                .await
                .expect("migrating again through the backend is a no-op");
            Some((db.relay_store(), db.store()))
        }
    }
}

/// `Worker::connect` (what the bindings call) picks the SQL Server store for a SQL Server
/// connection string: against a closed port the error is tiberius' refused connection, with
/// the password masked, not a PostgreSQL URL parse error.
#[cfg(feature = "sqlserver")]
#[tokio::test]
async fn worker_connect_dispatches_sqlserver_urls_to_the_sqlserver_store() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    for url in [
        format!("sqlserver://sa:hunter22@127.0.0.1:{port}/app?trust_server_certificate=true"),
        format!("Server=tcp:127.0.0.1,{port};Database=app;User Id=sa;Password=hunter22;TrustServerCertificate=true"),
    ] {
        let err = queuebox_core::Worker::connect(&url, queuebox_core::WorkerOptions::new("orders")).await.err().expect("nothing listens there");
        let text = err.to_string();
        assert!(matches!(err, queuebox_core::Error::Connect { .. }), "{text}");
        assert!(text.contains("refused") && !text.contains("PostgreSQL") && !text.contains("hunter22"), "{text}");
    }
}
