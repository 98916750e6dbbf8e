//! Handler-statement values on PostgreSQL: [`SqlValue`] parameters bound with one type per
//! variant, statement texts keyed by those types, and result rows as JSON.
//!
//! Why the key: sqlx caches a prepared statement per connection by its SQL text alone and
//! sends a later call's parameters in binary with that call's types. A statement prepared
//! with an `int8` parameter and run again with a `float8` one has PostgreSQL read the
//! double's eight bytes as an integer (4.25 stored as 4616471093031469056, with no error).
//! [`keyed`] writes the parameters' types into the text, so every type signature is a
//! prepared statement of its own, and the same text keeps its cached plan.

use std::borrow::Cow;
use std::str::FromStr;

use serde_json::{Map, Number, Value};
use sqlx::encode::IsNull;
use sqlx::error::BoxDynError;
use sqlx::postgres::types::Oid;
use sqlx::postgres::{PgArgumentBuffer, PgArguments, PgRow, PgTypeInfo};
use sqlx::types::BigDecimal;
use sqlx::{Column, Encode, Postgres, Row, Type, TypeInfo, ValueRef};

use super::db_err;
use crate::error::{Error, Result};
use crate::store::{JsonRow, SqlValue};

type Query<'q> = sqlx::query::Query<'q, Postgres, PgArguments>;

/// `sql` behind a comment naming its parameters' types (`/* queuebox params: itd */`), one
/// letter per parameter ([`SqlValue::type_code`]). Comments are ignored by PostgreSQL and by
/// `pg_stat_statements`' query ids.
pub(super) fn keyed<'a>(sql: &'a str, params: &[SqlValue]) -> Cow<'a, str> {
    if params.is_empty() {
        return Cow::Borrowed(sql);
    }
    let mut text = String::with_capacity(sql.len() + params.len() + 24);
    text.push_str("/* queuebox params: ");
    text.extend(params.iter().map(SqlValue::type_code));
    text.push_str(" */ ");
    text.push_str(sql);
    Cow::Owned(text)
}

/// Binds `params` in order; a `Decimal` that is not a number, or lies outside `numeric`'s
/// range, is an [`Error::InvalidInput`] naming its parameter (`$2`).
pub(super) fn bind_all<'q>(mut q: Query<'q>, params: &'q [SqlValue]) -> Result<Query<'q>> {
    for (index, p) in params.iter().enumerate() {
        q = match p {
            SqlValue::Null => q.bind(UntypedNull),
            SqlValue::Bool(b) => q.bind(*b),
            SqlValue::Int(i) => q.bind(*i),
            SqlValue::Float(f) => q.bind(*f),
            SqlValue::Decimal(text) => q.bind(numeric(index + 1, text)?),
            SqlValue::Text(s) => q.bind(s.as_str()),
            SqlValue::Json(v) => q.bind(v),
        };
    }
    Ok(q)
}

/// `numeric` holds up to 131,072 digits before the point and 16,383 after it.
const NUMERIC_MAX_INTEGER_DIGITS: i64 = 131_072;
const NUMERIC_MAX_SCALE: i64 = 16_383;

/// The exact `numeric` of a decimal text. Checked before encoding: sqlx would otherwise send
/// an out-of-range value as a sentinel the server refuses with a message naming nothing, and
/// a hostile `1e999999999` would expand into a vector of that many digits first.
fn numeric(position: usize, text: &str) -> Result<BigDecimal> {
    let bad = |why: &str| {
        let shown: String = text.chars().take(40).collect();
        let more = if shown.len() < text.len() { "…" } else { "" };
        Error::InvalidInput(format!("parameter ${position} ({shown}{more}) {why}"))
    };
    // More digits than numeric's two limits together can never fit; refused before parsing,
    // which takes time quadratic in the digits.
    if text.len() > (NUMERIC_MAX_INTEGER_DIGITS + NUMERIC_MAX_SCALE) as usize + 32 {
        return Err(bad(&format!(
            "has {} characters, more digits than PostgreSQL's numeric holds",
            text.len()
        )));
    }
    let value = BigDecimal::from_str(text).map_err(|_| bad("is not a decimal number"))?;
    let (_, scale) = value.as_bigint_and_exponent();
    let digits = i64::try_from(value.digits()).unwrap_or(i64::MAX);
    if scale > NUMERIC_MAX_SCALE {
        return Err(bad(&format!(
            "has more than {NUMERIC_MAX_SCALE} digits after the decimal point, more than PostgreSQL's numeric holds"
        )));
    }
    if digits.saturating_sub(scale) > NUMERIC_MAX_INTEGER_DIGITS {
        return Err(bad(&format!(
            "has more than {NUMERIC_MAX_INTEGER_DIGITS} digits before the decimal point, more than PostgreSQL's numeric holds"
        )));
    }
    Ok(value)
}

/// A NULL bound as PostgreSQL's `unknown` pseudo-type, so the server infers its type from the
/// statement as it does for an untyped libpq parameter: a NULL into a `numeric` column is a
/// `numeric` NULL, not a `text` one the column refuses. A NULL carries no bytes, so no type
/// can misread it.
struct UntypedNull;

impl Type<Postgres> for UntypedNull {
    fn type_info() -> PgTypeInfo {
        PgTypeInfo::with_oid(Oid(705))
    }
}

