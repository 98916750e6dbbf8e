//! The certificate and login settings of broker connections are checked at start-up by the
//! real binary (`check-config`), each problem named by its key path: a TLS block that would
//! never be used (Kafka without an SSL protocol), unreadable certificate and `.creds` files,
//! a client certificate without its key, two NATS logins at once, unknown Kafka protocol
//! and SASL mechanism names. A mistake here must stop start-up, never run in plain text.

mod common;

use common::{relay_command, write_config};

const BASE: &str = "database:
  url: postgres://app@127.0.0.1:1/app
";

async fn problems_of(yaml: &str) -> String {
    let f = write_config(&format!("{BASE}{yaml}"));
    let out = relay_command(f.path(), &["check-config"])
        .output()
        .await
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(
        !out.status.success(),
        "check-config accepted:\n{yaml}\n{err}"
    );
    err
}

#[tokio::test]
async fn broker_tls_and_login_mistakes_stop_start_up_naming_their_key_paths() {
    let err = problems_of(
        "destinations:
  log:
    type: kafka
    bootstrapServers: 127.0.0.1:9093
    topic: t
    tls:
      caFile: /nonexistent/ca.pem
  secure:
    type: kafka
    bootstrapServers: 127.0.0.1:9093
    topic: t
    securityProtocol: SASL_TLS
    saslMechanism: SCRAM-SHA-1
",
    )
    .await;
    assert!(
        err.contains("destinations.log.tls:") && err.contains("SSL or SASL_SSL"),
        "{err}"
    );
    assert!(
        err.contains("destinations.log.tls.caFile:") && err.contains("/nonexistent/ca.pem"),
        "{err}"
    );
    assert!(
        err.contains("destinations.secure.securityProtocol:") && err.contains("SASL_TLS"),
        "{err}"
    );
    assert!(
        err.contains("destinations.secure.saslMechanism:") && err.contains("SCRAM-SHA-1"),
        "{err}"
    );

    let err = problems_of(
        "destinations:
  bus:
    type: nats
    servers: tls://127.0.0.1:4222
    subject: s
    token: abc
    credsFile: /nonexistent/user.creds
    tls:
      certFile: /nonexistent/client.crt
",
    )
    .await;
    assert!(
        err.contains("destinations.bus:") && err.contains("only one of token"),
        "{err}"
    );
    assert!(
        err.contains("destinations.bus.credsFile:") && err.contains("/nonexistent/user.creds"),
        "{err}"
    );
    assert!(err.contains("destinations.bus.tls.certFile:"), "{err}");
    assert!(
        err.contains("destinations.bus.tls:") && err.contains("certFile and keyFile go together"),
        "{err}"
    );

    let err = problems_of(
        "destinations:
  rabbit:
    type: rabbitmq
    url: amqp://guest:guest@127.0.0.1:5672/%2f
    exchange: e
    tls:
      caFile: /nonexistent/rabbit-ca.pem
",
    )
    .await;
    assert!(
        err.contains("destinations.rabbit.tls:") && err.contains("amqps://"),
        "{err}"
    );
    assert!(
        err.contains("destinations.rabbit.tls.caFile:")
            && err.contains("/nonexistent/rabbit-ca.pem"),
        "{err}"
    );
}

/// The broker's host name is always checked against its certificate (Kafka:
/// `ssl.endpoint.identification.algorithm=https`, set by the relay whatever the protocol's
/// case): there is no key to turn the check off, and the keys people try are refused by name
/// rather than accepted and ignored.
#[tokio::test]
async fn no_key_turns_off_the_broker_host_name_check() {
    let err = problems_of(
        "destinations:
  k:
    type: kafka
    bootstrapServers: 127.0.0.2:9093
    topic: t
    securityProtocol: ssl
    sslEndpointIdentificationAlgorithm: none
    tls:
      insecureSkipVerify: true
",
    )
    .await;
    assert!(
        err.contains("destinations.k.sslEndpointIdentificationAlgorithm:")
            && err.contains("unknown"),
        "{err}"
    );
    assert!(
        err.contains("destinations.k.tls.insecureSkipVerify:") && err.contains("unknown"),
        "{err}"
    );
}
