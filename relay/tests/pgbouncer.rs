//! QueueBox through a real PgBouncer (Debian's `pgbouncer`, started by each
//! test on a port of its own in front of the test PostgreSQL), with the real `queuebox`
//! binary and the core's worker.
//!
//! - Session mode works: `queuebox migrate` twice, a POST delivered through the outbox to a
//!   real HTTP receiver, a SIGKILLed replica's claimed rows taken over by a second replica
//!   within seconds (its owner session's advisory lock went with its server session), and
//!   the Rust pull worker woken by `LISTEN` and completing rows.
//! - Transaction and statement modes are refused at start by `queuebox migrate`, the relay
//!   and the worker, naming PgBouncer's `pool_mode` and what to set, with nothing done.
//! - PgBouncer's defaults refuse sqlx's `extra_float_digits` startup parameter: the error
//!   names `ignore_startup_parameters`, and the relay gives up at once instead of retrying.
//!
//! Without pgbouncer installed every test fails saying NOT RUN (scripts/test.d/10-rust.sh
//! installs it from Debian's packages).

mod common;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::*;
use queuebox_core::{ErrorKind, Worker, WorkerOptions};

/// A pgbouncer process of one test, in front of the test server; killed on drop.
struct PgBouncer {
    child: std::process::Child,
    port: u16,
    dir: tempfile::TempDir,
    user: String,
}

impl PgBouncer {
    /// Serves each `(alias, database, pool_mode)` of `databases`; with `ignore_extra_float_digits`
    /// as QueueBox's docs say to set it, else with PgBouncer's defaults.
    fn start(databases: &[(&str, &str, &str)], ignore_extra_float_digits: bool) -> PgBouncer {
        let bin = ["/usr/sbin/pgbouncer", "/usr/bin/pgbouncer", "/usr/local/bin/pgbouncer"]
            .into_iter()
            .find(|p| std::path::Path::new(p).exists())
            .unwrap_or_else(|| {
                panic!("NOT RUN: pgbouncer is not installed (apt-get install pgbouncer; scripts/test.d/10-rust.sh installs it)")
            });
        let server = reqwest::Url::parse(&format!("{}/x", server_url())).unwrap();
        let user = match server.username() {
            "" => "postgres".to_string(),
            u => u.to_string(),
        };
        let dir = tempfile::tempdir().unwrap();
        // Run as root, pgbouncer switches to `nobody` (it refuses to run as root), which
        // must still read its files.
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let port = free_port();
        let mut ini = String::from("[databases]\n");
        for (alias, db, mode) in databases {
            ini += &format!(
                "{alias} = host={} port={} dbname={db} pool_mode={mode}\n",
                server.host_str().unwrap(),
                server.port().unwrap_or(5432)
            );
        }
        ini += &format!(
            "[pgbouncer]\nlisten_addr = 127.0.0.1\nlisten_port = {port}\nunix_socket_dir =\n\
             auth_type = trust\nauth_file = {}/users.txt\npool_mode = session\n\
             default_pool_size = 40\nmax_client_conn = 300\n",
            dir.path().display()
        );
        if ignore_extra_float_digits {
            ini += "ignore_startup_parameters = extra_float_digits\n";
        }
        let file = |name: &str, text: &str| {
            let p = dir.path().join(name);
            std::fs::write(&p, text).unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
            p
        };
        file("users.txt", &format!("\"{user}\" \"\"\n"));
        let ini_path = file("pgbouncer.ini", &ini);
        let log = std::fs::File::create(dir.path().join("pgbouncer.log")).unwrap();
        let mut cmd = std::process::Command::new(bin);
        if std::fs::metadata("/proc/self").unwrap().uid() == 0 {
            cmd.args(["-u", "nobody"]);
        }
        let child = cmd
            .arg(&ini_path)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        let mut b = PgBouncer {
            child,
            port,
            dir,
            user,
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(Some(status)) = b.child.try_wait() {
                panic!("pgbouncer exited ({status}): {}", b.log());
            }
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return b;
            }
            assert!(
                Instant::now() < deadline,
                "pgbouncer did not listen: {}",
                b.log()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn url(&self, alias: &str) -> String {
        format!("postgres://{}@127.0.0.1:{}/{alias}", self.user, self.port)
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("pgbouncer.log")).unwrap_or_default()
    }
}

impl Drop for PgBouncer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The database name of a test URL (`…/qb_x` → `qb_x`).
fn db_name(url: &str) -> &str {
    url.rsplit('/').next().unwrap()
}

/// Posted orders go to `/hooks`; `crash.*` rows to `/hang`, where the receiver can hang.
const ROUTES: &str = "  hang:
    type: http
    baseUrl: {rx}
    path: /hang
    timeoutMs: 60000
routes:
  - topicPattern: 'orders.**'
    destination: rx
  - topicPattern: 'crash.**'
    destination: hang
sources:
  orders:
    path: /orders
    idempotencyKeyPath: $.id
    topic: orders.created
";

/// A relay through `url` with one-minute leases (a takeover within seconds is the owner
/// session's doing, not a lease running out) and a pool of 4.
fn relay_config(url: &str, rx: &Receiver) -> String {
    base_config(url, &rx.url())
        .replace(
            "  startupTimeoutMs: 60000\n",
            "  startupTimeoutMs: 60000\n  poolSize: 4\n",
        )
        .replace("  claimTimeoutMs: 5000\n", "  claimTimeoutMs: 60000\n")
        .replace("    timeoutMs: 3000\n", "    timeoutMs: 60000\n")
        + &ROUTES.replace("{rx}", &rx.url())
}

/// `queuebox migrate` with the relay configuration `yaml`: exit status, stdout, stderr, and
/// how long it took.
async fn migrate(yaml: &str) -> (bool, String, String, Duration) {
    let config = write_config(&yaml.replace("{port}", &free_port().to_string()));
    let t = Instant::now();
    let out = relay_command(config.path(), &["migrate"])
        .output()
        .await
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        t.elapsed(),
    )
}

