//! The JSON the C ABI (and the Node and Python bindings) hand to the core, through the
//! bridge functions the `qb_*` exports call: worker options (`qb_worker_new`,
//! `queuebox_bridge::json::worker_options_from_json`), a pull message to enqueue
//! (`Database.enqueue`, `enqueue_message_from_json`), statement parameters
//! (`qb_task_execute` / `query`, `params_from_json`) and the application's publish
//! statement (`qb_publish_statement`, `queuebox_bridge::app_tx::publish_statement`).
//!
//! Input: a first line naming the call (`worker`, `message`, `params`, or `publish <backend>
//! <placeholder>`), then the JSON text, so the seed corpus (fuzz/corpus/c_abi_json) is
//! readable.
//!
//! Beyond "no panic": worker options round-trip through `worker_options_to_json`; every
//! refusal is an invalid-input or config error with a reason; a publish statement has one
//! id per message and its parameters as an array.
#![no_main]

use libfuzzer_sys::fuzz_target;
use queuebox_bridge::json;
use queuebox_core::{Error, ErrorKind, WorkerOptions};
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return; // the C ABI refuses a non-UTF-8 string before any JSON is read
    };
    let (call, body) = text.split_once('\n').unwrap_or((text, ""));
    let mut words = call.split(' ');
    match words.next().unwrap_or("") {
        "worker" => worker(body),
        "message" => {
            if let Err(e) =
                json::parse("message", body).and_then(|v| json::enqueue_message_from_json(&v))
            {
                refusal(&e);
            }
        }
        "params" => match json::params_from_text(Some(body)) {
            Ok(p) => {
                let v: Value = serde_json::from_str(body).expect("params parsed it");
                assert_eq!(p.len(), v.as_array().map_or(0, Vec::len));
            }
            Err(e) => refusal(&e),
        },
        "publish" => {
            let backend = words.next().filter(|b| !b.is_empty());
            let placeholder = words.next().unwrap_or("dollar");
            publish(backend, placeholder, body);
        }
        _ => {}
    }
});

fn worker(body: &str) {
    match json::parse("options", body).and_then(|v| json::worker_options_from_json(&v)) {
        Ok(o) => {
            let again = json::worker_options_from_json(&json::worker_options_to_json(&o))
                .unwrap_or_else(|e| panic!("the effective options do not read back: {e}"));
            // The effective options name the batch in force, so an adaptive (unset) batch
            // reads back as that number; everything else reads back as it was.
            let effective = WorkerOptions {
                batch_size: Some(o.batch()),
                ..o
            };
            assert_eq!(again, effective);
        }
        Err(e) => refusal(&e),
    }
}

fn publish(backend: Option<&str>, placeholder: &str, body: &str) {
    match queuebox_bridge::app_tx::publish_statement(backend, body, placeholder) {
        Ok(out) => {
            let v: Value = serde_json::from_str(&out).expect("the statement is JSON");
            let n = serde_json::from_str::<Value>(body)
                .unwrap()
                .as_array()
                .unwrap()
                .len();
            assert_eq!(v["ids"].as_array().map(Vec::len), Some(n), "{out}");
            assert!(v["params"].is_array() && v["sql"].is_string(), "{out}");
        }
        Err(e) => refusal(&e),
    }
}

/// A refusal the binding can report: invalid input or config, with a reason.
fn refusal(e: &Error) {
    assert!(
        matches!(e.kind(), ErrorKind::InvalidInput | ErrorKind::Config),
        "{:?}: {e}",
        e.kind()
    );
    assert!(!e.to_string().trim().is_empty());
}
