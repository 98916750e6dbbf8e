//! The trace context columns (migration 5) through the store on a real PostgreSQL: a row
//! inserted with a W3C trace context hands it back on a pull claim, a push claim and the
//! admin's row read; a row without one hands back none; a context built by hand that the
//! validation would not keep is refused naming the field, and quarantine drops it.

mod support;

use std::time::Duration;

use queuebox_core::store::relay::RelayStore;
use queuebox_core::trace::TraceContext;
use queuebox_core::{Error, NewInboxMessage, Store};
use serde_json::json;

const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

fn traced(key: &str) -> NewInboxMessage {
    let mut m = NewInboxMessage::new("orders", key, json!({ "k": key }));
    m.trace = Some(TraceContext {
        traceparent: TRACEPARENT.into(),
        tracestate: Some("congo=t61rcWkgMzE".into()),
    });
    m
}

#[tokio::test]
async fn claims_and_reads_return_the_stored_trace_context() {
    let (store, _) = support::fresh_store("trace_columns").await;
    let lease = Duration::from_secs(30);

    store.insert_inbox(&traced("pull-1").pull()).await.unwrap();
    store
        .insert_inbox(&NewInboxMessage::new("orders", "pull-2", json!({})).pull())
        .await
        .unwrap();
    let mut pulled = store.claim_pull("orders", 10, lease).await.unwrap();
    pulled.sort_by(|a, b| a.message.idempotency_key.cmp(&b.message.idempotency_key));
    assert_eq!(pulled.len(), 2);
    let t = pulled[0]
        .message
        .trace
        .as_ref()
        .expect("pull-1 keeps its trace");
    assert_eq!(t.traceparent, TRACEPARENT);
    assert_eq!(t.tracestate.as_deref(), Some("congo=t61rcWkgMzE"));
    assert_eq!(pulled[1].message.trace, None);

    store.insert_inbox(&traced("push-1")).await.unwrap();
    let pushed = store.claim_push(10, lease).await.unwrap();
    assert_eq!(pushed.len(), 1);
    assert_eq!(
        pushed[0]
            .message
            .trace
            .as_ref()
            .map(|t| t.traceparent.as_str()),
        Some(TRACEPARENT)
    );
    let read = store
        .inbox_row(pushed[0].message.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(read.trace, pushed[0].message.trace);
}

#[tokio::test]
async fn a_context_the_validation_would_not_keep_is_refused_or_dropped() {
    let (store, _) = support::fresh_store("trace_columns_bad").await;
    let mut m = traced("bad-1");
    m.trace.as_mut().unwrap().traceparent = TRACEPARENT.to_uppercase();
    match store.insert_inbox(&m).await {
        Err(Error::InvalidInput(why)) => assert!(why.contains("trace.traceparent"), "{why}"),
        other => panic!("expected InvalidInput, got {other:?}"),
    }
    m.quarantine(b"{}", "test");
    assert_eq!(m.trace, None);
}
