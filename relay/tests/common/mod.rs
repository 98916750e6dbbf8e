//! Test harness: a fresh database per test, a real HTTP receiver, and the real `queuebox`
//! binary as a child process. Shared by the relay's tests and the acceptance suite
//! (tests/acceptance includes this file), so nothing here may depend on being compiled
//! inside the relay package.
#![allow(dead_code)]

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use queuebox_core::store::postgres::PgStore;
use tokio::process::{Child, Command};

/// The test server without a database name (`queuebox_testkit::server_url`).
pub fn server_url() -> String {
    queuebox_testkit::server_url()
}

/// A fresh, migrated database of its own.
pub async fn fresh_db(suite: &str) -> (String, PgStore) {
    let (url, store) = empty_db(&format!("relay_{suite}")).await;
    queuebox_core::migrate::postgres::run(&store).await.unwrap();
    (url, store)
}

/// A fresh database of its own with no tables: the binary under test migrates it.
pub async fn empty_db(suite: &str) -> (String, PgStore) {
    let url = queuebox_testkit::fresh_database(suite).await;
    let store = PgStore::connect(&url, 4).await.unwrap();
    (url, store)
}

/// A port nothing listens on, for a child process (the relay, a PostgreSQL) to bind later.
///
/// Chosen below the kernel's ephemeral range, never from it: a port from `bind(:0)` is free
/// again the moment it is returned, and the next `bind(:0)` in this process (a test's
/// `Receiver`, running in parallel) may be handed the same port before the child binds it;
/// the child then fails to start while the test talks to the receiver instead. Ports below
/// the range are never handed out by `bind(:0)` or used for outgoing connections, and a
/// process-wide cursor keeps two calls from returning the same one.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static CURSOR: AtomicU32 = AtomicU32::new(0);
    let ephemeral_low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u32>().ok())
        .unwrap_or(32768);
    let (low, high) = (20000u32, ephemeral_low.max(20001));
    let span = high - low;
    // Start each test process at its own offset, so two test binaries run side by side
    // (a developer's two terminals) rarely probe the same ports.
    let _ = CURSOR.compare_exchange(
        0,
        std::process::id().wrapping_mul(7919) % span + 1,
        Ordering::SeqCst,
        Ordering::SeqCst,
    );
    for _ in 0..span {
        let port = (low + CURSOR.fetch_add(1, Ordering::SeqCst) % span) as u16;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free port in {low}..{high}");
}

/// One request the receiver got.
#[derive(Debug, Clone)]
pub struct Delivery {
    pub path: String,
    pub headers: HashMap<String, String>,
    pub body: serde_json::Value,
    /// The body bytes exactly as they arrived.
    pub raw: Bytes,
    /// When it arrived.
    pub at: Instant,
}

impl Delivery {
    pub fn h(&self, name: &str) -> Option<&str> {
        self.headers
            .get(&name.to_ascii_lowercase())
            .map(String::as_str)
    }
}

/// How the receiver answers a request to a path: a script of statuses (the last repeats),
/// and an optional delay for the first request of each `X-Message-Id`.
#[derive(Default)]
pub struct Behaviour {
    pub statuses: HashMap<String, Vec<u16>>,
    pub first_delay: Option<Duration>,
    /// While true, requests to `/hang` never answer.
    pub hang: bool,
}

#[derive(Clone, Default)]
pub struct Receiver {
    pub got: Arc<Mutex<Vec<Delivery>>>,
    pub behaviour: Arc<Mutex<Behaviour>>,
    pub port: u16,
    /// Delayed requests (`first_delay`) being answered now, and the most at any one time.
    pub in_flight: Arc<std::sync::atomic::AtomicUsize>,
    pub max_in_flight: Arc<std::sync::atomic::AtomicUsize>,
}

impl Receiver {
    pub async fn start() -> Receiver {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let r = Receiver {
            port: listener.local_addr().unwrap().port(),
            ..Receiver::default()
        };
        let app = axum::Router::new().fallback(receive).with_state(r.clone());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        r
    }
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
    pub fn deliveries(&self) -> Vec<Delivery> {
        self.got.lock().unwrap().clone()
    }
    pub fn to(&self, path: &str) -> Vec<Delivery> {
        self.deliveries()
            .into_iter()
            .filter(|d| d.path == path)
            .collect()
    }
    pub fn script(&self, path: &str, statuses: &[u16]) {
        self.behaviour
            .lock()
            .unwrap()
            .statuses
            .insert(path.to_string(), statuses.to_vec());
    }
}

