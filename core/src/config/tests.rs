use super::*;

fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect()
}

const BASE: &str = "
database:
  url: postgres://app@127.0.0.1:5432/app
destinations:
  hooks:
    type: http
    baseUrl: http://127.0.0.1:9000
routes:
  - topicPattern: 'orders.**'
    destination: hooks
sources:
  orders:
    path: /orders
    idempotencyKeyPath: $.id
    topic: 'orders.{{ source }}'
";

#[test]
fn a_valid_file_loads_with_defaults() {
    let c = from_yaml_with_env(BASE, &[]).unwrap();
    assert_eq!(c.outbox.batch_size, 100);
    assert_eq!(c.route_for("orders.created.v1").unwrap().destination, "hooks");
    assert_eq!(c.sources["orders"].kind.type_name(), "http");
}

#[test]
fn every_mistake_is_listed_with_its_path_and_a_hint() {
    let y = format!("{BASE}outbox:\n  batchSzie: 3\nserver:\n  htpPort: 1\n");
    let mut y = y.replace("destination: hooks", "destination: hookz");
    y = y.replace("topic: 'orders.{{ source }}'", "topic: '{{ nope }}'");
    y = y.replace("http://127.0.0.1:9000", "ftp://127.0.0.1");
    let e = from_yaml_with_env(&y, &[]).unwrap_err();
    let text = e.to_string();
    assert!(text.contains("outbox.batchSzie: unknown key; did you mean batchSize?"), "{text}");
    assert!(text.contains("server.htpPort: unknown key; did you mean httpPort?"), "{text}");
    assert!(e.mentions("routes[0].destination"), "{text}");
    assert!(e.mentions("sources.orders.topic"), "{text}");
    assert!(e.mentions("destinations.hooks.baseUrl"), "{text}");
}

#[test]
fn a_key_of_another_kind_and_a_nested_unknown_key_fail() {
    let y = BASE.replace("baseUrl: http://127.0.0.1:9000", "baseUrl: http://127.0.0.1:9000\n    exchange: x")
        .replace("path: /orders", "path: /orders\n    auth:\n      type: bearer\n      token: abcd\n      tokn: x");
    let e = from_yaml_with_env(&y, &[]).unwrap_err();
    assert!(e.mentions("destinations.hooks.exchange"), "{e}");
    assert!(e.mentions("sources.orders.auth.tokn"), "{e}");
}

#[test]
fn variables_are_substituted_and_env_overrides_win() {
    let y = BASE.replace("127.0.0.1:9000", "${HOOK_HOST:-127.0.0.1}:${HOOK_PORT}");
    let vars = env(&[
        ("HOOK_PORT", "9100"),
        ("QUEUEBOX_OUTBOX_POLLINTERVALMS", "7"),
        ("QUEUEBOX_ROUTES_1_TOPICPATTERN", "x.*"),
        ("QUEUEBOX_ROUTES_1_DESTINATION", "my_api"),
        ("QUEUEBOX_DESTINATIONS_MY__API_TYPE", "http"),
        ("QUEUEBOX_DESTINATIONS_MY__API_BASEURL", "http://localhost:1"),
        ("QUEUEBOX_DB_SERVICE_HOST", "10.0.0.1"),
        ("QUEUEBOX_TEST_DATABASE_URL", "postgres://x@y/z"),
        ("QUEUEBOX_CONFIG_FILE", "/nope"),
    ]);
    let c = from_yaml_with_env(&y, &vars).unwrap();
    let DestinationKind::Http(h) = &c.destinations["hooks"].kind else { panic!("hooks is an http destination") };
    assert_eq!(h.base_url, "http://127.0.0.1:9100");
    assert_eq!(c.outbox.poll_interval_ms, 7);
    assert_eq!(c.routes[1].destination, "my_api");
    assert!(c.destinations.contains_key("my_api"));
}

#[test]
fn an_unknown_env_variable_fails_naming_the_variable() {
    let e = from_yaml_with_env(BASE, &env(&[("QUEUEBOX_OUTBOX_BATCHSZIE", "3")])).unwrap_err();
    let p = e.problems.iter().find(|p| p.path == "outbox.batchszie").expect("problem");
    assert_eq!(p.env.as_deref(), Some("QUEUEBOX_OUTBOX_BATCHSZIE"));
    assert!(p.message.contains("did you mean batchSize"), "{e}");
}

#[test]
fn secrets_are_redacted_in_the_printout() {
    let y = BASE.replace("app@127.0.0.1", "app:hunter22@127.0.0.1").replace("path: /orders", "path: /orders\n    auth:\n      type: hmac\n      secret: s3cr3t-value");
    let c = from_yaml_with_env(&y, &[]).unwrap();
    let out = c.to_redacted_yaml();
    assert!(!out.contains("hunter22") && !out.contains("s3cr3t-value"), "{out}");
    assert!(out.contains("***"));
}

#[test]
fn admin_without_auth_and_pull_sources_without_topics() {
    let y = format!("{BASE}admin:\n  enabled: true\n");
    assert!(from_yaml_with_env(&y, &[]).unwrap_err().mentions("admin.auth"));
    let y = format!("{BASE}admin:\n  enabled: true\n  insecure: true\n");
    assert!(from_yaml_with_env(&y, &[]).is_ok());
    let y = format!("{BASE}  jobs:\n    path: /jobs\n    consumption: pull\n");
    assert!(from_yaml_with_env(&y, &[]).is_ok());
    let y = format!("{BASE}  hooks2:\n    path: /h2\n");
    assert!(from_yaml_with_env(&y, &[]).unwrap_err().mentions("sources.hooks2.topic"));
}

#[test]
fn globs_are_anchored_and_segment_aware() {
    assert!(glob_match("order.*", "order.created"));
    assert!(!glob_match("order.*", "order"));
    assert!(!glob_match("order.*", "order.item.added"));
    assert!(glob_match("order.**", "order.item.added"));
    assert!(glob_match("**", "anything.at.all"));
    assert_eq!(render_topic(" {{source}}.{{ eventType }} ", "s", Some("e")), "s.e");
    assert_eq!(render_topic("{{ eventType }}", "s", None), "");
}