impl Encode<'_, Postgres> for UntypedNull {
    fn encode_by_ref(&self, _: &mut PgArgumentBuffer) -> std::result::Result<IsNull, BoxDynError> {
        Ok(IsNull::Yes)
    }
}

/// Decodes one row by column type. Types outside the common set must be cast in SQL
/// (`col::text`); the error says which column.
pub(super) fn row_to_json(row: &PgRow) -> Result<JsonRow> {
    let mut out = Map::new();
    for (i, col) in row.columns().iter().enumerate() {
        let raw = row.try_get_raw(i).map_err(|e| db_err("decode", e))?;
        if raw.is_null() {
            out.insert(col.name().to_string(), Value::Null);
            continue;
        }
        let ty = col.type_info().name().to_ascii_uppercase();
        let dec = |e: sqlx::Error| {
            Error::InvalidInput(format!("column `{}` of type {ty}: {e}", col.name()))
        };
        let v = match ty.as_str() {
            "BOOL" => Value::Bool(row.try_get::<bool, _>(i).map_err(dec)?),
            "INT2" => Value::from(row.try_get::<i16, _>(i).map_err(dec)?),
            "INT4" => Value::from(row.try_get::<i32, _>(i).map_err(dec)?),
            "INT8" => Value::from(row.try_get::<i64, _>(i).map_err(dec)?),
            "FLOAT4" => Number::from_f64(row.try_get::<f32, _>(i).map_err(dec)? as f64).map(Value::Number).unwrap_or(Value::Null),
            "FLOAT8" => Number::from_f64(row.try_get::<f64, _>(i).map_err(dec)?).map(Value::Number).unwrap_or(Value::Null),
            // Exact: the JSON number carries every digit (serde_json's arbitrary_precision).
            "NUMERIC" => exact_number(&row.try_get::<BigDecimal, _>(i).map_err(dec)?),
            "TEXT" | "VARCHAR" | "BPCHAR" | "NAME" | "CHAR" => Value::String(row.try_get::<String, _>(i).map_err(dec)?),
            "UUID" => Value::String(row.try_get::<uuid::Uuid, _>(i).map_err(dec)?.to_string()),
            "JSON" | "JSONB" => row.try_get::<Value, _>(i).map_err(dec)?,
            "TIMESTAMPTZ" => Value::String(row.try_get::<chrono::DateTime<chrono::Utc>, _>(i).map_err(dec)?.to_rfc3339()),
            "TIMESTAMP" => Value::String(row.try_get::<chrono::NaiveDateTime, _>(i).map_err(dec)?.to_string()),
            "DATE" => Value::String(row.try_get::<chrono::NaiveDate, _>(i).map_err(dec)?.to_string()),
            other => {
                return Err(Error::InvalidInput(format!(
                    "column `{}` has type {other}, which rows-as-JSON does not decode; cast it in SQL (e.g. `{}::text`)",
                    col.name(),
                    col.name()
                )))
            }
        };
        out.insert(col.name().to_string(), v);
    }
    Ok(out)
}

/// A `numeric` as a JSON number with all its digits, written out without an exponent and
/// without trailing zeros: sqlx decodes `numeric` in groups of four digits, so 4.25 would
/// otherwise read `4.2500` (the same number; JSON numbers carry no scale).
fn exact_number(value: &BigDecimal) -> Value {
    Number::from_str(&value.normalized().to_plain_string()).map_or(Value::Null, Value::Number)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_numeric_text_too_long_for_any_numeric_is_refused_before_parsing() {
        let long = format!("1{}", "0".repeat(1_000_000));
        let started = std::time::Instant::now();
        let e = numeric(3, &long).unwrap_err().to_string();
        assert!(started.elapsed() < std::time::Duration::from_millis(100));
        assert!(
            e.contains("parameter $3 (1000") && e.contains("1000001 characters"),
            "{e}"
        );
        assert!(
            e.len() < 200,
            "the message shows the start of the value, not all of it"
        );
    }

    #[test]
    fn keyed_text_differs_by_parameter_types_only() {
        let sql = "INSERT INTO t (n) VALUES ($1)";
        let int = keyed(sql, &[SqlValue::Int(3)]);
        let dec = keyed(sql, &[SqlValue::Decimal("4.25".into())]);
        assert_ne!(int, dec);
        assert_eq!(int, keyed(sql, &[SqlValue::Int(7)]));
        assert_eq!(keyed(sql, &[]), sql);
        assert!(int.ends_with(sql));
    }

    #[test]
    fn numeric_accepts_the_range_of_postgres_and_names_the_parameter_outside_it() {
        for ok in [
            "4.25",
            "1e-400",
            "123456789012345678901234567890",
            "-0.5",
            "1e131071",
        ] {
            assert!(numeric(1, ok).is_ok(), "{ok}");
        }
        for (bad, why) in [
            ("1e999999999999", "before the decimal point"),
            ("1e131072", "before the decimal point"),
            ("1e-16384", "after the decimal point"),
            ("12abc", "is not a decimal number"),
        ] {
            let e = numeric(2, bad).unwrap_err().to_string();
            assert!(e.contains("parameter $2") && e.contains(why), "{bad}: {e}");
        }
    }
}
