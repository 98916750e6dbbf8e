//! NATS over TLS with client certificates and each way of logging in, against a real
//! nats-server this test starts on a free loopback port (`tls { verify: true }`, an
//! `authorization` block with a password user and an NKey user). The right CA, client
//! certificate and credentials connect and carry a message; a wrong CA, a missing client
//! certificate and a wrong password are errors that name the connection and the cause, at
//! once (no background retry, no plain-text fallback). Without nats-server or openssl the
//! test prints that it did not run and fails, so it never passes silently.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures::StreamExt;
use queuebox_brokers::config::{BrokerTls, NatsLogin};
use queuebox_brokers::nats::connect;
use queuebox_config::Secret;

/// A nats-server of one test; killed on drop.
struct Server {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
    certs: PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Certificates (a CA, another CA nobody trusts, a server certificate for localhost and
/// 127.0.0.1, a client certificate) and a TLS-only nats-server with `nkey_public` as one user.
fn start(test: &str, nkey_public: &str) -> Server {
    start_named(test, nkey_public, "DNS:localhost,IP:127.0.0.1")
}

/// As [`start`], with a server certificate whose subjectAltName is `san`.
fn start_named(test: &str, nkey_public: &str, san: &str) -> Server {
    for tool in ["nats-server", "openssl"] {
        if Command::new(tool).arg("--version").output().is_err()
            && Command::new(tool).arg("version").output().is_err()
        {
            panic!("NOT RUN {test}: {tool} is not installed (bash scripts/brokers.sh deps installs nats-server; apt-get install openssl)");
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let script = r#"set -e
ca() { openssl req -x509 -newkey rsa:2048 -nodes -days 2 -sha256 -subj "/CN=$2" -keyout $1.key -out $1.crt \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null; }
leaf() {
  openssl req -new -newkey rsa:2048 -nodes -subj "/CN=$2" -keyout $1.key -out $1.csr 2>/dev/null
  printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n%s\n' "$3" > $1.ext
  openssl x509 -req -in $1.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 -sha256 -extfile $1.ext -out $1.crt 2>/dev/null
}
ca ca "QueueBox NATS test CA"
ca other-ca "Some other CA"
leaf server localhost "extendedKeyUsage=serverAuth
subjectAltName=$QB_SAN"
leaf client queuebox "extendedKeyUsage=clientAuth"
"#;
    let out = Command::new("bash")
        .arg("-c")
        .arg(script)
        .env("QB_SAN", san)
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "openssl: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let port = free_port();
    let certs = dir.path().to_path_buf();
    let conf = format!(
        r#"listen: "127.0.0.1:{port}"
tls {{
  cert_file: "{d}/server.crt"
  key_file: "{d}/server.key"
  ca_file: "{d}/ca.crt"
  verify: true
  timeout: 2
}}
authorization {{
  users = [
    {{ user: "relay", password: "relay-secret" }}
    {{ nkey: "{nkey_public}" }}
  ]
}}
"#,
        d = certs.display()
    );
    std::fs::write(certs.join("nats.conf"), conf).unwrap();
    let child = Command::new("nats-server")
        .arg("-c")
        .arg(certs.join("nats.conf"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "nats-server did not listen on {port}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    Server {
        child,
        port,
        _dir: dir,
        certs,
    }
}

fn tls(certs: &Path, ca: &str, client: bool) -> BrokerTls {
    let f = |n: &str| Some(certs.join(n).display().to_string());
    BrokerTls {
        ca_file: f(ca),
        cert_file: if client { f("client.crt") } else { None },
        key_file: if client { f("client.key") } else { None },
    }
}

fn login(
    tls: &BrokerTls,
    user: Option<&str>,
    password: Option<&Secret>,
    nkey: Option<&Secret>,
) -> NatsLogin {
    NatsLogin {
        username: user.map(str::to_string),
        password: password.cloned(),
        token: None,
        nkey_seed: nkey.cloned(),
        creds_file: None,
        tls: Some(tls.clone()),
    }
}

/// A message published by one client reaches a subscriber on another: the link works.
/// (async-nats's flush does not wait for the server to register the subscription, so the
/// publisher repeats until one arrives.)
async fn round_trip(a: &async_nats::Client, b: &async_nats::Client) {
    let mut sub = b.subscribe("tls.check").await.unwrap();
    b.flush().await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        a.publish("tls.check", "over tls".into()).await.unwrap();
        a.flush().await.unwrap();
        if let Ok(msg) = tokio::time::timeout(Duration::from_millis(200), sub.next()).await {
            assert_eq!(&msg.unwrap().payload[..], b"over tls");
            return;
        }
        assert!(
            Instant::now() < deadline,
            "no message crossed between the two TLS clients"
        );
    }
}

#[tokio::test]
async fn nats_with_tls_client_certificates_connects_with_password_or_nkey_and_refuses_a_wrong_ca_a_missing_certificate_and_a_wrong_password(
) {
    let pair = nkeys::KeyPair::new_user();
    let server = start("nats_tls", &pair.public_key());
    let url = format!("tls://127.0.0.1:{}", server.port);
    let right = tls(&server.certs, "ca.crt", true);
    let password = Secret::new("relay-secret");
    let seed = Secret::new(pair.seed().unwrap());

    let by_password = connect(
        &url,
        &login(&right, Some("relay"), Some(&password), None),
        "orders",
    )
    .await
    .expect("password user over TLS");
    let by_nkey = connect(&url, &login(&right, None, None, Some(&seed)), "events")
        .await
        .expect("nkey user over TLS");
    round_trip(&by_password, &by_nkey).await;
    assert!(
        by_password.server_info().tls_required,
        "the server requires TLS"
    );

    let started = Instant::now();
    let wrong_ca = tls(&server.certs, "other-ca.crt", true);
    let e = connect(
        &url,
        &login(&wrong_ca, Some("relay"), Some(&password), None),
        "orders",
    )
    .await
    .expect_err("a wrong CA is refused")
    .to_string();
    assert!(
        e.contains("NATS `orders`") && e.contains("127.0.0.1"),
        "names the connection: {e}"
    );
    assert!(
        e.to_lowercase().contains("tls") && e.contains("UnknownIssuer"),
        "says why: {e}"
    );

    let no_client_cert = tls(&server.certs, "ca.crt", false);
    let e = connect(
        &url,
        &login(&no_client_cert, Some("relay"), Some(&password), None),
        "orders",
    )
    .await
    .expect_err("no client certificate is refused")
    .to_string();
    assert!(e.contains("NATS `orders`"), "names the connection: {e}");

    let wrong = Secret::new("guess");
    let e = connect(
        &url,
        &login(&right, Some("relay"), Some(&wrong), None),
        "orders",
    )
    .await
    .expect_err("a wrong password is refused")
    .to_string();
    assert!(
        e.contains("NATS `orders`") && e.to_lowercase().contains("authoriz"),
        "says why: {e}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "refusals come at once, not after retries: {:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn nats_refuses_a_server_whose_certificate_does_not_name_the_host_connected_to() {
    let pair = nkeys::KeyPair::new_user();
    // Signed by the CA the client trusts, but for another host only.
    let server = start_named("nats_tls host name", &pair.public_key(), "DNS:nats.example");
    let url = format!("tls://127.0.0.1:{}", server.port);
    let right = tls(&server.certs, "ca.crt", true);
    let password = Secret::new("relay-secret");
    let e = connect(
        &url,
        &login(&right, Some("relay"), Some(&password), None),
        "orders",
    )
    .await
    .expect_err("a certificate for another host is refused")
    .to_string();
    assert!(
        e.contains("NATS `orders`") && e.contains("127.0.0.1"),
        "names the connection: {e}"
    );
    assert!(
        e.contains("not valid for name") || e.contains("NotValidForName"),
        "says why: {e}"
    );
    eprintln!("host name refused: {e}");
}
