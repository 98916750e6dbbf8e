use super::*;

fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
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
    assert_eq!(c.outbox.batch_size, None);
    assert_eq!(
        c.route_for("orders.created.v1").unwrap().destination,
        "hooks"
    );
    assert_eq!(c.sources["orders"].kind.type_name(), "http");
}

#[test]
fn retry_unreachable_forever_is_off_unless_asked_for() {
    let c = from_yaml_with_env(BASE, &[]).unwrap();
    assert!(
        !c.outbox.retry_unreachable_forever,
        "spent attempts make a row dead by default"
    );
    let y = format!("{BASE}outbox:\n  retryUnreachableForever: true\n");
    assert!(
        from_yaml_with_env(&y, &[])
            .unwrap()
            .outbox
            .retry_unreachable_forever
    );
    let e = env(&[("QUEUEBOX_OUTBOX_RETRYUNREACHABLEFOREVER", "true")]);
    assert!(
        from_yaml_with_env(BASE, &e)
            .unwrap()
            .outbox
            .retry_unreachable_forever
    );
}

#[test]
fn outbox_batch_size_unset_adapts_from_100_to_1000_set_is_exact() {
    let c = from_yaml_with_env(BASE, &[]).unwrap().outbox;
    assert_eq!(c.batch_sizes(), (100, 1000));
    let y = format!("{BASE}outbox:\n  batchSize: 100\n");
    let c = from_yaml_with_env(&y, &[]).unwrap().outbox;
    assert_eq!(c.batch_sizes(), (100, 100), "a set size does not adapt");
    let e = env(&[("QUEUEBOX_OUTBOX_BATCHSIZE", "2500")]);
    let c = from_yaml_with_env(BASE, &e).unwrap().outbox;
    assert_eq!(c.batch_sizes(), (2500, 2500));
    let y = format!("{BASE}outbox:\n  batchSize: 0\n");
    let text = from_yaml_with_env(&y, &[]).unwrap_err().to_string();
    assert!(text.contains("outbox.batchSize"), "{text}");
}

#[test]
fn the_printed_configuration_says_what_unset_outbox_settings_mean() {
    let shown = from_yaml_with_env(BASE, &[]).unwrap().to_redacted_yaml();
    assert!(shown.contains("  batchSize: null\n"), "{shown}");
    assert!(
        shown
            .contains("# outbox.batchSize unset: claims of 100 to 1000 rows, as the batches allow"),
        "{shown}"
    );
    assert!(
        shown.contains("# outbox.concurrency unset: up to 64 publishes at once, at most 8 of them HTTP requests"),
        "{shown}"
    );
    // Still YAML, and silent about settings that were given.
    let y = format!("{BASE}outbox:\n  batchSize: 300\n  concurrency: 4\n");
    let shown = from_yaml_with_env(&y, &[]).unwrap().to_redacted_yaml();
    assert!(!shown.contains("unset"), "{shown}");
    let back: serde_yaml::Value = serde_yaml::from_str(&shown).unwrap();
    assert_eq!(back["outbox"]["batchSize"], 300);
}

#[test]
fn outbox_concurrency_unset_caps_http_requests_at_8_and_publishes_at_64_set_caps_both() {
    let c = from_yaml_with_env(BASE, &[]).unwrap().outbox;
    assert_eq!(c.concurrency, None);
    assert_eq!((c.in_flight(), c.http_requests()), (64, 8));
    let y = format!("{BASE}outbox:\n  concurrency: 4\n");
    let c = from_yaml_with_env(&y, &[]).unwrap().outbox;
    assert_eq!(
        (c.in_flight(), c.http_requests()),
        (4, 4),
        "exact for every destination"
    );
    let e = env(&[("QUEUEBOX_OUTBOX_CONCURRENCY", "16")]);
    let c = from_yaml_with_env(BASE, &e).unwrap().outbox;
    assert_eq!((c.in_flight(), c.http_requests()), (16, 16));
    let y = format!("{BASE}outbox:\n  concurrency: 0\n");
    let text = from_yaml_with_env(&y, &[]).unwrap_err().to_string();
    assert!(text.contains("outbox.concurrency"), "{text}");
}

