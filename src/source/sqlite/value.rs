//! From SQLite's values to keys, flags and content digests.
//!
//! SQLite stores each value in one of five classes whatever the column's declared type says:
//! INTEGER is hashed as an integer, REAL as a float (its shortest round-trip decimal, so REAL
//! `1.5` equals PostgreSQL's `NUMERIC 1.50`), TEXT as text, BLOB as bytes, NULL as null. The
//! declared type adds only what a TEXT value means where SQLite has no class for it: in a
//! DECIMAL or NUMERIC column a decimal's text is hashed by its canonical decimal (`"1.50"`
//! equals PostgreSQL's `NUMERIC 1.5`), in a DATE column `YYYY-MM-DD` is a date, and in a
//! DATETIME or TIMESTAMP column a time (with its offset, or taken as UTC without one) is
//! microseconds since the epoch. A TEXT value that is not what its column's type says is
//! hashed as text, so it differs from every number, date or time instead of failing the
//! scan. Pure: no IO.

use rusqlite::types::Value;

use crate::content::ContentValue;
use crate::source::sql::key::{Key, KeyType, Param};

/// How a content column's TEXT values are read, from its declared type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Text is text.
    Plain,
    /// DECIMAL, NUMERIC: a decimal's text is a number.
    Decimal,
    /// DATE: `YYYY-MM-DD` is a date.
    Date,
    /// DATETIME, TIMESTAMP: a time is a point in time (UTC without an offset).
    Timestamp,
}

impl Kind {
    /// The kind of a column of declared type `declared`.
    pub(crate) fn of(declared: &str) -> Kind {
        let t = declared.to_ascii_uppercase();
        if t.contains("DATETIME") || t.contains("TIMESTAMP") {
            Kind::Timestamp
        } else if t.starts_with("DATE") {
            Kind::Date
        } else if affinity(&t) == Affinity::Numeric && (t.contains("DEC") || t.contains("NUM")) {
            Kind::Decimal
        } else {
            Kind::Plain
        }
    }
}

/// A column's type affinity (SQLite's rules, in their order).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Affinity {
    /// INTEGER.
    Integer,
    /// TEXT.
    Text,
    /// BLOB (or no type).
    Blob,
    /// REAL.
    Real,
    /// NUMERIC.
    Numeric,
}

/// The affinity of declared type `declared` (upper-cased or not).
pub(crate) fn affinity(declared: &str) -> Affinity {
    let t = declared.to_ascii_uppercase();
    if t.contains("INT") {
        Affinity::Integer
    } else if t.contains("CHAR") || t.contains("CLOB") || t.contains("TEXT") {
        Affinity::Text
    } else if t.contains("BLOB") || t.trim().is_empty() {
        Affinity::Blob
    } else if t.contains("REAL") || t.contains("FLOA") || t.contains("DOUB") {
        Affinity::Real
    } else {
        Affinity::Numeric
    }
}

/// The key of a key value.
///
/// # Errors
/// A message for a NULL key or a value of another class than the key column's (SQLite lets
/// a column hold any class; keyset pages cannot order such a key with the others).
pub(crate) fn key_of(ty: KeyType, v: &Value) -> Result<Key, String> {
    match (ty, v) {
        (_, Value::Null) => Err("a row has a NULL key".into()),
        (KeyType::Int { .. }, Value::Integer(i)) => Ok(Key::Int(i128::from(*i))),
        (KeyType::Text, Value::Text(s)) => Ok(Key::Text(s.clone())),
        (_, other) => Err(format!(
            "a key holds a {} value where the column's keys are {} (SQLite lets a column hold any type): \
             keyset pages cannot order it with the others",
            class(other),
            if ty.is_int() { "INTEGER" } else { "TEXT" }
        )),
    }
}

fn class(v: &Value) -> &'static str {
    match v {
        Value::Null => "NULL",
        Value::Integer(_) => "INTEGER",
        Value::Real(_) => "REAL",
        Value::Text(_) => "TEXT",
        Value::Blob(_) => "BLOB",
    }
}

/// A statement parameter as SQLite binds it.
pub(crate) fn param(p: &Param) -> Value {
    match p {
        // Keys are bounded by the column's type (64-bit), row limits are small.
        Param::Int(n) => {
            Value::Integer(i64::try_from(*n).unwrap_or(if *n < 0 { i64::MIN } else { i64::MAX }))
        }
        Param::Text(s) => Value::Text(s.clone()),
    }
}

/// Whether a flag column (`CASE WHEN pred THEN 1 ELSE 0 END`, `key = ?`) is set.
pub(crate) fn is_set(v: &Value) -> bool {
    matches!(v, Value::Integer(i) if *i != 0)
}

/// A value as text (counts and key bounds, read through `CAST(... AS TEXT)`).
pub(crate) fn text(v: &Value) -> Option<String> {
    match v {
        Value::Null => None,
        Value::Integer(i) => Some(i.to_string()),
        Value::Real(f) => Some(f.to_string()),
        Value::Text(s) => Some(s.clone()),
        Value::Blob(b) => Some(String::from_utf8_lossy(b).into_owned()),
    }
}

/// Bytes of a value, for the page's bound.
pub(crate) fn bytes(v: &Value) -> u64 {
    match v {
        Value::Null => 1,
        Value::Integer(_) | Value::Real(_) => 8,
        Value::Text(s) => u64::try_from(s.len()).unwrap_or(u64::MAX),
        Value::Blob(b) => u64::try_from(b.len()).unwrap_or(u64::MAX),
    }
}

