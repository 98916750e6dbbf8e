//! # queuebox-config
//!
//! The relay's configuration: one YAML file, `${VAR}` / `${VAR:-default}` substitution,
//! `QUEUEBOX_*` environment overrides, and a strict check that reports every offending key
//! path at once (unknown keys with a "did you mean" hint, routes to missing destinations,
//! templates with unknown placeholders, bad URLs, ...). It is a crate of the relay, apart
//! from `queuebox-core`, so the language bindings that link the core never link a YAML
//! parser; it uses the core only for protocol types ([`queuebox_core::Consumption`], JSONPath
//! keys, error redaction, [`queuebox_core::Error::Config`]).
//!
//! ## Module map
//!
//! From the top down; a module imports only modules listed below it.
//!
//! | module | what it owns |
//! |---|---|
//! | (crate root) | [`load`] (file / environment / packaged demo precedence) and [`from_yaml_with_env`]: text → substitution → overrides → typed → validated [`Config`] |
//! | `substitute` | `${VAR}` substitution and the problem an unset variable causes at its key |
//! | `env` | `QUEUEBOX_*` overrides mapped onto key paths |
//! | [`reference`] | docs/configuration.md, generated from the model's structs |
//! | `parse` | section by section typing; `type`-dispatched maps (sources, destinations, auth) and the broker kind table |
//! | `validate` | semantic checks after parsing, each naming its key path |
//! | `transform` | compiling the `transform` blocks ([`TransformConfig`]) and key expressions, during validation and for the relay |
//! | `model` | the typed configuration ([`Config`] and its sections) and every key it knows, re-exported at the root |
//! | [`brokers`] | the keys of the RabbitMQ, Kafka and NATS sources and destinations, and their checks |
//! | `destination_auth` | an HTTP destination's outbound auth ([`DestinationAuth`]: bearer, api-key, basic, header, oauth2, hmac signing) |
//! | `auth` | an HTTP source's and the admin API's request auth ([`AuthConfig`]: bearer, api-key, hmac), and the shapes an outbound auth shares |
//! | `checks` | the checks several sections share (a positive number, a readable file) |
//! | `strict` | path-aware deserialisation: unknown keys, type errors, hints ([`ConfigErrors`], [`Problem`], [`suggest`]) |
//! | [`template`] | the one `{{ name }}` template renderer ([`Template`], [`render_topic`]) |
//! | `glob` | route globs ([`glob_match`]) |
//! | `secret` | [`Secret`]: a value printed as `***` |
//!
//! ```no_run
//! let cfg = queuebox_config::load(Some("examples/relay.yml".as_ref())).unwrap();
//! println!("{}", cfg.to_redacted_yaml());
//! ```
//!
//! Environment mapping (docs/relay.md, "Where the configuration comes from"): strip
//! `QUEUEBOX_`, lower-case, `_` separates path segments, `__` is a literal `_` inside a map
//! key, a number is a list index, and a field
//! name matches the camelCase key case-insensitively: `QUEUEBOX_OUTBOX_POLLINTERVALMS` →
//! `outbox.pollIntervalMs`, `QUEUEBOX_DESTINATIONS_MY__API_BASEURL` →
//! `destinations.my_api.baseUrl`, `QUEUEBOX_ROUTES_0_TOPICPATTERN` → `routes[0].topicPattern`.

#![forbid(unsafe_code)]

mod auth;
pub mod brokers;
mod checks;
mod destination_auth;
mod env;
mod glob;
mod model;
mod parse;
pub mod reference;
mod secret;
mod strict;
mod substitute;
pub mod template;
mod transform;
mod validate;

use std::path::Path;

pub use auth::{ApiKeyAuth, AuthConfig, BearerAuth, HmacAuth};
pub use destination_auth::{
    BasicAuth, DestinationAuth, HeaderAuth, HmacSigning, OAuth2Auth, DESTINATION_AUTH_TYPES,
};
pub use env::CONFIG_FILE_ENV;
pub use glob::glob_match;
pub use model::*;
pub use secret::Secret;
pub use strict::{suggest, ConfigErrors, Problem};
pub use template::{render_topic, Template, TemplateError, TOPIC_PLACEHOLDERS};
pub use transform::{key_expression, key_expressions, TransformProblem, MAX_TRANSFORM_TIMEOUT_MS};