#[test]
fn every_mistake_is_listed_with_its_path_and_a_hint() {
    let y = format!("{BASE}outbox:\n  batchSzie: 3\nserver:\n  htpPort: 1\n");
    let mut y = y.replace("destination: hooks", "destination: hookz");
    y = y.replace("topic: 'orders.{{ source }}'", "topic: '{{ nope }}'");
    y = y.replace("http://127.0.0.1:9000", "ftp://127.0.0.1");
    let e = from_yaml_with_env(&y, &[]).unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("outbox.batchSzie: unknown key; did you mean batchSize?"),
        "{text}"
    );
    assert!(
        text.contains("server.htpPort: unknown key; did you mean httpPort?"),
        "{text}"
    );
    assert!(e.mentions("routes[0].destination"), "{text}");
    assert!(e.mentions("sources.orders.topic"), "{text}");
    assert!(e.mentions("destinations.hooks.baseUrl"), "{text}");
}

#[test]
fn a_key_of_another_kind_and_a_nested_unknown_key_fail() {
    let y = BASE
        .replace(
            "baseUrl: http://127.0.0.1:9000",
            "baseUrl: http://127.0.0.1:9000\n    exchange: x",
        )
        .replace(
            "path: /orders",
            "path: /orders\n    auth:\n      type: bearer\n      token: abcd\n      tokn: x",
        );
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
        (
            "QUEUEBOX_DESTINATIONS_MY__API_BASEURL",
            "http://localhost:1",
        ),
        ("QUEUEBOX_DB_SERVICE_HOST", "10.0.0.1"),
        ("QUEUEBOX_TEST_DATABASE_URL", "postgres://x@y/z"),
        ("QUEUEBOX_CONFIG_FILE", "/nope"),
    ]);
    let c = from_yaml_with_env(&y, &vars).unwrap();
    let DestinationKind::Http(h) = &c.destinations["hooks"].kind else {
        panic!("hooks is an http destination")
    };
    assert_eq!(h.base_url, "http://127.0.0.1:9100");
    assert_eq!(c.outbox.poll_interval_ms, 7);
    assert_eq!(c.routes[1].destination, "my_api");
    assert!(c.destinations.contains_key("my_api"));
}

#[test]
fn an_unknown_env_variable_fails_naming_the_variable() {
    let e = from_yaml_with_env(BASE, &env(&[("QUEUEBOX_OUTBOX_BATCHSZIE", "3")])).unwrap_err();
    let p = e
        .problems
        .iter()
        .find(|p| p.path == "outbox.batchszie")
        .expect("problem");
    assert_eq!(p.env.as_deref(), Some("QUEUEBOX_OUTBOX_BATCHSZIE"));
    assert!(p.message.contains("did you mean batchSize"), "{e}");
}

#[test]
fn secrets_are_redacted_in_the_printout() {
    let y = BASE
        .replace("app@127.0.0.1", "app:hunter22@127.0.0.1")
        .replace(
            "path: /orders",
            "path: /orders\n    auth:\n      type: hmac\n      secret: s3cr3t-value",
        );
    let c = from_yaml_with_env(&y, &[]).unwrap();
    let out = c.to_redacted_yaml();
    assert!(
        !out.contains("hunter22") && !out.contains("s3cr3t-value"),
        "{out}"
    );
    assert!(out.contains("***"));
}

#[test]
fn admin_without_auth_and_pull_sources_without_topics() {
    let y = format!("{BASE}admin:\n  enabled: true\n");
    assert!(from_yaml_with_env(&y, &[])
        .unwrap_err()
        .mentions("admin.auth"));
    let y = format!("{BASE}admin:\n  enabled: true\n  insecure: true\n");
    assert!(from_yaml_with_env(&y, &[]).is_ok());
    let y = format!("{BASE}  jobs:\n    path: /jobs\n    consumption: pull\n");
    assert!(from_yaml_with_env(&y, &[]).is_ok());
    let y = format!("{BASE}  hooks2:\n    path: /h2\n");
    assert!(from_yaml_with_env(&y, &[])
        .unwrap_err()
        .mentions("sources.hooks2.topic"));
}

