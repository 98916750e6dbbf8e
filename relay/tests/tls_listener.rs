//! HTTPS on the relay's own ports (`server.tls`), against the real binary: a throwaway CA
//! and two server certificates made with openssl in the test; a client that trusts the CA
//! posts over HTTPS and gets 202; plain HTTP to the TLS port gets no answer; after the
//! certificate files are replaced and SIGHUP is sent, or only replaced (the relay polls
//! them), new connections see the new certificate, and a reload from broken files keeps the
//! old one. With `server.tls.clientCaFile` both ports take only clients whose certificate
//! that CA signed.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::*;

const SOURCES: &str = "sources:
  orders:
    path: /orders
    topic: orders
";

/// A CA and two leaf certificates for `localhost` / 127.0.0.1, subjects `queuebox-one`
/// and `queuebox-two`; `None` (the test says it did not run) without openssl.
fn make_certs(test: &str) -> Option<(tempfile::TempDir, PathBuf)> {
    if std::process::Command::new("openssl")
        .arg("version")
        .output()
        .is_err()
    {
        panic!("NOT RUN {test}: openssl is not installed, no certificates can be made (scripts/test.d/10-rust.sh installs it; apt-get install openssl)");
    }
    let dir = tempfile::tempdir().unwrap();
    let script = r#"set -e
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -sha256 -subj "/CN=QueueBox listener test CA" -keyout ca.key -out ca.crt \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
for n in one two; do
  openssl req -new -newkey rsa:2048 -nodes -subj "/CN=queuebox-$n" -keyout $n.key -out $n.csr 2>/dev/null
  printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\nsubjectAltName=DNS:localhost,IP:127.0.0.1\n' > $n.ext
  openssl x509 -req -in $n.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 -sha256 -extfile $n.ext -out $n.crt 2>/dev/null
done
# Client certificates for mutual TLS: one the CA signed, one another CA signed.
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -sha256 -subj "/CN=Some other CA" -keyout other-ca.key -out other-ca.crt \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
for n in client:ca foreign:other-ca; do
  c=${n%%:*}; issuer=${n#*:}
  openssl req -new -newkey rsa:2048 -nodes -subj "/CN=relay-$c" -keyout $c.key -out $c.csr 2>/dev/null
  printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n' > $c.ext
  openssl x509 -req -in $c.csr -CA $issuer.crt -CAkey $issuer.key -CAcreateserial -days 2 -sha256 -extfile $c.ext -out $c.crt 2>/dev/null
done
"#;
    let out = std::process::Command::new("bash")
        .arg("-c")
        .arg(script)
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "openssl: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let path = dir.path().to_path_buf();
    Some((dir, path))
}

/// The subject of the certificate the server at `port` presents (`openssl s_client`).
fn served_subject(port: u16, ca: &Path) -> String {
    let cmd = format!(
        "openssl s_client -connect 127.0.0.1:{port} -servername localhost -CAfile {} -verify_return_error </dev/null 2>/dev/null | openssl x509 -noout -subject",
        ca.display()
    );
    let out = std::process::Command::new("bash")
        .arg("-c")
        .arg(cmd)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn https_client(ca: &Path) -> reqwest::Client {
    let pem = std::fs::read(ca).unwrap();
    reqwest::Client::builder()
        .tls_built_in_root_certs(false)
        .add_root_certificate(reqwest::Certificate::from_pem(&pem).unwrap())
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap()
}

fn tls_config(db: &str, rx: &str, certs: &Path, mgmt: u16) -> String {
    let base = base_config(db, rx);
    let tls = format!(
        "server:\n  managementPort: {mgmt}\n  tls:\n    certFile: {}\n    keyFile: {}\n",
        certs.join("live.crt").display(),
        certs.join("live.key").display()
    );
    format!("{}{SOURCES}", base.replacen("server:\n", &tls, 1))
}

fn install(certs: &Path, name: &str) {
    std::fs::copy(certs.join(format!("{name}.crt")), certs.join("live.crt")).unwrap();
    std::fs::copy(certs.join(format!("{name}.key")), certs.join("live.key")).unwrap();
}

#[tokio::test]
async fn the_relay_serves_https_only_and_a_sighup_swaps_in_the_renewed_certificate() {
    let Some((_keep, certs)) =
        make_certs("the_relay_serves_https_only_and_a_sighup_swaps_in_the_renewed_certificate")
    else {
        return;
    };
    install(&certs, "one");
    let (url, store) = fresh_db("tls_listener").await;
    let rx = Receiver::start().await;
    let mgmt = free_port();
    let relay = Relay::start(&tls_config(&url, &rx.url(), &certs, mgmt)).await;
    let ca = certs.join("ca.crt");
    let client = https_client(&ca);
    let data = format!("https://localhost:{}", relay.port);

    let resp = client
        .post(format!("{data}/inbox/orders"))
        .header("content-type", "application/json")
        .body(r#"{"id":"tls-1"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(
        resp.status().as_u16(),
        202,
        "{}",
        resp.text().await.unwrap_or_default()
    );
    assert_eq!(scalar_i64(&store, "SELECT count(*) FROM inbox").await, 1);
    let health = client
        .get(format!("https://localhost:{mgmt}/health/live"))
        .send()
        .await
        .unwrap();
    assert_eq!(
        health.status().as_u16(),
        200,
        "the management port speaks HTTPS too"
    );

    // Plain HTTP to the TLS port: no answer at all, and nothing is stored.
    let plain = reqwest::Client::new()
        .post(format!("http://127.0.0.1:{}/inbox/orders", relay.port))
        .header("content-type", "application/json")
        .body(r#"{"id":"plain-1"}"#)
        .timeout(Duration::from_secs(5))
        .send()
        .await;
    assert!(
        plain.is_err(),
        "plain HTTP got an answer: {:?}",
        plain.map(|r| r.status())
    );
    assert_eq!(scalar_i64(&store, "SELECT count(*) FROM inbox").await, 1);

    assert_eq!(served_subject(relay.port, &ca), "subject=CN = queuebox-one");
    install(&certs, "two");
    let pid = relay.child.id().unwrap().to_string();
    std::process::Command::new("kill")
        .args(["-HUP", &pid])
        .status()
        .unwrap();
    let port = relay.port;
    eventually("the renewed certificate is served", 10, || {
        let ca = ca.clone();
        async move { served_subject(port, &ca) == "subject=CN = queuebox-two" }
    })
    .await;
    let resp = https_client(&ca)
        .post(format!("{data}/inbox/orders"))
        .header("content-type", "application/json")
        .body(r#"{"id":"tls-2"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 202);

    // A reload from broken files keeps the certificate in use.
    std::fs::write(certs.join("live.crt"), "not a certificate").unwrap();
    std::process::Command::new("kill")
        .args(["-HUP", &pid])
        .status()
        .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(served_subject(port, &ca), "subject=CN = queuebox-two");
    let resp = https_client(&ca)
        .post(format!("{data}/inbox/orders"))
        .header("content-type", "application/json")
        .body(r#"{"id":"tls-3"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 202);
    assert_eq!(scalar_i64(&store, "SELECT count(*) FROM inbox").await, 3);
}

/// Renewal tools (cert-manager, certbot) replace the files and signal nobody: the relay
/// notices the change by itself (it looks every 2 s) and serves the new certificate; broken
/// files keep the old one, and a later good pair is picked up again.
#[tokio::test]
async fn replaced_certificate_files_are_served_without_a_signal_and_broken_ones_keep_the_old() {
    let Some((_keep, certs)) = make_certs(
        "replaced_certificate_files_are_served_without_a_signal_and_broken_ones_keep_the_old",
    ) else {
        return;
    };
    install(&certs, "one");
    let (url, _store) = fresh_db("tls_listener_watch").await;
    let rx = Receiver::start().await;
    let relay = Relay::start(&tls_config(&url, &rx.url(), &certs, free_port())).await;
    let (ca, port) = (certs.join("ca.crt"), relay.port);
    let serves = |subject: &'static str| {
        let ca = ca.clone();
        move || {
            let ca = ca.clone();
            async move { served_subject(port, &ca) == subject }
        }
    };
    assert_eq!(served_subject(port, &ca), "subject=CN = queuebox-one");

    install(&certs, "two");
    let swapped = std::time::Instant::now();
    eventually(
        "the replaced certificate is served, no SIGHUP sent",
        10,
        serves("subject=CN = queuebox-two"),
    )
    .await;
    println!(
        "new certificate served {:?} after the files changed",
        swapped.elapsed()
    );

    // Broken files: two polls later the old certificate is still served.
    std::fs::write(certs.join("live.crt"), "not a certificate").unwrap();
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(served_subject(port, &ca), "subject=CN = queuebox-two");

    install(&certs, "one");
    eventually(
        "a good pair after a broken one is picked up",
        10,
        serves("subject=CN = queuebox-one"),
    )
    .await;
}

#[tokio::test]
async fn an_unreadable_listener_certificate_is_a_start_up_error_naming_its_key() {
    let yaml = "server:\n  tls:\n    certFile: /nonexistent/qb.crt\n    keyFile: /nonexistent/qb.key\ndatabase:\n  url: postgres://u@127.0.0.1:1/db\n";
    let f = write_config(yaml);
    let out = relay_command(f.path(), &["check-config"])
        .output()
        .await
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("server.tls.certFile") && err.contains("/nonexistent/qb.crt"),
        "{err}"
    );
    assert!(err.contains("server.tls.keyFile"), "{err}");
}

#[tokio::test]
async fn a_key_that_does_not_match_the_certificate_stops_the_relay_at_start_up() {
    let Some((_keep, certs)) =
        make_certs("a_key_that_does_not_match_the_certificate_stops_the_relay_at_start_up")
    else {
        return;
    };
    std::fs::copy(certs.join("one.crt"), certs.join("live.crt")).unwrap();
    std::fs::copy(certs.join("two.key"), certs.join("live.key")).unwrap();
    let (url, _store) = fresh_db("tls_listener_mismatch").await;
    let f = write_config(
        &tls_config(&url, "http://127.0.0.1:9", &certs, free_port())
            .replace("{port}", &free_port().to_string()),
    );
    let out = tokio::time::timeout(
        Duration::from_secs(60),
        relay_command(f.path(), &["run"]).output(),
    )
    .await
    .expect("the relay exits")
    .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("server.tls") && err.contains("does not belong"),
        "{err}"
    );
}

/// An HTTPS client that trusts `ca` and presents the client certificate `name` (.crt, .key).
fn https_client_with(ca: &Path, certs: &Path, name: &str) -> reqwest::Client {
    let mut pem = std::fs::read(certs.join(format!("{name}.crt"))).unwrap();
    pem.extend(std::fs::read(certs.join(format!("{name}.key"))).unwrap());
    reqwest::Client::builder()
        .tls_built_in_root_certs(false)
        .add_root_certificate(reqwest::Certificate::from_pem(&std::fs::read(ca).unwrap()).unwrap())
        .identity(reqwest::Identity::from_pem(&pem).unwrap())
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap()
}

#[tokio::test]
async fn with_a_client_ca_file_both_ports_take_only_clients_whose_certificate_that_ca_signed() {
    let Some((_keep, certs)) = make_certs(
        "with_a_client_ca_file_both_ports_take_only_clients_whose_certificate_that_ca_signed",
    ) else {
        return;
    };
    install(&certs, "one");
    let (url, store) = fresh_db("tls_listener_mtls").await;
    let rx = Receiver::start().await;
    let mgmt = free_port();
    let ca = certs.join("ca.crt");
    let yaml = tls_config(&url, &rx.url(), &certs, mgmt).replacen(
        "  tls:\n",
        &format!("  tls:\n    clientCaFile: {}\n", ca.display()),
        1,
    );
    let relay = Relay::start(&yaml).await;
    let post = |client: reqwest::Client, id: &'static str| {
        let url = format!("https://localhost:{}/inbox/orders", relay.port);
        async move {
            client
                .post(url)
                .header("content-type", "application/json")
                .body(format!(r#"{{"id":"{id}"}}"#))
                .send()
                .await
        }
    };

    let resp = post(https_client_with(&ca, &certs, "client"), "mtls-1")
        .await
        .expect("a client certificate the CA signed is accepted");
    assert_eq!(resp.status().as_u16(), 202);
    let health = https_client_with(&ca, &certs, "client")
        .get(format!("https://localhost:{mgmt}/health/live"))
        .send()
        .await
        .expect("the management port takes the client certificate too");
    assert_eq!(health.status().as_u16(), 200);

    // No client certificate, or one another CA signed: the handshake fails, nothing stored.
    let none = post(https_client(&ca), "mtls-none").await;
    assert!(
        none.is_err(),
        "no client certificate got {:?}",
        none.map(|r| r.status())
    );
    let foreign = post(https_client_with(&ca, &certs, "foreign"), "mtls-foreign").await;
    assert!(
        foreign.is_err(),
        "a foreign client certificate got {:?}",
        foreign.map(|r| r.status())
    );
    let health = https_client(&ca)
        .get(format!("https://localhost:{mgmt}/health/live"))
        .send()
        .await;
    assert!(
        health.is_err(),
        "the management port without a client certificate got {:?}",
        health.map(|r| r.status())
    );
    assert_eq!(scalar_i64(&store, "SELECT count(*) FROM inbox").await, 1);

    // An unreadable CA file is a start-up error naming its key.
    let bad = write_config(
        &yaml
            .replace(&ca.display().to_string(), "/nonexistent/client-ca.pem")
            .replace("{port}", &free_port().to_string()),
    );
    let out = relay_command(bad.path(), &["check-config"])
        .output()
        .await
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("server.tls.clientCaFile") && err.contains("/nonexistent/client-ca.pem"),
        "{err}"
    );
}