/// The relay with `yaml` until it exits (at most `secs`): exit status and stderr.
async fn run_until_exit(yaml: &str, secs: u64) -> (std::process::ExitStatus, String, Duration) {
    let config = write_config(&yaml.replace("{port}", &free_port().to_string()));
    let t = Instant::now();
    let child = relay_command(config.path(), &["run"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = tokio::time::timeout(Duration::from_secs(secs), child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("the relay was still running after {secs} s"))
        .unwrap();
    (
        out.status,
        String::from_utf8_lossy(&out.stderr).into_owned(),
        t.elapsed(),
    )
}

/// The refusal every component gives for a transaction or statement pool.
fn assert_refused_naming_pool_mode(what: &str, text: &str) {
    for part in [
        "connection pooler in transaction or statement mode",
        "PgBouncer pool_mode = transaction or statement",
        "pool_mode = session",
    ] {
        assert!(text.contains(part), "{what}: no `{part}` in: {text}");
    }
}

async fn public_tables(store: &queuebox_core::store::postgres::PgStore) -> i64 {
    scalar_i64(
        store,
        "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'",
    )
    .await
}

#[tokio::test]
async fn session_mode_migrates_twice_delivers_a_post_and_takes_over_a_killed_replicas_rows() {
    let (direct, store) = empty_db("pgb_session").await;
    let bouncer = PgBouncer::start(&[("qb", db_name(&direct), "session")], true);
    let url = bouncer.url("qb");
    let rx = Receiver::start().await;
    rx.behaviour.lock().unwrap().hang = true;

    let config = relay_config(&url, &rx);
    let (ok, first, err, _) = migrate(&config).await;
    assert!(
        ok,
        "the first migrate through session-mode pgbouncer: {err}"
    );
    assert!(!first.contains("(0 applied now"), "{first}");
    let (ok, second, err, _) = migrate(&config).await;
    assert!(ok, "the second migrate: {err}");
    assert!(second.contains("(0 applied now"), "{second}");

    // Replica A delivers a posted order through the outbox.
    let mut a = Relay::start(&config).await;
    let (s, body) = a.post("/inbox/orders", r#"{"id":"o-1"}"#, &[]).await;
    assert_eq!(s, 202, "{body}");
    eventually("A delivered the order", 20, || async {
        rx.to("/hooks").len() == 1
    })
    .await;

    // A claims three rows (one statement, so one claim takes all three) and hangs publishing
    // them; then it is SIGKILLed.
    sqlx::query(
        "INSERT INTO outbox (topic, key, payload) SELECT 'crash.t', 'k' || n, '{}' FROM generate_series(1, 3) n",
    )
    .execute(store.pool())
    .await
    .unwrap();
    eventually("A holds the three rows under its owner key", 20, || async {
        scalar_i64(
            &store,
            "SELECT count(*) FROM outbox WHERE state = 'processing' AND claim_owner IS NOT NULL AND lease_expires_at > now() + interval '50 seconds'",
        )
        .await
            == 3
    })
    .await;
    // Its three publishes have reached the receiver (and hang there): a kill before the last
    // one is sent would leave fewer than the six deliveries counted below, a race that failed
    // this test once on a loaded machine.
    eventually("A's three publishes reached the receiver", 20, || async {
        rx.to("/hang").len() == 3
    })
    .await;
    a.kill();
    let _ = a.child.wait().await;
    let killed = Instant::now();
    rx.behaviour.lock().unwrap().hang = false;

    // Replica B finds A's owner session gone and delivers its rows, long before the lease.
    let b = Relay::start(&config).await;
    eventually("B delivered A's three rows", 20, || async {
        rx.to("/hang").len() >= 6
    })
    .await;
    let took = killed.elapsed();
    println!(
        "through session-mode pgbouncer: a SIGKILLed replica's 3 rows delivered by another {:.2} s later (lease 60 s)",
        took.as_secs_f64()
    );
    assert!(took < Duration::from_secs(15), "{took:?}");

    // And B delivers what is posted to it.
    let (s, body) = b.post("/inbox/orders", r#"{"id":"o-2"}"#, &[]).await;
    assert_eq!(s, 202, "{body}");
    eventually("B delivered the second order", 20, || async {
        rx.to("/hooks").len() == 2
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    // A's hung attempts reached the receiver too (3), then B's (3): one each per row.
    let mut ids: Vec<String> = rx
        .to("/hang")
        .iter()
        .map(|d| d.h("x-message-id").unwrap_or_default().to_string())
        .collect();
    assert_eq!(ids.len(), 6, "A's attempts and B's: {:?}", rx.to("/hang"));
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 3);
    assert_eq!(rx.to("/hooks").len(), 2, "each order delivered once");
    assert_eq!(
        scalar_i64(&store, "SELECT count(*) FROM outbox WHERE state = 'sent'").await,
        5
    );
}

#[tokio::test]
async fn session_mode_rust_worker_is_woken_by_listen_and_completes_rows() {
    let (direct, store) = fresh_db("pgb_worker").await;
    let bouncer = PgBouncer::start(&[("qb", db_name(&direct), "session")], true);
    let mut opts = WorkerOptions::new("jobs");
    // Rows inserted after the worker waits are claimed within seconds only through LISTEN.
    opts.poll_interval = Duration::from_secs(60);
    let worker = Worker::connect(&bouncer.url("qb"), opts).await.unwrap();
    // The worker finds nothing and waits; then five rows arrive.
    let waiting = {
        let w = worker.clone();
        tokio::spawn(async move { w.next().await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiting.is_finished(), "no row yet");
    sqlx::query(
        "INSERT INTO inbox (source, idempotency_key, payload, consumption) SELECT 'jobs', 'j' || n, '{}', 'pull' FROM generate_series(1, 5) n",
    )
    .execute(store.pool())
    .await
    .unwrap();
    let t = Instant::now();
    let first = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect(
            "woken within 10 s of the insert (poll interval 60 s): LISTEN works through pgbouncer",
        )
        .unwrap()
        .unwrap()
        .expect("a task");
    let mut done = std::collections::HashSet::from([first.message().id]);
    first.complete().await.unwrap();
    while done.len() < 5 {
        let task = tokio::time::timeout(Duration::from_secs(10), worker.next())
            .await
            .expect("the other rows of the claim")
            .unwrap()
            .expect("a task");
        assert!(done.insert(task.message().id), "each row handed out once");
        task.complete().await.unwrap();
    }
    println!(
        "through session-mode pgbouncer: the Rust worker woken and 5 rows completed in {:.2} s",
        t.elapsed().as_secs_f64()
    );
    worker.shutdown().await;
    assert_eq!(
        scalar_i64(
            &store,
            "SELECT count(*) FROM inbox WHERE source = 'jobs' AND state = 'processed'"
        )
        .await,
        5
    );
}

#[tokio::test]
async fn transaction_and_statement_modes_are_refused_by_migrate_the_relay_and_the_worker() {
    let (direct, store) = empty_db("pgb_txn").await;
    let name = db_name(&direct);
    let bouncer = PgBouncer::start(
        &[
            ("qb_txn", name, "transaction"),
            ("qb_stmt", name, "statement"),
        ],
        true,
    );
    let rx = Receiver::start().await;
    for alias in ["qb_txn", "qb_stmt"] {
        let url = bouncer.url(alias);
        let (ok, _, err, took) = migrate(&relay_config(&url, &rx)).await;
        assert!(!ok, "migrate through {alias} succeeded");
        assert_refused_naming_pool_mode(&format!("migrate through {alias}"), &err);
        assert!(took < Duration::from_secs(10), "{took:?}");
        assert_eq!(public_tables(&store).await, 0, "migrate created nothing");

        // The relay exits at once (startupTimeoutMs is 60 s: the refusal is not retried).
        let (status, err, took) = run_until_exit(&relay_config(&url, &rx), 30).await;
        assert_eq!(
            status.code(),
            Some(1),
            "the relay through {alias}: {status}"
        );
        assert_refused_naming_pool_mode(&format!("the relay through {alias}"), &err);
        assert!(took < Duration::from_secs(10), "{took:?}");
        assert_eq!(public_tables(&store).await, 0, "the relay migrated nothing");
    }

    // A pull worker on a migrated database with a row waiting: refused, the row untouched.
    queuebox_core::migrate::postgres::run(&store).await.unwrap();
    sqlx::query(
        "INSERT INTO inbox (source, idempotency_key, payload, consumption) VALUES ('jobs', 'j1', '{}', 'pull')",
    )
    .execute(store.pool())
    .await
    .unwrap();
    for alias in ["qb_txn", "qb_stmt"] {
        let e = match Worker::connect(&bouncer.url(alias), WorkerOptions::new("jobs")).await {
            Ok(_) => panic!("a worker started through {alias}"),
            Err(e) => e,
        };
        assert_eq!(e.kind(), ErrorKind::Config, "{e}");
        assert!(!e.is_transient(), "{e}");
        assert_refused_naming_pool_mode(&format!("the worker through {alias}"), &e.to_string());
    }
    let row: (String, i32, Option<uuid::Uuid>) = sqlx::query_as(
        "SELECT state, attempt, claim_token FROM inbox WHERE idempotency_key = 'j1'",
    )
    .fetch_one(store.pool())
    .await
    .unwrap();
    assert_eq!(
        row,
        ("pending".to_string(), 0, None),
        "the row was not claimed"
    );
}

#[tokio::test]
async fn pgbouncers_default_startup_parameters_refusal_names_the_setting_and_is_not_retried() {
    let (direct, store) = empty_db("pgb_defaults").await;
    let bouncer = PgBouncer::start(&[("qb", db_name(&direct), "session")], false);
    let rx = Receiver::start().await;
    let yaml = relay_config(&bouncer.url("qb"), &rx);
    let hint = "ignore_startup_parameters = extra_float_digits";
    let (ok, _, err, took) = migrate(&yaml).await;
    assert!(!ok);
    assert!(err.contains(hint), "{err}");
    assert!(took < Duration::from_secs(10), "{took:?}");
    let (status, err, took) = run_until_exit(&yaml, 30).await;
    assert_eq!(status.code(), Some(1), "{status}");
    assert!(err.contains(hint), "{err}");
    // startupTimeoutMs is 60 s: retrying would outlast this.
    assert!(took < Duration::from_secs(10), "{took:?}");
    assert_eq!(public_tables(&store).await, 0);
}