/// The problems of `yaml` under `vars`, as (path, message) pairs.
fn problems(yaml: &str, vars: &[(&str, &str)]) -> Vec<(String, String)> {
    let e = from_yaml_with_env(yaml, &env(vars)).expect_err("the configuration must fail");
    e.problems
        .into_iter()
        .map(|p| (p.path, p.message))
        .collect()
}

#[test]
fn an_out_of_range_port_is_one_problem_naming_its_key() {
    let p = problems(&format!("{BASE}server:\n  httpPort: 99999\n"), &[]);
    assert_eq!(p.len(), 1, "{p:?}");
    assert_eq!(p[0].0, "server.httpPort");
    assert!(
        p[0].1.contains("99999") && p[0].1.contains("from 0 to 65535"),
        "{p:?}"
    );
}

#[test]
fn a_type_error_in_one_section_does_not_hide_the_mistakes_of_another() {
    let p = problems(
        &format!(
            "{BASE}server:\n  httpPort: 99999\noutbox:\n  batchSzie: 3\n  pollIntervalMs: soon\n"
        ),
        &[],
    );
    let paths: Vec<&str> = p.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(
        paths,
        [
            "server.httpPort",
            "outbox.batchSzie",
            "outbox.pollIntervalMs"
        ],
        "{p:?}"
    );
}

#[test]
fn a_negative_destination_timeout_is_one_problem_and_its_routes_stay_quiet() {
    let routes = "destination: hooks\n  - topicPattern: 'a.*'\n    destination: hooks\n  - topicPattern: 'b.*'\n    destination: hooks\n";
    let y = BASE
        .replace(
            "baseUrl: http://127.0.0.1:9000",
            "baseUrl: http://127.0.0.1:9000\n    timeoutMs: -5",
        )
        .replace("destination: hooks\n", routes);
    let p = problems(&y, &[]);
    assert_eq!(p.len(), 1, "{p:?}");
    assert_eq!(p[0].0, "destinations.hooks.timeoutMs");
    assert!(p[0].1.contains("-5"), "{p:?}");
    // A destination that really is missing is still reported.
    let y = y.replace(
        routes,
        &format!("{routes}  - topicPattern: 'c.*'\n    destination: nowhere\n"),
    );
    let p = problems(&y, &[]);
    assert_eq!(
        p.iter().map(|(p, _)| p.as_str()).collect::<Vec<_>>(),
        ["destinations.hooks.timeoutMs", "routes[3].destination"],
        "{p:?}"
    );
}

#[test]
fn an_unset_variable_is_one_problem_naming_the_variable_and_the_key() {
    let p = problems(
        &format!("{BASE}server:\n  httpPort: ${{UNSET_PORT}}\n"),
        &[],
    );
    assert_eq!(p.len(), 1, "{p:?}");
    assert_eq!(p[0].0, "server.httpPort");
    assert!(p[0].1.contains("UNSET_PORT"), "{p:?}");
    // Inside a longer value, in a list, and in a destination its routes name.
    let y = BASE
        .replace("127.0.0.1:9000", "${HOOK_HOST}:9000")
        .replace("'orders.**'", "'${TOPIC_ROOT}.**'");
    let p = problems(&y, &[]);
    assert_eq!(
        p.iter().map(|(p, _)| p.as_str()).collect::<Vec<_>>(),
        ["destinations.hooks.baseUrl", "routes[0].topicPattern"],
        "{p:?}"
    );
    assert!(
        p[0].1.contains("HOOK_HOST") && p[1].1.contains("TOPIC_ROOT"),
        "{p:?}"
    );
    let y = BASE.replace("baseUrl: http://127.0.0.1:9000", "baseUrl: ${HOOK_URL}");
    assert_eq!(problems(&y, &[]).len(), 1);
}

