//! The real `queuebox` binary against RabbitMQ and Kafka listeners that speak TLS only,
//! started by `scripts/brokers.sh` with certificates it makes with openssl
//! (`$QB_BROKERS_DIR/tls`): RabbitMQ amqps requiring a client certificate
//! (`ssl_options.verify = verify_peer, fail_if_no_peer_cert = true`), Kafka `SSL` requiring
//! a client certificate and Kafka `SASL_SSL` with PLAIN and SCRAM users.
//!
//! Each round trip leaves the relay through a TLS destination and comes back in through a TLS
//! source of the same kind: an outbox row is published to the broker, the source reads it
//! into the inbox and the inbox relay forwards it to an HTTP receiver. The test's own broker
//! clients use only the plain listeners (to declare the queue), so every byte the relay moves
//! crosses a TLS listener. Wrong CAs, missing or foreign client certificates, a host name the
//! certificate does not name and wrong passwords are refused, and `/health/ready` names the
//! connection and the cause.
//!
//! Ignored (reported as not run) unless run with `--ignored`, as scripts/test.d/20-brokers.sh
//! does after starting the brokers; run without the brokers' TLS settings they fail saying
//! NOT RUN.

mod common;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::*;
use lapin::{Connection, ConnectionProperties};
use serde_json::{json, Value};

/// Where the brokers' TLS listeners and certificates are (`scripts/brokers.sh env`).
struct TlsBrokers {
    certs: PathBuf,
    amqps_url: String,
    kafka_ssl: String,
    kafka_sasl_ssl: String,
}

impl TlsBrokers {
    fn from_env(test: &str) -> TlsBrokers {
        let var = |k: &str| {
            std::env::var(k).unwrap_or_else(|_| {
                panic!("NOT RUN {test}: {k} is not set (scripts/test.d/20-brokers.sh starts the brokers with TLS listeners and exports it)")
            })
        };
        let certs = PathBuf::from(var("QUEUEBOX_TEST_BROKER_TLS_DIR"));
        assert!(
            certs.join("client.key").exists(),
            "NOT RUN {test}: no certificates in {}",
            certs.display()
        );
        TlsBrokers {
            amqps_url: var("QUEUEBOX_TEST_AMQPS_URL"),
            kafka_ssl: var("QUEUEBOX_TEST_KAFKA_SSL_BROKERS"),
            kafka_sasl_ssl: var("QUEUEBOX_TEST_KAFKA_SASL_SSL_BROKERS"),
            certs,
        }
    }

    fn file(&self, name: &str) -> String {
        self.certs.join(name).display().to_string()
    }

    /// A `tls:` block: trust `ca`, and present `client` (`client` or `client-other`) if any.
    fn tls(&self, ca: &str, client: Option<&str>) -> String {
        let mut t = format!("{{ caFile: {}", self.file(ca));
        if let Some(c) = client {
            t += &format!(
                ", certFile: {}, keyFile: {}",
                self.file(&format!("{c}.crt")),
                self.file(&format!("{c}.key"))
            );
        }
        t + " }"
    }
}

fn unique(p: &str) -> String {
    format!("{p}_{}", &uuid::Uuid::new_v4().simple().to_string()[..10])
}

async fn insert_outbox(
    store: &queuebox_core::store::postgres::PgStore,
    topic: &str,
    payload: &Value,
) {
    sqlx::query("INSERT INTO outbox (topic, payload) VALUES ($1, $2)")
        .bind(topic)
        .bind(payload)
        .execute(store.pool())
        .await
        .unwrap();
}

/// `/health/ready`'s `components.brokers.down`: component -> why.
async fn brokers_down(relay: &Relay) -> serde_json::Map<String, Value> {
    let (_, body) = relay.get("/health/ready").await;
    serde_json::from_str::<Value>(&body)
        .ok()
        .and_then(|v| v["components"]["brokers"]["down"].as_object().cloned())
        .unwrap_or_default()
}

