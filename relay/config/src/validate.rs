//! Semantic checks after parsing: each failure names its key path.

use std::collections::{BTreeMap, BTreeSet};

use crate::auth::AuthConfig;
use crate::checks::{positive, readable};
use crate::model::*;
use crate::strict::{suggest, ConfigErrors};
use crate::template::{Template, TOPIC_PLACEHOLDERS};
use queuebox_core::keys::JsonPath;
use queuebox_core::Consumption;

const CREDENTIAL_HEADERS: [&str; 3] = ["authorization", "proxy-authorization", "cookie"];

/// `broken_destinations` are declared but failed to parse (already reported): a route to
/// one is not a second mistake.
pub(super) fn config(c: &Config, broken_destinations: &BTreeSet<String>, errs: &mut ConfigErrors) {
    database(&c.database, errs);
    positive(
        errs,
        "server.requestHeaderTimeoutMs",
        c.server.request_header_timeout_ms,
    );
    positive(
        errs,
        "server.requestBodyTimeoutMs",
        c.server.request_body_timeout_ms,
    );
    positive(
        errs,
        "server.maxConnections",
        c.server.max_connections as u64,
    );
    positive(errs, "outbox.pollIntervalMs", c.outbox.poll_interval_ms);
    if let Some(n) = c.outbox.batch_size {
        positive(errs, "outbox.batchSize", n as u64);
    }
    if let Some(n) = c.outbox.concurrency {
        positive(errs, "outbox.concurrency", n as u64);
    }
    positive(errs, "outbox.claimTimeoutMs", c.outbox.claim_timeout_ms);
    positive(
        errs,
        "outbox.retryBaseDelayMs",
        c.outbox.retry_base_delay_ms,
    );
    positive(
        errs,
        "outbox.pendingGaugeIntervalMs",
        c.outbox.pending_gauge_interval_ms,
    );
    positive(errs, "inbox.maxBodyBytes", c.inbox.max_body_bytes);
    positive(
        errs,
        "inbox.maxHeaderBytes",
        c.inbox.max_header_bytes as u64,
    );
    positive(
        errs,
        "inbox.relay.pollIntervalMs",
        c.inbox.relay.poll_interval_ms,
    );
    positive(
        errs,
        "inbox.relay.batchSize",
        c.inbox.relay.batch_size as u64,
    );
    positive(
        errs,
        "inbox.relay.claimTimeoutMs",
        c.inbox.relay.claim_timeout_ms,
    );
    positive(
        errs,
        "inbox.relay.pendingGaugeIntervalMs",
        c.inbox.relay.pending_gauge_interval_ms,
    );
    if !c.inbox.base_path.starts_with('/')
        || c.inbox.base_path.ends_with('/') && c.inbox.base_path.len() > 1
    {
        errs.push(
            "inbox.basePath",
            "must start with `/` and not end with `/` (e.g. /inbox)",
        );
    }
    if let Some(tls) = &c.server.tls {
        readable(errs, "server.tls.certFile", &tls.cert_file);
        readable(errs, "server.tls.keyFile", &tls.key_file);
        if let Some(ca) = &tls.client_ca_file {
            readable(errs, "server.tls.clientCaFile", ca);
        }
    }
    if c.server.management_port == Some(c.server.http_port) {
        errs.push("server.managementPort", "must differ from server.httpPort");
    }
    if c.admin.enabled && c.admin.auth.is_none() && !c.admin.insecure {
        errs.push("admin.auth", "the admin API is enabled without authentication; configure admin.auth or set admin.insecure: true");
    }
    if let Some(a) = &c.admin.auth {
        auth(a, "admin.auth", errs);
    }
    let mut schedule_names = BTreeSet::new();
    for (i, s) in c.schedules.iter().enumerate() {
        let at = format!("schedules[{i}]");
        if let Err(e) = s.to_schedule(&at) {
            match e {
                queuebox_core::Error::Config { path, reason } => errs.push(path, reason),
                other => errs.push(at.clone(), other.to_string()),
            }
        }
        if !schedule_names.insert(s.name.trim()) {
            errs.push(
                format!("{at}.name"),
                format!("`{}` is the name of an earlier schedule: a tick's row key holds the name, so two schedules of one name would share their rows", s.name.trim()),
            );
        }
    }
    for (i, r) in c.routes.iter().enumerate() {
        if r.topic_pattern.trim().is_empty() {
            errs.push(format!("routes[{i}].topicPattern"), "must not be empty");
        }
        if !c.destinations.contains_key(&r.destination)
            && !broken_destinations.contains(&r.destination)
        {
            let hint = suggest(&r.destination, c.destinations.keys().map(String::as_str))
                .map(|h| format!("; did you mean {h}?"))
                .unwrap_or_default();
            errs.push(
                format!("routes[{i}].destination"),
                format!("destination `{}` does not exist{hint}", r.destination),
            );
        }
        route_key(c, i, r, errs);
    }
    for (name, d) in &c.destinations {
        let path = format!("destinations.{name}");
        if let Some(l) = &d.rate_limit {
            destination_limits(l, &format!("{path}.rateLimit"), errs);
        }
        match (&d.kind, d.kind.broker()) {
            (DestinationKind::Http(h), _) => http_destination(h, &path, errs),
            (_, Some(broker)) => broker.validate(&path, errs),
            (_, None) => {}
        }
    }
    let mut paths: BTreeMap<&str, &str> = BTreeMap::new();
    for (name, s) in &c.sources {
        let path = format!("sources.{name}");
        common(s, &path, errs);
        match (&s.kind, s.kind.broker()) {
            (SourceKind::Http(h), _) => {
                http_source(h, &path, errs);
                if let Some(other) = paths.insert(h.path.as_str(), name.as_str()) {
                    errs.push(
                        format!("{path}.path"),
                        format!("`{}` is also the path of source `{other}`", h.path),
                    );
                }
            }
            (_, Some(broker)) => broker.validate(&path, errs),
            (_, None) => {}
        }
    }
    retention(&c.retention.outbox, "retention.outbox", true, errs);
    retention(&c.retention.inbox, "retention.inbox", false, errs);
    crate::transform::expressions(c, errs);
    positive(
        errs,
        "admin.maxTransformTimeoutMs",
        c.admin.max_transform_timeout_ms,
    );
    positive(errs, "admin.maxPayloadBytes", c.admin.max_payload_bytes);
}

