//! Table and column names (proto-docs/own-schema.md): `database.outboxTableName`,
//! `database.inboxTableName` and `database.columnMapping.{outbox,inbox}.<key>`.
//!
//! The statements of `store::postgres::sql` are templates with named slots; [`Names::render`]
//! fills them in. `{inbox}` / `{outbox}` become the table, `{inbox.source}` a column,
//! `{=inbox.source}` a column read back by name (`"src" AS source` once renamed, so the Rust
//! code that decodes rows never learns the custom names), and `{inbox.dedup}` the conflict
//! target of the inbox insert. A name left at its default renders exactly as before (bare,
//! `inbox`, `source`), so the default naming sends the very SQL of earlier releases; a custom
//! name is validated and always quoted (`"order"` on PostgreSQL, `[order]` on SQL Server), so
//! reserved words such as `order`, `user` or `key` work.
//!
//! A store renders its statements once, when it is created ([`Rendered`]).

use std::collections::{BTreeMap, HashMap};

use crate::error::{Error, Result};
use crate::store::Backend;

/// Outbox mapping keys (proto-docs/own-schema.md) and their default column names.
pub const OUTBOX_COLUMNS: &[(&str, &str)] = &[
    ("id", "id"),
    ("topic", "topic"),
    ("key", "key"),
    ("aggregateType", "aggregate_type"),
    ("payload", "payload"),
    ("headers", "headers"),
    ("state", "state"),
    ("attempt", "attempt"),
    ("maxAttempts", "max_attempts"),
    ("scheduledAt", "scheduled_at"),
    ("createdAt", "created_at"),
    ("updatedAt", "updated_at"),
    ("claimedAt", "claimed_at"),
    ("claimToken", "claim_token"),
    ("leaseExpiresAt", "lease_expires_at"),
    ("lastError", "last_error"),
    ("sequence", "sequence"),
    ("claimOwner", "claim_owner"),
];

/// Inbox mapping keys: the original columns, then the columns later migrations added
/// (`sequence`: arrival order; `traceparent`/`tracestate`: migration 0005; `claimOwner`:
/// migration 0006; `priority`, `maxAttempts`: migration 0010).
pub const INBOX_COLUMNS: &[(&str, &str)] = &[
    ("id", "id"),
    ("source", "source"),
    ("idempotencyKey", "idempotency_key"),
    ("aggregateId", "aggregate_id"),
    ("eventType", "event_type"),
    ("payload", "payload"),
    ("state", "state"),
    ("createdAt", "created_at"),
    ("processedAt", "processed_at"),
    ("claimedAt", "claimed_at"),
    ("claimToken", "claim_token"),
    ("leaseExpiresAt", "lease_expires_at"),
    ("correlationId", "correlation_id"),
    ("consumption", "consumption"),
    ("scheduledAt", "scheduled_at"),
    ("attempt", "attempt"),
    ("lastError", "last_error"),
    ("headers", "headers"),
    ("sequence", "sequence"),
    ("traceparent", "traceparent"),
    ("tracestate", "tracestate"),
    ("claimOwner", "claim_owner"),
    ("priority", "priority"),
    ("maxAttempts", "max_attempts"),
];

/// The longest identifier accepted: PostgreSQL's limit (SQL Server allows 128).
const MAX_IDENTIFIER: usize = 63;

/// Which of the two tables.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Table {
    Outbox,
    Inbox,
}

impl Table {
    fn default_name(self) -> &'static str {
        match self {
            Table::Outbox => "outbox",
            Table::Inbox => "inbox",
        }
    }
    /// The configuration key of the table's name (`database.inboxTableName`).
    pub fn config_key(self) -> &'static str {
        match self {
            Table::Outbox => "database.outboxTableName",
            Table::Inbox => "database.inboxTableName",
        }
    }
    fn columns(self) -> &'static [(&'static str, &'static str)] {
        match self {
            Table::Outbox => OUTBOX_COLUMNS,
            Table::Inbox => INBOX_COLUMNS,
        }
    }
}

/// The names of one table.
#[derive(Clone, Debug, PartialEq, Eq)]
struct TableNames {
    schema: Option<String>,
    name: String,
    /// Default column name → the column's name (only renamed ones).
    renamed: BTreeMap<&'static str, String>,
}

