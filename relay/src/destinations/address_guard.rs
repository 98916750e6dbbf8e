//! `http.blockPrivateAddresses`: HTTP destinations (and their OAuth2 token endpoints) may
//! only reach public addresses.
//!
//! Two checks, both needed:
//! - at start-up, [`check_startup`] looks at every `baseUrl` and `tokenUrl` host (an IP
//!   literal directly, a name through DNS) and refuses to start naming the key; a name that
//!   does not resolve does not stop start-up (reference §4.3) — the connect-time check
//!   covers it later;
//! - at connect time, [`PublicOnly`] is the destination client's DNS resolver: it drops
//!   private addresses from every answer, so a name that later resolves to a private address
//!   (DNS rebinding) cannot be reached. IP-literal URLs never reach a resolver; they are
//!   fixed in the configuration and refused at start-up, and redirects are never followed.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use queuebox_config::{Config, DestinationAuth, DestinationKind};

/// How long the start-up check waits for one name to resolve.
const STARTUP_LOOKUP_TIMEOUT: Duration = Duration::from_secs(5);

/// Why `ip` is not a public address, or `None` when it is.
pub fn private_kind(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            if v4.is_loopback() {
                Some("loopback")
            } else if v4.is_unspecified() || o[0] == 0 {
                Some("unspecified")
            } else if v4.is_private() {
                Some("private")
            } else if v4.is_link_local() {
                Some("link-local")
            } else {
                None
            }
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return private_kind(IpAddr::V4(v4));
            }
            let first = v6.segments()[0];
            if v6.is_loopback() {
                Some("loopback")
            } else if v6.is_unspecified() {
                Some("unspecified")
            } else if first & 0xfe00 == 0xfc00 {
                Some("unique-local")
            } else if first & 0xffc0 == 0xfe80 {
                Some("link-local")
            } else if first & 0xffc0 == 0xfec0 {
                Some("site-local")
            } else {
                None
            }
        }
    }
}

/// One refused host: the key it sits under and why.
#[derive(Debug, thiserror::Error)]
#[error("{key}: {reason} and http.blockPrivateAddresses is true")]
pub struct Blocked {
    pub key: String,
    pub reason: String,
}

/// Every HTTP destination host and OAuth2 token host that is (or resolves to) a private
/// address, when `http.blockPrivateAddresses` is on. Empty when it is off.
pub async fn check_startup(cfg: &Config) -> Vec<Blocked> {
    let mut out = Vec::new();
    if !cfg.http.block_private_addresses {
        return out;
    }
    for (name, d) in &cfg.destinations {
        let DestinationKind::Http(h) = &d.kind else {
            continue;
        };
        let mut urls = vec![(format!("destinations.{name}.baseUrl"), h.base_url.as_str())];
        if let Some(DestinationAuth::OAuth2(o)) = &h.auth {
            urls.push((
                format!("destinations.{name}.auth.tokenUrl"),
                o.token_url.as_str(),
            ));
        }
        for (key, url) in urls {
            if let Some(reason) = host_reason(url).await {
                out.push(Blocked { key, reason });
            }
        }
    }
    out
}

async fn host_reason(url: &str) -> Option<String> {
    let u = url::Url::parse(url).ok()?;
    let ip = match u.host()? {
        url::Host::Ipv4(ip) => IpAddr::V4(ip),
        url::Host::Ipv6(ip) => IpAddr::V6(ip),
        url::Host::Domain(name) => {
            let port = u.port_or_known_default().unwrap_or(80);
            let addrs = match tokio::time::timeout(
                STARTUP_LOOKUP_TIMEOUT,
                tokio::net::lookup_host((name, port)),
            )
            .await
            {
                Ok(Ok(a)) => a.map(|a| a.ip()).collect::<Vec<_>>(),
                _ => {
                    tracing::warn!(host = name, "cannot resolve a destination host at start-up; its addresses are checked when it connects (http.blockPrivateAddresses)");
                    return None;
                }
            };
            let ip = addrs.into_iter().find(|ip| private_kind(*ip).is_some())?;
            return Some(format!(
                "{name} resolves to {ip}, a private address ({})",
                private_kind(ip)?
            ));
        }
    };
    private_kind(ip).map(|kind| format!("{ip} is a private address ({kind})"))
}

