//! The configuration reference, `docs/configuration.md`, generated from the model: each
//! block's keys are its struct's own field list ([`crate::strict::fields_of`], the list the
//! strict check accepts), each key's type is what the struct's `Deserialize` says it expected
//! when given a value of the wrong shape, its default is the struct's `Default` (or its
//! `#[serde(default = ...)]`) serialised, a key takes `file:` when deserialising
//! `file:<path>` there reads the file ([`crate::Secret`]), and the environment variable is
//! the `QUEUEBOX_*` mapping of its path (`env`). The test in this module compares the text
//! with the committed file, so a key added to the model without regenerating the page fails
//! the build (`QUEUEBOX_BLESS_DOCS=1 cargo test -p queuebox-config reference` rewrites it),
//! and a configuration struct that no block lists fails it too.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_yaml::{Mapping, Value};

use crate::strict::fields_of;

/// Deserialises a `T` from `v` and serialises it back (the defaults it filled in).
type Roundtrip = fn(Value) -> Result<Value, String>;

fn roundtrip<T: DeserializeOwned + Serialize>(v: Value) -> Result<Value, String> {
    let t: T = serde_yaml::from_value(v).map_err(|e| e.to_string())?;
    serde_yaml::to_value(&t).map_err(|e| e.to_string())
}

/// One table of docs/configuration.md: the keys of one struct at one path.
struct Block {
    /// The key path of the block (`server.tls`, `sources.<name>`).
    path: &'static str,
    /// What the block is, in a sentence (written by hand; the keys are not).
    about: &'static str,
    fields: &'static [&'static str],
    roundtrip: Roundtrip,
    /// Keys the struct takes but the block does not list (a nested block documents them).
    nested: &'static [&'static str],
    /// Keys of the same mapping taken by another struct (a source's `type`, `auth`), listed
    /// first with their type written here.
    extra: &'static [(&'static str, &'static str)],
}

fn block<T: DeserializeOwned + Serialize>(path: &'static str, about: &'static str) -> Block {
    Block {
        path,
        about,
        fields: fields_of::<T>(),
        roundtrip: roundtrip::<T>,
        nested: &[],
        extra: &[],
    }
}

impl Block {
    fn nested(mut self, keys: &'static [&'static str]) -> Self {
        self.nested = keys;
        self
    }
    fn extra(mut self, keys: &'static [(&'static str, &'static str)]) -> Self {
        self.extra = keys;
        self
    }
}

