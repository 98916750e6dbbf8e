//! `http.blockPrivateAddresses` through the real `queuebox` binary: every
//! special-purpose range the issue found open — CGNAT, IETF protocol assignments, TEST-NETs,
//! benchmarking, reserved, multicast, broadcast, IPv6 documentation, and IPv4 embedded in
//! IPv6 (mapped, compatible, NAT64, 6to4, Teredo) — is refused by `check-config` and `run`
//! as a literal and as a name, and a name that resolves to one later is refused at connect
//! time.
//!
//! Nothing here may ever send a packet to a blocked address. The literal checks never get
//! that far (the database URL points at a closed loopback port, so even a relay that let
//! them through stops before delivering). The name checks run the relay in a network
//! namespace of its own (`unshare --net`: only a loopback interface, no route anywhere)
//! with a private `/etc/hosts` (`unshare --mount`, bind-mounted), reaching PostgreSQL over
//! its Unix socket: a relay whose guard failed could not reach the address either, and the
//! test sees "Network is unreachable" instead of the guard's refusal. Those tests need root
//! (or the capabilities for `unshare`), as CI has; without them they fail saying NOT RUN,
//! never pass untested.

mod common;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use common::*;
use tokio::process::Command;

/// Destination name → a host (`{h}` in the URL) the guard must refuse, and a fragment of the
/// reason the refusal names.
const HOSTS: &[(&str, &str, &str)] = &[
    ("cgnat", "100.64.0.1", "shared address space (CGNAT) 100.64.0.0/10"),
    (
        "mapped",
        "::ffff:100.64.0.1",
        "IPv4-mapped ::ffff:0:0/96, RFC 4291 §2.5.5.2; embedded IPv4 100.64.0.1: shared address space (CGNAT)",
    ),
    ("nat64", "64:ff9b::a9fe:a9fe", "NAT64 well-known prefix 64:ff9b::/96, RFC 6052; embedded IPv4 169.254.169.254: link-local"),
    ("sixtofour", "2002:a9fe:a9fe::1", "6to4 2002::/16, RFC 3056; embedded IPv4 169.254.169.254: link-local"),
    ("compat", "::127.0.0.1", "embedded IPv4 127.0.0.1: loopback"),
    ("teredo", "2001:0:4136:e378:8000:63bf:3f57:fefe", "Teredo 2001::/32, RFC 4380; embedded IPv4 192.168.1.1: private"),
    ("bench", "198.18.0.1", "benchmarking 198.18.0.0/15, RFC 2544"),
    ("ietf", "192.0.0.1", "IETF protocol assignments 192.0.0.0/24"),
    ("testnet", "192.0.2.1", "documentation TEST-NET-1 192.0.2.0/24, RFC 5737"),
    ("reserved", "240.0.0.1", "reserved 240.0.0.0/4"),
    ("multicast", "224.0.0.1", "multicast 224.0.0.0/4"),
    ("broadcast", "255.255.255.255", "limited broadcast 255.255.255.255/32"),
    ("doc6", "2001:db8::1", "documentation 2001:db8::/32, RFC 3849"),
];

/// `host` as it goes into a URL.
fn url_host(host: &str) -> String {
    if host.contains(':') {
        format!("[{host}]")
    } else {
        host.to_string()
    }
}

/// A configuration with one destination per entry of [`HOSTS`], its URL from `url`.
fn config(db: &str, url: impl Fn(&str, &str) -> String) -> String {
    let mut yaml = format!(
        "server:\n  httpPort: {}\n  bindAddress: 127.0.0.1\ndatabase:\n  url: '{db}'\n  startupTimeoutMs: 1000\n\
         http:\n  blockPrivateAddresses: true\noutbox:\n  pollIntervalMs: 50\n  retryBaseDelayMs: 100\n  maxAttempts: 1000\n\
         destinations:\n",
        free_port()
    );
    for (name, host, _) in HOSTS {
        yaml += &format!(
            "  {name}:\n    type: http\n    baseUrl: '{}'\n    timeoutMs: 2000\n",
            url(name, host)
        );
    }
    yaml += "routes:\n";
    for (name, _, _) in HOSTS {
        yaml += &format!("  - topicPattern: '{name}'\n    destination: {name}\n");
    }
    yaml
}

async fn output(mut cmd: Command) -> (bool, String) {
    let out = tokio::time::timeout(Duration::from_secs(60), cmd.output())
        .await
        .expect("the command ends")
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout),
    )
}

/// Asserts `out` refuses every destination of [`HOSTS`] at `baseUrl`, each with its reason.
fn assert_every_host_refused(command: &str, ok: bool, out: &str, via_name: bool) {
    assert!(!ok, "{command} must refuse the configuration:\n{out}");
    assert!(
        out.contains("QueueBox refuses to start: a destination host is private."),
        "{command}: {out}"
    );
    for (name, host, why) in HOSTS {
        let line = out
            .lines()
            .find(|l| l.contains(&format!("- destinations.{name}.baseUrl: ")))
            .unwrap_or_else(|| {
                panic!("{command}: destinations.{name} ({host}) is not refused:\n{out}")
            });
        let shown: std::net::IpAddr = host.parse().unwrap();
        let expected = if via_name {
            format!("{name}.test resolves to {shown}, a private address (")
        } else {
            format!("{shown} is a private address (")
        };
        assert!(line.contains(&expected), "{command}: {line}");
        assert!(line.contains(why), "{command}: {line} should say {why}");
        assert!(
            line.ends_with("and http.blockPrivateAddresses is true"),
            "{line}"
        );
    }
}