async fn receive(State(r): State<Receiver>, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    let path = uri.path().to_string();
    let d = Delivery {
        path: path.clone(),
        headers: headers
            .iter()
            .map(|(k, v)| {
                (
                    k.as_str().to_string(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect(),
        body: serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null),
        raw: body.clone(),
        at: Instant::now(),
    };
    let first_of_id = {
        let mut got = r.got.lock().unwrap();
        let first = !got
            .iter()
            .any(|g| g.h("x-message-id") == d.h("x-message-id"));
        got.push(d.clone());
        first
    };
    let (status, delay, hang) = {
        let mut b = r.behaviour.lock().unwrap();
        let hang = b.hang && path == "/hang";
        let delay = if first_of_id { b.first_delay } else { None };
        let status = match b.statuses.get_mut(&path) {
            Some(s) if s.len() > 1 => s.remove(0),
            Some(s) if s.len() == 1 => s[0],
            _ => 200,
        };
        (status, delay, hang)
    };
    if hang {
        futures::future::pending::<()>().await;
    }
    if let Some(d) = delay {
        use std::sync::atomic::Ordering::SeqCst;
        let now = r.in_flight.fetch_add(1, SeqCst) + 1;
        r.max_in_flight.fetch_max(now, SeqCst);
        tokio::time::sleep(d).await;
        r.in_flight.fetch_sub(1, SeqCst);
    }
    let mut resp = (StatusCode::from_u16(status).unwrap(), "receiver says hi").into_response();
    if (300..400).contains(&status) {
        resp.headers_mut()
            .insert("location", "/redirected".parse().unwrap());
    }
    resp
}

/// A running `queuebox` child process.
pub struct Relay {
    pub child: Child,
    pub port: u16,
    pub config: tempfile::NamedTempFile,
}

/// The `queuebox` binary under test: `QUEUEBOX_BIN` when set, the one cargo built for the
/// relay's own tests, else the one next to this test executable (target/<profile>/, which
/// `cargo build -p queuebox` fills before the acceptance suite runs).
pub fn queuebox_bin() -> std::path::PathBuf {
    if let Some(bin) = std::env::var_os("QUEUEBOX_BIN") {
        return bin.into();
    }
    if let Some(bin) = option_env!("CARGO_BIN_EXE_queuebox") {
        return bin.into();
    }
    let exe = std::env::current_exe().expect("the test executable's path");
    // target/<profile>/deps/<test> → target/<profile>/queuebox
    let bin = exe
        .parent()
        .and_then(|d| d.parent())
        .unwrap()
        .join("queuebox");
    assert!(
        bin.exists(),
        "no queuebox binary at {} (run `cargo build -p queuebox` or set QUEUEBOX_BIN)",
        bin.display()
    );
    bin
}

/// The repository's root (the folder holding scripts/postgres.sh).
pub fn repo_root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .find(|d| d.join("scripts/postgres.sh").exists())
        .expect("the repository root above CARGO_MANIFEST_DIR")
        .to_path_buf()
}

pub fn relay_command(config_path: &std::path::Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(queuebox_bin());
    cmd.arg("--config").arg(config_path).args(args);
    for (k, _) in std::env::vars() {
        if k.starts_with("QUEUEBOX_") {
            cmd.env_remove(k);
        }
    }
    cmd.env(
        "RUST_LOG",
        std::env::var("QB_RELAY_LOG").unwrap_or_else(|_| "warn".into()),
    );
    cmd.kill_on_drop(true).stdin(Stdio::null());
    cmd
}

/// Runs `queuebox <args>` with the relay's configuration: exit code, stdout, stderr.
pub async fn relay_cli(relay: &Relay, args: &[&str]) -> (i32, String, String) {
    let out = relay_command(relay.config.path(), args)
        .output()
        .await
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

pub fn write_config(yaml: &str) -> tempfile::NamedTempFile {
    let f = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(f.path(), yaml).unwrap();
    f
}

impl Relay {
    /// Starts the relay with `yaml` (`{port}` is replaced by a free port) and waits for it
    /// to listen.
    pub async fn start(yaml: &str) -> Relay {
        let port = free_port();
        let config = write_config(&yaml.replace("{port}", &port.to_string()));
        let child = relay_command(config.path(), &["run"]).spawn().unwrap();
        let mut r = Relay {
            child,
            port,
            config,
        };
        r.wait_listening().await;
        r
    }
    /// Waits until the relay's port accepts connections; fails at once, with the exit
    /// status, if the relay exits instead (a bad config, a port already taken).
    pub async fn wait_listening(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!(
                    "the relay exited ({status}) before it listened on {}",
                    self.port
                );
            }
            if tokio::net::TcpStream::connect(("127.0.0.1", self.port))
                .await
                .is_ok()
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("the relay did not listen on {}", self.port);
    }
    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }
    pub async fn post(&self, path: &str, body: &str, headers: &[(&str, &str)]) -> (u16, String) {
        let mut req = reqwest::Client::new()
            .post(self.url(path))
            .body(body.to_string())
            .header("content-type", "application/json");
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status().as_u16();
        (status, resp.text().await.unwrap())
    }
    pub async fn get(&self, path: &str) -> (u16, String) {
        match reqwest::get(self.url(path)).await {
            Ok(r) => (r.status().as_u16(), r.text().await.unwrap_or_default()),
            Err(_) => (0, String::new()),
        }
    }
    /// The value of a metric series (the full name with labels, e.g. `queuebox_claims_lost_total{component="outbox"}`).
    pub async fn metric(&self, series: &str) -> f64 {
        let (_, text) = self.get("/metrics").await;
        text.lines()
            .find_map(|l| l.strip_prefix(series).and_then(|v| v.trim().parse().ok()))
            .unwrap_or(0.0)
    }
    pub fn kill(&mut self) {
        let pid = self.child.id().unwrap() as i32;
        unsafe_kill(pid, 9);
    }
    pub fn term(&mut self) {
        let pid = self.child.id().unwrap() as i32;
        unsafe_kill(pid, 15);
    }
}

fn unsafe_kill(pid: i32, sig: i32) {
    let _ = std::process::Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid.to_string())
        .status();
}

