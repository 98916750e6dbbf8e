//! The migration catalog: the files embedded from `core/migrations/<backend>/`, how a file is
//! split into statements, and the baseline rules every backend's runner applies (the runners
//! and the rules for writing a file are described in [`crate::migrate`]).

use sha2::{Digest, Sha256};

use crate::error::{Error, Result};

/// One migration file.
#[derive(Debug, Clone, Copy)]
pub struct Migration {
    pub version: i32,
    pub name: &'static str,
    pub sql: &'static str,
}

/// The first line of a migration that runs outside a transaction, one statement at a time
/// (module documentation).
pub const NO_TRANSACTION: &str = "-- queuebox:no-transaction";

impl Migration {
    pub fn checksum(&self) -> String {
        hex::encode(Sha256::digest(self.sql.as_bytes()))
    }

    /// False when the file's first line is [`NO_TRANSACTION`].
    pub fn in_transaction(&self) -> bool {
        self.sql.lines().next().map(str::trim_end) != Some(NO_TRANSACTION)
    }

    /// Whether `recorded`, the checksum in the database's history, is this migration's: its
    /// own, or one `superseded` lists for its version (the text it had when released).
    pub fn accepts_checksum(&self, recorded: &str, superseded: &[Superseded]) -> bool {
        recorded == self.checksum()
            || superseded
                .iter()
                .any(|s| s.version == self.version && s.checksum == recorded)
    }
}

/// A released text of a migration that was changed afterwards: a database that applied it
/// keeps its history row and is not asked to apply the new text.
#[derive(Debug, Clone, Copy)]
pub struct Superseded {
    pub version: i32,
    /// The SHA-256 of the released file, as [`Migration::checksum`] gives it.
    pub checksum: &'static str,
    /// Why the text changed, and why the schema it made needs nothing more.
    pub why: &'static str,
}

/// The PostgreSQL migrations' superseded texts. Only a change that leaves the schema as the
/// released text made it (the same objects under the same names) may be listed here; any other
/// change is a new migration.
pub const POSTGRES_SUPERSEDED: &[Superseded] = &[Superseded {
    version: 9,
    checksum: "0840a77dd0ddf1728a7ddfc9bff677eabd0014181d13634463227f05a6f391dc",
    why: "9 as first released built its three indexes in one transaction, blocking outbox \
          writes meanwhile; it now builds them CONCURRENTLY outside a transaction. \
          Both texts end with the same indexes under the same names",
}];

/// Splits a migration into its statements for a run outside a transaction: on `;` outside
/// single-quoted strings, double-quoted names, dollar-quoted bodies and comments. Comments are
/// left out; statements with nothing but whitespace are dropped. Not understood: a backslash
/// escape of a quote in an `E'…'` string (no migration needs one; write `''`).
pub fn statements(sql: &str) -> Vec<String> {
    let b = sql.as_bytes();
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut i = 0;
    while i < b.len() {
        let rest = &sql[i..];
        if rest.starts_with("--") {
            i += rest.find('\n').unwrap_or(rest.len());
        } else if rest.starts_with("/*") {
            i += rest.find("*/").map_or(rest.len(), |e| e + 2);
        } else if b[i] == b'\'' || b[i] == b'"' {
            // A doubled quote inside is two quoted runs back to back: copied as they are.
            let end = rest[1..].find(b[i] as char).map_or(rest.len(), |e| e + 2);
            cur.push_str(&rest[..end]);
            i += end;
        } else if let Some(tag) = dollar_tag(rest) {
            let end = rest[tag.len()..]
                .find(tag)
                .map_or(rest.len(), |e| e + 2 * tag.len());
            cur.push_str(&rest[..end]);
            i += end;
        } else if b[i] == b';' {
            push_statement(&mut out, &mut cur);
            i += 1;
        } else {
            let c = rest.chars().next().expect("not at the end");
            cur.push(c);
            i += c.len_utf8();
        }
    }
    push_statement(&mut out, &mut cur);
    out
}