/// Waits until readiness reports each component down with a reason that contains all of
/// its `must` texts and one of its `one_of` texts (librdkafka may first report a bare "all
/// brokers are down"; the cause follows within milliseconds), and returns the reasons.
/// Panics with what readiness said after 60 s.
async fn refused_with(
    relay: &Relay,
    expected: &[(String, Vec<String>, Vec<&str>)],
) -> serde_json::Map<String, Value> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let down = brokers_down(relay).await;
        let settled = expected.iter().all(|(c, must, one_of)| {
            let w = why(&down, c);
            must.iter().all(|m| w.contains(m.as_str())) && one_of.iter().any(|o| w.contains(o))
        });
        if settled {
            return down;
        }
        assert!(
            Instant::now() < deadline,
            "readiness did not report {expected:#?} within 60 s; it says {down:#?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn why<'a>(down: &'a serde_json::Map<String, Value>, component: &str) -> &'a str {
    down.get(component).and_then(Value::as_str).unwrap_or("")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs real brokers: scripts/test.d/20-brokers.sh starts them and runs it with --ignored"]
async fn rabbitmq_source_and_destination_over_amqps_with_a_client_certificate_carry_a_row_out_and_back_in(
) {
    let tls = TlsBrokers::from_env("rabbitmq amqps round trip");
    let (db_url, store) = fresh_db("tls_rabbit").await;
    let rx = Receiver::start().await;
    // The exchange and the queue bound to it, declared through the plain listener.
    let plain = std::env::var("QUEUEBOX_TEST_AMQP_URL")
        .unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:55672/%2f".into());
    let conn = Connection::connect(&plain, ConnectionProperties::default())
        .await
        .unwrap();
    let ch = conn.create_channel().await.unwrap();
    let (exchange, queue) = (unique("qb_tls_ex"), unique("qb_tls_q"));
    amqp_bound_queue(&ch, &exchange, &queue, "#").await.unwrap();

    let client_tls = tls.tls("ca.crt", Some("client"));
    let yaml = base_config(&db_url, &rx.url())
        + &format!(
            "  secure_bus:
    type: rabbitmq
    url: {url}
    exchange: {exchange}
    tls: {client_tls}
sources:
  secure_in:
    type: rabbitmq
    connectionUrl: {url}
    queueName: {queue}
    idempotencyKeyPath: $.id
    tls: {client_tls}
routes:
  - topicPattern: 'tls.out'
    destination: secure_bus
  - topicPattern: 'secure_in'
    destination: rx
",
            url = tls.amqps_url
        );
    let relay = Relay::start(&yaml).await;
    let payload = json!({"id": "amqps-1", "total": 42});
    insert_outbox(&store, "tls.out", &payload).await;
    eventually(
        "the row came back through amqps to the receiver",
        30,
        || async { !rx.to("/hooks").is_empty() },
    )
    .await;
    let d = &rx.to("/hooks")[0];
    assert_eq!(d.body, payload);
    assert_eq!(d.h("x-source"), Some("secure_in"));

    // The broker's own view: both of the relay's connections are TLS with its client
    // certificate (the AMQP connection name is `queuebox-<source or destination>`).
    let out = std::process::Command::new("bash")
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../scripts/brokers.sh"
        ))
        .args([
            "rabbitmqctl",
            "-q",
            "list_connections",
            "ssl",
            "ssl_protocol",
            "peer_cert_subject",
            "client_properties",
        ])
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "rabbitmqctl: {table} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    for name in ["queuebox-secure_in", "queuebox-secure_bus"] {
        let line = table
            .lines()
            .find(|l| l.contains(&format!("\"{name}\"")))
            .unwrap_or_else(|| panic!("no connection {name} in:\n{table}"));
        assert!(
            line.starts_with("true\ttlsv1.3\tCN=queuebox\t"),
            "{name} is TLS with the client certificate: {line}"
        );
    }
    let (status, body) = relay.get("/health/ready").await;
    assert_eq!(status, 200, "{body}");
    conn.close(200, "done".into()).await.ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs real brokers: scripts/test.d/20-brokers.sh starts them and runs it with --ignored"]