/// The file read when neither `--config` nor `QUEUEBOX_CONFIG_FILE` names one.
pub const DEFAULT_CONFIG_FILE: &str = "/etc/queuebox/queuebox.yml";

/// The packaged demo configuration, used only with no file and no `QUEUEBOX_*` variable: two webhook sources (`stripe`,
/// `github`), two HTTP destinations, two routes, a local PostgreSQL.
pub const PACKAGED_CONFIG: &str = include_str!("../packaged.yml");

/// Where a loaded configuration came from (the relay says so at start-up).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// A YAML file, with the environment applied over it.
    File(std::path::PathBuf),
    /// No file: `QUEUEBOX_*` variables only.
    Environment,
    /// No file and no `QUEUEBOX_*` variable: [`PACKAGED_CONFIG`].
    Packaged,
}

/// Loads the configuration by its precedence (docs/relay.md, "Where the configuration comes
/// from") — the file at `path`, else
/// `$QUEUEBOX_CONFIG_FILE`, else [`DEFAULT_CONFIG_FILE`] if it exists; with no file, the
/// environment alone, or the packaged demo when no `QUEUEBOX_*` variable configures
/// anything. A file or a variable replaces the packaged demo entirely (no merge). Applies the
/// process environment and validates.
pub fn load(path: Option<&Path>) -> Result<Config, ConfigErrors> {
    load_with_origin(path).map(|(cfg, _)| cfg)
}

/// [`load`], also saying where the configuration came from.
pub fn load_with_origin(path: Option<&Path>) -> Result<(Config, Origin), ConfigErrors> {
    let vars: Vec<(String, String)> = std::env::vars().collect();
    let from_env = std::env::var(CONFIG_FILE_ENV)
        .ok()
        .filter(|s| !s.is_empty());
    let default = Path::new(DEFAULT_CONFIG_FILE);
    let path = path
        .map(Path::to_path_buf)
        .or(from_env.map(Into::into))
        .or_else(|| default.exists().then(|| default.to_path_buf()));
    let (text, origin) = match path {
        Some(p) => {
            let text = std::fs::read_to_string(&p).map_err(|e| {
                let mut errs = ConfigErrors::default();
                errs.push("<file>", format!("cannot read {}: {e}", p.display()));
                errs
            })?;
            (text, Origin::File(p))
        }
        None if vars.iter().any(|(k, _)| env::configures(k)) => {
            (String::new(), Origin::Environment)
        }
        None => (PACKAGED_CONFIG.to_string(), Origin::Packaged),
    };
    from_yaml_with_env(&text, &vars).map(|cfg| (cfg, origin))
}

/// Parses `yaml` with `${VAR}` substitution and `QUEUEBOX_*` overrides from `vars`, then
/// validates. The pure core of [`load`], used by tests.
pub fn from_yaml_with_env(yaml: &str, vars: &[(String, String)]) -> Result<Config, ConfigErrors> {
    let mut errs = ConfigErrors::default();
    let (text, missing) = substitute::substitute_vars(yaml, |k| {
        vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
    });
    // Keys whose value references an unset variable: that is their one problem, whatever
    // the empty value then breaks at the same key.
    let unset_keys = substitute::unset_var_problems(yaml, &missing, &mut errs);
    let reported = errs.problems.len();
    let mut root: serde_yaml::Value = if text.trim().is_empty() {
        serde_yaml::Value::Mapping(Default::default())
    } else {
        match serde_yaml::from_str(&text) {
            Ok(v) => v,
            Err(e) => {
                errs.push("<file>", format!("not valid YAML: {e}"));
                return Err(errs);
            }
        }
    };
    if root.is_null() {
        root = serde_yaml::Value::Mapping(Default::default());
    }
    let origins = env::apply(&mut root, vars, &mut errs);
    let mut parsed = parse::config(&root, &mut errs);
    if let Some(p) = &mut parsed {
        validate::otlp(&mut p.config.tracing.otlp, vars, &mut errs);
        validate::config(&p.config, &p.broken_destinations, &mut errs);
    }
    let cfg = parsed.map(|p| p.config);
    let mut i = 0;
    errs.problems.retain(|p| {
        i += 1;
        i <= reported
            || !unset_keys.iter().any(|k| {
                p.path == *k
                    || p.path
                        .strip_prefix(k.as_str())
                        .is_some_and(|r| r.starts_with(['.', '[']))
            })
    });
    // Name the environment variable behind each offending key.
    for p in &mut errs.problems {
        if let Some((_, var)) = origins
            .iter()
            .find(|(path, _)| p.path == *path || p.path.starts_with(&format!("{path}.")))
        {
            p.env = Some(var.clone());
        }
    }
    match cfg {
        Some(cfg) if errs.is_empty() => Ok(cfg),
        _ => Err(errs),
    }
}