/// One content value of a column of `kind`.
pub(crate) fn content(kind: Kind, v: &Value) -> ContentValue<'_> {
    match v {
        Value::Null => ContentValue::Null,
        Value::Integer(i) => ContentValue::Int(i128::from(*i)),
        Value::Real(f) => ContentValue::Float(*f),
        Value::Blob(b) => ContentValue::Bytes(b),
        Value::Text(s) => text_content(kind, s),
    }
}

fn text_content(kind: Kind, s: &str) -> ContentValue<'_> {
    match kind {
        Kind::Decimal if crate::content::canonical_decimal(s).is_ok() => ContentValue::Decimal(s),
        Kind::Date => date(s).unwrap_or(ContentValue::Text(s)),
        Kind::Timestamp => micros(s).map_or(ContentValue::Text(s), ContentValue::TimestampMicros),
        _ => ContentValue::Text(s),
    }
}

/// `YYYY-MM-DD` as a date.
fn date(s: &str) -> Option<ContentValue<'static>> {
    if s.len() != 10 {
        return None;
    }
    let d: jiff::civil::Date = s.parse().ok()?;
    Some(ContentValue::Date {
        year: u16::try_from(d.year()).ok()?,
        month: u8::try_from(d.month()).ok()?,
        day: u8::try_from(d.day()).ok()?,
    })
}

/// A time with an offset (`2026-01-01T12:00:00+02:00`, `...Z`), or without one (taken as
/// UTC: `2026-01-01 12:00:00.5`), as microseconds since the epoch.
fn micros(s: &str) -> Option<i64> {
    if s.len() > 64 {
        return None;
    }
    if let Ok(ts) = s.parse::<jiff::Timestamp>() {
        return Some(ts.as_microsecond());
    }
    let dt: jiff::civil::DateTime = s.parse().ok()?;
    let epoch = jiff::civil::DateTime::constant(1970, 1, 1, 0, 0, 0, 0);
    i64::try_from(dt.duration_since(epoch).as_micros()).ok()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // Tests: a panic is the failure report.
    use super::*;
    use crate::content::record_hash;

    #[test]
    fn values_hash_as_the_other_dialects_hash_theirs() {
        let h = |v: ContentValue<'_>| record_hash(&[v]).unwrap();
        // NUMERIC 1.50 in PostgreSQL: the decimal's text, a REAL, an INTEGER for 7.
        let pg = h(ContentValue::Decimal("1.50"));
        assert_eq!(h(content(Kind::Decimal, &Value::Text("1.5".into()))), pg);
        assert_eq!(h(content(Kind::Decimal, &Value::Real(1.5))), pg);
        assert_eq!(
            h(content(Kind::Plain, &Value::Integer(7))),
            h(ContentValue::Decimal("7.000"))
        );
        // Outside a decimal column, text is text.
        assert_ne!(h(content(Kind::Plain, &Value::Text("1.5".into()))), pg);
        // Text that is not a decimal stays text (it differs, it does not fail).
        assert_eq!(
            h(content(Kind::Decimal, &Value::Text("n/a".into()))),
            h(ContentValue::Text("n/a"))
        );
        assert_eq!(
            h(content(Kind::Date, &Value::Text("2026-03-01".into()))),
            h(ContentValue::Date {
                year: 2026,
                month: 3,
                day: 1
            })
        );
        let noon = h(content(
            Kind::Timestamp,
            &Value::Text("2026-03-01 12:00:00".into()),
        ));
        assert_eq!(
            h(content(
                Kind::Timestamp,
                &Value::Text("2026-03-01T14:00:00+02:00".into())
            )),
            noon
        );
        assert_eq!(
            noon,
            h(ContentValue::TimestampMicros(1_772_366_400_000_000))
        );
        assert_eq!(h(content(Kind::Plain, &Value::Null)), h(ContentValue::Null));
        assert_eq!(
            h(content(Kind::Plain, &Value::Blob(vec![1, 2]))),
            h(ContentValue::Bytes(&[1, 2]))
        );
    }

    #[test]
    fn declared_types_follow_sqlites_affinity_rules() {
        assert_eq!(affinity("BIGINT"), Affinity::Integer);
        assert_eq!(affinity("varchar(64)"), Affinity::Text);
        assert_eq!(affinity(""), Affinity::Blob);
        assert_eq!(affinity("DOUBLE PRECISION"), Affinity::Real);
        assert_eq!(affinity("DECIMAL(10,2)"), Affinity::Numeric);
        assert_eq!(Kind::of("DECIMAL(10,2)"), Kind::Decimal);
        assert_eq!(Kind::of("numeric"), Kind::Decimal);
        assert_eq!(Kind::of("DATE"), Kind::Date);
        assert_eq!(Kind::of("DATETIME"), Kind::Timestamp);
        assert_eq!(Kind::of("TEXT"), Kind::Plain);
        // A "decimal" declared as an integer type has INTEGER affinity: its values are numbers.
        assert_eq!(Kind::of("INT"), Kind::Plain);
    }

    #[test]
    fn a_key_of_another_class_is_named_not_skipped() {
        let int = KeyType::signed(64);
        assert_eq!(key_of(int, &Value::Integer(-3)).unwrap(), Key::Int(-3));
        let e = key_of(int, &Value::Real(1.5)).unwrap_err();
        assert!(
            e.contains("REAL value where the column's keys are INTEGER"),
            "{e}"
        );
        assert!(key_of(KeyType::Text, &Value::Integer(1)).is_err());
        assert!(key_of(int, &Value::Null).is_err());
    }
}
