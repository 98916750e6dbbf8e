//! From the YAML tree to the typed [`Config`]: fixed structs through [`typed`], and the
//! maps whose entries choose a kind with `type` dispatched here, one arm per kind.

use std::collections::{BTreeMap, BTreeSet};

use serde::de::DeserializeOwned;
use serde_yaml::{Mapping, Value};

use crate::auth::AuthConfig;
use crate::brokers::{NatsDestinationConfig, NatsLogin, NatsSourceConfig};
use crate::destination_auth::DestinationAuth;
use crate::model::*;
use crate::strict::{self, join, suggest, ConfigErrors};

/// What parsing produced: the typed configuration, and the destinations that are declared
/// but could not be built (their problem is already reported, so a route naming one must
/// not add a second, false "does not exist").
pub(super) struct Parsed {
    pub config: Config,
    pub broken_destinations: BTreeSet<String>,
}

pub(super) fn config(root: &Value, errs: &mut ConfigErrors) -> Option<Parsed> {
    let raw: RawConfig = typed(root, "", errs)?;
    // Every section is typed even when an earlier one failed, so all mistakes are listed.
    let server = section::<ServerConfig>(&raw.server, "server", errs);
    let database = match &raw.database {
        Some(v) => typed::<DatabaseConfig>(v, "database", errs),
        None => {
            errs.push("database", "required: set database.url");
            None
        }
    };
    let outbox = section::<OutboxConfig>(&raw.outbox, "outbox", errs);
    let inbox = section::<InboxConfig>(&raw.inbox, "inbox", errs);
    let http = section::<HttpConfig>(&raw.http, "http", errs);
    let admin = admin(raw.admin.as_ref(), errs);
    let retention = section::<RetentionConfig>(&raw.retention, "retention", errs);
    let logging = section::<LoggingConfig>(&raw.logging, "logging", errs);
    let tracing = section::<TracingConfig>(&raw.tracing, "tracing", errs);
    let routes = section::<Vec<RouteConfig>>(&raw.routes, "routes", errs);
    let schedules = section::<Vec<ScheduleConfig>>(&raw.schedules, "schedules", errs);
    let mut destinations = BTreeMap::new();
    let mut broken_destinations = BTreeSet::new();
    for (name, v) in &raw.destinations {
        match destination(name, v, errs) {
            Some(d) => {
                destinations.insert(name.clone(), d);
            }
            None => {
                broken_destinations.insert(name.clone());
            }
        }
    }
    let mut sources = BTreeMap::new();
    for (name, v) in &raw.sources {
        if let Some(s) = source(name, v, errs) {
            sources.insert(name.clone(), s);
        }
    }
    let config = Config {
        server: server?,
        database: database?,
        outbox: outbox?,
        inbox: inbox?,
        http: http?,
        admin: admin?,
        retention: retention?,
        logging: logging?,
        tracing: tracing?,
        destinations,
        routes: routes?,
        sources,
        schedules: schedules?,
    };
    Some(Parsed {
        config,
        broken_destinations,
    })
}

/// [`strict::typed`], its "did you mean" hints drawn from every key of the configuration.
fn typed<T: DeserializeOwned>(v: &Value, path: &str, errs: &mut ConfigErrors) -> Option<T> {
    strict::typed(v, path, all_known_keys(), errs)
}

/// A fixed section: its defaults when absent (or empty), else typed under `path`.
fn section<T: DeserializeOwned + Default>(
    v: &Option<Value>,
    path: &str,
    errs: &mut ConfigErrors,
) -> Option<T> {
    match v {
        None | Some(Value::Null) => Some(T::default()),
        Some(v) => typed(v, path, errs),
    }
}

fn admin(v: Option<&Value>, errs: &mut ConfigErrors) -> Option<AdminConfig> {
    let Some(v) = v else {
        return Some(AdminConfig::default());
    };
    let flags: AdminFlags = typed(v, "admin", errs)?;
    let auth = match &flags.auth {
        Some(a) => Some(auth(a, "admin.auth", errs)?),
        None => None,
    };
    Some(AdminConfig {
        enabled: flags.enabled,
        insecure: flags.insecure,
        auth,
        max_transform_timeout_ms: flags.max_transform_timeout_ms,
        max_payload_bytes: flags.max_payload_bytes,
    })
}

