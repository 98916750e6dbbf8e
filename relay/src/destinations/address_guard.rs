//! `http.blockPrivateAddresses`: HTTP destinations (and their OAuth2 token endpoints) may
//! only reach public addresses.
//!
//! What is not public is one table ([`IPV4_TABLE`], the IPv6 table, matched with the `ipnet`
//! crate): the IANA IPv4 and IPv6 Special-Purpose Address Registries' entries that are not
//! globally reachable, multicast, broadcast and reserved space, and for IPv6 anything outside
//! the global unicast space 2000::/3. IPv4 embedded in IPv6 (IPv4-mapped, IPv4-compatible,
//! NAT64 64:ff9b::/96, 6to4, Teredo) is unwrapped and checked against the IPv4 table. The
//! table, with the source of every range, is in proto-docs/http-destination.md.
//!
//! Two checks, both needed:
//! - at start-up (`queuebox run` and `queuebox check-config`), [`check_startup`] looks at
//!   every `baseUrl` and `tokenUrl` host (an IP literal directly, a name through DNS) and
//!   refuses to start naming the key; a name that does not resolve does not stop start-up
//!   (a name may resolve later) — the connect-time check covers it later;
//! - at connect time, [`PublicOnly`] is the destination client's DNS resolver: it drops
//!   private addresses from every answer, so a name that later resolves to a private address
//!   (DNS rebinding) cannot be reached. IP-literal URLs never reach a resolver; they are
//!   fixed in the configuration and refused at start-up, and redirects are never followed.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::LazyLock;
use std::time::Duration;

use ipnet::{Ipv4Net, Ipv6Net};
use queuebox_config::{Config, DestinationAuth, DestinationKind};

/// How long the start-up check waits for one name to resolve.
const STARTUP_LOOKUP_TIMEOUT: Duration = Duration::from_secs(5);

/// Every IPv4 range refused, most specific first: (prefix, what it is, where it comes from).
/// The IANA IPv4 Special-Purpose Address Registry (RFC 6890) entries that are not globally
/// reachable, plus multicast, the reserved 240/4 and the deprecated 6to4 relay anycast.
/// Kept in step with the table in proto-docs/http-destination.md.
pub const IPV4_TABLE: &[(&str, &str, &str)] = &[
    (
        "0.0.0.0/8",
        "this network / unspecified",
        "RFC 791 §3.2, RFC 6890",
    ),
    ("10.0.0.0/8", "private", "RFC 1918"),
    ("100.64.0.0/10", "shared address space (CGNAT)", "RFC 6598"),
    ("127.0.0.0/8", "loopback", "RFC 1122 §3.2.1.3"),
    ("169.254.0.0/16", "link-local", "RFC 3927"),
    ("172.16.0.0/12", "private", "RFC 1918"),
    ("192.0.0.0/24", "IETF protocol assignments", "RFC 6890 §2.1"),
    ("192.0.2.0/24", "documentation TEST-NET-1", "RFC 5737"),
    (
        "192.88.99.0/24",
        "deprecated 6to4 relay anycast",
        "RFC 7526",
    ),
    ("192.168.0.0/16", "private", "RFC 1918"),
    ("198.18.0.0/15", "benchmarking", "RFC 2544"),
    ("198.51.100.0/24", "documentation TEST-NET-2", "RFC 5737"),
    ("203.0.113.0/24", "documentation TEST-NET-3", "RFC 5737"),
    ("224.0.0.0/4", "multicast", "RFC 5771"),
    (
        "255.255.255.255/32",
        "limited broadcast",
        "RFC 919, RFC 8190",
    ),
    ("240.0.0.0/4", "reserved", "RFC 1112 §4"),
];

/// How an IPv6 range holds an IPv4 address, for the forms that embed one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Embeds {
    /// Not an embedding form: the range itself is refused.
    Nothing,
    /// The last 32 bits (IPv4-mapped, IPv4-compatible, NAT64 well-known prefix).
    Last32,
    /// Bits 16..48 (6to4, `2002:AABB:CCDD::`).
    SixToFour,
    /// Teredo: the server in bits 32..64, the client's address inverted in the last 32 bits.
    Teredo,
}