/// `tracing.otlp`: the endpoint from the file, else from `OTEL_EXPORTER_OTLP_ENDPOINT`
/// (filled in, so `check-config` shows what runs); it must be an http(s) URL with a host,
/// and the error names where it came from.
pub(super) fn otlp(o: &mut OtlpConfig, vars: &[(String, String)], errs: &mut ConfigErrors) {
    let mut key = "tracing.otlp.endpoint";
    if o.endpoint.is_none() {
        let from_env = vars
            .iter()
            .find(|(k, v)| k == queuebox_core::otlp::ENDPOINT_ENV && !v.trim().is_empty());
        if let Some((_, v)) = from_env {
            o.endpoint = Some(v.trim().to_string());
            key = queuebox_core::otlp::ENDPOINT_ENV;
        }
    }
    if o.service_name.trim().is_empty() {
        errs.push("tracing.otlp.serviceName", "must not be empty");
    }
    let Some(endpoint) = &o.endpoint else {
        return;
    };
    if let Err(why) = queuebox_core::otlp::check_endpoint(endpoint) {
        errs.push(key, why);
    }
}

fn database(d: &DatabaseConfig, errs: &mut ConfigErrors) {
    use queuebox_core::backend::DatabaseUrl;
    use queuebox_core::store::Backend;
    let kind = match d.kind.as_str() {
        "postgresql" => Some(Backend::Postgres),
        "sqlserver" => Some(Backend::SqlServer),
        other => {
            errs.push(
                "database.type",
                format!("`{other}` is not one of postgresql, sqlserver"),
            );
            None
        }
    };
    if d.url.trim().is_empty() {
        errs.push(
            "database.url",
            "required (postgres://user@host:5432/db or sqlserver://user@host:1433/db)",
        );
    } else if d.url.starts_with("file:") {
        errs.push("database.url", "`file:` is only read for secret fields; put the password in database.password: file:/path");
    } else {
        // The backend factory is the one reader of URL forms.
        match DatabaseUrl::parse(&d.url) {
            Ok(u) if kind.is_some_and(|k| k != u.backend()) => errs.push(
                "database.url",
                format!(
                    "names a {:?} database but database.type is `{}`",
                    u.backend(),
                    d.kind
                ),
            ),
            Ok(_) => {}
            Err(
                queuebox_core::Error::Connect { reason, .. }
                | queuebox_core::Error::Config { reason, .. },
            ) => errs.push("database.url", reason),
            Err(e) => errs.push("database.url", e.to_string()),
        }
    }
    positive(errs, "database.poolSize", d.pool_size as u64);
    positive(
        errs,
        "database.connectionTimeoutMs",
        d.connection_timeout_ms,
    );
    names(d, kind, errs);
}

