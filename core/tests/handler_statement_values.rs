//! A handler's statements store exactly the values they were given, whatever the order of
//! their kinds on one connection. sqlx caches a prepared statement by its text; QueueBox used
//! to bind a whole JSON number as `int8` and a fraction as `float8`, so the second call of
//! one text had its bytes read with the first call's types (4.25 after 3 stored as
//! 4616471093031469056, 7 after 12.5 as 3.5e-323), silently.
//!
//! Each value goes in as JSON text (what every language's wrapper hands the core) through
//! `SqlValue::from_json`, and comes back as the column's text, compared with what
//! PostgreSQL itself makes of the same literal (`'4.25'::numeric::text`).

mod support;

use queuebox_core::store::{SqlValue, StoreTx};
use queuebox_core::Store;

/// The JSON values sent, in one order; each column's run also sends them reversed.
fn values(column: &str) -> Vec<&'static str> {
    match column {
        "numeric" => vec![
            "3",
            "4.25",
            "12.5",
            "7",
            "0.5",
            "null",
            "123456789012345678901234567890",
            "0.1234567890123456789012345",
            "1e-400",
            "-9223372036854775808",
            "18446744073709551616",
            "2.5E+3",
        ],
        "float8" => vec!["3", "4.25", "0.1", "7", "null", "1e300", "-0.5"],
        "int8" => vec!["3", "9223372036854775807", "null", "-7", "0"],
        "text" => vec![
            "\"12.345\"",
            "3",
            "4.25",
            "true",
            "null",
            "\"héllo\"",
            "[1,\"a\"]",
            "{\"a\":1.50}",
        ],
        "jsonb" => vec![
            "{\"a\":1}",
            "[1,2.5,\"x\"]",
            "null",
            "{\"big\":123456789012345678901234567890}",
        ],
        "bool" => vec!["true", "false", "null"],
        other => panic!("no values for {other}"),
    }
}

/// What PostgreSQL makes of `json` stored into a `column` column, as text: the literal
/// parsed by the server itself. A JSON string is its text; arrays and objects are `jsonb`.
async fn expected(tx: &mut dyn StoreTx, column: &str, json: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(json).unwrap();
    let sql = match (&v, column) {
        (serde_json::Value::Null, _) => return None,
        (serde_json::Value::String(s), _) => return Some(s.clone()),
        (serde_json::Value::Array(_) | serde_json::Value::Object(_), _) => {
            "SELECT ($1::text)::jsonb::text AS v"
        }
        (_, "text") if v.is_number() => "SELECT ($1::text)::numeric::text AS v",
        (_, "text") => "SELECT ($1::text)::bool::text AS v",
        (_, "numeric") => "SELECT ($1::text)::numeric::text AS v",
        (_, "float8") => "SELECT ($1::text)::float8::text AS v",
        (_, "int8") => "SELECT ($1::text)::int8::text AS v",
        (_, "bool") => "SELECT ($1::text)::bool::text AS v",
        _ => panic!("no oracle for {json} into {column}"),
    };
    let rows = tx
        .query(sql, &[SqlValue::Text(json.to_string())])
        .await
        .unwrap();
    rows[0]["v"].as_str().map(str::to_string)
}

#[tokio::test]
async fn one_statement_stores_every_kind_of_value_exactly_in_any_order() {
    let (store, _) = support::fresh_store("stmtvalues").await;
    let mut tx = store.begin().await.unwrap();
    let mut wrong = Vec::new();
    for column in ["numeric", "float8", "int8", "text", "jsonb", "bool"] {
        tx.execute(
            &format!("CREATE TABLE t_{column} (n serial, v {column})"),
            &[],
        )
        .await
        .unwrap();
        let forward = values(column);
        let backward: Vec<_> = forward.iter().rev().copied().collect();
        let sent: Vec<&str> = forward.into_iter().chain(backward).collect();
        // One text for every value: the statement sqlx prepares once on this connection.
        let insert = format!("INSERT INTO t_{column} (v) VALUES ($1)");
        for json in &sent {
            let value = SqlValue::from_json(&serde_json::from_str(json).unwrap());
            tx.execute(&insert, &[value]).await.unwrap_or_else(|e| {
                panic!("{json} into {column}: {e}");
            });
        }
        let stored = tx
            .query(
                &format!("SELECT v::text AS v FROM t_{column} ORDER BY n"),
                &[],
            )
            .await
            .unwrap();
        assert_eq!(stored.len(), sent.len());
        for (json, row) in sent.iter().zip(&stored) {
            let got = row["v"].as_str().map(str::to_string);
            let want = expected(tx.as_mut(), column, json).await;
            if got != want {
                wrong.push(format!(
                    "{column}: sent {json}, stored {got:?}, expected {want:?}"
                ));
            }
        }
    }
    tx.rollback().await.unwrap();
    assert!(
        wrong.is_empty(),
        "values stored wrongly:\n{}",
        wrong.join("\n")
    );
}

#[tokio::test]
async fn a_numeric_column_reads_back_as_the_exact_json_number() {
    let (store, _) = support::fresh_store("stmtnumeric").await;
    let mut tx = store.begin().await.unwrap();
    let sent = [
        "4.25",
        "123456789012345678901234567890.000000000000000001",
        "1e-30",
        "12.50",
        "100",
    ];
    tx.execute("CREATE TABLE money (n serial, v numeric)", &[])
        .await
        .unwrap();
    for json in sent {
        let value = SqlValue::from_json(&serde_json::from_str(json).unwrap());
        tx.execute("INSERT INTO money (v) VALUES ($1)", &[value])
            .await
            .unwrap();
    }
    let rows = tx
        .query("SELECT v FROM money ORDER BY n", &[])
        .await
        .unwrap();
    let got: Vec<String> = rows.iter().map(|r| r["v"].to_string()).collect();
    // The same numbers, digit for digit (PostgreSQL writes 1e-30 out in full).
    assert_eq!(
        got,
        [
            "4.25",
            "123456789012345678901234567890.000000000000000001",
            "0.000000000000000000000000000001",
            "12.5",
            "100"
        ]
    );
    tx.rollback().await.unwrap();
}

#[tokio::test]
async fn a_number_outside_numeric_fails_naming_its_parameter_and_nothing_is_stored() {
    let (store, _) = support::fresh_store("stmtrange").await;
    let mut tx = store.begin().await.unwrap();
    tx.execute("CREATE TABLE t (a int, v numeric)", &[])
        .await
        .unwrap();
    let huge = SqlValue::from_json(&serde_json::from_str("1e999999999").unwrap());
    let err = tx
        .execute(
            "INSERT INTO t (a, v) VALUES ($1, $2)",
            &[SqlValue::Int(1), huge],
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("parameter $2") && err.contains("digits before the decimal point"),
        "{err}"
    );
    // Refused before anything was sent: the transaction goes on, and holds no row.
    let rows = tx
        .query("SELECT count(*)::int8 AS n FROM t", &[])
        .await
        .unwrap();
    assert_eq!(rows[0]["n"], 0);
    // A number into a float8 column that float8 cannot hold is the server's loud error.
    tx.rollback().await.unwrap();
    let mut tx = store.begin().await.unwrap();
    tx.execute("CREATE TABLE f (v float8)", &[]).await.unwrap();
    let tiny = SqlValue::from_json(&serde_json::from_str("1e-400").unwrap());
    let err = tx
        .execute("INSERT INTO f (v) VALUES ($1)", &[tiny])
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("out of range"), "{err}");
    tx.rollback().await.unwrap();
}