/// The table and column names a store uses. [`Names::default`] is QueueBox's own schema.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Names {
    outbox: TableNames,
    inbox: TableNames,
}

impl Default for Names {
    fn default() -> Self {
        let table = |t: Table| TableNames {
            schema: None,
            name: t.default_name().to_string(),
            renamed: BTreeMap::new(),
        };
        Names {
            outbox: table(Table::Outbox),
            inbox: table(Table::Inbox),
        }
    }
}

impl Names {
    /// Names from the configuration's values: a table name may be `schema.table`; each map
    /// goes from a mapping key (`aggregateType`) to a column name. A bad identifier or an
    /// unknown key is an [`Error::Config`] naming the key.
    pub fn new(
        outbox_table: Option<&str>,
        inbox_table: Option<&str>,
        outbox_columns: &BTreeMap<String, String>,
        inbox_columns: &BTreeMap<String, String>,
    ) -> Result<Names> {
        Ok(Names {
            outbox: TableNames::new(Table::Outbox, outbox_table, outbox_columns)?,
            inbox: TableNames::new(Table::Inbox, inbox_table, inbox_columns)?,
        })
    }

    /// Names from a JSON object with the configuration's keys (`outboxTableName`,
    /// `inboxTableName`, `columnMapping: {outbox: {key: column}, inbox: …}`; other keys are
    /// ignored): the bindings' worker options and the test fixtures. Absent keys keep the
    /// defaults.
    pub fn from_json(obj: &serde_json::Map<String, serde_json::Value>) -> Result<Names> {
        use serde_json::Value;
        let bad = |path: String, reason: &str| Error::Config {
            path: format!("database.{path}"),
            reason: reason.into(),
        };
        let text = |key: &str| match obj.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.as_str())),
            Some(_) => Err(bad(key.into(), "must be a string")),
        };
        let mut columns: [BTreeMap<String, String>; 2] = Default::default();
        if let Some(mapping) = obj.get("columnMapping") {
            let mapping = mapping
                .as_object()
                .ok_or_else(|| bad("columnMapping".into(), "must be an object"))?;
            for (table, cols) in mapping {
                let path = format!("columnMapping.{table}");
                let slot = match table.as_str() {
                    "outbox" => 0,
                    "inbox" => 1,
                    _ => return Err(bad(path, "is not outbox or inbox")),
                };
                let cols = cols
                    .as_object()
                    .ok_or_else(|| bad(path.clone(), "must be an object"))?;
                for (key, column) in cols {
                    let column = column
                        .as_str()
                        .ok_or_else(|| bad(format!("{path}.{key}"), "must be a string"))?;
                    columns[slot].insert(key.clone(), column.to_string());
                }
            }
        }
        Names::new(
            text("outboxTableName")?,
            text("inboxTableName")?,
            &columns[0],
            &columns[1],
        )
    }

    /// The JSON [`Names::from_json`] reads, holding only what differs from QueueBox's own
    /// names (empty for [`Names::default`]): how the bindings echo a worker's options.
    pub fn to_json(&self) -> serde_json::Map<String, serde_json::Value> {
        use serde_json::{Map, Value};
        let mut obj = Map::new();
        let mut mapping = Map::new();
        for (t, key) in [
            (Table::Outbox, "outboxTableName"),
            (Table::Inbox, "inboxTableName"),
        ] {
            let names = self.of(t);
            if names.schema.is_some() || names.name != t.default_name() {
                obj.insert(key.into(), Value::from(self.table_display(t)));
            }
            let renamed: Map<String, Value> = t
                .columns()
                .iter()
                .filter_map(|(k, default)| {
                    let column = names.renamed.get(default)?;
                    Some((k.to_string(), Value::from(column.clone())))
                })
                .collect();
            if !renamed.is_empty() {
                mapping.insert(t.default_name().into(), Value::Object(renamed));
            }
        }
        if !mapping.is_empty() {
            obj.insert("columnMapping".into(), Value::Object(mapping));
        }
        obj
    }

    /// True when nothing is renamed: QueueBox's own, migrated schema.
    pub fn is_default(&self) -> bool {
        *self == Names::default()
    }

    /// The configuration keys that rename something, e.g. `database.inboxTableName`,
    /// `database.columnMapping.outbox.key` (for the refusal of `migrate: true`).
    pub fn renamed_keys(&self) -> Vec<String> {
        let mut keys = Vec::new();
        for (t, names) in [(Table::Outbox, &self.outbox), (Table::Inbox, &self.inbox)] {
            if names.schema.is_some() || names.name != t.default_name() {
                keys.push(t.config_key().to_string());
            }
            for (key, column) in t.columns() {
                if names.renamed.contains_key(column) {
                    keys.push(format!("{}.{key}", mapping_prefix(t)));
                }
            }
        }
        keys
    }

    /// The table as the statements name it: `inbox`, or quoted (`"app"."order"`).
    pub fn table(&self, backend: Backend, t: Table) -> String {
        let names = self.of(t);
        if names.schema.is_none() && names.name == t.default_name() {
            return names.name.clone();
        }
        let mut out = String::new();
        if let Some(s) = &names.schema {
            out.push_str(&quote(backend, s));
            out.push('.');
        }
        out.push_str(&quote(backend, &names.name));
        out
    }

    /// The table as the configuration spelled it (`app.order`), for messages.
    pub fn table_display(&self, t: Table) -> String {
        let names = self.of(t);
        match &names.schema {
            Some(s) => format!("{s}.{}", names.name),
            None => names.name.clone(),
        }
    }

    /// `(schema, table)` for a catalogue look-up; no schema: the search path's.
    pub fn table_parts(&self, t: Table) -> (Option<&str>, &str) {
        let names = self.of(t);
        (names.schema.as_deref(), &names.name)
    }

    /// The column the default name `default` (`aggregate_type`) has here, unquoted.
    pub fn column_name(&self, t: Table, default: &str) -> String {
        self.of(t)
            .renamed
            .get(default)
            .cloned()
            .unwrap_or_else(|| default.to_string())
    }

    /// Every column of table `t`: (mapping key, column name as configured).
    pub fn columns(&self, t: Table) -> Vec<(&'static str, String)> {
        t.columns()
            .iter()
            .map(|(key, default)| (*key, self.column_name(t, default)))
            .collect()
    }

    /// The configuration key of a column (`database.columnMapping.inbox.headers`).
    pub fn column_key(t: Table, key: &str) -> String {
        format!("{}.{key}", mapping_prefix(t))
    }

    fn of(&self, t: Table) -> &TableNames {
        match t {
            Table::Outbox => &self.outbox,
            Table::Inbox => &self.inbox,
        }
    }

    fn column(&self, backend: Backend, t: Table, default: &str) -> String {
        match self.of(t).renamed.get(default) {
            Some(c) => quote(backend, c),
            None => default.to_string(),
        }
    }

    /// Fills every slot of `template` (see the module comment). A slot naming no known
    /// table or column is a bug in a template and panics; the tests render every statement.
    pub fn render(&self, backend: Backend, template: &str) -> String {
        let mut out = String::with_capacity(template.len() + 64);
        let mut rest = template;
        while let Some(start) = rest.find('{') {
            out.push_str(&rest[..start]);
            let after = &rest[start + 1..];
            match after.find('}').map(|end| (&after[..end], end)) {
                Some((slot, end)) if is_slot(slot) => {
                    out.push_str(&self.slot(backend, slot));
                    rest = &after[end + 1..];
                }
                _ => {
                    out.push('{');
                    rest = after;
                }
            }
        }
        out.push_str(rest);
        out
    }

    fn slot(&self, backend: Backend, slot: &str) -> String {
        let (projected, slot) = match slot.strip_prefix('=') {
            Some(s) => (true, s),
            None => (false, slot),
        };
        let (table, column) = match slot.split_once('.') {
            Some((t, c)) => (t, Some(c)),
            None => (slot, None),
        };
        let t = match table {
            "inbox" => Table::Inbox,
            "outbox" => Table::Outbox,
            other => panic!("statement template names an unknown table slot `{other}`"),
        };
        match column {
            None => self.table(backend, t),
            Some("dedup") => self.dedup(backend),
            Some(c) => {
                assert!(
                    t.columns().iter().any(|(_, d)| *d == c),
                    "statement template names an unknown column slot `{table}.{c}`"
                );
                let rendered = self.column(backend, t, c);
                if projected && rendered != c {
                    format!("{rendered} AS {c}")
                } else {
                    rendered
                }
            }
        }
    }

    /// The inbox insert's conflict target: QueueBox's own constraint, or, on a custom schema,
    /// the two columns (which need a unique constraint or index, see proto-docs).
    fn dedup(&self, backend: Backend) -> String {
        let source = self.column(backend, Table::Inbox, "source");
        let key = self.column(backend, Table::Inbox, "idempotency_key");
        if self.inbox == Names::default().inbox {
            "ON CONSTRAINT uq_inbox_source_idempotency".to_string()
        } else {
            format!("({source}, {key})")
        }
    }
}

