//! Each configuration mistake stops the real binary with exactly one problem, named by its
//! key path.

mod common;

use common::{relay_command, write_config};

const BASE: &str = "database:
  url: postgres://app@127.0.0.1:1/app
destinations:
  hooks:
    type: http
    baseUrl: http://127.0.0.1:9000
routes:
  - topicPattern: 'a.*'
    destination: hooks
  - topicPattern: 'b.*'
    destination: hooks
  - topicPattern: 'c.*'
    destination: hooks
";

/// Runs `queuebox check-config` on `yaml`; returns the problem lines of stderr.
async fn problems_of(yaml: &str) -> (Vec<String>, String) {
    let f = write_config(yaml);
    let out = relay_command(f.path(), &["check-config"])
        .output()
        .await
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(
        !out.status.success(),
        "check-config accepted:\n{yaml}\n{err}"
    );
    let lines = err
        .lines()
        .filter(|l| l.trim_start().starts_with("- "))
        .map(|l| l.trim().to_string())
        .collect();
    (lines, err)
}

#[tokio::test]
async fn each_config_mistake_is_one_error_naming_its_key_path() {
    // An out-of-range port.
    let (p, err) = problems_of(&format!("{BASE}server:\n  httpPort: 99999\n")).await;
    assert_eq!(p.len(), 1, "{err}");
    assert!(
        p[0].starts_with("- server.httpPort:") && p[0].contains("99999"),
        "{err}"
    );

    // A negative destination timeout, with three routes to that destination.
    let (p, err) = problems_of(&BASE.replace(
        "baseUrl: http://127.0.0.1:9000",
        "baseUrl: http://127.0.0.1:9000\n    timeoutMs: -5",
    ))
    .await;
    assert_eq!(p.len(), 1, "{err}");
    assert!(p[0].starts_with("- destinations.hooks.timeoutMs:"), "{err}");
    assert!(!err.contains("does not exist"), "{err}");

    // An unset variable: the key and the variable.
    let (p, err) = problems_of(&format!(
        "{BASE}outbox:\n  pollIntervalMs: ${{QB_TEST_UNSET_VAR}}\n"
    ))
    .await;
    assert_eq!(p.len(), 1, "{err}");
    assert!(
        p[0].starts_with("- outbox.pollIntervalMs:") && p[0].contains("QB_TEST_UNSET_VAR"),
        "{err}"
    );
}

#[tokio::test]
async fn an_unknown_key_under_a_nats_source_or_destination_names_its_full_path() {
    // NATS entries type their login keys (username, password, token, nkeySeed, credsFile,
    // tls) apart from their other keys; an unknown key in either part must still be named.
    let nats = "  bus:
    type: nats
    servers: nats://127.0.0.1:1
    subject: out
    nkeySeed: SUAX
    subjct: typo
sources:
  events:
    type: nats
    servers: nats://127.0.0.1:1
    stream: EVENTS
    durable: qb
    username: relay
    password: pw
    tls:
      caFle: /ca.pem
";
    let (p, err) = problems_of(&BASE.replace("routes:\n", &format!("{nats}routes:\n"))).await;
    assert_eq!(p.len(), 2, "{err}");
    assert!(
        p[0].starts_with("- destinations.bus.subjct: unknown key; did you mean subject?"),
        "{err}"
    );
    assert!(
        p[1].starts_with("- sources.events.tls.caFle: unknown key; did you mean caFile?"),
        "{err}"
    );
}

#[tokio::test]
async fn a_long_list_of_problems_is_printed_whole() {
    // 60 problems take ~4,000 characters: every one is printed, none cut off with "…"
    // (the list was cut at 2,000 characters).
    let mut yaml = BASE[..BASE.find("routes:").unwrap()].to_string();
    for i in 0..60 {
        yaml += &format!(
            "  d{i:02}:\n    type: http\n    baseUrl: http://127.0.0.1:9000\n    timeotMs: 5\n"
        );
    }
    yaml += "routes:\n  - topicPattern: 'a.*'\n    destination: hooks\n";
    let (p, err) = problems_of(&yaml).await;
    assert!(err.contains("the configuration has 60 problems"), "{err}");
    assert!(!err.contains('…'), "the list is cut: {err}");
    assert_eq!(p.len(), 60, "{err}");
    assert!(
        p[59].starts_with("- destinations.d59.timeotMs: unknown key; did you mean timeoutMs?"),
        "{err}"
    );
}