fn push_statement(out: &mut Vec<String>, cur: &mut String) {
    let s = cur.trim();
    if !s.is_empty() {
        out.push(s.to_string());
    }
    cur.clear();
}

/// `$$` or `$tag$` at the start of `s` (a dollar quote's opening), not `$1`.
fn dollar_tag(s: &str) -> Option<&str> {
    let rest = s.strip_prefix('$')?;
    let end = rest.find('$')?;
    let tag = &rest[..end];
    let ok = tag
        .chars()
        .enumerate()
        .all(|(i, c)| c == '_' || c.is_ascii_alphabetic() || (i > 0 && c.is_ascii_digit()));
    ok.then(|| &s[..end + 2])
}

/// The index a `CREATE [UNIQUE] INDEX CONCURRENTLY [IF NOT EXISTS] <name>` statement builds.
pub fn concurrent_index_name(statement: &str) -> Option<&str> {
    let mut words = statement.split_whitespace().peekable();
    let mut next_is = |w: &str| words.next_if(|x| x.eq_ignore_ascii_case(w)).is_some();
    if !next_is("CREATE") {
        return None;
    }
    next_is("UNIQUE");
    if !(next_is("INDEX") && next_is("CONCURRENTLY")) {
        return None;
    }
    if next_is("IF") && !(next_is("NOT") && next_is("EXISTS")) {
        return None;
    }
    words.next().filter(|w| !w.eq_ignore_ascii_case("ON"))
}

macro_rules! migration {
    ($dir:literal, $version:literal, $name:literal) => {
        Migration {
            version: $version,
            name: $name,
            sql: include_str!(concat!("../../migrations/", $dir, "/", $name, ".sql")),
        }
    };
}

/// The PostgreSQL migrations, in order.
pub const POSTGRES: &[Migration] = &[
    migration!("postgres", 1, "0001_create_outbox"),
    migration!("postgres", 2, "0002_create_inbox"),
    migration!("postgres", 3, "0003_inbox_pull_notify"),
    migration!("postgres", 4, "0004_outbox_publish"),
    migration!("postgres", 5, "0005_inbox_trace_context"),
    migration!("postgres", 6, "0006_inbox_claim_owner"),
    migration!("postgres", 7, "0007_outbox_claim_owner"),
    migration!("postgres", 8, "0008_time_ordered_ids"),
    migration!("postgres", 9, "0009_outbox_claim_indexes"),
    migration!("postgres", 10, "0010_inbox_priority"),
    migration!("postgres", 11, "0011_inbox_enqueue_many"),
    migration!("postgres", 12, "0012_inbox_enqueue"),
    migration!("postgres", 13, "0013_inbox_pull_priority_index"),
    migration!("postgres", 14, "0014_cancelled_state"),
    migration!("postgres", 15, "0015_paused"),
    migration!("postgres", 16, "0016_inbox_enqueue_many_set_based"),
];

/// The SQL Server migrations, in order: the same versions as [`POSTGRES`] (a version that does
/// not apply to SQL Server, like the NOTIFY trigger of 3, is a comment-only file).
pub const SQLSERVER: &[Migration] = &[
    migration!("sqlserver", 1, "0001_create_outbox"),
    migration!("sqlserver", 2, "0002_create_inbox"),
    migration!("sqlserver", 3, "0003_inbox_pull_notify"),
    migration!("sqlserver", 4, "0004_outbox_publish"),
    migration!("sqlserver", 5, "0005_inbox_trace_context"),
    migration!("sqlserver", 6, "0006_inbox_claim_owner"),
    migration!("sqlserver", 7, "0007_outbox_claim_owner"),
    migration!("sqlserver", 8, "0008_time_ordered_ids"),
    migration!("sqlserver", 9, "0009_outbox_claim_indexes"),
    migration!("sqlserver", 10, "0010_inbox_priority"),
    migration!("sqlserver", 11, "0011_inbox_enqueue_many"),
    migration!("sqlserver", 12, "0012_inbox_enqueue"),
    migration!("sqlserver", 13, "0013_inbox_pull_priority_index"),
    migration!("sqlserver", 14, "0014_cancelled_state"),
    migration!("sqlserver", 15, "0015_paused"),
    migration!("sqlserver", 16, "0016_inbox_enqueue_many_set_based"),
];

