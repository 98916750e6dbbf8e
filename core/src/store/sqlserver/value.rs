//! Values in and out of tiberius: [`SqlValue`] parameters as TDS values, and result cells
//! decoded to JSON by column type (the rows-as-JSON of [`crate::StoreTx::query`]).

use std::borrow::Cow;

use chrono::{DateTime, FixedOffset, NaiveDate, NaiveDateTime, NaiveTime, Utc};
use serde_json::{Map, Number, Value};
use tiberius::{ColumnData, FromSql, Row, ToSql};

use crate::error::{Error, Result};
use crate::store::{JsonRow, SqlValue};

/// A [`SqlValue`] bound as a statement parameter.
///
/// - `Null` is an `NVARCHAR` NULL, which SQL Server converts to any column type;
/// - `Int` is `BIGINT`, `Float` is `FLOAT(53)`, `Bool` is `BIT`;
/// - `Text` and `Json` are `NVARCHAR` (JSON serialised; the headers and payload columns are
///   `NVARCHAR(MAX)`); a UUID in text converts implicitly to `UNIQUEIDENTIFIER`.
pub struct Param<'a>(pub &'a SqlValue);

impl ToSql for Param<'_> {
    fn to_sql(&self) -> ColumnData<'_> {
        match self.0 {
            SqlValue::Null => ColumnData::String(None),
            SqlValue::Bool(b) => ColumnData::Bit(Some(*b)),
            SqlValue::Int(i) => ColumnData::I64(Some(*i)),
            SqlValue::Float(f) => ColumnData::F64(Some(*f)),
            // SQL Server converts the text exactly into the column's decimal, float or int
            // type, and refuses a value outside it (tiberius' Numeric stops at 38 digits).
            SqlValue::Decimal(d) => ColumnData::String(Some(Cow::Borrowed(d.as_str()))),
            SqlValue::Text(s) => ColumnData::String(Some(Cow::Borrowed(s.as_str()))),
            SqlValue::Json(v) => ColumnData::String(Some(Cow::Owned(v.to_string()))),
        }
    }
}

/// Wraps parameters for tiberius' `&[&dyn ToSql]`.
pub fn params(values: &[SqlValue]) -> Vec<Param<'_>> {
    values.iter().map(Param).collect()
}

/// Decodes one result row to a JSON object keyed by column name.
pub fn row_to_json(row: &Row) -> Result<JsonRow> {
    let mut out = Map::new();
    for (col, data) in row.cells() {
        out.insert(col.name().to_string(), cell_to_json(col.name(), data)?);
    }
    Ok(out)
}

/// One cell as JSON:
/// - integers and floats are numbers (a non-finite float is `null`), `BIT` is a boolean;
/// - character types and XML are strings; a `UNIQUEIDENTIFIER` is its canonical lowercase
///   text (tiberius has already swapped SQL Server's mixed-endian wire order);
/// - `DECIMAL`/`NUMERIC`/`MONEY` are strings (exact; a JSON number would round);
/// - `DATETIME2`, `DATETIME`, `SMALLDATETIME` are read as UTC (QueueBox writes UTC) and
///   printed like PostgreSQL's `timestamptz` (RFC 3339, `+00:00`); `DATETIMEOFFSET` keeps its
///   instant, printed in UTC; `DATE` and `TIME` are ISO text;
/// - binary types are `0x…` hex text, the T-SQL literal form.
pub fn cell_to_json(column: &str, data: &ColumnData<'static>) -> Result<Value> {
    let dec = |e: tiberius::error::Error| Error::InvalidInput(format!("column `{column}`: {e}"));
    let v = match data {
        ColumnData::U8(v) => v.map(Value::from),
        ColumnData::I16(v) => v.map(Value::from),
        ColumnData::I32(v) => v.map(Value::from),
        ColumnData::I64(v) => v.map(Value::from),
        ColumnData::F32(v) => v.map(|f| {
            Number::from_f64(f as f64)
                .map(Value::Number)
                .unwrap_or(Value::Null)
        }),
        ColumnData::F64(v) => v.map(|f| {
            Number::from_f64(f)
                .map(Value::Number)
                .unwrap_or(Value::Null)
        }),
        ColumnData::Bit(v) => v.map(Value::Bool),
        ColumnData::String(v) => v.as_ref().map(|s| Value::String(s.to_string())),
        ColumnData::Guid(v) => v.map(|g| Value::String(g.hyphenated().to_string())),
        ColumnData::Binary(v) => v
            .as_ref()
            .map(|b| Value::String(format!("0x{}", hex::encode_upper(b)))),
        ColumnData::Numeric(v) => v.map(|n| Value::String(n.to_string())),
        ColumnData::Xml(v) => v.as_ref().map(|x| Value::String(x.to_string())),
        ColumnData::DateTime(_) | ColumnData::SmallDateTime(_) | ColumnData::DateTime2(_) => {
            NaiveDateTime::from_sql(data)
                .map_err(dec)?
                .map(|t| Value::String(utc_text(t)))
        }
        ColumnData::DateTimeOffset(_) => DateTime::<FixedOffset>::from_sql(data)
            .map_err(dec)?
            .map(|t| Value::String(t.with_timezone(&Utc).to_rfc3339())),
        ColumnData::Date(_) => NaiveDate::from_sql(data)
            .map_err(dec)?
            .map(|d| Value::String(d.to_string())),
        ColumnData::Time(_) => NaiveTime::from_sql(data)
            .map_err(dec)?
            .map(|t| Value::String(t.to_string())),
    };
    Ok(v.unwrap_or(Value::Null))
}