/// A DNS resolver that never hands out a private address (see the module docs).
pub struct PublicOnly;

/// Every address of a name was private.
#[derive(Debug, thiserror::Error)]
#[error("{host} resolves only to private addresses ({ip}) and http.blockPrivateAddresses is true")]
struct OnlyPrivate {
    host: String,
    ip: IpAddr,
}

impl reqwest::dns::Resolve for PublicOnly {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let host = name.as_str().to_string();
        Box::pin(async move {
            let all: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let public: Vec<SocketAddr> = all
                .iter()
                .copied()
                .filter(|a| private_kind(a.ip()).is_none())
                .collect();
            match (public.is_empty(), all.first()) {
                (true, Some(first)) => Err(Box::new(OnlyPrivate {
                    host,
                    ip: first.ip(),
                }) as _),
                _ => Ok(Box::new(public.into_iter()) as reqwest::dns::Addrs),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    use super::private_kind;
    use crate::destinations::http::HttpPublisher;
    use crate::destinations::{OutboundMessage, Publisher};

    /// A publisher to `http://localhost:<port>` (a name, so it goes through the resolver), and
    /// how many connections the listener behind it accepted.
    async fn publish_to_localhost(block: bool) -> (Result<(), String>, usize) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let accepted = Arc::new(AtomicUsize::new(0));
        let count = accepted.clone();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::SeqCst);
                use tokio::io::{AsyncReadExt, AsyncWriteExt};
                // The whole small request (head and `{"n":1}`), then a 200.
                let mut got = Vec::new();
                let mut buf = [0u8; 1024];
                while !got.ends_with(br#"{"n":1}"#) {
                    match s.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => got.extend_from_slice(&buf[..n]),
                    }
                }
                let _ = s
                    .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
                    .await;
            }
        });
        let d: queuebox_config::HttpDestination = serde_json::from_value(
            serde_json::json!({"baseUrl": format!("http://localhost:{port}"), "timeoutMs": 2000}),
        )
        .unwrap();
        let http = queuebox_config::HttpConfig {
            block_private_addresses: block,
            ..Default::default()
        };
        let p = HttpPublisher::new(&d, &http, Arc::new(crate::metrics::Metrics::new())).unwrap();
        let msg = OutboundMessage {
            id: uuid::Uuid::new_v4(),
            topic: "t".into(),
            key: None,
            aggregate_type: None,
            payload: serde_json::json!({"n": 1}),
            headers: Default::default(),
            attempt: 0,
            routing_key: None,
        };
        let r = p.publish(&msg).await.map_err(|e| e.to_string());
        (r, accepted.load(Ordering::SeqCst))
    }

    #[tokio::test]
    async fn the_destination_resolver_never_connects_to_a_private_address() {
        let (r, accepted) = publish_to_localhost(true).await;
        let e = r.unwrap_err();
        assert!(
            e.contains("localhost resolves only to private addresses")
                && e.contains("http.blockPrivateAddresses"),
            "{e}"
        );
        assert_eq!(accepted, 0, "no connection was made");
        // The same destination without the setting connects: the refusal is the guard's.
        let (r, accepted) = publish_to_localhost(false).await;
        assert_eq!(r, Ok(()));
        assert_eq!(accepted, 1);
    }

    #[test]
    fn private_ranges_are_recognised_and_public_ones_pass() {
        for (ip, kind) in [
            ("127.0.0.1", Some("loopback")),
            ("10.1.2.3", Some("private")),
            ("172.16.0.1", Some("private")),
            ("192.168.1.1", Some("private")),
            ("169.254.169.254", Some("link-local")),
            ("0.0.0.0", Some("unspecified")),
            ("::1", Some("loopback")),
            ("::", Some("unspecified")),
            ("fd00::1", Some("unique-local")),
            ("fe80::1", Some("link-local")),
            ("fec0::1", Some("site-local")),
            ("::ffff:127.0.0.1", Some("loopback")),
            ("93.184.216.34", None),
            ("172.32.0.1", None),
            ("2606:4700::1111", None),
        ] {
            assert_eq!(private_kind(ip.parse().unwrap()), kind, "{ip}");
        }
    }
}