#[test]
fn a_variable_in_a_comment_is_not_a_problem() {
    let y = format!("# old: ${{NOT_SET_ANYWHERE}}\n{BASE}");
    assert!(from_yaml_with_env(&y, &[]).is_ok());
}

#[test]
fn an_environment_override_out_of_range_names_the_key_and_the_variable() {
    let e = from_yaml_with_env(BASE, &env(&[("QUEUEBOX_SERVER_HTTPPORT", "99999")])).unwrap_err();
    assert_eq!(e.problems.len(), 1, "{e}");
    assert_eq!(e.problems[0].path, "server.httpPort");
    assert_eq!(
        e.problems[0].env.as_deref(),
        Some("QUEUEBOX_SERVER_HTTPPORT")
    );
}

/// Every numeric key: a negative value, and zero where zero cannot work, is exactly one
/// problem naming that key.
#[test]
fn every_numeric_key_names_itself_in_exactly_one_problem() {
    let hmac = BASE.replace(
        "path: /orders",
        "path: /orders\n    auth:\n      type: hmac\n      secret: s3cr3t",
    );
    let retention = format!(
        "{hmac}retention:\n  enabled: true\n  outbox:\n    policy: COUNT\n    maxCount: 10\n"
    );
    let y = retention
        .replace("routes:", "  nd:\n    type: nats\n    servers: nats://127.0.0.1:4222\n    subject: s\n  rd:\n    type: rabbitmq\n    url: amqp://127.0.0.1\n    exchange: x\nroutes:")
        .replace("sources:", "sources:\n  ns:\n    type: nats\n    consumption: pull\n    servers: nats://127.0.0.1:4222\n    stream: s\n    durable: d\n  ks:\n    type: kafka\n    consumption: pull\n    bootstrapServers: 127.0.0.1:9092\n    topics: [t]\n    groupId: g");
    assert!(
        from_yaml_with_env(&y, &[]).is_ok(),
        "{:?}",
        from_yaml_with_env(&y, &[]).err().map(|e| e.to_string())
    );
    let keys = [
        ("server.httpPort", false),
        ("server.managementPort", false),
        ("server.drainTimeoutMs", false),
        ("database.poolSize", true),
        ("database.connectionTimeoutMs", false),
        ("database.startupTimeoutMs", false),
        ("outbox.pollIntervalMs", true),
        ("outbox.batchSize", true),
        ("outbox.retryBaseDelayMs", true),
        ("outbox.maxAttempts", false),
        ("outbox.concurrency", true),
        ("outbox.claimTimeoutMs", true),
        ("outbox.pendingGaugeIntervalMs", true),
        ("outbox.shutdownTimeoutMs", false),
        ("inbox.maxBodyBytes", true),
        ("inbox.relay.pollIntervalMs", true),
        ("inbox.relay.batchSize", true),
        ("inbox.relay.claimTimeoutMs", true),
        ("inbox.relay.pendingGaugeIntervalMs", true),
        ("inbox.relay.maxAttempts", false),
        ("http.maxErrorBodyBytes", false),
        ("retention.outbox.maxCount", true),
        ("retention.outbox.batchSize", true),
        ("destinations.hooks.timeoutMs", true),
        ("destinations.nd.timeoutMs", true),
        ("destinations.rd.timeoutMs", true),
        ("sources.orders.auth.timestampTolerance", false),
        ("sources.ns.ackWaitMs", true),
        ("sources.ns.batchSize", true),
        ("sources.ks.maxPollRecords", true),
    ];
    for (key, zero_refused) in keys {
        let var = format!("QUEUEBOX_{}", key.replace('.', "_").to_ascii_uppercase());
        let mut values = vec!["-1"];
        if zero_refused {
            values.push("0");
        }
        for v in values {
            let e = from_yaml_with_env(&y, &env(&[(var.as_str(), v)]))
                .expect_err(&format!("{key}: {v} must fail"));
            let paths: Vec<&str> = e.problems.iter().map(|p| p.path.as_str()).collect();
            assert_eq!(paths, [key], "{key}: {v}: {e}");
        }
    }
}

