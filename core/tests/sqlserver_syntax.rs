//! T-SQL syntax checks for the SQL Server backend, which cannot run against a server here:
//! every statement the backend sends (`store::sqlserver::sql::statements()`) and every file of
//! `core/migrations/sqlserver/` is split into statements and parsed with sqlparser's MsSqlDialect;
//! the migrations are compared with the PostgreSQL ones (same tables, columns, index names,
//! index columns and filters); and the rules sqlparser cannot see (UTC clock, no PostgreSQL
//! syntax, the claim's locking protocol) are checked on the text.
#![cfg(feature = "sqlserver")]

use std::collections::{BTreeMap, BTreeSet};

use queuebox_core::migrate::{Migration, POSTGRES, SQLSERVER};
use queuebox_core::store::sqlserver::sql;
use sqlparser::ast::Statement;
use sqlparser::dialect::{MsSqlDialect, PostgreSqlDialect};
use sqlparser::parser::Parser;

/// Splits a T-SQL batch into top-level statements at `;`, outside strings, comments and
/// `BEGIN … END` / `CASE … END` blocks (an `IF … BEGIN …; …; END` is one statement).
fn split_batch(batch: &str) -> Vec<String> {
    let chars: Vec<char> = batch.chars().collect();
    let (mut out, mut cur, mut depth, mut i) = (Vec::new(), String::new(), 0i32, 0usize);
    let word_at = |i: usize| -> String {
        chars[i..]
            .iter()
            .take_while(|c| c.is_ascii_alphanumeric() || **c == '_')
            .collect()
    };
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '-' && next == Some('-') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
            cur.push('\n');
            continue;
        }
        if c == '/' && next == Some('*') {
            let end = batch[batch.char_indices().nth(i).unwrap().0..]
                .find("*/")
                .expect("unterminated comment");
            i += batch[batch.char_indices().nth(i).unwrap().0..][..end + 2]
                .chars()
                .count();
            cur.push(' ');
            continue;
        }
        if c == '\'' {
            cur.push(c);
            i += 1;
            while i < chars.len() {
                cur.push(chars[i]);
                if chars[i] == '\'' {
                    if chars.get(i + 1) == Some(&'\'') {
                        cur.push('\'');
                        i += 2;
                        continue;
                    }
                    break;
                }
                i += 1;
            }
            i += 1;
            continue;
        }
        let starts_word = (c.is_ascii_alphabetic() || c == '_')
            && (i == 0
                || !(chars[i - 1].is_ascii_alphanumeric()
                    || chars[i - 1] == '_'
                    || chars[i - 1] == '@'));
        if starts_word {
            let w = word_at(i);
            let upper = w.to_ascii_uppercase();
            let following = chars[i + w.len()..].iter().collect::<String>();
            let following = following.trim_start().to_ascii_uppercase();
            match upper.as_str() {
                "BEGIN"
                    if !(following.starts_with("TRAN") || following.starts_with("DISTRIBUTED")) =>
                {
                    depth += 1
                }
                "CASE" => depth += 1,
                "END" => depth -= 1,
                _ => {}
            }
            cur.push_str(&w);
            i += w.len();
            continue;
        }
        if c == ';' && depth == 0 {
            if !cur.trim().is_empty() {
                out.push(cur.trim().to_string());
            }
            cur.clear();
            i += 1;
            continue;
        }
        cur.push(c);
        i += 1;
    }
    assert_eq!(depth, 0, "unbalanced BEGIN/CASE … END in:\n{batch}");
    if !cur.trim().is_empty() {
        out.push(cur.trim().to_string());
    }
    out
}