/// Every IPv6 range with a rule, most specific first (the first match decides): (prefix, what
/// it is, where it comes from, the IPv4 it embeds). An embedding form is allowed only when
/// every IPv4 address it embeds is public, except IPv4-compatible (deprecated): always
/// refused. The IANA IPv6 Special-Purpose Address Registry (RFC 6890) entries that are not
/// globally reachable, multicast, site-local, and last [`IPV6_GLOBAL_UNICAST`]: anything
/// outside 2000::/3, the only space IANA allocates for global unicast.
const IPV6_TABLE: &[(&str, &str, &str, Embeds)] = &[
    ("::1/128", "loopback", "RFC 4291 §2.5.3", Embeds::Nothing),
    ("::/128", "unspecified", "RFC 4291 §2.5.2", Embeds::Nothing),
    (
        "::ffff:0:0/96",
        "IPv4-mapped",
        "RFC 4291 §2.5.5.2",
        Embeds::Last32,
    ),
    (
        "::/96",
        "IPv4-compatible (deprecated)",
        "RFC 4291 §2.5.5.1",
        Embeds::Last32,
    ),
    (
        "64:ff9b::/96",
        "NAT64 well-known prefix",
        "RFC 6052",
        Embeds::Last32,
    ),
    (
        "64:ff9b:1::/48",
        "NAT64 local-use prefix",
        "RFC 8215",
        Embeds::Nothing,
    ),
    ("100::/64", "discard-only", "RFC 6666", Embeds::Nothing),
    (
        "100:0:0:1::/64",
        "dummy prefix",
        "RFC 9780",
        Embeds::Nothing,
    ),
    ("2001::/32", "Teredo", "RFC 4380", Embeds::Teredo),
    (
        "2001:db8::/32",
        "documentation",
        "RFC 3849",
        Embeds::Nothing,
    ),
    (
        "2001::/23",
        "IETF protocol assignments",
        "RFC 2928, RFC 6890",
        Embeds::Nothing,
    ),
    ("2002::/16", "6to4", "RFC 3056", Embeds::SixToFour),
    ("3fff::/20", "documentation", "RFC 9637", Embeds::Nothing),
    ("5f00::/16", "SRv6 SIDs", "RFC 9602", Embeds::Nothing),
    ("fc00::/7", "unique-local", "RFC 4193", Embeds::Nothing),
    (
        "fe80::/10",
        "link-local",
        "RFC 4291 §2.5.6",
        Embeds::Nothing,
    ),
    (
        "fec0::/10",
        "site-local (deprecated)",
        "RFC 3879",
        Embeds::Nothing,
    ),
    ("ff00::/8", "multicast", "RFC 4291 §2.7", Embeds::Nothing),
];

/// The last IPv6 rule: an address outside it is refused.
pub const IPV6_GLOBAL_UNICAST: (&str, &str) = ("2000::/3", "IANA IPv6 Address Space registry");

struct V4Rule {
    net: Ipv4Net,
    text: &'static str,
    name: &'static str,
    source: &'static str,
}

struct V6Rule {
    net: Ipv6Net,
    text: &'static str,
    name: &'static str,
    source: &'static str,
    embeds: Embeds,
}

static V4_RULES: LazyLock<Vec<V4Rule>> = LazyLock::new(|| {
    IPV4_TABLE
        .iter()
        .map(|(net, name, source)| V4Rule {
            net: net.parse().expect("a valid IPv4 prefix in IPV4_TABLE"),
            text: net,
            name,
            source,
        })
        .collect()
});

static V6_RULES: LazyLock<Vec<V6Rule>> = LazyLock::new(|| {
    IPV6_TABLE
        .iter()
        .map(|(net, name, source, embeds)| V6Rule {
            net: net.parse().expect("a valid IPv6 prefix in IPV6_TABLE"),
            text: net,
            name,
            source,
            embeds: *embeds,
        })
        .collect()
});

/// Why an address is not public: the range it falls in and, for an IPv6 form that embeds an
/// IPv4 address, the embedded address and its own range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Special {
    /// The range's name, `loopback`, `shared address space (CGNAT)`, `IPv4-mapped` …
    pub name: &'static str,
    /// The range, `127.0.0.0/8`.
    pub net: &'static str,
    /// Where the range comes from, `RFC 6598`.
    pub source: &'static str,
    /// The embedded IPv4 address and why it is refused (`None` when the range is refused
    /// itself).
    pub embedded: Option<(Ipv4Addr, Box<Special>)>,
}