/// `database.username` / `database.password` reach the backend factory's settings as values
/// on every URL form (a JDBC SQL Server URL has no user:password part to splice them into),
/// and neither the settings nor the check-config printout shows the password.
#[test]
fn database_credentials_reach_the_connection_settings_and_no_printout() {
    let yaml = "
database:
  type: sqlserver
  url: jdbc:sqlserver://db:1433;databaseName=app
  username: qb
  password: s3cret;pw
  poolSize: 7
  connectionTimeoutMs: 1500
";
    let c = from_yaml_with_env(yaml, &[]).unwrap();
    let s = c.database_settings();
    assert_eq!(s.url, "jdbc:sqlserver://db:1433;databaseName=app");
    assert_eq!(s.credentials.username.as_deref(), Some("qb"));
    assert_eq!(s.credentials.password.as_deref(), Some("s3cret;pw"));
    assert_eq!(
        (s.pool_size, s.connection_timeout),
        (7, std::time::Duration::from_millis(1500))
    );
    assert!(!format!("{s:?}").contains("s3cret"), "{s:?}");
    assert!(!c.to_redacted_yaml().contains("s3cret"));
    assert!(c.secrets().contains(&"s3cret;pw".to_string()));
}

/// Custom table and column names (proto-docs/own-schema.md), from the file and from the environment.
#[test]
fn custom_names_load_from_file_and_environment() {
    let y = BASE.replace(
        "  url: postgres://app@127.0.0.1:5432/app\n",
        "  url: postgres://app@127.0.0.1:5432/app\n  migrate: false\n  outboxTableName: shop.order\n  columnMapping:\n    outbox:\n      key: user\n",
    );
    let c = from_yaml_with_env(
        &y,
        &env(&[
            ("QUEUEBOX_DATABASE_INBOXTABLENAME", "user"),
            (
                "QUEUEBOX_DATABASE_COLUMNMAPPING_INBOX_IDEMPOTENCYKEY",
                "key",
            ),
        ]),
    )
    .unwrap();
    let names = c.database_settings().names;
    assert_eq!(
        names.renamed_keys(),
        vec![
            "database.outboxTableName",
            "database.columnMapping.outbox.key",
            "database.inboxTableName",
            "database.columnMapping.inbox.idempotencyKey",
        ]
    );
    assert_eq!(
        names.render(
            queuebox_core::store::Backend::Postgres,
            "{outbox}.{outbox.key} {inbox}.{inbox.idempotency_key}"
        ),
        r#""shop"."order"."user" "user"."key""#
    );
}

#[test]
fn custom_names_refuse_migrate_unknown_keys_and_bad_identifiers() {
    let y = BASE.replace(
        "  url: postgres://app@127.0.0.1:5432/app\n",
        "  url: postgres://app@127.0.0.1:5432/app\n  inboxTableName: my-inbox\n  outboxTableName: events\n  columnMapping:\n    inbox:\n      sourse: src\n",
    );
    let e = from_yaml_with_env(&y, &[]).unwrap_err();
    let text = e.to_string();
    assert!(e.mentions("database.inboxTableName"), "{text}");
    assert!(
        text.contains("`my-inbox` is not a valid identifier"),
        "{text}"
    );
    assert!(e.mentions("database.columnMapping.inbox.sourse"), "{text}");
    assert!(text.contains("unknown column key `sourse`"), "{text}");
    // migrate defaults to true: refused, naming every renamed key.
    let y = BASE.replace(
        "  url: postgres://app@127.0.0.1:5432/app\n",
        "  url: postgres://app@127.0.0.1:5432/app\n  outboxTableName: events\n  columnMapping:\n    inbox:\n      source: src\n",
    );
    let e = from_yaml_with_env(&y, &[]).unwrap_err();
    let text = e.to_string();
    assert!(e.mentions("database.migrate"), "{text}");
    assert!(
        text.contains("database.outboxTableName, database.columnMapping.inbox.source"),
        "{text}"
    );
    // QueueBox's own names need no migrate: false.
    let same = BASE.replace(
        "  url: postgres://app@127.0.0.1:5432/app\n",
        "  url: postgres://app@127.0.0.1:5432/app\n  outboxTableName: outbox\n",
    );
    assert!(from_yaml_with_env(&same, &[]).is_ok());
}