/// What a migration run did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MigrationReport {
    pub applied: Vec<String>,
    pub already_applied: Vec<String>,
}

/// Why `migrate` and the service refuse QueueBox tables that have no migration history
/// (created by hand or by another tool), and what to run (docs/migrations.md).
pub const NO_HISTORY: &str = "QueueBox tables exist without a migration history. Run \
     `queuebox migrate --baseline <version>` with the last version you applied by hand.";

/// The migrations a `--baseline <version>` records as applied without running them: `version`
/// and every one before it. A version this build does not have is refused (0 records nothing).
pub fn baseline_of(migrations: &[Migration], version: i32) -> Result<Vec<&Migration>> {
    let latest = latest_version(migrations);
    if version < 0 || version > latest {
        return Err(Error::Migration(format!(
            "--baseline {version} is not a migration version of this build (0 to {latest})"
        )));
    }
    Ok(migrations.iter().filter(|m| m.version <= version).collect())
}

/// The refusal of a baseline on a database that has a history already (nothing was changed).
pub fn baseline_refused(current: i32) -> Error {
    Error::Migration(format!(
        "the database already has a migration history (at version {current}); --baseline is only \
         for a database without one. Nothing was changed"
    ))
}

/// The latest version this build knows; readiness compares the database with it.
pub fn latest_version(migrations: &[Migration]) -> i32 {
    migrations.iter().map(|m| m.version).max().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn postgres(version: i32) -> &'static Migration {
        POSTGRES.iter().find(|m| m.version == version).unwrap()
    }

    /// A database that applied migration 9 as first released is not refused by this build, and
    /// the list names exactly that text: its SHA-256 is the one of the released file, kept as a
    /// fixture.
    #[test]
    fn the_released_text_of_9_is_accepted_for_9_only() {
        let released = include_str!("../../tests/fixtures/postgres_0009_as_shipped.sql");
        let released = hex::encode(Sha256::digest(released.as_bytes()));
        assert_eq!(POSTGRES_SUPERSEDED.len(), 1);
        assert_eq!(POSTGRES_SUPERSEDED[0].checksum, released);
        let nine = postgres(9);
        assert_ne!(nine.checksum(), released, "9 was fixed after its release");
        assert!(nine.accepts_checksum(&nine.checksum(), POSTGRES_SUPERSEDED));
        assert!(nine.accepts_checksum(&released, POSTGRES_SUPERSEDED));
        // Not without the list, not for another version, not another text.
        assert!(!nine.accepts_checksum(&released, &[]));
        assert!(!postgres(8).accepts_checksum(&released, POSTGRES_SUPERSEDED));
        let edited = hex::encode(Sha256::digest(format!("{}\n", nine.sql).as_bytes()));
        assert!(!nine.accepts_checksum(&edited, POSTGRES_SUPERSEDED));
        // Every listed version exists, and lists its checksum once.
        for s in POSTGRES_SUPERSEDED {
            assert!(
                POSTGRES.iter().any(|m| m.version == s.version),
                "{}",
                s.version
            );
            assert!(!s.why.is_empty());
        }
    }

    #[test]
    fn statements_split_on_semicolons_outside_quotes_and_comments() {
        let sql = "-- queuebox:no-transaction\n-- a comment; with a semicolon\n\
                   CREATE INDEX CONCURRENTLY IF NOT EXISTS a ON t (x) WHERE y = 'p;q''r';\n\
                   /* block; comment */ SELECT \"we;ird\", $1 FROM t;\n\
                   CREATE FUNCTION f() RETURNS int LANGUAGE sql AS $body$ SELECT 1; $body$;\n\
                   DO $$ BEGIN PERFORM 1; END $$\n-- trailing";
        assert_eq!(
            statements(sql),
            [
                "CREATE INDEX CONCURRENTLY IF NOT EXISTS a ON t (x) WHERE y = 'p;q''r'",
                "SELECT \"we;ird\", $1 FROM t",
                "CREATE FUNCTION f() RETURNS int LANGUAGE sql AS $body$ SELECT 1; $body$",
                "DO $$ BEGIN PERFORM 1; END $$",
            ]
        );
        assert!(statements("-- only a comment;\n ; ;").is_empty());
    }

    #[test]
    fn the_index_of_a_concurrent_build_is_found_by_name() {
        for (statement, name) in [
            (
                "CREATE INDEX CONCURRENTLY IF NOT EXISTS idx_a ON t (x)",
                Some("idx_a"),
            ),
            (
                "create unique index concurrently idx_b\n  on t (x)",
                Some("idx_b"),
            ),
            ("CREATE INDEX CONCURRENTLY ON t (x)", None),
            ("CREATE INDEX idx_c ON t (x)", None),
            ("DROP INDEX CONCURRENTLY IF EXISTS idx_a", None),
        ] {
            assert_eq!(concurrent_index_name(statement), name, "{statement}");
        }
    }

    #[test]
    fn the_marker_is_the_first_line_only() {
        let m = |sql| Migration {
            version: 1,
            name: "x",
            sql,
        };
        assert!(!m("-- queuebox:no-transaction\nSELECT 1;").in_transaction());
        assert!(!m("-- queuebox:no-transaction\r\nSELECT 1;").in_transaction());
        assert!(!m("-- queuebox:no-transaction \nSELECT 1;").in_transaction());
        assert!(m("-- about\n-- queuebox:no-transaction\nSELECT 1;").in_transaction());
        assert!(m("SELECT 1;").in_transaction());
        assert!(!postgres(9).in_transaction(), "9 builds its indexes online");
        assert!(SQLSERVER.iter().all(Migration::in_transaction));
    }

    /// What a migration may hold, by how it runs (module documentation). A statement of an
    /// online migration runs again when an interrupted run is resumed, so each must be one of
    /// the forms known to be safe to repeat. A migration in a transaction must not build or drop
    /// an index on a table it did not create (`inbox` and `outbox` may be large: make such a
    /// migration online), and cannot hold CONCURRENTLY (PostgreSQL refuses it in a transaction).
    #[test]
    fn online_migrations_only_hold_statements_that_can_run_again() {
        let rerunnable = [
            "CREATE INDEX CONCURRENTLY IF NOT EXISTS ",
            "CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS ",
            "DROP INDEX CONCURRENTLY IF EXISTS ",
            "ALTER INDEX IF EXISTS ",
        ];
        for m in POSTGRES {
            for statement in statements(m.sql) {
                let upper = statement.split_whitespace().collect::<Vec<_>>().join(" ");
                let upper = upper.to_ascii_uppercase();
                if !m.in_transaction() {
                    if upper.starts_with("ALTER TABLE ") {
                        assert!(
                            rerunnable_constraint_change(&upper, m.sql),
                            "{}: `{statement}` may not be safe to run again after an interruption",
                            m.name
                        );
                        continue;
                    }
                    assert!(
                        rerunnable.iter().any(|p| upper.starts_with(p)),
                        "{}: `{statement}` may not be safe to run again after an interruption",
                        m.name
                    );
                    if upper.starts_with("ALTER INDEX") {
                        assert!(upper.contains(" RENAME TO "), "{}: {statement}", m.name);
                    }
                    continue;
                }
                assert!(!upper.contains("CONCURRENTLY"), "{}: {statement}", m.name);
                let index_change = ["CREATE INDEX", "CREATE UNIQUE INDEX", "DROP INDEX"]
                    .iter()
                    .any(|p| upper.starts_with(p));
                // A constraint added as it is checks every row under the table's strongest
                // lock; on an existing table it must come NOT VALID, in an online migration.
                assert!(
                    !upper.contains(" ADD CONSTRAINT ")
                        || upper.ends_with(" NOT VALID")
                        || m.sql.contains("CREATE TABLE"),
                    "{}: `{statement}` reads every row while it blocks writes; add the \
                     constraint NOT VALID and VALIDATE it in a migration whose first line is \
                     {NO_TRANSACTION}",
                    m.name
                );
                assert!(
                    !index_change || m.sql.contains("CREATE TABLE"),
                    "{}: `{statement}` blocks writes to an existing table while it runs; \
                     put it in a migration whose first line is {NO_TRANSACTION}, with CONCURRENTLY",
                    m.name
                );
            }
        }
    }

    /// The re-runnable ALTER TABLE forms of an online migration (module documentation):
    /// `statement` upper-cased with single spaces, `file` the migration's text.
    fn rerunnable_constraint_change(statement: &str, file: &str) -> bool {
        let words: Vec<&str> = statement.split(' ').collect();
        match words.get(3..) {
            // DROP CONSTRAINT IF EXISTS <new>, ADD CONSTRAINT <new> CHECK (…) NOT VALID
            Some(["DROP", "CONSTRAINT", "IF", "EXISTS", new, "ADD", "CONSTRAINT", added, ..]) => {
                new.strip_suffix(',') == Some(added) && statement.ends_with(" NOT VALID")
            }
            Some(["VALIDATE", "CONSTRAINT", _])
            | Some(["DROP", "CONSTRAINT", "IF", "EXISTS", _]) => true,
            // The new name must be one this file adds again on every run.
            Some(["RENAME", "CONSTRAINT", new, "TO", _]) => file
                .to_ascii_uppercase()
                .contains(&format!("ADD CONSTRAINT {new}")),
            _ => false,
        }
    }

    #[test]
    fn constraint_changes_in_online_migrations_must_be_rerunnable() {
        let file = "ADD CONSTRAINT CK_NEW CHECK";
        for ok in [
            "ALTER TABLE T DROP CONSTRAINT IF EXISTS CK_NEW, ADD CONSTRAINT CK_NEW CHECK (X IN ('A')) NOT VALID",
            "ALTER TABLE T VALIDATE CONSTRAINT CK_NEW",
            "ALTER TABLE T DROP CONSTRAINT IF EXISTS CK_OLD",
            "ALTER TABLE T RENAME CONSTRAINT CK_NEW TO CK_OLD",
        ] {
            assert!(rerunnable_constraint_change(ok, file), "{ok}");
        }
        for bad in [
            // Checks every row under the strongest lock.
            "ALTER TABLE T DROP CONSTRAINT IF EXISTS CK_NEW, ADD CONSTRAINT CK_NEW CHECK (X IN ('A'))",
            // Fails on a second run: the constraint exists.
            "ALTER TABLE T ADD CONSTRAINT CK_NEW CHECK (X IN ('A')) NOT VALID",
            "ALTER TABLE T DROP CONSTRAINT IF EXISTS CK_A, ADD CONSTRAINT CK_B CHECK (X) NOT VALID",
            "ALTER TABLE T DROP CONSTRAINT CK_OLD",
            // Nothing in the file makes CK_OTHER again.
            "ALTER TABLE T RENAME CONSTRAINT CK_OTHER TO CK_OLD",
            "ALTER TABLE T ADD COLUMN Y INT",
        ] {
            assert!(!rerunnable_constraint_change(bad, file), "{bad}");
        }
    }

    #[test]
    fn a_baseline_records_its_version_and_every_earlier_one() {
        let recorded: Vec<i32> = baseline_of(POSTGRES, 3)
            .unwrap()
            .iter()
            .map(|m| m.version)
            .collect();
        assert_eq!(recorded, [1, 2, 3]);
        assert!(baseline_of(POSTGRES, 0).unwrap().is_empty());
        let latest = latest_version(POSTGRES);
        assert_eq!(baseline_of(POSTGRES, latest).unwrap().len(), POSTGRES.len());
        for bad in [-1, latest + 1] {
            let e = baseline_of(POSTGRES, bad).unwrap_err().to_string();
            assert!(e.contains(&format!("--baseline {bad}")), "{e}");
        }
    }
}