/// Every block of docs/configuration.md, in the page's order.
fn blocks() -> Vec<Block> {
    use crate::auth::*;
    use crate::brokers::*;
    use crate::destination_auth::{BasicAuth, HeaderAuth, HmacSigning, OAuth2Auth};
    use crate::model::*;
    const TRANSFORM: &[&str] = &["transform"];
    vec![
        block::<ServerConfig>("server", "The HTTP listener: ingest on `httpPort`; `/health/*`, `/metrics` and `/admin/*` on it too unless `managementPort` is set.").nested(&["tls"]),
        block::<ServerTls>("server.tls", "HTTPS on both ports (PEM files), re-read on SIGHUP and when the files change."),
        block::<DatabaseConfig>("database", "The application's database, where the `outbox` and `inbox` tables live.").nested(&["columnMapping"]),
        block::<OutboxConfig>("outbox", "The outbox poller: claims rows the application wrote and publishes them to the routes' destinations."),
        block::<InboxConfig>("inbox", "HTTP ingest and the inbox rows it stores.").nested(&["relay"]),
        block::<RelayConfig>("inbox.relay", "The inbox relay: moves `push` inbox rows into the outbox (one row per received message)."),
        block::<HttpConfig>("http", "HTTP destinations' client."),
        block::<AdminFlags>("admin", "The admin API (`/admin/*`).").nested(&["auth"]),
        block::<BearerAuth>("admin.auth (type: bearer)", "`Authorization: Bearer <token>`; the same kinds as an HTTP source's `auth`.").extra(&[("type", "`bearer`")]),
        block::<ApiKeyAuth>("admin.auth (type: api-key)", "A key in a request header.").extra(&[("type", "`api-key`")]),
        block::<HmacAuth>("admin.auth (type: hmac)", "HMAC-SHA256 of the request body.").extra(&[("type", "`hmac`")]),
        block::<RetentionConfig>("retention", "Deletes old `processed` (and `dead`, by `maxAge`) rows in batches.").nested(&["outbox", "inbox"]),
        block::<TableRetention>("retention.outbox", "The outbox table's policy: `AGE`, `COUNT` or `DISABLED`."),
        block::<TableRetention>("retention.inbox", "The inbox table's policy: `AGE` or `DISABLED`."),
        block::<LoggingConfig>("logging", "Log records on stderr (the level filter is `RUST_LOG`)."),
        block::<TracingConfig>("tracing", "OTLP span export.").nested(&["otlp"]),
        block::<OtlpConfig>("tracing.otlp", "Where spans go (OTLP over HTTP); unset `endpoint` and `OTEL_EXPORTER_OTLP_ENDPOINT`: tracing is off."),
        block::<RouteConfig>("routes[<n>]", "Which outbox topics go to which destination (first match wins).").nested(TRANSFORM),
        block::<TransformConfig>("routes[<n>].transform", "A JSONata transform; the same block for sources (`sources.<name>.transform`, at receipt) and destinations (`destinations.<name>.transform`, at delivery after the route's)."),
        block::<HttpDestination>("destinations.<name> (type: http)", "An HTTP endpoint rows are POSTed to.").extra(&[("type", "`http`"), ("transform", "transform block (see `routes[<n>].transform`)"), ("rateLimit", "outbound limits block (see `destinations.<name>.rateLimit`)")]),
        block::<BearerAuth>("destinations.<name>.auth (type: bearer)", "Outbound `Authorization: Bearer <token>`.").extra(&[("type", "`bearer`")]),
        block::<ApiKeyAuth>("destinations.<name>.auth (type: api-key)", "Outbound `<headerName>: <key>`.").extra(&[("type", "`api-key`")]),
        block::<BasicAuth>("destinations.<name>.auth (type: basic)", "Outbound Basic auth.").extra(&[("type", "`basic`")]),
        block::<HeaderAuth>("destinations.<name>.auth (type: header)", "One custom header.").extra(&[("type", "`header`")]),
        block::<OAuth2Auth>("destinations.<name>.auth (type: oauth2)", "OAuth2 client credentials; the token is cached until shortly before it expires.").extra(&[("type", "`oauth2`")]),
        block::<HmacSigning>("destinations.<name>.auth (type: hmac)", "Signs each request body (the format an HTTP source's `hmac` auth verifies).").extra(&[("type", "`hmac`")]),
        block::<RabbitMqDestinationConfig>("destinations.<name> (type: rabbitmq)", "Publishes to a RabbitMQ exchange.").extra(&[("type", "`rabbitmq`"), ("transform", "transform block"), ("rateLimit", "outbound limits block")]).nested(&["tls"]),
        block::<KafkaDestinationConfig>("destinations.<name> (type: kafka)", "Produces to a Kafka topic.").extra(&[("type", "`kafka`"), ("transform", "transform block"), ("rateLimit", "outbound limits block")]).nested(&["tls"]),
        block::<NatsDestinationConfig>("destinations.<name> (type: nats)", "Publishes to NATS (core or JetStream); the login keys are below.").extra(&[("type", "`nats`"), ("transform", "transform block"), ("rateLimit", "outbound limits block")]).nested(&["login"]),
        block::<NatsLogin>("destinations.<name> / sources.<name> (type: nats): login keys", "NATS credentials, written beside the entry's other keys (not under a `login` key).").nested(&["tls"]),
        block::<BrokerTls>("destinations.<name>.tls / sources.<name>.tls (brokers)", "TLS to a broker: required when the block is present."),
        block::<DestinationLimits>("destinations.<name>.rateLimit", "Outbound limits of one destination of any type, per relay replica: a row waiting on them is not an attempt ([operations](operations.md#outbound-limits))."),
        block::<SourceCommon>("sources.<name>", "Keys every source takes, whatever its `type`.").nested(&["filter", "transform"]).extra(&[("type", "`http`, `rabbitmq`, `kafka` or `nats`")]),
        block::<HeaderFilter>("sources.<name>.filter", "Header rules a message must pass to be stored.").nested(&["require", "exclude"]),
        block::<HeaderRule>("sources.<name>.filter.require[<n>] / exclude[<n>]", "One rule: `header` and exactly one test."),
        block::<HttpSource>("sources.<name> (type: http)", "Messages POSTed to `<inbox.basePath>/<path>`.").extra(&[("auth", "auth block: the kinds of `admin.auth`")]).nested(&["rateLimit"]),
        block::<RateLimit>("sources.<name>.rateLimit", "Requests a minute on one HTTP source (429 beyond)."),
        block::<RabbitMqSourceConfig>("sources.<name> (type: rabbitmq)", "Consumes a RabbitMQ queue.").nested(&["tls", "attributeHeaders"]),
        block::<KafkaSourceConfig>("sources.<name> (type: kafka)", "Consumes Kafka topics in a consumer group.").nested(&["tls", "attributeHeaders"]),
        block::<NatsSourceConfig>("sources.<name> (type: nats)", "Consumes a NATS JetStream durable consumer (or core NATS); the login keys are above.").nested(&["login", "attributeHeaders"]),
        block::<AttributeHeaders>("sources.<name>.attributeHeaders (brokers)", "The message headers the row's attributes are read from."),
        block::<ScheduleConfig>("schedules[<n>]", "A periodic schedule: one pull row of `source` per tick of `cron` (in `timeZone`) or `everyMs`, exactly once however many relays and workers run it ([operations](operations.md#schedules))."),
    ]
}

