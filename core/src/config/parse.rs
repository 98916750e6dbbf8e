//! From the YAML tree to the typed [`Config`]: fixed structs through [`typed`], and the
//! maps whose entries choose a kind with `type` dispatched here, one arm per kind.

use std::collections::BTreeMap;

use serde_yaml::{Mapping, Value};

use super::model::*;
use super::strict::{join, suggest, typed, ConfigErrors};

pub(super) fn config(root: &Value, errs: &mut ConfigErrors) -> Option<Config> {
    let raw: RawConfig = typed(root, "", errs)?;
    let database = match &raw.database {
        Some(v) => typed::<DatabaseConfig>(v, "database", errs),
        None => {
            errs.push("database", "required: set database.url");
            None
        }
    };
    let admin = admin(raw.admin.as_ref(), errs);
    let mut destinations = BTreeMap::new();
    for (name, v) in &raw.destinations {
        if let Some(d) = destination(name, v, errs) {
            destinations.insert(name.clone(), d);
        }
    }
    let mut sources = BTreeMap::new();
    for (name, v) in &raw.sources {
        if let Some(s) = source(name, v, errs) {
            sources.insert(name.clone(), s);
        }
    }
    Some(Config {
        server: raw.server,
        database: database?,
        outbox: raw.outbox,
        inbox: raw.inbox,
        http: raw.http,
        admin: admin?,
        retention: raw.retention,
        destinations,
        routes: raw.routes,
        sources,
    })
}

fn admin(v: Option<&Value>, errs: &mut ConfigErrors) -> Option<AdminConfig> {
    let Some(v) = v else { return Some(AdminConfig::default()) };
    let flags: AdminFlags = typed(v, "admin", errs)?;
    let auth = match &flags.auth {
        Some(a) => Some(auth(a, "admin.auth", errs)?),
        None => None,
    };
    Some(AdminConfig { enabled: flags.enabled, insecure: flags.insecure, auth })
}

/// The mapping without `type` and `auth` (handled by the dispatch), and the `type` value.
fn split_kind(v: &Value, path: &str, errs: &mut ConfigErrors) -> Option<(Mapping, Option<String>, Option<Value>)> {
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
    let hint = suggest(kind, known.iter().copied()).map(|h| format!("; did you mean {h}?")).unwrap_or_default();
    errs.push(join(path, "type"), format!("unknown type `{kind}` (one of {}){hint}", known.join(", ")));
}

/// Destination kinds; a broker kind adds its name here and an arm below.
pub const DESTINATION_TYPES: &[&str] = &["http", "rabbitmq", "kafka", "nats"];

fn destination(name: &str, v: &Value, errs: &mut ConfigErrors) -> Option<DestinationConfig> {
    let path = format!("destinations.{name}");
    let (rest, kind, auth_v) = split_kind(v, &path, errs)?;
    let rest = Value::Mapping(rest);
    let kind = match kind.as_deref() {
        None => {
            errs.push(join(&path, "type"), format!("required (one of {})", DESTINATION_TYPES.join(", ")));
            return None;
        }
        Some("http") => {
            let mut h: HttpDestination = typed(&rest, &path, errs)?;
            h.auth = match &auth_v {
                Some(a) => Some(auth(a, &join(&path, "auth"), errs)?),
                None => None,
            };
            DestinationKind::Http(h)
        }
        Some("rabbitmq") => DestinationKind::RabbitMq(typed(&rest, &path, errs)?),
        Some("kafka") => DestinationKind::Kafka(typed(&rest, &path, errs)?),
        Some("nats") => DestinationKind::Nats(typed(&rest, &path, errs)?),
        Some(other) => {
            unknown_kind(&path, other, DESTINATION_TYPES, errs);
            return None;
        }
    };
    Some(DestinationConfig { name: name.to_string(), kind })
}

/// Source kinds; a broker kind adds its name here and an arm below.
pub const SOURCE_TYPES: &[&str] = &["http", "rabbitmq", "kafka", "nats"];

fn source(name: &str, v: &Value, errs: &mut ConfigErrors) -> Option<SourceConfig> {
    let path = format!("sources.{name}");
    let (rest, kind, auth_v) = split_kind(v, &path, errs)?;
    let common_fields = super::strict::fields_of::<SourceCommon>();
    // Common keys go to SourceCommon, the others to the kind's struct, so each struct
    // reports the unknown keys of its own part.
    let (common_map, kind_map): (Mapping, Mapping) = {
        let mut c = Mapping::new();
        let mut k = Mapping::new();
        for (key, val) in rest {
            if key.as_str().is_some_and(|s| common_fields.contains(&s)) {
                c.insert(key, val);
            } else {
                k.insert(key, val);
            }
        }
        (c, k)
    };
    let common: Option<SourceCommon> = typed(&Value::Mapping(common_map), &path, errs);
    let kind_v = Value::Mapping(kind_map);
    let kind = match kind.as_deref().unwrap_or("http") {
        "http" => {
            let mut h: HttpSource = typed(&kind_v, &path, errs)?;
            h.auth = match &auth_v {
                Some(a) => Some(auth(a, &join(&path, "auth"), errs)?),
                None => None,
            };
            SourceKind::Http(h)
        }
        "rabbitmq" => SourceKind::RabbitMq(typed(&kind_v, &path, errs)?),
        "kafka" => SourceKind::Kafka(typed(&kind_v, &path, errs)?),
        "nats" => SourceKind::Nats(typed(&kind_v, &path, errs)?),
        other => {
            unknown_kind(&path, other, SOURCE_TYPES, errs);
            return None;
        }
    };
    Some(SourceConfig { name: name.to_string(), common: common?, kind })
}

pub const AUTH_TYPES: &[&str] = &["bearer", "api-key", "hmac"];

fn auth(v: &Value, path: &str, errs: &mut ConfigErrors) -> Option<AuthConfig> {
    let (rest, kind, nested) = split_kind(v, path, errs)?;
    if nested.is_some() {
        errs.push(join(path, "auth"), "unknown key");
    }
    let rest = Value::Mapping(rest);
    match kind.as_deref() {
        None => {
            errs.push(join(path, "type"), format!("required (one of {})", AUTH_TYPES.join(", ")));
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