async fn rabbitmq_amqps_refuses_a_wrong_ca_a_missing_or_foreign_client_certificate_and_a_host_name_the_certificate_does_not_name(
) {
    let tls = TlsBrokers::from_env("rabbitmq amqps refusals");
    let (db_url, store) = fresh_db("tls_rabbit_no").await;
    let url = &tls.amqps_url;
    let other_host = url.replace("@127.0.0.1:", "@127.0.0.2:");
    assert_ne!(&other_host, url, "the test URL names 127.0.0.1: {url}");
    let source = |name: &str, url: &str, tls_block: String| {
        format!(
            "  {name}:
    type: rabbitmq
    connectionUrl: {url}
    queueName: qb_tls_never_{name}
    tls: {tls_block}
"
        )
    };
    let yaml = base_config(&db_url, "http://127.0.0.1:9")
        + &format!(
            "  wrong_ca_bus:
    type: rabbitmq
    url: {url}
    exchange: qb_tls_never
    tls: {}
routes:
  - topicPattern: 'tls.never'
    destination: wrong_ca_bus
sources:
",
            tls.tls("other-ca.crt", Some("client"))
        )
        + &source("wrong_ca", url, tls.tls("other-ca.crt", Some("client")))
        + &source("no_cert", url, tls.tls("ca.crt", None))
        + &source("foreign_cert", url, tls.tls("ca.crt", Some("client-other")))
        + &source("wrong_host", &other_host, tls.tls("ca.crt", Some("client")));
    let started = Instant::now();
    let relay = Relay::start(&yaml).await;
    insert_outbox(&store, "tls.never", &json!({"id": "never"})).await;
    // Each names the connection (`RabbitMQ `<name>` at amqps://…`) and gives the cause, as
    // rustls and the broker's TLS alert say it. Under TLS 1.3 the broker judges the client
    // certificate after the client's side of the handshake is done, so a refused one reaches
    // the client as the broker's alert or, when the reset wins the race, as a reset; either
    // way the relay says that the server wants a (different) client certificate.
    let refused_client = vec![
        "TLS failed: the server requires a client certificate (IO error: received fatal alert: CertificateRequired); set tls.certFile and tls.keyFile",
        "TLS failed: the server closed the TLS connection (IO error: Connection reset by peer (os error 104)); a client certificate may be required: set tls.certFile and tls.keyFile",
    ];
    let expected: Vec<(String, Vec<String>, Vec<&str>)> = [
        ("wrong_ca", vec!["invalid peer certificate: UnknownIssuer"]),
        (
            "wrong_ca_bus",
            vec!["invalid peer certificate: UnknownIssuer"],
        ),
        ("no_cert", refused_client.clone()),
        (
            "foreign_cert",
            vec![
                "TLS failed: the server ended the TLS handshake with an alert (IO error: received fatal alert: UnknownCA); it may have refused the client certificate in tls.certFile",
                "TLS failed: the server closed the TLS connection (IO error: Connection reset by peer (os error 104)); it may have refused the client certificate in tls.certFile",
            ],
        ),
        (
            "wrong_host",
            vec!["certificate not valid for name \"127.0.0.2\""],
        ),
    ]
    .into_iter()
    .map(|(name, causes)| {
        (
            format!("rabbitmq.{name}"),
            vec![format!("RabbitMQ `{name}` at amqps://")],
            causes,
        )
    })
    .collect();
    let down = refused_with(&relay, &expected).await;
    let elapsed = started.elapsed();
    println!("amqps refusals reported in {elapsed:?}: {down:#?}");
    // The row was not published some other way: its last error names the destination.
    let last_error: Option<String> = sqlx::query_scalar("SELECT last_error FROM outbox")
        .fetch_one(store.pool())
        .await
        .unwrap();
    assert!(
        last_error
            .as_deref()
            .unwrap_or("")
            .contains("RabbitMQ `wrong_ca_bus`"),
        "the row's last_error names the destination: {last_error:?}"
    );
}

