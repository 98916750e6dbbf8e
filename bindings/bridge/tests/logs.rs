//! The forwarding layer: records reach the sink with their level, message and fields; a
//! level below the minimum is not even enabled; removing the sink stops forwarding.

use std::sync::{Arc, Mutex};

use queuebox_bridge::logs::{self, LogLevel, Record};

#[test]
fn records_reach_the_sink_filtered_by_level_and_stop_when_removed() {
    let seen: Arc<Mutex<Vec<Record>>> = Arc::default();
    let into = seen.clone();
    logs::set_sink(
        Some(Arc::new(move |r: &Record| {
            into.lock().unwrap().push(r.clone())
        })),
        LogLevel::Info,
    )
    .unwrap();

    let id = uuid::Uuid::new_v4();
    tracing::warn!(message_id = %id, source = "orders", attempt = 3, "message dead-lettered");
    tracing::debug!(source = "orders", "below the minimum");
    assert!(
        !tracing::enabled!(tracing::Level::DEBUG),
        "a disabled level must be off in the macro"
    );
    assert!(tracing::enabled!(tracing::Level::INFO));

    let got = seen.lock().unwrap().clone();
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0].level, LogLevel::Warn);
    assert_eq!(got[0].message, "message dead-lettered");
    assert_eq!(got[0].fields["message_id"], id.to_string());
    assert_eq!(got[0].fields["source"], "orders");
    assert_eq!(got[0].fields["attempt"], 3);
    assert!(got[0].target.contains("logs"), "target {}", got[0].target);

    // Lowering the minimum turns debug on.
    let into = seen.clone();
    logs::set_sink(
        Some(Arc::new(move |r: &Record| {
            into.lock().unwrap().push(r.clone())
        })),
        LogLevel::Debug,
    )
    .unwrap();
    tracing::debug!("now forwarded");
    assert_eq!(
        seen.lock().unwrap().last().unwrap().message,
        "now forwarded"
    );

    logs::set_sink(None, LogLevel::Info).unwrap();
    let before = seen.lock().unwrap().len();
    tracing::error!("nobody listens");
    assert!(!tracing::enabled!(tracing::Level::ERROR));
    assert_eq!(seen.lock().unwrap().len(), before);
}

#[test]
fn level_names_and_numbers_round_trip() {
    for n in 1..=5 {
        let l = LogLevel::from_number(n).unwrap();
        assert_eq!(LogLevel::from_name(l.as_str()), Some(l));
        assert_eq!(l as u32, n);
    }
    assert_eq!(LogLevel::from_number(0), None);
    assert_eq!(LogLevel::from_name("loud"), None);
}