impl fmt::Display for Special {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}, {}", self.name, self.net, self.source)?;
        if let Some((v4, inner)) = &self.embedded {
            write!(f, "; embedded IPv4 {v4}: {inner}")?;
        }
        Ok(())
    }
}

fn v4_special(ip: Ipv4Addr) -> Option<Special> {
    V4_RULES
        .iter()
        .find(|r| r.net.contains(&ip))
        .map(|r| Special {
            name: r.name,
            net: r.text,
            source: r.source,
            embedded: None,
        })
}

/// The IPv4 addresses an IPv6 address of an embedding form holds.
fn embedded(v6: Ipv6Addr, how: Embeds) -> Vec<Ipv4Addr> {
    let b = u128::from(v6);
    match how {
        Embeds::Nothing => Vec::new(),
        Embeds::Last32 => vec![Ipv4Addr::from(b as u32)],
        Embeds::SixToFour => vec![Ipv4Addr::from((b >> 80) as u32)],
        Embeds::Teredo => vec![
            Ipv4Addr::from((b >> 64) as u32),
            Ipv4Addr::from(!(b as u32)),
        ],
    }
}

fn v6_special(v6: Ipv6Addr) -> Option<Special> {
    let Some(rule) = V6_RULES.iter().find(|r| r.net.contains(&v6)) else {
        let (net, source) = IPV6_GLOBAL_UNICAST;
        let global: Ipv6Net = net.parse().expect("2000::/3");
        return (!global.contains(&v6)).then_some(Special {
            name: "outside the global unicast space",
            net,
            source,
            embedded: None,
        });
    };
    let range = |embedded| Special {
        name: rule.name,
        net: rule.text,
        source: rule.source,
        embedded,
    };
    if rule.embeds == Embeds::Nothing {
        return Some(range(None));
    }
    for v4 in embedded(v6, rule.embeds) {
        if let Some(inner) = v4_special(v4) {
            return Some(range(Some((v4, Box::new(inner)))));
        }
    }
    // Every embedded address is public: the form is as public as they are, except the
    // deprecated IPv4-compatible form, which nothing routes any more.
    (rule.name == "IPv4-compatible (deprecated)").then(|| range(None))
}

/// Why `ip` is not a public address, or `None` when it is (see [`IPV4_TABLE`] and the IPv6
/// table; IPv4 embedded in IPv6 is unwrapped and checked against the IPv4 table).
pub fn special(ip: IpAddr) -> Option<Special> {
    match ip {
        IpAddr::V4(v4) => v4_special(v4),
        IpAddr::V6(v6) => v6_special(v6),
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
            let (ip, why) = addrs
                .into_iter()
                .find_map(|ip| special(ip).map(|s| (ip, s)))?;
            return Some(format!(
                "{name} resolves to {ip}, a private address ({why})"
            ));
        }
    };
    special(ip).map(|why| format!("{ip} is a private address ({why})"))
}

/// [`check_startup`] as the error `queuebox run` and `queuebox check-config` stop with.
pub async fn refuse_blocked(cfg: &Config) -> anyhow::Result<()> {
    let blocked = check_startup(cfg).await;
    if blocked.is_empty() {
        return Ok(());
    }
    let list: Vec<String> = blocked.iter().map(|b| format!("\n  - {b}")).collect();
    anyhow::bail!(
        "QueueBox refuses to start: a destination host is private.{}",
        list.concat()
    )
}

/// A DNS resolver that never hands out a private address (see the module docs).
pub struct PublicOnly;

/// Every address of a name was private.
#[derive(Debug, thiserror::Error)]
#[error("{host} resolves only to private addresses ({ip}: {why}) and http.blockPrivateAddresses is true")]
struct OnlyPrivate {
    host: String,
    ip: IpAddr,
    why: Special,
}