/// One way of reaching Kafka over TLS: its destination and source share the settings.
struct KafkaWay {
    /// `k_<way>` is the destination, `from_<way>` the source.
    way: &'static str,
    brokers: String,
    settings: String,
}

impl TlsBrokers {
    /// `securityProtocol` and the rest of a Kafka connection, as YAML lines at `indent`.
    fn kafka_settings(
        &self,
        protocol: &str,
        mechanism: Option<&str>,
        password: &str,
        tls: String,
    ) -> String {
        let mut s = format!("    securityProtocol: {protocol}\n    tls: {tls}\n");
        if let Some(m) = mechanism {
            s += &format!(
                "    saslMechanism: {m}\n    saslUsername: relay\n    saslPassword: {password}\n"
            );
        }
        s
    }

    /// SSL with a client certificate, and SASL_SSL with PLAIN, SCRAM-SHA-256 and -512.
    fn kafka_ways(&self) -> Vec<KafkaWay> {
        let ca_only = || self.tls("ca.crt", None);
        vec![
            KafkaWay {
                way: "ssl",
                brokers: self.kafka_ssl.clone(),
                settings: self.kafka_settings("SSL", None, "", self.tls("ca.crt", Some("client"))),
            },
            KafkaWay {
                way: "plain",
                brokers: self.kafka_sasl_ssl.clone(),
                settings: self.kafka_settings("SASL_SSL", Some("PLAIN"), "relay-secret", ca_only()),
            },
            KafkaWay {
                way: "scram256",
                brokers: self.kafka_sasl_ssl.clone(),
                settings: self.kafka_settings(
                    "SASL_SSL",
                    Some("SCRAM-SHA-256"),
                    "relay-secret",
                    ca_only(),
                ),
            },
            KafkaWay {
                way: "scram512",
                brokers: self.kafka_sasl_ssl.clone(),
                settings: self.kafka_settings(
                    "SASL_SSL",
                    Some("SCRAM-SHA-512"),
                    "relay-secret",
                    ca_only(),
                ),
            },
        ]
    }
}