/// Valid T-SQL that sqlparser 0.64's MsSqlDialect does not parse, rewritten to an equivalent
/// form it does parse, so the rest of the statement is still checked. Every rewrite is listed
/// here with the construct it stands for; anything else must parse as written.
fn rewrite_known_gaps(stmt: &str) -> String {
    let mut s = stmt.to_string();
    // 1. `EXEC @qbLock = sp_getapplock @Resource = …`: capturing a procedure's return code is
    //    not supported by sqlparser's EXECUTE; without the capture the call (procedure name and
    //    named arguments) parses. The capture variable is checked by `claim_protocol_is_intact`.
    if let Some(rest) = s.strip_prefix("EXEC @qbLock = ") {
        s = format!("EXEC {rest}");
    }
    // 2. `DEFAULT (NEXT VALUE FOR <sequence>)`: sequence defaults are not in sqlparser's
    //    expression grammar; replaced by a constant. `sequence_defaults_name_a_created_sequence`
    //    checks each one names a sequence created earlier in the same file.
    while let Some(start) = s.find("(NEXT VALUE FOR ") {
        let end = start + s[start..].find(')').expect("closing parenthesis");
        s.replace_range(start..=end, "(0)");
    }
    // 3. `CREATE UNIQUE CLUSTERED INDEX`: the CLUSTERED keyword on CREATE INDEX is not parsed
    //    (NONCLUSTERED on a table constraint is); the index is otherwise a plain unique index.
    s = s.replace("CREATE UNIQUE CLUSTERED INDEX", "CREATE UNIQUE INDEX");
    // 4. `ALTER TABLE <t> WITH NOCHECK ADD CONSTRAINT`: the option that skips checking the
    //    existing rows (migration 14) is not parsed; the constraint that follows still is.
    if let Some(at) = s.find(" WITH NOCHECK ADD CONSTRAINT ") {
        if s.starts_with("ALTER TABLE ") {
            s.replace_range(at..at + " WITH NOCHECK".len(), "");
        }
    }
    s
}

fn parse_tsql(what: &str, batch: &str) -> Vec<Statement> {
    let mut parsed = Vec::new();
    for stmt in split_batch(batch) {
        let text = rewrite_known_gaps(&stmt);
        match Parser::parse_sql(&MsSqlDialect {}, &text) {
            Ok(mut v) => {
                assert_eq!(
                    v.len(),
                    1,
                    "{what}: one statement expected from:\n{text}\nparsed as {v:?}"
                );
                parsed.push(v.remove(0));
            }
            Err(e) => panic!("{what}: T-SQL does not parse: {e}\n{text}"),
        }
    }
    parsed
}