impl TableNames {
    fn new(t: Table, table: Option<&str>, columns: &BTreeMap<String, String>) -> Result<Self> {
        let (schema, name) = match table.map(str::trim) {
            None | Some("") => (None, t.default_name().to_string()),
            Some(v) => {
                let (schema, name) = match v.split_once('.') {
                    Some((s, n)) => (Some(s), n),
                    None => (None, v),
                };
                if let Some(s) = schema {
                    identifier(t.config_key(), s)?;
                }
                identifier(t.config_key(), name)?;
                (schema.map(str::to_string), name.to_string())
            }
        };
        let mut renamed = BTreeMap::new();
        for (key, column) in columns {
            let path = format!("{}.{key}", mapping_prefix(t));
            let Some((_, default)) = t.columns().iter().find(|(k, _)| k == key) else {
                let known: Vec<&str> = t.columns().iter().map(|(k, _)| *k).collect();
                return Err(Error::Config {
                    path: path.clone(),
                    reason: format!(
                        "unknown column key `{key}`; known keys: {}",
                        known.join(", ")
                    ),
                });
            };
            identifier(&path, column)?;
            if column != default {
                renamed.insert(*default, column.clone());
            }
        }
        let mut seen = BTreeMap::new();
        for (key, default) in t.columns() {
            let column = renamed.get(default).map(String::as_str).unwrap_or(default);
            if let Some(other) = seen.insert(column, *key) {
                let path = format!("{}.{key}", mapping_prefix(t));
                return Err(Error::Config {
                    path: path.clone(),
                    reason: format!(
                        "column `{column}` is already used for `{other}`; each key needs its own column"
                    ),
                });
            }
        }
        Ok(TableNames {
            schema,
            name,
            renamed,
        })
    }
}