#[test]
fn the_packaged_demo_configuration_loads() {
    let cfg = from_yaml_with_env(crate::PACKAGED_CONFIG, &[]).expect("packaged config");
    let mut sources: Vec<&str> = cfg.sources.keys().map(String::as_str).collect();
    sources.sort();
    assert_eq!(sources, ["github", "stripe"]);
    assert_eq!(cfg.destinations.len(), 2);
    assert_eq!(cfg.routes.len(), 2);
}

#[test]
fn only_variables_that_configure_something_turn_the_packaged_demo_off() {
    assert!(crate::env::configures("QUEUEBOX_DATABASE_URL"));
    assert!(crate::env::configures("QUEUEBOX_ROUTES_0_TOPICPATTERN"));
    for inert in [
        "QUEUEBOX_CONFIG_FILE",
        "QUEUEBOX_TEST_DATABASE_URL",
        "QUEUEBOX_DB_SERVICE_HOST",
        "QUEUEBOX_PORT",
        "PATH",
    ] {
        assert!(!crate::env::configures(inert), "{inert}");
    }
}

/// Found by the fuzz target config_load: an override's list index filled the list up to it,
/// so `QUEUEBOX_ROUTES_22222222222222_…` took all memory, and an index beyond usize became 0.
#[test]
fn an_override_list_index_beyond_the_bound_is_refused_naming_the_variable() {
    for index in ["22222222222222", "99999999999999999999999999", "1024"] {
        let var = format!("QUEUEBOX_ROUTES_{index}_TOPICPATTERN");
        let errs = from_yaml_with_env(BASE, &env(&[(var.as_str(), "x.*")])).unwrap_err();
        let p = errs
            .problems
            .iter()
            .find(|p| p.path == format!("routes[{index}]"))
            .unwrap_or_else(|| panic!("{errs}"));
        assert_eq!(p.env.as_deref(), Some(var.as_str()));
        assert!(p.message.contains("too large"), "{}", p.message);
    }
    let ok = from_yaml_with_env(
        BASE,
        &env(&[
            ("QUEUEBOX_ROUTES_1_TOPICPATTERN", "x.*"),
            ("QUEUEBOX_ROUTES_1_DESTINATION", "hooks"),
        ]),
    )
    .unwrap();
    assert_eq!(ok.routes[1].topic_pattern, "x.*");
}

