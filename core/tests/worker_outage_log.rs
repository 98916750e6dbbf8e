//! A running pull worker whose database goes away says so once, at warn, and says at info
//! when it is back: not a log line per poll. The outage is real: the worker reaches the
//! shared PostgreSQL through a TCP relay in this test, which is closed (its port refuses,
//! its connections are cut) and then opened again on the same port.

mod support;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use queuebox_core::{Worker, WorkerOptions};
use support::*;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;

/// Every formatted log line of this test binary (JSON, one object per line).
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    /// The records at `level` whose message contains `text`.
    fn count(&self, level: &str, text: &str) -> usize {
        let bytes = self.0.lock().unwrap().clone();
        String::from_utf8_lossy(&bytes)
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|v| {
                v["level"] == level
                    && v["fields"]["message"]
                        .as_str()
                        .is_some_and(|m| m.contains(text))
            })
            .count()
    }
}

/// The relay's connections, each copying bytes both ways.
type Connections = Arc<Mutex<JoinSet<()>>>;

/// A TCP relay to `upstream` on a fixed local port, that can be closed and reopened.
struct Relay {
    addr: SocketAddr,
    upstream: SocketAddr,
    /// The accept loop and the open connections, while open.
    conns: Option<(tokio::task::JoinHandle<()>, Connections)>,
}

impl Relay {
    async fn open(&mut self) {
        let listener = TcpListener::bind(self.addr).await.expect("bind the relay");
        self.addr = listener.local_addr().unwrap();
        let upstream = self.upstream;
        let conns: Connections = Arc::default();
        let spawned = conns.clone();
        let accept = tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                spawned.lock().unwrap().spawn(async move {
                    if let Ok(mut server) = TcpStream::connect(upstream).await {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                    }
                });
            }
        });
        self.conns = Some((accept, conns));
    }

    /// Stops accepting (the port refuses) and cuts every connection.
    fn close(&mut self) {
        if let Some((accept, conns)) = self.conns.take() {
            accept.abort();
            conns.lock().unwrap().abort_all();
        }
    }
}

#[tokio::test]
async fn an_outage_is_logged_once_at_warn_and_the_recovery_at_info() {
    let captured = Captured::default();
    let writer = captured.clone();
    tracing::subscriber::set_global_default(
        tracing_subscriber::fmt()
            .json()
            .with_max_level(tracing::Level::INFO)
            .with_writer(move || writer.clone())
            .finish(),
    )
    .unwrap();

    let (_store, url) = fresh_store("outage_log").await;
    // postgres://user@host:port/name: the relay takes host:port's place.
    let (scheme_user, rest) = url.split_once('@').unwrap();
    let (host_port, db) = rest.split_once('/').unwrap();
    let mut relay = Relay {
        addr: "127.0.0.1:0".parse().unwrap(),
        upstream: tokio::net::lookup_host(host_port)
            .await
            .unwrap()
            .next()
            .unwrap(),
        conns: None,
    };
    relay.open().await;
    let via_relay = format!("{scheme_user}@{}/{db}", relay.addr);

    let opts = WorkerOptions {
        poll_interval: Duration::from_millis(50),
        listen: false,
        ..WorkerOptions::new("outage")
    };
    let worker = Worker::connect(&via_relay, opts).await.unwrap();
    let polling = worker.clone();
    let poller = tokio::spawn(async move {
        // No rows: `next` keeps claiming every poll interval until shutdown.
        let _ = polling.next().await;
    });
    tokio::time::sleep(Duration::from_millis(200)).await;

    relay.close();
    let unreachable = "the database is unreachable; pull worker retrying";
    wait_for(|| captured.count("WARN", unreachable) == 1).await;
    // More failed claims (each waits for the pool's connect attempt, then logs at debug only).
    wait_for(|| worker.stats().claim_errors >= 3).await;
    assert_eq!(
        captured.count("WARN", unreachable),
        1,
        "one warning per outage"
    );
    assert_eq!(captured.count("WARN", "pull claim failed"), 0);

    relay.open().await;
    wait_for(|| captured.count("INFO", "the database is reachable again") == 1).await;

    worker.shutdown().await;
    poller.await.unwrap();
    relay.close();
}

async fn wait_for(mut check: impl FnMut() -> bool) {
    let start = Instant::now();
    while !check() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "timed out waiting"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