/// What a value of the wrong shape made the struct's `Deserialize` say it expected: the
/// key's type in the words of the page.
fn describe(expected: &str) -> String {
    let e = expected.trim();
    match e {
        "u8" => "integer 0–255".into(),
        "u16" => "integer 0–65535".into(),
        "u32" => "integer 0–4294967295".into(),
        "u64" | "usize" => "integer ≥ 0".into(),
        "a nonzero u32" => "integer 1–4294967295".into(),
        "i16" => "integer -32768–32767".into(),
        "i32" | "i64" => "integer".into(),
        "f32" | "f64" => "number".into(),
        "a boolean" => "boolean".into(),
        "a string" | "a borrowed string" => "string".into(),
        "a map" => "map".into(),
        _ => e.to_string(),
    }
}

/// The "expected ..." part of a serde error, if it is a type error.
fn expected_of(err: &str) -> Option<String> {
    let (_, rest) = err.split_once("invalid type: ")?;
    let (_, exp) = rest.split_once(", expected ")?;
    Some(exp.split(" at line ").next().unwrap_or(exp).to_string())
}

fn single(key: &str, v: Value) -> Value {
    let mut m = Mapping::new();
    m.insert(Value::String(key.into()), v);
    Value::Mapping(m)
}

/// The probe a secret-taking key cannot read.
const PROBE_FILE: &str = "file:/nonexistent/queuebox-reference-probe";

/// What one key is, as the model says.
#[derive(Debug, Clone, Default)]
struct KeyInfo {
    ty: String,
    secret: bool,
}