fn mapping_prefix(t: Table) -> &'static str {
    match t {
        Table::Outbox => "database.columnMapping.outbox",
        Table::Inbox => "database.columnMapping.inbox",
    }
}

/// A slot is `table`, `table.column` or `=table.column`, lower case and `_` only; anything
/// else between braces (a JSON literal `'{}'`) is SQL text.
fn is_slot(s: &str) -> bool {
    let s = s.strip_prefix('=').unwrap_or(s);
    (s.starts_with("inbox") || s.starts_with("outbox"))
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c == '_' || c == '.')
}

/// An identifier a user may name: a letter or `_` first, then letters, digits and `_`, at
/// most 63 characters. Reserved words are fine: custom names are always quoted.
fn identifier(path: &str, v: &str) -> Result<()> {
    let mut chars = v.chars();
    let ok = v.len() <= MAX_IDENTIFIER
        && chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if ok {
        Ok(())
    } else {
        Err(Error::Config {
            path: path.to_string(),
            reason: format!(
                "`{v}` is not a valid identifier (a letter or _ first, then letters, digits or _, at most {MAX_IDENTIFIER} characters)"
            ),
        })
    }
}

/// `"x"` on PostgreSQL, `[x]` on SQL Server ([`identifier`] admits no quote characters).
fn quote(backend: Backend, v: &str) -> String {
    match backend {
        Backend::Postgres => format!("\"{v}\""),
        Backend::SqlServer => format!("[{v}]"),
    }
}

/// A backend's statements rendered for one [`Names`], built once per store: every template
/// of the backend's `statements()` list, looked up by its template text.
#[derive(Clone, Debug)]
pub struct Rendered {
    by_template: HashMap<&'static str, String>,
}