impl Config {
    /// The resolved configuration as YAML with every secret shown as `***` and passwords
    /// in URLs masked (what `queuebox check-config` prints), followed by comments saying what
    /// an unset optional setting (printed `null`) means in force.
    pub fn to_redacted_yaml(&self) -> String {
        let mut out =
            serde_yaml::to_string(self).unwrap_or_else(|e| format!("# cannot render: {e}\n"));
        let o = &self.outbox;
        if o.batch_size.is_none() {
            let (min, max) = o.batch_sizes();
            out += &format!(
                "# outbox.batchSize unset: claims of {min} to {max} rows, as the batches allow\n"
            );
        }
        if o.concurrency.is_none() {
            out += &format!(
                "# outbox.concurrency unset: up to {} publishes at once, at most {} of them HTTP requests\n",
                o.in_flight(),
                o.http_requests()
            );
        }
        out
    }

    /// The first route whose pattern matches `topic`, in configuration order.
    pub fn route_for(&self, topic: &str) -> Option<&RouteConfig> {
        self.routes
            .iter()
            .find(|r| glob_match(&r.topic_pattern, topic))
    }

    /// The HTTP source served at `path` (relative to `inbox.basePath`).
    pub fn http_source_at(&self, path: &str) -> Option<&SourceConfig> {
        self.sources
            .values()
            .find(|s| matches!(&s.kind, SourceKind::Http(h) if h.path == path))
    }

    /// What the backend factory connects with: `database.url`, `database.username` /
    /// `database.password` (given to the driver apart from the URL, in every URL form: see
    /// [`queuebox_core::backend::connect`]), `poolSize` and `connectionTimeoutMs`.
    pub fn database_settings(&self) -> queuebox_core::DatabaseSettings {
        let d = &self.database;
        let mut s = queuebox_core::DatabaseSettings::new(d.url.clone())
            .pool_size(d.pool_size)
            .credentials(
                d.username.clone(),
                d.password.as_ref().map(|p| p.expose().to_string()),
            );
        s.connection_timeout = std::time::Duration::from_millis(d.connection_timeout_ms);
        // Validated when the configuration was loaded (validate::names).
        s.names = d
            .names()
            .expect("database names are validated when the configuration loads");
        s
    }

    /// Secrets to mask in log lines and `last_error` text.
    pub fn secrets(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(p) = &self.database.password {
            out.push(p.expose().to_string());
        }
        if let Ok(u) = url::Url::parse(&self.database.url) {
            if let Some(p) = u.password() {
                out.push(p.to_string());
            }
        }
        // Broker credentials, collected apart from `out` (the closure below borrows it).
        let mut extra: Vec<String> = Vec::new();
        let mut auth = |a: &Option<AuthConfig>| match a {
            Some(AuthConfig::Bearer(b)) => out.push(b.token.expose().to_string()),
            Some(AuthConfig::ApiKey(k)) => out.push(k.key.expose().to_string()),
            Some(AuthConfig::Hmac(h)) => out.push(h.secret.expose().to_string()),
            None => {}
        };
        auth(&self.admin.auth);
        for s in self.sources.values() {
            match (&s.kind, s.kind.broker()) {
                (SourceKind::Http(h), _) => auth(&h.auth),
                (_, Some(b)) => extra.extend(b.secrets().iter().map(|s| s.expose().to_string())),
                (_, None) => {}
            }
        }
        for d in self.destinations.values() {
            match (&d.kind, d.kind.broker()) {
                (DestinationKind::Http(h), _) => {
                    extra.extend(h.auth.iter().flat_map(|a| a.secrets()));
                    // Every static header value (`Authorization`, API keys).
                    extra.extend(h.headers.values().map(|v| v.expose().to_string()));
                }
                (_, Some(b)) => {
                    extra.extend(b.secrets().iter().map(|s| s.expose().to_string()));
                    extra.extend(b.static_headers().values().cloned());
                }
                (_, None) => {}
            }
        }
        out.extend(extra);
        out.retain(|s| s.len() >= 4);
        out
    }
}

#[cfg(test)]
mod tests;