/// Custom table and column names (proto-docs/own-schema.md): valid identifiers and known keys; the
/// application owns such a schema, so `migrate: true` is refused naming every renamed key,
/// and SQL Server (which has no rendering of custom names yet) refuses them.
fn names(d: &DatabaseConfig, kind: Option<queuebox_core::store::Backend>, errs: &mut ConfigErrors) {
    use queuebox_core::store::names::Names;
    use std::collections::BTreeMap;
    let mut push = |r: queuebox_core::Result<Names>| match r {
        Err(queuebox_core::Error::Config { path, reason }) => {
            errs.push(path, reason);
            false
        }
        Err(e) => {
            errs.push("database.columnMapping", e.to_string());
            false
        }
        Ok(_) => true,
    };
    // Each name on its own first, so every bad one is listed, then all together (two keys
    // mapped to one column).
    let none = BTreeMap::new();
    let one = |k: &String, v: &String| BTreeMap::from([(k.clone(), v.clone())]);
    let mut ok = push(Names::new(
        d.outbox_table_name.as_deref(),
        None,
        &none,
        &none,
    ));
    ok &= push(Names::new(
        None,
        d.inbox_table_name.as_deref(),
        &none,
        &none,
    ));
    for (k, v) in &d.column_mapping.outbox {
        ok &= push(Names::new(None, None, &one(k, v), &none));
    }
    for (k, v) in &d.column_mapping.inbox {
        ok &= push(Names::new(None, None, &none, &one(k, v)));
    }
    if !ok {
        return;
    }
    let names = match d.names() {
        Ok(n) => n,
        Err(e) => {
            push(Err(e));
            return;
        }
    };
    let renamed = names.renamed_keys();
    if renamed.is_empty() {
        return;
    }
    if d.migrate {
        errs.push(
            "database.migrate",
            format!(
                "must be false with custom table or column names ({}): QueueBox migrates only its own schema; create yours as proto-docs/own-schema.md shows",
                renamed.join(", ")
            ),
        );
    }
    if kind == Some(queuebox_core::store::Backend::SqlServer) {
        errs.push(
            renamed[0].clone(),
            "custom table and column names are implemented for PostgreSQL only",
        );
    }
}