/// `destinations.<name>.rateLimit` (any kind): both keys load; 0, a negative number, a string,
/// an unknown key and an empty block are each one problem naming the key.
#[test]
fn destination_limits_load_and_bad_values_name_their_key() {
    let with = |block: &str| {
        BASE.replace(
            "baseUrl: http://127.0.0.1:9000",
            &format!("baseUrl: http://127.0.0.1:9000\n    rateLimit:\n{block}"),
        )
    };
    let c = from_yaml_with_env(&with("      perSecond: 20\n      inFlight: 2\n"), &[]).unwrap();
    let l = c.destinations["hooks"].rate_limit.as_ref().unwrap();
    assert_eq!(
        (l.per_second.map(u32::from), l.in_flight.map(u32::from)),
        (Some(20), Some(2))
    );
    assert!(from_yaml_with_env(BASE, &[]).unwrap().destinations["hooks"]
        .rate_limit
        .is_none());
    // A broker destination takes the same block.
    let nats = BASE.replace("routes:", "  nd:\n    type: nats\n    servers: nats://127.0.0.1:4222\n    subject: s\n    rateLimit:\n      inFlight: 1\nroutes:");
    let c = from_yaml_with_env(&nats, &[]).unwrap();
    let l = c.destinations["nd"].rate_limit.as_ref().unwrap();
    assert_eq!(l.in_flight.map(u32::from), Some(1));
    for (block, path, says) in [
        (
            "      perSecond: 0\n",
            "destinations.hooks.rateLimit.perSecond",
            "nonzero",
        ),
        (
            "      inFlight: 0\n",
            "destinations.hooks.rateLimit.inFlight",
            "nonzero",
        ),
        (
            "      perSecond: -3\n",
            "destinations.hooks.rateLimit.perSecond",
            "-3",
        ),
        (
            "      inFlight: two\n",
            "destinations.hooks.rateLimit.inFlight",
            "string",
        ),
        (
            "      perSecond: 2.5\n",
            "destinations.hooks.rateLimit.perSecond",
            "2.5",
        ),
        (
            "      perSecnd: 5\n      inFlight: 1\n",
            "destinations.hooks.rateLimit.perSecnd",
            "perSecond",
        ),
        ("      {}\n", "destinations.hooks.rateLimit", "no limit"),
    ] {
        let p = problems(&with(block), &[]);
        assert_eq!(p.len(), 1, "{block}: {p:?}");
        assert_eq!(p[0].0, path, "{block}: {p:?}");
        assert!(p[0].1.contains(says), "{block}: {p:?}");
    }
    // The environment variable the reference lists sets (and is checked like) the key.
    let y = with("      inFlight: 2\n");
    let var = "QUEUEBOX_DESTINATIONS_HOOKS_RATELIMIT_PERSECOND";
    let c = from_yaml_with_env(&y, &env(&[(var, "7")])).unwrap();
    let l = c.destinations["hooks"].rate_limit.as_ref().unwrap();
    assert_eq!(l.per_second.map(u32::from), Some(7));
    let p = problems(&y, &[(var, "0")]);
    assert_eq!(p.len(), 1, "{p:?}");
    assert_eq!(p[0].0, "destinations.hooks.rateLimit.perSecond", "{p:?}");
}

#[test]
fn schedules_load_and_every_mistake_names_its_field() {
    let y = format!(
        "{BASE}schedules:
  - name: nightly
    source: reports
    cron: '0 2 * * *'
    timeZone: Europe/Paris
    payload: {{kind: nightly}}
    priority: 5
    headers: {{team: ops}}
  - name: heartbeat
    source: pings
    everyMs: 200
    payload: 1
    missed: skip
"
    );
    let c = from_yaml_with_env(&y, &[]).unwrap();
    let s = c.schedules[0].to_schedule("schedules[0]").unwrap();
    assert_eq!(s.priority, 5);
    assert_eq!(s.payload, serde_json::json!({"kind": "nightly"}));
    assert_eq!(s.headers["team"], "ops");
    assert_eq!(s.missed, queuebox_core::schedule::Missed::Latest);
    let s = c.schedules[1].to_schedule("schedules[1]").unwrap();
    assert_eq!(s.missed, queuebox_core::schedule::Missed::Skip);
    assert!(c.schedules[1].enabled);
    let off = env(&[("QUEUEBOX_SCHEDULES_1_ENABLED", "false")]);
    assert!(!from_yaml_with_env(&y, &off).unwrap().schedules[1].enabled);

    let bad = format!(
        "{BASE}schedules:
  - name: a
    source: jobs
    cron: '0 25 * * *'
    timeZone: Europe/Pariss
    payload: {{}}
  - name: a
    source: jobs
    everyMs: 50
    payload: {{}}
  - name: c
    source: jobs
    payload: {{}}
  - name: d
    source: jobs
    everyMs: 1000
    timeZone: UTC
    payload: {{}}
  - name: e
    source: ''
    everyMs: 1000
    payload: {{}}
    missed: all
"
    );
    let paths: Vec<String> = problems(&bad, &[]).into_iter().map(|(p, _)| p).collect();
    assert_eq!(
        paths,
        ["schedules[4].missed",],
        "a type error is reported first, alone for its section"
    );
    let bad = bad.replace("    missed: all\n", "");
    let got = problems(&bad, &[]);
    let paths: Vec<&str> = got.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(
        paths,
        [
            "schedules[0].cron",
            "schedules[1].everyMs",
            "schedules[1].name",
            "schedules[2]",
            "schedules[3].timeZone",
            "schedules[4].source",
        ],
        "{got:?}"
    );
}