pub async fn eventually<F: FnMut() -> Fut, Fut: std::future::Future<Output = bool>>(
    what: &str,
    secs: u64,
    f: F,
) {
    queuebox_testkit::wait_until(Duration::from_secs(secs), what, f).await;
}

pub async fn scalar_i64(store: &PgStore, sql: &str) -> i64 {
    sqlx::query_scalar::<_, i64>(sql)
        .fetch_one(store.pool())
        .await
        .unwrap()
}

/// The common fast settings of a test relay.
/// Declares `exchange` as a durable topic exchange (accepted only if an existing one is the
/// same), a durable `queue`, and binds them with `pattern`: where a test's RabbitMQ
/// destination publishes and the test reads.
pub async fn amqp_bound_queue(
    ch: &lapin::Channel,
    exchange: &str,
    queue: &str,
    pattern: &str,
) -> Result<(), lapin::Error> {
    use lapin::options::{ExchangeDeclareOptions, QueueBindOptions, QueueDeclareOptions};
    use lapin::types::FieldTable;
    ch.exchange_declare(
        exchange.into(),
        lapin::ExchangeKind::Topic,
        ExchangeDeclareOptions {
            durable: true,
            ..Default::default()
        },
        FieldTable::default(),
    )
    .await?;
    ch.queue_declare(
        queue.into(),
        QueueDeclareOptions {
            durable: true,
            ..Default::default()
        },
        FieldTable::default(),
    )
    .await?;
    ch.queue_bind(
        queue.into(),
        exchange.into(),
        pattern.into(),
        QueueBindOptions::default(),
        FieldTable::default(),
    )
    .await?;
    Ok(())
}

pub fn base_config(db_url: &str, receiver: &str) -> String {
    format!(
        "server:
  httpPort: {{port}}
  bindAddress: 127.0.0.1
  drainTimeoutMs: 2000
database:
  url: {db_url}
  startupTimeoutMs: 60000
outbox:
  pollIntervalMs: 20
  retryBaseDelayMs: 50
  claimTimeoutMs: 5000
  maxAttempts: 2
  shutdownTimeoutMs: 3000
inbox:
  maxBodyBytes: 1000
  relay:
    pollIntervalMs: 20
    claimTimeoutMs: 5000
destinations:
  rx:
    type: http
    baseUrl: {receiver}
    path: /hooks
    timeoutMs: 3000
"
    )
}

/// A throwaway PostgreSQL cluster of one test (scripts/postgres.sh on its own port and
/// data directory), so a test can stop and restart "the database" without touching the
/// shared test server. Stopped and removed on drop.
pub struct Cluster {
    pub port: u16,
    pub dir: String,
}

impl Cluster {
    /// A cluster on `port` (not started yet); `tag` names its data directory.
    pub fn new(port: u16, tag: &str) -> Cluster {
        Cluster {
            port,
            dir: format!("/tmp/qb-relay-{tag}-{port}"),
        }
    }

    /// `postgres://…/queuebox` on this cluster.
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/queuebox", self.port)
    }

    /// Runs `scripts/postgres.sh <action>` (`start` creates the cluster and waits for it).
    pub fn script(&self, action: &str) {
        let st = std::process::Command::new("bash")
            .arg(repo_root().join("scripts/postgres.sh"))
            .arg(action)
            .env("QB_PG_PORT", self.port.to_string())
            .env("QB_PG_DIR", &self.dir)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(st.success(), "postgres.sh {action}");
    }

    /// [`Cluster::script`] off the runtime thread, so in-process servers keep answering.
    pub async fn script_async(&self, action: &str) {
        let c = Cluster {
            port: self.port,
            dir: self.dir.clone(),
        };
        let action = action.to_string();
        tokio::task::spawn_blocking(move || {
            c.script(&action);
            std::mem::forget(c);
        })
        .await
        .unwrap();
    }

    pub async fn script_start_blocking(&self) -> &Cluster {
        self.script_async("start").await;
        self
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.script("stop");
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