fn key_info(b: &Block, key: &str) -> KeyInfo {
    let rt = b.roundtrip;
    let seq = Value::Sequence(vec![]);
    let ty = match rt(single(key, seq.clone())) {
        Err(e) if expected_of(&e).is_some() => {
            let exp = expected_of(&e).unwrap_or_default();
            let base = describe(&exp);
            if base == "map" {
                // The values' type: a map whose value is a sequence.
                match rt(single(key, single("k", seq.clone())))
                    .err()
                    .and_then(|e| expected_of(&e).or_else(|| secret_error(&e)))
                {
                    Some(inner) => format!("map of {}", describe(&inner)),
                    None => base,
                }
            } else if exp.starts_with("struct ") {
                "block (below)".into()
            } else if exp.contains("enum") {
                variants(rt, key).unwrap_or(base)
            } else {
                base
            }
        }
        Err(e) if secret_error(&e).is_some() => "string".into(),
        Err(e) if e.contains("untagged enum PathList") => {
            "JSONPath, or a list of them (the first with a value wins)".into()
        }
        Err(e) if e.contains("untagged enum") => "see the notes".into(),
        // A sequence was taken: a list; its items' type from a list holding a list.
        _ => match rt(single(key, Value::Sequence(vec![seq]))).err() {
            Some(e) if e.contains("untagged enum PathList") => {
                "JSONPath, or a list of them (the first with a value wins)".into()
            }
            Some(e) => match expected_of(&e) {
                Some(inner) if inner.starts_with("struct ") => "list of blocks (below)".into(),
                Some(inner) => format!("list of {}", describe(&inner)),
                None => "any".into(),
            },
            None => "any".into(),
        },
    };
    let ty = match variants(rt, key) {
        Some(v) if ty == "string" => v,
        _ => ty,
    };
    let secret = [
        single(key, Value::String(PROBE_FILE.into())),
        single(key, single("k", Value::String(PROBE_FILE.into()))),
    ]
    .into_iter()
    .any(|v| rt(v).is_err_and(|e| e.contains("cannot read the secret file")));
    KeyInfo { ty, secret }
}

/// A custom `Deserialize` (a [`crate::Secret`]) says "expected a string" without serde's
/// "invalid type" prefix.
fn secret_error(e: &str) -> Option<String> {
    e.contains("expected a string")
        .then(|| "a string".to_string())
}

/// The values an enum key takes, from the "unknown variant" error.
fn variants(rt: Roundtrip, key: &str) -> Option<String> {
    let e = rt(single(
        key,
        Value::String("queuebox-reference-probe".into()),
    ))
    .err()?;
    let (_, list) = e.split_once("unknown variant `queuebox-reference-probe`, expected ")?;
    let list = list.split(" at line ").next().unwrap_or(list).trim();
    let list = list
        .strip_prefix("one of ")
        .unwrap_or(list)
        .replace(" or ", ", ");
    Some(format!("one of {list}"))
}

/// A placeholder value of the type `ty` (to satisfy a required key while finding defaults).
fn sample(ty: &str) -> Value {
    if ty.starts_with("integer") || ty == "number" {
        Value::Number(1.into())
    } else if ty == "boolean" {
        Value::Bool(true)
    } else if ty.starts_with("list") {
        Value::Sequence(vec![])
    } else if ty.starts_with("map") || ty.starts_with("block") {
        Value::Mapping(Mapping::new())
    } else if let Some(first) = ty
        .strip_prefix("one of `")
        .and_then(|r| r.split('`').next())
    {
        Value::String(first.into())
    } else {
        Value::String("x".into())
    }
}

/// The required keys of the block and its serialised defaults (from an entry holding only
/// the required keys).
fn defaults(b: &Block, infos: &[(String, KeyInfo)]) -> (BTreeSet<String>, Option<Value>) {
    let mut required = BTreeSet::new();
    let mut v = Mapping::new();
    for _ in 0..=b.fields.len() {
        match (b.roundtrip)(Value::Mapping(v.clone())) {
            Ok(out) => return (required, Some(out)),
            Err(e) => {
                let Some(name) = e
                    .split_once("missing field `")
                    .and_then(|(_, r)| r.split('`').next())
                else {
                    return (required, None);
                };
                let ty = infos
                    .iter()
                    .find(|(k, _)| k == name)
                    .map(|(_, i)| i.ty.clone())
                    .unwrap_or_default();
                required.insert(name.to_string());
                v.insert(Value::String(name.into()), sample(&ty));
            }
        }
    }
    (required, None)
}

/// A value as the page shows it.
fn show(v: &Value) -> String {
    match v {
        Value::Null => "unset".into(),
        Value::String(s) if s.is_empty() => "`\"\"`".into(),
        Value::Mapping(m) if m.is_empty() => "empty".into(),
        Value::Sequence(s) if s.is_empty() => "empty".into(),
        other => {
            let text = serde_yaml::to_string(other).unwrap_or_default();
            format!("`{}`", text.trim().replace('\n', " "))
        }
    }
}