/// A `DATETIME2` written by `SYSUTCDATETIME()` as an instant.
pub fn utc(t: NaiveDateTime) -> DateTime<Utc> {
    DateTime::from_naive_utc_and_offset(t, Utc)
}

fn utc_text(t: NaiveDateTime) -> String {
    utc(t).to_rfc3339()
}

/// A JSON column stored as `NVARCHAR(MAX)`: parsed, or kept as a string when another writer
/// stored text that is not JSON (a claim must not fail on one bad row).
pub fn json_text(text: Option<&str>) -> Value {
    match text {
        None => Value::Null,
        Some(t) => serde_json::from_str(t).unwrap_or_else(|_| Value::String(t.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tiberius::{ColumnType, IntoSql};

    fn bound(v: SqlValue) -> ColumnData<'static> {
        match Param(&v).to_sql() {
            ColumnData::String(s) => ColumnData::String(s.map(|c| Cow::Owned(c.into_owned()))),
            other => {
                // Every non-string variant owns its data already.
                let s: ColumnData<'static> = match other {
                    ColumnData::Bit(b) => ColumnData::Bit(b),
                    ColumnData::I64(i) => ColumnData::I64(i),
                    ColumnData::F64(f) => ColumnData::F64(f),
                    x => panic!("unexpected parameter type {x:?}"),
                };
                s
            }
        }
    }

    #[test]
    fn parameters_bind_as_the_documented_tds_types() {
        assert_eq!(bound(SqlValue::Null), ColumnData::String(None));
        assert_eq!(bound(SqlValue::Bool(true)), ColumnData::Bit(Some(true)));
        assert_eq!(bound(SqlValue::Int(-7)), ColumnData::I64(Some(-7)));
        assert_eq!(bound(SqlValue::Float(1.5)), ColumnData::F64(Some(1.5)));
        assert_eq!(
            bound(SqlValue::Decimal("1e-400".into())),
            ColumnData::String(Some("1e-400".into()))
        );
        assert_eq!(
            bound(SqlValue::Text("héllo".into())),
            ColumnData::String(Some("héllo".into()))
        );
        assert_eq!(
            bound(SqlValue::Json(serde_json::json!({"a": [1, "x"]}))),
            ColumnData::String(Some(r#"{"a":[1,"x"]}"#.into()))
        );
        // tiberius' own conversions agree for the same Rust values.
        assert_eq!(7i64.into_sql(), ColumnData::I64(Some(7)));
        assert_eq!("héllo".into_sql(), ColumnData::String(Some("héllo".into())));
    }

    #[test]
    fn params_keep_their_order() {
        let values = vec![
            SqlValue::Int(1),
            SqlValue::Text("two".into()),
            SqlValue::Null,
        ];
        let ps = params(&values);
        let data: Vec<ColumnData<'_>> = ps.iter().map(|p| p.to_sql()).collect();
        assert_eq!(
            data,
            vec![
                ColumnData::I64(Some(1)),
                ColumnData::String(Some("two".into())),
                ColumnData::String(None)
            ]
        );
    }

    #[test]
    fn rows_decode_to_json_by_column_type() {
        let when = NaiveDate::from_ymd_opt(2024, 2, 29)
            .unwrap()
            .and_hms_micro_opt(23, 59, 58, 123_456)
            .unwrap();
        let row = Row::builder()
            .column("n8", ColumnType::Int1, ColumnData::U8(Some(255)))
            .column("n16", ColumnType::Int2, ColumnData::I16(Some(-2)))
            .column("n32", ColumnType::Int4, ColumnData::I32(Some(42)))
            .column(
                "n64",
                ColumnType::Int8,
                ColumnData::I64(Some(9_007_199_254_740_993)),
            )
            .column("f", ColumnType::Float8, ColumnData::F64(Some(0.25)))
            .column("nan", ColumnType::Float8, ColumnData::F64(Some(f64::NAN)))
            .column("flag", ColumnType::Bit, ColumnData::Bit(Some(false)))
            .column(
                "text",
                ColumnType::NVarchar,
                ColumnData::String(Some("ünï".into())),
            )
            .column("missing", ColumnType::NVarchar, ColumnData::String(None))
            .column(
                "blob",
                ColumnType::BigVarBin,
                ColumnData::Binary(Some(vec![0xde, 0xad, 0x01].into())),
            )
            .column("at", ColumnType::Datetime2, when.into_sql())
            .column("day", ColumnType::Daten, when.date().into_sql())
            .build();
        let json = row_to_json(&row).unwrap();
        assert_eq!(
            Value::Object(json),
            serde_json::json!({
                "n8": 255, "n16": -2, "n32": 42, "n64": 9_007_199_254_740_993i64, "f": 0.25, "nan": null,
                "flag": false, "text": "ünï", "missing": null, "blob": "0xDEAD01",
                "at": "2024-02-29T23:59:58.123456+00:00", "day": "2024-02-29"
            })
        );
    }

    #[test]
    fn a_guid_decodes_to_canonical_text_not_wire_order() {
        // Microsoft's documented example: the uniqueidentifier 6F9619FF-8B86-D011-B42D-00C04FC964FF
        // is stored as the bytes FF19966F 868B 11D0 B42D00C04FC964FF (first three groups
        // little-endian). The decoded JSON must be the canonical text, never the byte order.
        let id = uuid::Uuid::parse_str("6F9619FF-8B86-D011-B42D-00C04FC964FF").unwrap();
        let row = Row::builder()
            .column("id", ColumnType::Guid, ColumnData::Guid(Some(id)))
            .build();
        assert_eq!(
            row_to_json(&row).unwrap()["id"],
            "6f9619ff-8b86-d011-b42d-00c04fc964ff"
        );
        assert_eq!(row.get::<uuid::Uuid, _>("id"), Some(id));
        let wire_order = hex::encode_upper([
            id.as_bytes()[3],
            id.as_bytes()[2],
            id.as_bytes()[1],
            id.as_bytes()[0],
            id.as_bytes()[5],
            id.as_bytes()[4],
            id.as_bytes()[7],
            id.as_bytes()[6],
        ]);
        assert_eq!(wire_order, "FF19966F868B11D0");
        assert!(!row_to_json(&row).unwrap()["id"]
            .as_str()
            .unwrap()
            .to_uppercase()
            .replace('-', "")
            .starts_with(&wire_order));
    }

    #[test]
    fn json_columns_parse_and_tolerate_foreign_text() {
        assert_eq!(
            json_text(Some(r#"{"a":"b"}"#)),
            serde_json::json!({"a": "b"})
        );
        assert_eq!(
            json_text(Some("not json")),
            Value::String("not json".into())
        );
        assert_eq!(json_text(None), Value::Null);
    }
}