#[tokio::test]
async fn check_config_and_run_refuse_every_special_purpose_literal() {
    // A closed loopback port: a relay that let a host through stops at the database.
    let yaml = config("postgres://nobody@127.0.0.1:1/none", |_, host| {
        format!("http://{}:8080", url_host(host))
    });
    let file = write_config(&yaml);
    let (ok, out) = output(relay_command(file.path(), &["check-config"])).await;
    assert_every_host_refused("check-config", ok, &out, false);
    let (ok, out) = output(relay_command(file.path(), &["run"])).await;
    assert_every_host_refused("run", ok, &out, false);
    assert!(
        !out.contains("database"),
        "refused before the database: {out}"
    );
}

/// The PostgreSQL test server's Unix socket directory (scripts/postgres.sh's default
/// `QB_PG_DIR`), and its port.
fn socket_dir() -> Option<(PathBuf, u16)> {
    let port: u16 = server_url().rsplit(':').next()?.parse().ok()?;
    let dir = PathBuf::from(format!("/tmp/queuebox-pg-{port}"));
    dir.join(format!(".s.PGSQL.{port}"))
        .exists()
        .then_some((dir, port))
}

/// Panics with NOT RUN unless this process may make network and mount namespaces and the
/// test PostgreSQL has a Unix socket: a test that could not run must not pass.
async fn require_sandbox() {
    let ok = Command::new("unshare")
        .args(["--mount", "--net", "--", "true"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .await
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        "NOT RUN: `unshare --mount --net` is not permitted here (needs root)"
    );
    assert!(
        socket_dir().is_some(),
        "NOT RUN: no PostgreSQL Unix socket under /tmp/queuebox-pg-<port>"
    );
}

/// `queuebox --config <config> <args>` in a network namespace with only a loopback
/// interface and `hosts` as its `/etc/hosts`.
fn sandboxed(config: &Path, hosts: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new("unshare");
    cmd.args(["--mount", "--net", "--", "sh", "-c"])
        .arg("ip link set lo up && mount --bind \"$0\" /etc/hosts && exec \"$@\"")
        .arg(hosts)
        .arg(queuebox_bin())
        .arg("--config")
        .arg(config)
        .args(args);
    for (k, _) in std::env::vars() {
        if k.starts_with("QUEUEBOX_") {
            cmd.env_remove(k);
        }
    }
    cmd.env("RUST_LOG", "warn")
        .kill_on_drop(true)
        .stdin(Stdio::null());
    cmd
}

/// `url` (a database of the test server) over the Unix socket.
fn over_socket(url: &str) -> String {
    let (dir, port) = socket_dir().unwrap();
    format!("{url}?host={}&port={port}", dir.display())
}

/// Every name of [`HOSTS`] (`<name>.test`) mapped to its address.
fn hosts_file(names: bool) -> String {
    let mut text = "127.0.0.1 localhost\n::1 localhost\n".to_string();
    if names {
        for (name, host, _) in HOSTS {
            text += &format!("{host} {name}.test\n");
        }
    }
    text
}

#[tokio::test]
async fn check_config_and_run_refuse_a_name_that_resolves_to_a_special_purpose_address() {
    require_sandbox().await;
    let (url, _store) = fresh_db("guard_names").await;
    let hosts = write_config(&hosts_file(true));
    let yaml = config(&over_socket(&url), |name, _| {
        format!("http://{name}.test:8080")
    });
    let file = write_config(&yaml);
    let (ok, out) = output(sandboxed(file.path(), hosts.path(), &["check-config"])).await;
    assert_every_host_refused("check-config", ok, &out, true);
    let (ok, out) = output(sandboxed(file.path(), hosts.path(), &["run"])).await;
    assert_every_host_refused("run", ok, &out, true);
}

#[tokio::test]
async fn a_name_that_resolves_to_a_special_purpose_address_after_start_up_is_never_connected_to() {
    require_sandbox().await;
    let (url, store) = fresh_db("guard_rebind").await;
    // No name resolves at start-up, so the relay starts (each name is only warned about).
    let hosts = write_config(&hosts_file(false));
    let yaml = config(&over_socket(&url), |name, _| {
        format!("http://{name}.test:8080")
    });
    let file = write_config(&yaml);
    let mut relay = sandboxed(file.path(), hosts.path(), &["run"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    for (name, _, _) in HOSTS {
        sqlx::query("INSERT INTO outbox (topic, payload) VALUES ($1, '{}')")
            .bind(*name)
            .execute(store.pool())
            .await
            .unwrap();
    }
    // The relay runs and fails each row on the name it cannot resolve yet...
    eventually("every row attempted once", 60, || async {
        scalar_i64(
            &store,
            "SELECT count(*) FROM outbox WHERE last_error IS NOT NULL",
        )
        .await
            == HOSTS.len() as i64
    })
    .await;
    // ...then every name resolves, to a special-purpose address only (DNS rebinding). The
    // file is rewritten in place: the relay's /etc/hosts is a bind mount of it.
    std::fs::write(hosts.path(), hosts_file(true)).unwrap();
    for (name, host, why) in HOSTS {
        let shown: std::net::IpAddr = host.parse().unwrap();
        let expected = format!("{name}.test resolves only to private addresses ({shown}: ");
        let mut last = String::new();
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while std::time::Instant::now() < deadline {
            last = sqlx::query_scalar::<_, Option<String>>(
                "SELECT last_error FROM outbox WHERE topic = $1",
            )
            .bind(*name)
            .fetch_one(store.pool())
            .await
            .unwrap()
            .unwrap_or_default();
            if last.contains(&expected) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(
            last.contains(&expected) && last.contains(why),
            "{name} ({host}): the resolver must refuse it; last_error: {last}"
        );
        assert!(
            last.contains("and http.blockPrivateAddresses is true"),
            "{last}"
        );
    }
    let _ = relay.start_kill();
    let _ = relay.wait().await;
}