/// The destinations, sources and routes of `ways`: outbox topic `tls.<way>` goes to
/// destination `k_<way>` (a fresh Kafka topic), source `from_<way>` reads that topic and its
/// rows (topic `from_<way>`) go to the receiver `rx`.
fn kafka_config(db_url: &str, receiver: &str, ways: &[KafkaWay]) -> String {
    let mut destinations = String::new();
    let mut sources = String::from("sources:\n");
    let mut routes = String::from("routes:\n");
    for w in ways {
        let topic = unique(&format!("qb_tls_{}", w.way));
        destinations += &format!(
            "  k_{way}:\n    type: kafka\n    bootstrapServers: {b}\n    topic: {topic}\n    timeoutMs: 10000\n{s}",
            way = w.way,
            b = w.brokers,
            s = w.settings
        );
        sources += &format!(
            "  from_{way}:\n    type: kafka\n    bootstrapServers: {b}\n    topics: [{topic}]\n    groupId: {group}\n    idempotencyKeyPath: $.id\n{s}",
            way = w.way,
            b = w.brokers,
            group = unique("qb_tls_group"),
            s = w.settings
        );
        routes += &format!(
            "  - topicPattern: 'tls.{way}'\n    destination: k_{way}\n  - topicPattern: 'from_{way}'\n    destination: rx\n",
            way = w.way
        );
    }
    base_config(db_url, receiver) + &destinations + &sources + &routes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs real brokers: scripts/test.d/20-brokers.sh starts them and runs it with --ignored"]
async fn kafka_source_and_destination_over_ssl_and_sasl_ssl_plain_and_scram_each_carry_a_row_out_and_back_in(
) {
    let tls = TlsBrokers::from_env("kafka SSL / SASL_SSL round trips");
    let (db_url, store) = fresh_db("tls_kafka").await;
    let rx = Receiver::start().await;
    let ways = tls.kafka_ways();
    let relay = Relay::start(&kafka_config(&db_url, &rx.url(), &ways)).await;
    let started = Instant::now();
    for w in &ways {
        let payload = json!({"id": format!("kafka-{}", w.way), "way": w.way});
        insert_outbox(&store, &format!("tls.{}", w.way), &payload).await;
    }
    eventually(
        "every row came back through Kafka to the receiver",
        90,
        || async { rx.to("/hooks").len() >= ways.len() },
    )
    .await;
    println!("kafka TLS round trips done in {:?}", started.elapsed());
    let got = rx.to("/hooks");
    for w in &ways {
        let d = got
            .iter()
            .find(|d| d.body["way"] == w.way)
            .unwrap_or_else(|| panic!("nothing came back over {}: {got:?}", w.way));
        assert_eq!(d.h("x-source"), Some(format!("from_{}", w.way).as_str()));
        assert_eq!(d.body["id"], format!("kafka-{}", w.way));
    }
    assert_eq!(got.len(), ways.len(), "one delivery per way: {got:?}");
    let (status, body) = relay.get("/health/ready").await;
    assert_eq!(status, 200, "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs real brokers: scripts/test.d/20-brokers.sh starts them and runs it with --ignored"]
async fn kafka_refuses_a_wrong_ca_a_missing_client_certificate_and_wrong_passwords_and_readiness_names_each_connection(
) {
    let tls = TlsBrokers::from_env("kafka SSL / SASL_SSL refusals");
    let (db_url, store) = fresh_db("tls_kafka_no").await;
    let ways = vec![
        KafkaWay {
            way: "wrong_ca",
            brokers: tls.kafka_ssl.clone(),
            settings: tls.kafka_settings("SSL", None, "", tls.tls("other-ca.crt", Some("client"))),
        },
        KafkaWay {
            way: "no_cert",
            brokers: tls.kafka_ssl.clone(),
            settings: tls.kafka_settings("SSL", None, "", tls.tls("ca.crt", None)),
        },
        KafkaWay {
            way: "plain_wrong_password",
            brokers: tls.kafka_sasl_ssl.clone(),
            settings: tls.kafka_settings(
                "SASL_SSL",
                Some("PLAIN"),
                "guess",
                tls.tls("ca.crt", None),
            ),
        },
        KafkaWay {
            way: "scram_wrong_password",
            brokers: tls.kafka_sasl_ssl.clone(),
            settings: tls.kafka_settings(
                "SASL_SSL",
                Some("SCRAM-SHA-256"),
                "guess",
                tls.tls("ca.crt", None),
            ),
        },
    ];
    let started = Instant::now();
    let relay = Relay::start(&kafka_config(&db_url, "http://127.0.0.1:9", &ways)).await;
    for w in &ways {
        insert_outbox(&store, &format!("tls.{}", w.way), &json!({"id": w.way})).await;
    }
    // Each destination and source is down under its own name with librdkafka's cause (a
    // client certificate the broker wanted but did not get shows as the broker's TLS alert).
    let mut expected: Vec<(String, Vec<String>, Vec<&str>)> = Vec::new();
    for w in &ways {
        let must = if w.way == "wrong_ca" {
            vec![
                "checked again with tls.caFile: invalid peer certificate: UnknownIssuer"
                    .to_string(),
            ]
        } else {
            vec![]
        };
        let causes = if w.way.contains("wrong_password") {
            vec!["Authentication failed"]
        } else if w.way == "wrong_ca" {
            // librdkafka's words, then the cause the relay found (tls_check.rs).
            vec!["certificate verify failed: broker certificate could not be verified, verify that ssl.ca.location is correctly configured or root CA certificates are installed (install ca-certificates package) (after"]
        } else {
            vec!["alert bad certificate", "alert certificate required"]
        };
        for c in [
            format!("kafka.k_{}", w.way),
            format!("kafka.from_{}", w.way),
        ] {
            expected.push((c, must.clone(), causes.clone()));
        }
    }
    let down = refused_with(&relay, &expected).await;
    println!(
        "kafka refusals reported in {:?}: {down:#?}",
        started.elapsed()
    );
    // Nothing got through: no outbox row sent, no inbox row.
    let counts: (i64, i64) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM outbox WHERE state = 'sent'), (SELECT count(*) FROM inbox)",
    )
    .fetch_one(store.pool())
    .await
    .unwrap();
    assert_eq!(counts, (0, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs real brokers: scripts/test.d/20-brokers.sh starts them and runs it with --ignored"]
async fn kafka_refuses_a_broker_whose_certificate_does_not_name_the_address_the_relay_connects_to()
{
    let tls = TlsBrokers::from_env("kafka SSL host-name refusal");
    // Kafka's SSL listener on 127.0.0.2, with the same certificate (it names localhost and
    // 127.0.0.1 only) and the same CA: only the host name is wrong. The broker advertises
    // 127.0.0.2 too, but that never matters: the first (bootstrap) connection must already
    // fail the check, before any metadata could point the client elsewhere.
    let other_host = std::env::var("QUEUEBOX_TEST_KAFKA_SSL_OTHER_HOST_BROKERS").unwrap_or_else(|_| {
        panic!("NOT RUN kafka SSL host-name refusal: QUEUEBOX_TEST_KAFKA_SSL_OTHER_HOST_BROKERS is not set (scripts/brokers.sh env)")
    });
    assert!(
        other_host.starts_with("127.0.0.2:"),
        "the certificate names 127.0.0.1, not {other_host}"
    );
    let (db_url, store) = fresh_db("tls_kafka_host").await;
    let ways = vec![KafkaWay {
        way: "wrong_host",
        brokers: other_host.clone(),
        settings: tls.kafka_settings("SSL", None, "", tls.tls("ca.crt", Some("client"))),
    }];
    let started = Instant::now();
    let relay = Relay::start(&kafka_config(&db_url, "http://127.0.0.1:9", &ways)).await;
    insert_outbox(&store, "tls.wrong_host", &json!({"id": "wrong_host"})).await;
    // librdkafka says "certificate verify failed … verify that ssl.ca.location is correctly
    // configured", the same as for a wrong CA; the relay adds the cause (tls_check.rs).
    let must = vec![
        "ssl://127.0.0.2:".to_string(),
        "certificate verify failed".to_string(),
    ];
    let cause = vec![
        "checked again with tls.caFile: invalid peer certificate: certificate not valid for name \"127.0.0.2\"",
    ];
    let expected: Vec<(String, Vec<String>, Vec<&str>)> =
        ["kafka.k_wrong_host", "kafka.from_wrong_host"]
            .into_iter()
            .map(|c| (c.to_string(), must.clone(), cause.clone()))
            .collect();
    let down = refused_with(&relay, &expected).await;
    println!(
        "kafka host-name refusal reported in {:?}: {down:#?}",
        started.elapsed()
    );
    let (status, body) = relay.get("/health/ready").await;
    assert_eq!(status, 503, "{body}");
    let counts: (i64, i64) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM outbox WHERE state = 'sent'), (SELECT count(*) FROM inbox)",
    )
    .fetch_one(store.pool())
    .await
    .unwrap();
    assert_eq!(counts, (0, 0));
}