/// Takes the keys struct `T` declares out of the mapping `v` and types them into `T`; the
/// rest is returned for the entry's own struct. Both parts are typed under the same `path`,
/// so each reports the unknown keys of its own part by their full path (the common keys of
/// a source, the login keys of a NATS entry).
fn take_keys<T: DeserializeOwned>(
    v: &Value,
    path: &str,
    errs: &mut ConfigErrors,
) -> (Option<T>, Value) {
    let fields = strict::fields_of::<T>();
    let mut taken = Mapping::new();
    let mut rest = Mapping::new();
    for (key, val) in v.as_mapping().cloned().unwrap_or_default() {
        if key.as_str().is_some_and(|s| fields.contains(&s)) {
            taken.insert(key, val);
        } else {
            rest.insert(key, val);
        }
    }
    (
        typed(&Value::Mapping(taken), path, errs),
        Value::Mapping(rest),
    )
}

/// The mapping without `type` and `auth` (handled by the dispatch), and the `type` value.
fn split_kind(
    v: &Value,
    path: &str,
    errs: &mut ConfigErrors,
) -> Option<(Mapping, Option<String>, Option<Value>)> {
    let Some(map) = v.as_mapping() else {
        errs.push(path, "expected a mapping");
        return None;
    };
    let mut rest = map.clone();
    let kind = match rest.remove("type") {
        Some(Value::String(s)) => Some(s),
        Some(_) => {
            errs.push(join(path, "type"), "expected a string");
            return None;
        }
        None => None,
    };
    let auth = rest.remove("auth");
    Some((rest, kind, auth))
}

fn unknown_kind(path: &str, kind: &str, known: &[&str], errs: &mut ConfigErrors) {
    let hint = suggest(kind, known.iter().copied())
        .map(|h| format!("; did you mean {h}?"))
        .unwrap_or_default();
    errs.push(
        join(path, "type"),
        format!("unknown type `{kind}` (one of {}){hint}", known.join(", ")),
    );
}

/// One broker kind of the configuration: its `type` value and how its keys are typed (the
/// key lists of its structs are in `brokers::key_lists`).
struct BrokerKeysKind {
    type_name: &'static str,
    /// `sources.<name>` of this type (the common keys already taken out) → the source kind.
    source: fn(&Value, &str, &mut ConfigErrors) -> Option<SourceKind>,
    /// `destinations.<name>` of this type → the destination kind.
    destination: fn(&Value, &str, &mut ConfigErrors) -> Option<DestinationKind>,
}

/// The broker kinds, in the order the `type` lists name them. A new kind is one entry here
/// (and its variant in `SourceKind` / `DestinationKind`, its structs in `brokers::key_lists`).
const BROKER_KINDS: &[BrokerKeysKind] = &[
    BrokerKeysKind {
        type_name: "rabbitmq",
        source: |v, p, e| Some(SourceKind::RabbitMq(typed(v, p, e)?)),
        destination: |v, p, e| Some(DestinationKind::RabbitMq(typed(v, p, e)?)),
    },
    BrokerKeysKind {
        type_name: "kafka",
        source: |v, p, e| Some(SourceKind::Kafka(typed(v, p, e)?)),
        destination: |v, p, e| Some(DestinationKind::Kafka(typed(v, p, e)?)),
    },
    BrokerKeysKind {
        type_name: "nats",
        source: |v, p, e| {
            nats_entry(v, p, e, |s: &mut NatsSourceConfig, l| s.login = l).map(SourceKind::Nats)
        },
        destination: |v, p, e| {
            nats_entry(v, p, e, |d: &mut NatsDestinationConfig, l| d.login = l)
                .map(DestinationKind::Nats)
        },
    },
];

/// The registered broker kind named `type_name`.
fn broker_kind(type_name: &str) -> Option<&'static BrokerKeysKind> {
    BROKER_KINDS.iter().find(|k| k.type_name == type_name)
}

/// A NATS entry: its login keys typed into [`NatsLogin`], the others into `T` (both under
/// `path`, so an unknown key of either part is named in full).
fn nats_entry<T: DeserializeOwned>(
    v: &Value,
    path: &str,
    errs: &mut ConfigErrors,
    set: fn(&mut T, NatsLogin),
) -> Option<T> {
    let (login, rest) = take_keys::<NatsLogin>(v, path, errs);
    let mut entry: T = typed(&rest, path, errs)?;
    set(&mut entry, login?);
    Some(entry)
}

/// Destination kinds: HTTP and the registered broker kinds.
fn destination_types() -> Vec<&'static str> {
    std::iter::once("http")
        .chain(BROKER_KINDS.iter().map(|k| k.type_name))
        .collect()
}