/// `QUEUEBOX_*` for a key path: upper case, `.` and `[` become `_`; names chosen by the user
/// stay placeholders (`<NAME>`: written with `__` for a `_` in the name).
fn env_var(block_path: &str, key: &str) -> String {
    let path = block_path.split(" (").next().unwrap_or(block_path);
    let path = path.split(" / ").next().unwrap_or(path);
    let path = path.split(':').next().unwrap_or(path).trim();
    let full = if path.ends_with("login keys") || path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    };
    let mut out = String::from("QUEUEBOX");
    for seg in full.split(['.', '[']) {
        let seg = seg.trim_end_matches(']');
        out.push('_');
        out.push_str(&seg.to_ascii_uppercase());
    }
    out
}

/// The whole page.
pub fn markdown() -> String {
    let mut out = String::new();
    out.push_str(HEADER);
    let top: Vec<String> = fields_of::<crate::model::RawConfig>()
        .iter()
        .map(|k| format!("`{k}`"))
        .collect();
    let _ = writeln!(out, "\nThe top-level keys: {}.", top.join(", "));
    for b in blocks() {
        let _ = writeln!(out, "\n## `{}`\n\n{}\n", b.path, b.about);
        out.push_str(
            "| key | type | default | environment variable | `file:` |\n|---|---|---|---|---|\n",
        );
        let infos: Vec<(String, KeyInfo)> = b
            .fields
            .iter()
            .map(|k| (k.to_string(), key_info(&b, k)))
            .collect();
        let (required, defs) = defaults(&b, &infos);
        for (k, ty) in b.extra {
            let _ = writeln!(out, "| `{k}` | {ty} | | | |");
        }
        for (k, info) in &infos {
            let nested = b.nested.contains(&k.as_str());
            let ty = if nested && info.ty.starts_with("list") {
                "list of blocks (below)".to_string()
            } else if nested {
                "block (below)".to_string()
            } else {
                info.ty.clone()
            };
            let default = if nested {
                String::new()
            } else if required.contains(k) {
                "required".to_string()
            } else {
                match defs.as_ref().and_then(|d| d.get(k.as_str())) {
                    // A secret serialises as `***`: no default worth showing.
                    Some(Value::String(s)) if info.secret && s == "***" => "unset".into(),
                    Some(v) => show(v),
                    None => "unset".into(),
                }
            };
            let env = if ty.starts_with("block") || ty.starts_with("list of blocks") {
                String::new()
            } else if ty.starts_with("map") {
                format!("`{}_<KEY>`", env_var(b.path, k))
            } else if ty.starts_with("list") {
                format!("`{}_<I>`", env_var(b.path, k))
            } else {
                format!("`{}`", env_var(b.path, k))
            };
            let _ = writeln!(
                out,
                "| `{k}` | {ty} | {default} | {env} | {} |",
                if info.secret { "yes" } else { "" }
            );
        }
    }
    out.push_str(&column_mapping());
    out
}

fn column_mapping() -> String {
    use queuebox_core::store::names::{INBOX_COLUMNS, OUTBOX_COLUMNS};
    let mut out = String::from("\n## `database.columnMapping.outbox` / `database.columnMapping.inbox`\n\nColumn renames: each key (string, the column's new name; default the key's column) is one of the table's mapping keys.\n\n| table | keys |\n|---|---|\n");
    for (table, cols) in [("outbox", OUTBOX_COLUMNS), ("inbox", INBOX_COLUMNS)] {
        let keys: Vec<String> = cols.iter().map(|(k, _)| format!("`{k}`")).collect();
        let _ = writeln!(out, "| {table} | {} |", keys.join(", "));
    }
    out
}

const HEADER: &str = "# Configuration reference

<!-- Generated from the configuration model (relay/config/src/reference.rs) by
     `QUEUEBOX_BLESS_DOCS=1 cargo test -p queuebox-config reference`; CI fails when this
     file differs from what the model generates. Edit the model or reference.rs, not this file. -->