#[test]
fn every_backend_statement_parses_as_tsql() {
    let all = sql::statements();
    assert!(
        all.len() >= 15,
        "statements() lists the backend's statements"
    );
    for (name, text) in &all {
        assert!(!parse_tsql(name, text).is_empty(), "{name} is empty");
    }
    // The claim is one batch of several statements, the protocol of reference 3.3 step by step.
    let claim = parse_tsql("CLAIM", sql::CLAIM);
    let kinds: Vec<String> = claim
        .iter()
        .map(|s| {
            s.to_string()
                .split_whitespace()
                .take(2)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    assert!(kinds.iter().any(|k| k.starts_with("BEGIN")), "{kinds:?}");
    assert!(
        kinds.iter().any(|k| k == "EXECUTE sp_getapplock"),
        "{kinds:?}"
    );
    assert!(kinds.iter().any(|k| k.starts_with("IF")), "{kinds:?}");
    assert!(
        kinds.iter().any(|k| k.starts_with("WITH cand")),
        "{kinds:?}"
    );
    assert_eq!(kinds.last().map(String::as_str), Some("COMMIT"));
}

#[test]
fn every_migration_parses_as_tsql() {
    for m in SQLSERVER {
        let stmts = parse_tsql(m.name, m.sql);
        if m.version == 3 || m.version == 8 || m.version == 9 || m.version == 16 {
            // 0003 (NOTIFY trigger), 0008 (time-ordered ids), 0009 (narrower outbox indexes)
            // and 0016 (PostgreSQL's faster enqueue function) change nothing on SQL Server.
            assert!(stmts.is_empty(), "{} is comment-only on SQL Server", m.name);
        } else if m.version == 4 {
            // CREATE PROCEDURE must be alone in its batch (the runner sends a file as one).
            assert!(
                stmts.len() == 1 && matches!(stmts[0], Statement::CreateProcedure { .. }),
                "0004 is exactly one CREATE PROCEDURE: {stmts:?}"
            );
        } else if m.version == 5 {
            // Two nullable columns on inbox, one ALTER each (the parser reads one column per ADD).
            assert!(
                stmts.len() == 2
                    && stmts
                        .iter()
                        .all(|s| s.to_string().starts_with("ALTER TABLE inbox ADD")),
                "0005 adds the two trace columns to inbox: {stmts:?}"
            );
        } else if m.version == 6 {
            assert!(
                stmts.len() == 1 && stmts[0].to_string().starts_with("ALTER TABLE inbox ADD"),
                "0006 adds the claim owner column to inbox: {stmts:?}"
            );
        } else if m.version == 7 {
            assert!(
                stmts.len() == 1 && stmts[0].to_string().starts_with("ALTER TABLE outbox ADD"),
                "0007 adds the claim owner column to outbox: {stmts:?}"
            );
        } else if m.version == 10 {
            assert!(
                stmts.len() == 2
                    && stmts
                        .iter()
                        .all(|s| s.to_string().starts_with("ALTER TABLE inbox ADD")),
                "0010 adds priority and max_attempts to inbox: {stmts:?}"
            );
        } else if m.version == 11 || m.version == 12 {
            assert!(
                stmts.len() == 1 && matches!(stmts[0], Statement::CreateProcedure { .. }),
                "{} is exactly one CREATE PROCEDURE: {stmts:?}",
                m.name
            );
        } else if m.version == 13 {
            assert!(
                stmts.len() == 2
                    && stmts[0]
                        .to_string()
                        .starts_with("CREATE INDEX idx_inbox_pull_pending_priority")
                    && stmts[1].to_string().starts_with("DROP INDEX"),
                "0013 replaces the pull pending index: {stmts:?}"
            );
        } else if m.version == 14 {
            // Each table's state constraint replaced (dropped, added again with 'cancelled')
            // and its retention index replaced.
            let text: Vec<String> = stmts.iter().map(|s| s.to_string()).collect();
            assert!(
                text.len() == 8
                    && text.iter().filter(|s| s.contains("'cancelled'")).count() == 4
                    && text.iter().filter(|s| s.starts_with("DROP INDEX")).count() == 2,
                "0014 replaces the state constraints and the retention indexes: {text:?}"
            );
        } else if m.version == 15 {
            assert!(
                stmts.len() == 1
                    && stmts[0]
                        .to_string()
                        .starts_with("CREATE TABLE queuebox_paused"),
                "0015 creates the paused table: {stmts:?}"
            );
        } else {
            assert!(
                stmts.len() >= 5,
                "{} has {} statements",
                m.name,
                stmts.len()
            );
        }
    }
}

#[test]
fn the_check_rejects_broken_tsql() {
    // The parser is the check: these must fail, or the tests above prove nothing.
    for bad in [
        "UPDATE inbox SET WHERE id = @P1",
        "SELECT TOP (@qbBatch id FROM inbox",
        "SELECT 1 FROM inbox WITH (UPDLOCK READPAST)",
        "CREATE INDEX ON inbox (source",
        "IF @qbLock < 0 BEGIN ROLLBACK TRANSACTION; THROW 51000, 'x', 1;",
    ] {
        let failed = std::panic::catch_unwind(|| parse_tsql("negative control", bad)).is_err();
        assert!(failed, "accepted broken T-SQL: {bad}");
    }
    assert_eq!(split_batch("IF 1 = 1 BEGIN SELECT 1; SELECT 'a;b'; END; SELECT CASE WHEN 1 = 1 THEN 2 END; -- c;\nSELECT 3"), vec![
        "IF 1 = 1 BEGIN SELECT 1; SELECT 'a;b'; END",
        "SELECT CASE WHEN 1 = 1 THEN 2 END",
        "SELECT 3",
    ]);
}

/// Every T-SQL text the backend ships: (name, text).
fn all_tsql() -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = sql::statements()
        .into_iter()
        .map(|(n, s)| (n.to_string(), s))
        .collect();
    v.extend(
        SQLSERVER
            .iter()
            .map(|m| (m.name.to_string(), m.sql.to_string())),
    );
    v
}

fn code_only(text: &str) -> String {
    text.lines()
        .map(|l| l.split("--").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
        .to_ascii_uppercase()
}

#[test]
fn tsql_uses_the_utc_clock_and_no_postgresql_syntax() {
    const FORBIDDEN: [&str; 16] = [
        "GETDATE(",
        "GETUTCDATE(",
        "SYSDATETIME(",
        "SYSDATETIMEOFFSET(",
        "CURRENT_TIMESTAMP",
        "CLOCK_TIMESTAMP",
        "MAKE_INTERVAL",
        "GEN_RANDOM_UUID",
        "ON CONFLICT",
        "RETURNING",
        "SKIP LOCKED",
        "FOR UPDATE",
        "::",
        "$1",
        "JSONB",
        "TIMESTAMPTZ",
    ];
    for (name, text) in all_tsql() {
        let code = code_only(&text);
        for f in FORBIDDEN {
            assert!(!code.contains(f), "{name} contains `{f}`");
        }
        assert!(
            !code.contains(" LIMIT "),
            "{name}: LIMIT is not T-SQL (TOP)"
        );
        assert!(
            !code.lines().any(|l| l.trim() == "GO"),
            "{name}: GO is a client batch separator, not T-SQL"
        );
        // Every DATETIME column is DATETIME2 (UTC by convention), never DATETIME or a zoned type.
        for (i, _) in code.match_indices("DATETIME") {
            let after = &code[i + "DATETIME".len()..];
            assert!(
                after.starts_with('2') || code[..i].ends_with("SYSUTC"),
                "{name}: a DATETIME that is not DATETIME2"
            );
        }
        // Parameters are @P1…@Pn without gaps.
        let mut used = BTreeSet::new();
        for (i, _) in code.match_indices("@P") {
            let digits: String = code[i + 2..]
                .chars()
                .take_while(|c| c.is_ascii_digit())
                .collect();
            if let Ok(n) = digits.parse::<u32>() {
                used.insert(n);
            }
        }
        if let Some(max) = used.iter().max() {
            assert_eq!(
                used,
                (1..=*max).collect(),
                "{name}: parameters @P1..@P{max} without gaps"
            );
        }
    }
}

#[test]
fn claim_protocol_is_intact() {
    let c = sql::CLAIM;
    for required in [
        "DECLARE @qbBatch INT = @P2;",
        "DECLARE @qbLeaseMs BIGINT = @P3;",
        "DECLARE @qbCandLimit INT = @P4;",
        "SET TRANSACTION ISOLATION LEVEL READ COMMITTED;",
        "BEGIN TRANSACTION;",
        "EXEC @qbLock = sp_getapplock @Resource = @qbSource, @LockMode = 'Exclusive', @LockOwner = 'Transaction', @LockTimeout = 10000;",
        "IF @qbLock < 0",
        "THROW 51000, 'inbox pull claim: sp_getapplock did not acquire the per-source claim lock', 1;",
        "FROM inbox AS i WITH (UPDLOCK, READPAST, ROWLOCK)",
        "OUTPUT inserted.*",
        "claim_token = NEWID()",
        // An earlier row in retry backoff (pending, not due) does not block its aggregate.
        "AND (b.state = 'processing' OR b.scheduled_at <= SYSUTCDATETIME())",
        "COMMIT TRANSACTION;",
    ] {
        assert!(c.contains(required), "the claim lacks `{required}`");
    }
    // READPAST alone fails on a READ_COMMITTED_SNAPSHOT database: every use carries a
    // locking hint beside it.
    for (name, text) in all_tsql() {
        for (i, _) in text.match_indices("READPAST") {
            let open = text[..i]
                .rfind("WITH (")
                .expect("READPAST inside WITH (...)");
            let hints = &text[open..i + text[i..].find(')').unwrap()];
            assert!(
                hints.contains("UPDLOCK") || hints.contains("READCOMMITTEDLOCK"),
                "{name}: `{hints})` needs a locking hint"
            );
        }
    }
    // The lock comes before any read of inbox, the commit after the update.
    let lock = c.find("sp_getapplock").unwrap();
    assert!(c.find("FROM inbox").unwrap() > lock);
    assert!(c.rfind("COMMIT TRANSACTION").unwrap() > c.find("UPDATE i").unwrap());
    // The rollback precedes the THROW inside the IF block.
    assert!(c.find("ROLLBACK TRANSACTION").unwrap() < c.find("THROW 51000").unwrap());
    // Bound parameters are read once into the @qb variables and never used again after.
    let body = &c[c.find("BEGIN TRANSACTION").unwrap()..];
    assert!(
        !body.contains("@P"),
        "the claim body uses only @qb variables"
    );
    // Every fenced write carries the same fence as PostgreSQL.
    let fence = "id = @P1 AND consumption = 'pull' AND state = 'processing' AND claim_token = @P2 AND lease_expires_at > SYSUTCDATETIME()";
    for (name, s) in [
        ("COMPLETE", sql::COMPLETE),
        ("RETRY", sql::RETRY),
        ("DEAD", sql::DEAD),
        ("RELEASE", sql::RELEASE),
    ] {
        assert!(s.ends_with(fence), "{name} ends with the fence");
    }
}

#[test]
fn sequence_defaults_name_a_created_sequence() {
    for m in SQLSERVER {
        for (i, _) in m.sql.match_indices("NEXT VALUE FOR ") {
            let seq: String = m.sql[i + 15..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            let created = m
                .sql
                .find(&format!("CREATE SEQUENCE {seq} "))
                .unwrap_or_else(|| panic!("{}: {seq} is not created", m.name));
            assert!(created < i, "{}: {seq} is created after its use", m.name);
        }
    }
}

/// Tables → column names, and index name → (table, columns, filter), from parsed statements.
#[derive(Default, Debug)]
struct Shape {
    tables: BTreeMap<String, Vec<String>>,
    constraints: BTreeSet<String>,
    indexes: BTreeMap<String, (String, Vec<String>, Option<String>)>,
}

fn shape(stmts: &[Statement]) -> Shape {
    let mut s = Shape::default();
    for st in stmts {
        match st {
            Statement::CreateTable(t) => {
                s.tables.insert(
                    t.name.to_string(),
                    t.columns.iter().map(|c| c.name.value.clone()).collect(),
                );
                for c in &t.constraints {
                    if let Some(name) = c
                        .to_string()
                        .strip_prefix("CONSTRAINT ")
                        .and_then(|r| r.split_whitespace().next())
                    {
                        s.constraints.insert(name.to_string());
                    }
                }
            }
            // A later migration's added columns join their table's column list, in order.
            Statement::AlterTable(at) => {
                for op in &at.operations {
                    if let sqlparser::ast::AlterTableOperation::AddColumn { column_def, .. } = op {
                        s.tables
                            .entry(at.name.to_string())
                            .or_default()
                            .push(column_def.name.value.clone());
                    }
                }
            }
            Statement::CreateIndex(ix) => {
                let name = ix.name.as_ref().expect("indexes are named").to_string();
                let cols = ix
                    .columns
                    .iter()
                    .map(|c| {
                        let c = c.to_string();
                        let c = c.trim_matches(['[', ']', '"']);
                        // SQL Server keys an index on columns, not expressions: PostgreSQL's
                        // ascending `(-priority)` (migration 13) is its `priority DESC`.
                        match c.strip_prefix("(-").and_then(|c| c.strip_suffix(')')) {
                            Some(col) => format!("{col} DESC"),
                            None => c.to_string(),
                        }
                    })
                    .collect();
                let filter = ix
                    .predicate
                    .as_ref()
                    .map(|p| p.to_string().replace(['[', ']'], ""));
                s.indexes
                    .insert(name, (ix.table_name.to_string(), cols, filter));
            }
            // An index built under a temporary name and renamed (an online migration's
            // replacement of an index, 9).
            Statement::AlterIndex {
                name,
                operation: sqlparser::ast::AlterIndexOperation::RenameIndex { index_name },
            } => {
                if let Some(def) = s.indexes.remove(&name.to_string()) {
                    s.indexes.insert(index_name.to_string(), def);
                }
            }
            // A later migration's dropped index (13 replaces the pull pending index).
            Statement::Drop {
                object_type: sqlparser::ast::ObjectType::Index,
                names,
                ..
            } => {
                for n in names {
                    s.indexes.remove(&n.to_string());
                }
            }
            _ => {}
        }
    }
    s
}

fn postgres_statements(m: &Migration) -> Vec<Statement> {
    // sqlparser's PostgreSQL dialect does not parse `ALTER SEQUENCE … OWNED BY`, which has no
    // SQL Server counterpart (the sequence is a separate object there); leave it out.
    let text: Vec<&str> = m
        .sql
        .split(';')
        .filter(|s| !code_only(s).trim().starts_with("ALTER SEQUENCE"))
        .collect();
    // Nor an online migration's `DROP INDEX CONCURRENTLY` and `ALTER INDEX IF EXISTS`; the
    // shape is the same without the two words.
    let text = text
        .join(";")
        .replace("DROP INDEX CONCURRENTLY", "DROP INDEX")
        .replace("ALTER INDEX IF EXISTS", "ALTER INDEX");
    Parser::parse_sql(&PostgreSqlDialect {}, &text).unwrap_or_else(|e| panic!("{}: {e}", m.name))
}

#[test]
fn sqlserver_migrations_have_the_postgres_final_shape() {
    let pg_versions: Vec<(i32, &str)> = POSTGRES.iter().map(|m| (m.version, m.name)).collect();
    let ms_versions: Vec<(i32, &str)> = SQLSERVER.iter().map(|m| (m.version, m.name)).collect();
    assert_eq!(
        pg_versions, ms_versions,
        "same versions and names on both engines"
    );
    // Version 3 is the PostgreSQL NOTIFY trigger; it adds no table, column or index. Version 9
    // narrows outbox indexes for PostgreSQL's non-HOT updates (a claim adds an entry to every
    // index its new row version matches); SQL Server updates in place and keeps version 8's
    // indexes, so it is compared with PostgreSQL before 9, and 9 may change those three only.
    // Versions 10 on (priority, enqueue) are on both engines again.
    let pg_statements = |upto: i32| -> Vec<Statement> {
        POSTGRES
            .iter()
            .filter(|m| m.version != 3 && (m.version <= upto || m.version >= 10))
            .flat_map(postgres_statements)
            .collect()
    };
    let ms: Vec<Statement> = SQLSERVER
        .iter()
        .flat_map(|m| parse_tsql(m.name, m.sql))
        .collect();
    let (pg, pg_final, ms) = (
        shape(&pg_statements(8)),
        shape(&pg_statements(i32::MAX)),
        shape(&ms),
    );
    assert_eq!(pg.tables, pg_final.tables, "version 9 changes no table");
    let narrowed = [
        "idx_outbox_key_sequence",
        "idx_outbox_unkeyed_pending",
        "idx_outbox_topic",
    ];
    for name in pg.indexes.keys().chain(pg_final.indexes.keys()) {
        if !narrowed.contains(&name.as_str()) {
            assert_eq!(
                pg.indexes.get(name),
                pg_final.indexes.get(name),
                "index {name}: only {narrowed:?} differ on PostgreSQL from version 9"
            );
        }
    }
    assert!(pg_final.indexes.contains_key("idx_outbox_unkeyed_pending"));
    assert_ne!(
        pg.indexes.get("idx_outbox_topic"),
        pg_final.indexes.get("idx_outbox_topic")
    );
    assert_eq!(
        pg.tables, ms.tables,
        "the same tables with the same columns in the same order"
    );
    for (name, def) in &pg.indexes {
        assert_eq!(
            ms.indexes.get(name),
            Some(def),
            "index {name}: same table, columns and filter on SQL Server"
        );
    }
    let extra: Vec<&String> = ms
        .indexes
        .keys()
        .filter(|k| !pg.indexes.contains_key(*k))
        .collect();
    assert!(
        extra.iter().all(|k| k.starts_with("cx_")),
        "SQL Server adds only the clustered indexes: {extra:?}"
    );
    assert!(
        ms.constraints.contains("uq_inbox_source_idempotency"),
        "{:?}",
        ms.constraints
    );
    let inbox = SQLSERVER.iter().find(|m| m.version == 2).unwrap().sql;
    assert!(inbox.contains(
        "headers          NVARCHAR(MAX)    NOT NULL CONSTRAINT df_inbox_headers DEFAULT '{}'"
    ));
    assert!(inbox.contains(
        "id               UNIQUEIDENTIFIER NOT NULL CONSTRAINT df_inbox_id DEFAULT NEWID()"
    ));
}

/// The two backends' statement modules line up by name: every statement the PostgreSQL relay
/// and pull paths issue has a SQL Server statement of the same name (checked above), so a
/// reader can compare `store/postgres/sql.rs` and `store/sqlserver/sql.rs` side by side.
#[test]
fn every_postgres_statement_has_a_sqlserver_statement_of_the_same_name() {
    let sqlserver: BTreeSet<String> = sql::statements()
        .into_iter()
        .map(|(n, _)| n.to_string())
        .collect();
    // PostgreSQL-only: its migration runner's two catalogue probes (SQL Server does both in
    // SCHEMA_CHECK), and the owner session of dead-worker recovery (SQL Server pull claims
    // leave claim_owner NULL and are recovered by their lease). The operator commands
    // (`queuebox dead`, `inspect`, the console) refuse on SQL Server, naming it (RelayStore's defaults).
    let pg_only = [
        "HAS_HISTORY",
        "HAS_TABLES",
        "OWNER_LOCK",
        "OWNER_PING",
        "EXPIRE_DEAD_OWNERS",
        // The relays' owner sessions likewise (SQL Server relays leave outbox.claim_owner NULL).
        "EXPIRE_DEAD_RELAY_OUTBOX",
        "EXPIRE_DEAD_RELAY_PUSH",
        "FIND_DEAD_OUTBOX",
        "FIND_DEAD_INBOX",
        "DELETE_DEAD_OUTBOX",
        "DELETE_DEAD_INBOX",
        "REQUEUE_DEAD_INBOX",
        "JOURNEY_INBOX",
        "JOURNEY_OUTBOX",
        "STATE_COUNTS",
        // The schema guards of custom names, which SQL Server refuses (store::names).
        "TABLE_COLUMNS",
        // The grouped writes: SQL Server runs a group's rows through its one-row statements
        // (the defaults of Store::insert_inbox_many and RelayStore::forward_push_many).
        "INSERT_MANY",
        "LOOKUP_IDS",
        "FORWARD_PUSH_MANY",
        "INSERT_OUTBOX_MANY",
        // The pull claim that starts past the head of the queue (store/postgres/claim_start.rs):
        // SQL Server claims every batch from the head.
        "CLAIM_FROM",
        // Online migrations: the probe for an index an interrupted CREATE INDEX CONCURRENTLY
        // left INVALID (core/src/migrate/mod.rs). SQL Server has no concurrent build to interrupt.
        "INDEX_INVALID",
        // Cancel, an operator command like `queuebox dead` (RelayStore::cancel refuses on SQL
        // Server, naming it).
        "CANCEL_INBOX",
        "CANCEL_OUTBOX",
        // Pause and resume (RelayStore::pause refuses on SQL Server, naming it; migration 15
        // creates the table there too).
        "PAUSE",
        "RESUME",
        "LIST_PAUSED",
        "SOURCE_SEEN",
    ];
    let missing: Vec<&str> = queuebox_core::store::postgres::sql::statements()
        .into_iter()
        .map(|(n, _)| n)
        .filter(|n| !pg_only.contains(n) && !sqlserver.contains(*n))
        .collect();
    assert!(
        missing.is_empty(),
        "PostgreSQL statements without a SQL Server counterpart: {missing:?}"
    );
}