fn destination(name: &str, v: &Value, errs: &mut ConfigErrors) -> Option<DestinationConfig> {
    let path = format!("destinations.{name}");
    let (mut rest, kind, auth_v) = split_kind(v, &path, errs)?;
    // `transform` is the same block on every kind, so it is typed here, not by each kind.
    let transform = match rest.remove("transform") {
        Some(t) => Some(typed::<TransformConfig>(
            &t,
            &join(&path, "transform"),
            errs,
        )?),
        None => None,
    };
    // So is `rateLimit` (the outbox relay applies it whatever the kind).
    let rate_limit = match rest.remove("rateLimit") {
        Some(l) => Some(typed::<DestinationLimits>(
            &l,
            &join(&path, "rateLimit"),
            errs,
        )?),
        None => None,
    };
    let rest = Value::Mapping(rest);
    let kind = match kind.as_deref() {
        None => {
            errs.push(
                join(&path, "type"),
                format!("required (one of {})", destination_types().join(", ")),
            );
            return None;
        }
        Some("http") => {
            let mut h: HttpDestination = typed(&rest, &path, errs)?;
            h.auth = match &auth_v {
                Some(a) => Some(destination_auth(a, &join(&path, "auth"), errs)?),
                None => None,
            };
            DestinationKind::Http(h)
        }
        Some(other) => match broker_kind(other) {
            Some(broker) => (broker.destination)(&rest, &path, errs)?,
            None => {
                unknown_kind(&path, other, &destination_types(), errs);
                return None;
            }
        },
    };
    Some(DestinationConfig {
        name: name.to_string(),
        kind,
        transform,
        rate_limit,
    })
}

/// Source kinds: HTTP and the registered broker kinds.
fn source_types() -> Vec<&'static str> {
    destination_types()
}

fn source(name: &str, v: &Value, errs: &mut ConfigErrors) -> Option<SourceConfig> {
    let path = format!("sources.{name}");
    let (rest, kind, auth_v) = split_kind(v, &path, errs)?;
    let (common, kind_v) = take_keys::<SourceCommon>(&Value::Mapping(rest), &path, errs);
    let kind = match kind.as_deref().unwrap_or("http") {
        "http" => {
            let mut h: HttpSource = typed(&kind_v, &path, errs)?;
            h.auth = match &auth_v {
                Some(a) => Some(auth(a, &join(&path, "auth"), errs)?),
                None => None,
            };
            SourceKind::Http(h)
        }
        other => match broker_kind(other) {
            Some(broker) => (broker.source)(&kind_v, &path, errs)?,
            None => {
                unknown_kind(&path, other, &source_types(), errs);
                return None;
            }
        },
    };
    Some(SourceConfig {
        name: name.to_string(),
        common: common?,
        kind,
    })
}

pub const AUTH_TYPES: &[&str] = &["bearer", "api-key", "hmac"];

/// An HTTP destination's `auth`: its own kinds (outbound), see [`DestinationAuth`].
fn destination_auth(v: &Value, path: &str, errs: &mut ConfigErrors) -> Option<DestinationAuth> {
    use crate::destination_auth::DESTINATION_AUTH_TYPES as TYPES;
    let (rest, kind, nested) = split_kind(v, path, errs)?;
    if nested.is_some() {
        errs.push(join(path, "auth"), "unknown key");
    }
    let rest = Value::Mapping(rest);
    match kind.as_deref() {
        None => {
            errs.push(
                join(path, "type"),
                format!("required (one of {})", TYPES.join(", ")),
            );
            None
        }
        Some("bearer") => typed(&rest, path, errs).map(DestinationAuth::Bearer),
        Some("api-key") => typed(&rest, path, errs).map(DestinationAuth::ApiKey),
        Some("basic") => typed(&rest, path, errs).map(DestinationAuth::Basic),
        Some("header") => typed(&rest, path, errs).map(DestinationAuth::Header),
        Some("oauth2") => typed(&rest, path, errs).map(DestinationAuth::OAuth2),
        Some("hmac") => typed(&rest, path, errs).map(DestinationAuth::Hmac),
        Some(other) => {
            unknown_kind(path, other, TYPES, errs);
            None
        }
    }
}

fn auth(v: &Value, path: &str, errs: &mut ConfigErrors) -> Option<AuthConfig> {
    let (rest, kind, nested) = split_kind(v, path, errs)?;
    if nested.is_some() {
        errs.push(join(path, "auth"), "unknown key");
    }
    let rest = Value::Mapping(rest);
    match kind.as_deref() {
        None => {
            errs.push(
                join(path, "type"),
                format!("required (one of {})", AUTH_TYPES.join(", ")),
            );
            None
        }
        Some("bearer") => typed(&rest, path, errs).map(AuthConfig::Bearer),
        Some("api-key") => typed(&rest, path, errs).map(AuthConfig::ApiKey),
        Some("hmac") => typed(&rest, path, errs).map(AuthConfig::Hmac),
        Some(other) => {
            unknown_kind(path, other, AUTH_TYPES, errs);
            None
        }
    }
}