fn http_destination(h: &HttpDestination, path: &str, errs: &mut ConfigErrors) {
    match url::Url::parse(&h.base_url) {
        Ok(u) => {
            if !matches!(u.scheme(), "http" | "https") {
                errs.push(
                    format!("{path}.baseUrl"),
                    format!("scheme `{}` is not http or https", u.scheme()),
                );
            }
            if u.host_str().is_none_or(str::is_empty) {
                errs.push(format!("{path}.baseUrl"), "has no host");
            }
            if !u.username().is_empty() || u.password().is_some() {
                errs.push(
                    format!("{path}.baseUrl"),
                    "must not carry credentials (use auth instead)",
                );
            }
            if h.base_url.contains("/../")
                || h.base_url.contains("/./")
                || h.base_url.ends_with("/..")
            {
                errs.push(
                    format!("{path}.baseUrl"),
                    "must not contain `.` or `..` segments",
                );
            }
        }
        Err(e) => errs.push(
            format!("{path}.baseUrl"),
            format!("not an absolute URL: {e}"),
        ),
    }
    if h.path.split('/').any(|s| s == "." || s == "..") {
        errs.push(
            format!("{path}.path"),
            "must not contain `.` or `..` segments",
        );
    }
    positive(errs, &format!("{path}.timeoutMs"), h.timeout_ms);
    for k in h.headers.keys() {
        if k.trim().is_empty() {
            errs.push(format!("{path}.headers"), "a header name is empty");
        }
    }
    if let Some(a) = &h.auth {
        crate::destination_auth::validate(a, &format!("{path}.auth"), errs);
    }
}

fn paths(list: &Option<PathList>, path: &str, errs: &mut ConfigErrors) {
    if let Some(l) = list {
        let ps = l.paths();
        if ps.is_empty() {
            errs.push(path, "the list of paths is empty");
        }
        for p in ps {
            if let Err(e) = JsonPath::parse(p) {
                errs.push(
                    path,
                    e.to_string()
                        .trim_start_matches("invalid input: ")
                        .to_string(),
                );
            }
        }
    }
}

/// `scheduledAtHeader` / `scheduledAtPath` only move a hold that exists: they need
/// `initialDelay`; the path must parse and the header must be named.
fn publish_time(c: &SourceCommon, path: &str, errs: &mut ConfigErrors) {
    for (key, set) in [
        ("scheduledAtHeader", c.scheduled_at_header.is_some()),
        ("scheduledAtPath", c.scheduled_at_path.is_some()),
    ] {
        if set && c.initial_delay.is_none() {
            errs.push(
                format!("{path}.{key}"),
                format!("needs {path}.initialDelay (a positive duration): publish-time order moves the hold that initialDelay sets"),
            );
        }
    }
    if let Some(h) = &c.scheduled_at_header {
        if h.trim().is_empty() {
            errs.push(
                format!("{path}.scheduledAtHeader"),
                "the header name is empty",
            );
        }
    }
    if let Some(p) = &c.scheduled_at_path {
        if let Err(e) = JsonPath::parse(p) {
            errs.push(
                format!("{path}.scheduledAtPath"),
                e.to_string()
                    .trim_start_matches("invalid input: ")
                    .to_string(),
            );
        }
    }
}

fn common(s: &SourceConfig, path: &str, errs: &mut ConfigErrors) {
    let c = &s.common;
    if let Some(f) = &c.filter {
        header_filter(f, &format!("{path}.filter"), errs);
    }
    paths(
        &c.idempotency_key_path,
        &format!("{path}.idempotencyKeyPath"),
        errs,
    );
    paths(&c.event_type_path, &format!("{path}.eventTypePath"), errs);
    paths(
        &c.aggregate_id_path,
        &format!("{path}.aggregateIdPath"),
        errs,
    );
    if let Some(d) = &c.initial_delay {
        if parse_duration(d).is_none_or(|d| d.is_zero()) {
            errs.push(
                format!("{path}.initialDelay"),
                format!("`{d}` is not a positive duration like 30s, 5m, 2h or 1d"),
            );
        }
    }
    publish_time(c, path, errs);
    let template = s.topic_template();
    match Template::parse(template) {
        Err(e) => errs.push(format!("{path}.topic"), e.to_string()),
        Ok(t) => {
            let names: Vec<&str> = t.placeholders().collect();
            for n in &names {
                if !TOPIC_PLACEHOLDERS.contains(n) {
                    errs.push(format!("{path}.topic"), format!("unknown placeholder `{{{{ {n} }}}}` (known: {{{{ source }}}}, {{{{ eventType }}}})"));
                }
            }
            let has_event_type = c.event_type_path.is_some()
                || c.event_type_expression.is_some()
                || match (&s.kind, s.kind.broker()) {
                    (SourceKind::Http(h), _) => h.event_type_header.is_some(),
                    (_, Some(broker)) => broker.event_type_from_header(),
                    (_, None) => false,
                };
            if c.consumption == Consumption::Push && names.contains(&"eventType") && !has_event_type
            {
                errs.push(
                    format!("{path}.topic"),
                    "uses {{ eventType }} but the source declares no event type (set eventTypePath or eventTypeHeader, or a topic such as \"{{ source }}\")",
                );
            }
        }
    }
}