impl Rendered {
    pub fn new(
        names: &Names,
        backend: Backend,
        templates: &[(&'static str, &'static str)],
    ) -> Self {
        Rendered {
            by_template: templates
                .iter()
                .map(|(_, t)| (*t, names.render(backend, t)))
                .collect(),
        }
    }

    /// The rendered form of `template`, one of the constants listed in `statements()`.
    pub fn get(&self, template: &'static str) -> &str {
        self.by_template
            .get(template)
            .map(String::as_str)
            .expect("every statement template is listed in its backend's statements()")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_through_json_and_the_default_is_empty() {
        assert!(Names::default().to_json().is_empty());
        let json = serde_json::json!({
            "outboxTableName": "shop.order", "inboxTableName": "user",
            "columnMapping": {"outbox": {"topic": "group"}, "inbox": {"idempotencyKey": "key", "sequence": "order"}}
        });
        let names = Names::from_json(json.as_object().unwrap()).unwrap();
        assert_eq!(serde_json::Value::Object(names.to_json()), json);
        assert_eq!(Names::from_json(&names.to_json()).unwrap(), names);
    }

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn custom_names_are_quoted_and_projected_back_to_their_default() {
        let n = Names::new(
            Some("app.order"),
            None,
            &map(&[("key", "user")]),
            &map(&[("source", "from")]),
        )
        .unwrap();
        let sql = n.render(
            Backend::Postgres,
            "SELECT o.{=outbox.key}, {outbox.topic} FROM {outbox} o WHERE o.{outbox.key} = '{}' AND {inbox.source} = 1",
        );
        assert_eq!(
            sql,
            r#"SELECT o."user" AS key, topic FROM "app"."order" o WHERE o."user" = '{}' AND "from" = 1"#
        );
        assert_eq!(
            n.render(Backend::SqlServer, "{outbox}.{outbox.key}"),
            "[app].[order].[user]"
        );
        assert_eq!(
            n.renamed_keys(),
            vec![
                "database.outboxTableName",
                "database.columnMapping.outbox.key",
                "database.columnMapping.inbox.source"
            ]
        );
    }

    #[test]
    fn default_names_render_bare() {
        let n = Names::default();
        assert!(n.is_default());
        assert_eq!(
            n.render(Backend::Postgres, "INSERT INTO {inbox} ({inbox.source}) ON CONFLICT {inbox.dedup} RETURNING {=inbox.id}"),
            "INSERT INTO inbox (source) ON CONFLICT ON CONSTRAINT uq_inbox_source_idempotency RETURNING id"
        );
        // Mapping a key to its default column renames nothing.
        let same = Names::new(
            Some("outbox"),
            Some(" "),
            &map(&[("key", "key")]),
            &map(&[]),
        )
        .unwrap();
        assert!(same.is_default());
    }

    #[test]
    fn bad_names_are_refused_naming_the_key() {
        let err = |r: Result<Names>| match r {
            Err(Error::Config { path, reason }) => (path, reason),
            other => panic!("expected a config error, got {other:?}"),
        };
        let (path, reason) = err(Names::new(None, None, &map(&[("topik", "t")]), &map(&[])));
        assert_eq!(path, "database.columnMapping.outbox.topik");
        assert!(reason.contains("unknown column key `topik`"), "{reason}");
        let (path, _) = err(Names::new(None, Some("a.b.c"), &map(&[]), &map(&[])));
        assert_eq!(path, "database.inboxTableName");
        let (path, reason) = err(Names::new(
            None,
            None,
            &map(&[]),
            &map(&[("source", "x\"; DROP")]),
        ));
        assert_eq!(path, "database.columnMapping.inbox.source");
        assert!(reason.contains("not a valid identifier"), "{reason}");
        let (path, reason) = err(Names::new(
            None,
            None,
            &map(&[]),
            &map(&[("source", "state")]),
        ));
        assert_eq!(path, "database.columnMapping.inbox.state");
        assert!(reason.contains("already used for `source`"), "{reason}");
        let long = "a".repeat(64);
        assert!(Names::new(Some(&long), None, &map(&[]), &map(&[])).is_err());
    }
}