The relay reads one YAML file: `--config <file>`, else `$QUEUEBOX_CONFIG_FILE`, else
`/etc/queuebox/queuebox.yml` when it exists. With no file, the `QUEUEBOX_*` variables alone
configure it (with none either, the packaged demo configuration runs). Unknown keys are refused
at start, each named with its path and a \"did you mean\" hint.

- **Substitution**: `${VAR}` and `${VAR:-default}` anywhere in the file.
- **Environment variable**: overrides the key over the file. `QUEUEBOX_` + the path in upper
  case, `_` between segments; a list index is a number (`QUEUEBOX_ROUTES_0_DESTINATION`); a
  name you chose (`<NAME>`) is written as is, with `__` for a `_` inside it
  (`QUEUEBOX_DESTINATIONS_MY__API_BASEURL` sets `destinations.my_api.baseUrl`). Keys match
  case-insensitively, so `QUEUEBOX_OUTBOX_POLLINTERVALMS` sets `outbox.pollIntervalMs`.
- **`file:`**: a key marked *yes* also takes `file:/path/to/file`: the value is read from that
  file once at start (one trailing newline removed). Use it for secrets mounted as files
  (Kubernetes Secrets, systemd credentials). Other keys take the text literally.
- **Type** is what the model's parser accepts; **default** is what the relay uses when the key
  is absent (*required*: no default; *unset*: off, or the behaviour the notes describe).
  Durations written as text take `30s`, `5m`, `2h`, `7d`.
";

#[cfg(test)]
mod tests {
    use super::*;

    /// `docs/configuration.md` is what the model generates now. A key added to a struct
    /// changes the text: regenerate with `QUEUEBOX_BLESS_DOCS=1`.
    #[test]
    fn reference_matches_docs_configuration_md() {
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/configuration.md");
        let want = markdown();
        if std::env::var_os("QUEUEBOX_BLESS_DOCS").is_some() {
            std::fs::write(&path, &want).expect("write docs/configuration.md");
            return;
        }
        let have = std::fs::read_to_string(&path).unwrap_or_default();
        if have != want {
            let first = have
                .lines()
                .zip(want.lines())
                .position(|(a, b)| a != b)
                .unwrap_or_else(|| have.lines().count().min(want.lines().count()));
            panic!(
                "docs/configuration.md is not what the configuration model generates (first difference at line {}):\n  committed: {}\n  generated: {}\nRegenerate it: QUEUEBOX_BLESS_DOCS=1 cargo test -p queuebox-config reference",
                first + 1,
                have.lines().nth(first).unwrap_or("<end of file>"),
                want.lines().nth(first).unwrap_or("<end of file>"),
            );
        }
    }

    /// Every key name of every configuration struct (the strict check's list) is documented
    /// by some block: a new struct needs a block here.
    #[test]
    fn every_known_key_has_a_block() {
        let documented: BTreeSet<&str> = blocks()
            .iter()
            .flat_map(|b| {
                b.fields
                    .iter()
                    .copied()
                    .chain(b.extra.iter().map(|(k, _)| *k))
            })
            .chain(fields_of::<crate::model::RawConfig>().iter().copied())
            .chain(
                queuebox_core::store::names::OUTBOX_COLUMNS
                    .iter()
                    .chain(queuebox_core::store::names::INBOX_COLUMNS)
                    .map(|(k, _)| *k),
            )
            .collect();
        let missing: Vec<&str> = crate::model::all_known_keys()
            .iter()
            .copied()
            .filter(|k| !documented.contains(k))
            .collect();
        assert!(
            missing.is_empty(),
            "keys no block of reference.rs documents: {missing:?}"
        );
    }

    #[test]
    fn types_defaults_and_secrets_come_from_the_model() {
        let page = markdown();
        for line in [
            "| `httpPort` | integer 0–65535 | `8080` | `QUEUEBOX_SERVER_HTTPPORT` |  |",
            "| `password` | string | unset | `QUEUEBOX_DATABASE_PASSWORD` | yes |",
            "| `format` | one of `text`, `json` | `text` | `QUEUEBOX_LOGGING_FORMAT` |  |",
        ] {
            assert!(page.contains(line), "missing: {line}\n{page}");
        }
    }
}