impl reqwest::dns::Resolve for PublicOnly {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let host = name.as_str().to_string();
        Box::pin(async move {
            let all: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let public: Vec<SocketAddr> = all
                .iter()
                .copied()
                .filter(|a| special(a.ip()).is_none())
                .collect();
            match (public.is_empty(), all.first()) {
                (true, Some(first)) => Err(Box::new(OnlyPrivate {
                    host,
                    ip: first.ip(),
                    why: special(first.ip()).expect("every address is special"),
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

    use std::net::IpAddr;

    use super::{special, Special};
    use crate::destinations::http::HttpPublisher;
    use crate::destinations::{OutboundMessage, Publisher};

    /// The name of the range that decided: the embedded address's when there is one.
    fn kind(s: &Special) -> &'static str {
        match &s.embedded {
            Some((_, inner)) => kind(inner),
            None => s.name,
        }
    }

    fn private_kind(ip: IpAddr) -> Option<&'static str> {
        special(ip).as_ref().map(kind)
    }

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
            ("127.255.255.254", Some("loopback")),
            ("10.1.2.3", Some("private")),
            ("172.16.0.1", Some("private")),
            ("192.168.1.1", Some("private")),
            ("169.254.169.254", Some("link-local")),
            ("0.0.0.0", Some("this network / unspecified")),
            ("0.1.2.3", Some("this network / unspecified")),
            ("100.64.0.1", Some("shared address space (CGNAT)")),
            ("100.127.255.255", Some("shared address space (CGNAT)")),
            ("192.0.0.1", Some("IETF protocol assignments")),
            ("192.0.2.1", Some("documentation TEST-NET-1")),
            ("192.88.99.1", Some("deprecated 6to4 relay anycast")),
            ("198.18.0.1", Some("benchmarking")),
            ("198.19.255.255", Some("benchmarking")),
            ("198.51.100.7", Some("documentation TEST-NET-2")),
            ("203.0.113.9", Some("documentation TEST-NET-3")),
            ("224.0.0.1", Some("multicast")),
            ("239.255.255.250", Some("multicast")),
            ("240.0.0.1", Some("reserved")),
            ("255.255.255.255", Some("limited broadcast")),
            ("::1", Some("loopback")),
            ("::", Some("unspecified")),
            ("fd00::1", Some("unique-local")),
            ("fc00::1", Some("unique-local")),
            ("fe80::1", Some("link-local")),
            ("fec0::1", Some("site-local (deprecated)")),
            ("ff02::1", Some("multicast")),
            ("2001:db8::1", Some("documentation")),
            ("3fff::1", Some("documentation")),
            ("100::1", Some("discard-only")),
            ("2001:2::1", Some("IETF protocol assignments")),
            ("5f00::1", Some("SRv6 SIDs")),
            ("64:ff9b:1::1", Some("NAT64 local-use prefix")),
            ("4000::1", Some("outside the global unicast space")),
            // IPv4 embedded in IPv6: unwrapped and checked against the IPv4 table.
            ("::ffff:127.0.0.1", Some("loopback")),
            ("::ffff:100.64.0.1", Some("shared address space (CGNAT)")),
            ("::127.0.0.1", Some("loopback")),
            ("::8.8.8.8", Some("IPv4-compatible (deprecated)")),
            ("64:ff9b::a9fe:a9fe", Some("link-local")),
            ("64:ff9b::10.0.0.1", Some("private")),
            ("2002:a9fe:a9fe::1", Some("link-local")),
            ("2002:7f00:1::", Some("loopback")),
            // Teredo: server 65.54.227.120 (public), client 192.168.1.1 (0x3f57fefe inverted).
            ("2001:0:4136:e378:8000:63bf:3f57:fefe", Some("private")),
            // Teredo with a loopback server.
            ("2001:0:7f00:1::1", Some("loopback")),
            // Public: plain, and public IPv4 behind each embedding form.
            ("93.184.216.34", None),
            ("172.32.0.1", None),
            ("100.128.0.1", None),
            ("198.20.0.1", None),
            ("223.255.255.255", None),
            ("2606:4700::1111", None),
            ("::ffff:93.184.216.34", None),
            ("64:ff9b::5db8:d822", None),
            ("2002:5db8:d822::1", None),
            ("2001:0:4136:e378:8000:63bf:a247:27dd", None),
        ] {
            assert_eq!(private_kind(ip.parse().unwrap()), kind, "{ip}");
        }
    }

    #[test]
    fn a_reason_names_the_range_its_source_and_the_embedded_address() {
        let why = special("::ffff:100.64.0.1".parse().unwrap()).unwrap();
        assert_eq!(
            why.to_string(),
            "IPv4-mapped ::ffff:0:0/96, RFC 4291 §2.5.5.2; embedded IPv4 100.64.0.1: shared address space (CGNAT) 100.64.0.0/10, RFC 6598"
        );
        let why = special("192.0.2.1".parse().unwrap()).unwrap();
        assert_eq!(
            why.to_string(),
            "documentation TEST-NET-1 192.0.2.0/24, RFC 5737"
        );
    }
}