/// A route's `routingKeyTemplate` picks the key of a RabbitMQ or Kafka publish; HTTP and
/// NATS destinations have no such key (the NATS subject is the destination's `subject`), so
/// there it is refused rather than ignored. Its placeholders are checked with the
/// destination's templates when the publishers are built.
fn route_key(c: &Config, i: usize, r: &RouteConfig, errs: &mut ConfigErrors) {
    match &r.routing_key_template {
        Some(t) if t.trim().is_empty() => errs.push(
            format!("routes[{i}].routingKeyTemplate"),
            "must not be blank",
        ),
        Some(_) => {
            let kind = c
                .destinations
                .get(&r.destination)
                .map(|d| d.kind.type_name());
            if let Some(kind @ ("http" | "nats")) = kind {
                errs.push(
                    format!("routes[{i}].routingKeyTemplate"),
                    format!("destination `{}` is a {kind} destination, which has no routing key; only rabbitmq and kafka destinations use one", r.destination),
                );
            }
        }
        None if r.routing_key_missing_field_default.is_some() => errs.push(
            format!("routes[{i}].routingKeyMissingFieldDefault"),
            "has no effect without routes[].routingKeyTemplate",
        ),
        None => {}
    }
}

/// Each rule names a header and exactly one test; `exists: false` is refused (use an
/// `exclude` rule with `exists: true`), as are an empty `in` list and a blank `matches`.
fn header_filter(f: &HeaderFilter, path: &str, errs: &mut ConfigErrors) {
    for (list, rules) in [("require", &f.require), ("exclude", &f.exclude)] {
        for (i, r) in rules.iter().enumerate() {
            let at = format!("{path}.{list}[{i}]");
            if r.header.trim().is_empty() {
                errs.push(format!("{at}.header"), "must name a header");
            }
            let tests = [
                r.equals.is_some(),
                r.one_of.is_some(),
                r.matches.is_some(),
                r.exists.is_some(),
            ];
            match tests.iter().filter(|t| **t).count() {
                1 => {}
                0 => errs.push(
                    at.clone(),
                    "needs one test: equals, in, matches or exists: true",
                ),
                _ => errs.push(
                    at.clone(),
                    "has more than one test; use one of equals, in, matches or exists: true",
                ),
            }
            if r.exists == Some(false) {
                errs.push(format!("{at}.exists"), "`false` is not supported; to drop messages that carry the header, put `exists: true` under exclude");
            }
            if r.one_of.as_ref().is_some_and(|l| l.is_empty()) {
                errs.push(format!("{at}.in"), "must list at least one value");
            }
            if r.matches.as_ref().is_some_and(|m| m.trim().is_empty()) {
                errs.push(format!("{at}.matches"), "must not be blank");
            }
        }
    }
}

/// A `rateLimit` block sets at least one limit (each is nonzero by its type: 0 would stop
/// the destination for good, and pausing is not a limit).
fn destination_limits(l: &DestinationLimits, path: &str, errs: &mut ConfigErrors) {
    if l.per_second.is_none() && l.in_flight.is_none() {
        errs.push(path, "sets no limit: give perSecond, inFlight or both");
    }
}

