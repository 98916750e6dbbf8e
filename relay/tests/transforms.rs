//! Transforms and key expressions through the real binary (issue 17; reference §4.3, §4.5,
//! §5.1 step 8, §5.2; feature rows 21, 22, 34, 39, 60): start-up refuses an expression that
//! does not compile, naming its key; a source transform reshapes the stored payload or
//! answers 422; route then destination transforms at delivery with `onError`;
//! `POST /admin/transform/test`.

mod common;

use common::*;

const CHECK_BASE: &str = "database:
  url: postgres://app@127.0.0.1:1/app
destinations:
  hooks:
    type: http
    baseUrl: http://127.0.0.1:9000
routes:
  - topicPattern: 'a.*'
    destination: hooks
sources:
  orders:
    path: /orders
    idempotencyKeyPath: $.id
    topic: a.b
";

/// `queuebox check-config` on `yaml`: the problem lines of stderr (it must refuse).
async fn problems_of(yaml: &str) -> (Vec<String>, String) {
    let f = write_config(yaml);
    let out = relay_command(f.path(), &["check-config"])
        .output()
        .await
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(!out.status.success(), "accepted:\n{yaml}\n{err}");
    let lines = err
        .lines()
        .filter(|l| l.trim_start().starts_with("- "))
        .map(|l| l.trim().to_string())
        .collect();
    (lines, err)
}

#[tokio::test]
async fn an_expression_that_does_not_compile_stops_start_up_naming_its_key() {
    let cases = [
        (
            CHECK_BASE.replace(
                "destination: hooks\n",
                "destination: hooks\n    transform:\n      expression: '{ \"a\": '\n",
            ),
            "- routes[0].transform.expression:",
        ),
        (
            CHECK_BASE.replace(
                "baseUrl: http://127.0.0.1:9000\n",
                "baseUrl: http://127.0.0.1:9000\n    transform:\n      expression: 'id +'\n",
            ),
            "- destinations.hooks.transform.expression:",
        ),
        (
            format!("{CHECK_BASE}    transform:\n      expression: '$$$('\n"),
            "- sources.orders.transform.expression:",
        ),
        (
            format!("{CHECK_BASE}    aggregateIdExpression: '$split(subject,\"/\"'\n"),
            "- sources.orders.aggregateIdExpression:",
        ),
        (
            format!("{CHECK_BASE}    transform:\n      expression: id\n      onError: skip\n"),
            "- sources.orders.transform.onError:",
        ),
    ];
    for (yaml, want) in cases {
        let (p, err) = problems_of(&yaml).await;
        assert_eq!(p.len(), 1, "{err}");
        assert!(p[0].starts_with(want), "want {want}:\n{err}");
    }
    // A valid configuration with every key is accepted.
    let ok = format!(
        "{CHECK_BASE}    transform:
      expression: '$merge([$, {{\"via\": $source}}])'
      onError: Dead
      timeoutMs: 50
    aggregateIdExpression: '$split(subject,\"/\")[2]'
    eventTypeExpression: type
    idempotencyKeyExpression: id
admin:
  enabled: true
  insecure: true
  maxTransformTimeoutMs: 500
  maxPayloadBytes: 100
"
    );
    let f = write_config(&ok);
    let out = relay_command(f.path(), &["check-config"])
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{ok}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