fn http_source(h: &HttpSource, path: &str, errs: &mut ConfigErrors) {
    if h.rate_limit
        .as_ref()
        .is_some_and(|r| r.requests_per_minute == 0)
    {
        errs.push(
            format!("{path}.rateLimit.requestsPerMinute"),
            "must be at least 1 (leave rateLimit out for no limit)",
        );
    }
    if !h.path.starts_with('/') || h.path.len() < 2 {
        errs.push(
            format!("{path}.path"),
            "must start with `/` and name the source (e.g. /orders)",
        );
    }
    let auth_header = h
        .auth
        .as_ref()
        .map(|a| a.header_name().to_ascii_lowercase());
    for (key, v) in [
        ("idempotencyKeyHeader", &h.idempotency_key_header),
        ("eventTypeHeader", &h.event_type_header),
        ("aggregateIdHeader", &h.aggregate_id_header),
    ] {
        if let Some(name) = v {
            let lower = name.trim().to_ascii_lowercase();
            if lower.is_empty() {
                errs.push(format!("{path}.{key}"), "must not be blank");
            } else if CREDENTIAL_HEADERS.contains(&lower.as_str())
                || auth_header.as_deref() == Some(lower.as_str())
            {
                errs.push(
                    format!("{path}.{key}"),
                    format!("`{name}` carries a credential and is never stored"),
                );
            }
        }
    }
    if let Some(a) = &h.auth {
        auth(a, &format!("{path}.auth"), errs);
    }
}

fn auth(a: &AuthConfig, path: &str, errs: &mut ConfigErrors) {
    match a {
        AuthConfig::Bearer(b) if b.token.expose().is_empty() => {
            errs.push(format!("{path}.token"), "must not be empty")
        }
        AuthConfig::ApiKey(k) if k.key.expose().is_empty() => {
            errs.push(format!("{path}.key"), "must not be empty")
        }
        AuthConfig::Hmac(h) => {
            if h.secret.expose().is_empty() {
                errs.push(format!("{path}.secret"), "must not be empty");
            }
            if h.algorithm != "HmacSHA256" {
                errs.push(
                    format!("{path}.algorithm"),
                    format!("`{}` is not supported (HmacSHA256)", h.algorithm),
                );
            }
            if let Some(f) = &h.signature_payload_format {
                if !matches!(
                    f.to_ascii_lowercase().replace('_', "-").as_str(),
                    "body" | "timestamp-dot-body"
                ) {
                    errs.push(
                        format!("{path}.signaturePayloadFormat"),
                        "must be body or timestamp-dot-body",
                    );
                }
                if h.signs_timestamp() && h.timestamp_header.is_none() {
                    errs.push(
                        format!("{path}.timestampHeader"),
                        "required by signaturePayloadFormat: timestamp-dot-body",
                    );
                }
            }
        }
        _ => {}
    }
}

fn retention(r: &TableRetention, path: &str, count_ok: bool, errs: &mut ConfigErrors) {
    match r.policy.as_str() {
        "DISABLED" => {}
        "AGE" => match &r.max_age {
            None => errs.push(format!("{path}.maxAge"), "required by policy AGE"),
            Some(a) if parse_duration(a).is_none() => errs.push(format!("{path}.maxAge"), format!("`{a}` is not a duration like 7d")),
            _ => {}
        },
        "COUNT" if !count_ok => errs.push(format!("{path}.policy"), "COUNT is refused for the inbox: deleting by count would end deduplication early; use AGE"),
        "COUNT" => {
            if r.max_count.is_none_or(|n| n == 0) {
                errs.push(format!("{path}.maxCount"), "required by policy COUNT (a positive number)");
            }
        }
        other => errs.push(format!("{path}.policy"), format!("`{other}` is not AGE, COUNT or DISABLED")),
    }
    if parse_duration(&r.cleanup_interval).is_none_or(|d| d.is_zero()) {
        errs.push(
            format!("{path}.cleanupInterval"),
            format!(
                "`{}` is not a positive duration like 1h",
                r.cleanup_interval
            ),
        );
    }
    positive(errs, &format!("{path}.batchSize"), r.batch_size as u64);
}
