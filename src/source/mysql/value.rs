//! From the driver's values (binary protocol) to IDs, cursor keys and content digests.
//!
//! The mapping is the one PostgreSQL's source uses, so the same value hashes the same on both
//! sides (docs/guide-mysql.md has the table): integers as integers, DECIMAL by its text (the
//! canonical decimal makes `1.50` equal `1.5`), FLOAT by its shortest single-precision decimal,
//! DOUBLE as a float, text as text, binary as bytes, DATE as a date, DATETIME and TIMESTAMP
//! as UTC microseconds (the session's time zone is `+00:00`, so a TIMESTAMP is read in UTC and
//! a DATETIME is taken as UTC). A date MySQL allows but the calendar does not (`0000-00-00`,
//! day 0) is hashed as its text, so it differs from every real date instead of failing the
//! scan. Pure: no IO.

use mysql_async::Value;

use super::probe::Kind;
use crate::content::ContentValue;
#[cfg(test)]
use crate::content::RecordHasher;
use crate::source::sql::key::{Key, KeyType, Param};

/// The key of a key value.
///
/// # Errors
/// A message for a NULL key or a value of the wrong type.
pub(crate) fn key_of(ty: KeyType, v: &Value) -> Result<Key, String> {
    match (ty, v) {
        (_, Value::NULL) => Err("a row has a NULL key".into()),
        (KeyType::Int { .. }, Value::UInt(u)) => Ok(Key::Int(i128::from(*u))),
        (KeyType::Int { .. }, Value::Int(i)) => Ok(Key::Int(i128::from(*i))),
        (KeyType::Text, Value::Bytes(b)) => match std::str::from_utf8(b) {
            Ok(s) => Ok(Key::Text(s.to_owned())),
            Err(_) => Err("a key is not valid UTF-8".into()),
        },
        (_, other) => Err(format!("a key value has an unexpected type ({other:?})")),
    }
}

/// A statement parameter as the driver binds it.
pub(crate) fn param(p: &Param) -> Value {
    match p {
        Param::Int(n) => match (i64::try_from(*n), u64::try_from(*n)) {
            (Ok(i), _) => Value::Int(i),
            (Err(_), Ok(u)) => Value::UInt(u),
            // No SQL integer is outside both; the core bounds keys by the column's type.
            (Err(_), Err(_)) => Value::NULL,
        },
        Param::Text(s) => Value::Bytes(s.as_bytes().to_vec()),
    }
}

/// Whether a flag column (`CASE WHEN pred THEN 1 ELSE 0 END`, `key = ?`) is set.
pub(crate) fn is_set(v: &Value) -> bool {
    match v {
        Value::Int(i) => *i != 0,
        Value::UInt(u) => *u != 0,
        Value::Bytes(b) => b.as_slice() != b"0",
        _ => false,
    }
}

/// The value a missing cell reads as.
pub(crate) static NULL: Value = Value::NULL;

/// Gives each content value of a row to `add`, in order: `value(i)` is the row's `i`-th
/// content value. A date the calendar does not have is given as its text (so it differs from
/// every real date instead of failing the scan).
///
/// # Errors
/// The index of the column whose value cannot be read or added, and why.
pub(crate) fn each_content<'a>(
    kinds: &[Kind],
    value: impl Fn(usize) -> &'a Value,
    mut add: impl FnMut(&ContentValue<'_>) -> Result<(), String>,
) -> Result<(), (usize, String)> {
    for (i, kind) in kinds.iter().enumerate() {
        let v = value(i);
        match content_value(*kind, v).map_err(|p| (i, p))? {
            Some(cv) => add(&cv),
            None => {
                let text = odd_date_text(*kind, v).unwrap_or_default();
                add(&ContentValue::Text(&text))
            }
        }
        .map_err(|p| (i, p))?;
    }
    Ok(())
}

/// The content digest of one row, by the page's own path.
///
/// # Errors
/// A message naming the column whose value cannot be hashed.
#[cfg(test)]
pub(crate) fn content_hash<'a>(
    kinds: &[Kind],
    names: &[String],
    value: impl Fn(usize) -> &'a Value,
    hasher: &mut RecordHasher,
) -> Result<[u8; 32], String> {
    hasher
        .begin_record(kinds.len())
        .map_err(|e| e.to_string())?;
    each_content(kinds, value, |cv| {
        hasher.add_value(cv).map_err(|e| e.to_string())
    })
    .map_err(|(i, p)| {
        let name = names.get(i).map_or("?", String::as_str);
        format!("content column {name:?}: {p}")
    })?;
    Ok(hasher.record_digest())
}

fn utf8(b: &[u8]) -> Result<&str, String> {
    std::str::from_utf8(b).map_err(|_| "not valid UTF-8".to_owned())
}

/// One content value, or `None` for a DATE/DATETIME the calendar does not have.
fn content_value(kind: Kind, v: &Value) -> Result<Option<ContentValue<'_>>, String> {
    Ok(Some(match (kind, v) {
        (_, Value::NULL) => ContentValue::Null,
        (_, Value::Int(i)) => ContentValue::Int(i128::from(*i)),
        (_, Value::UInt(u)) => ContentValue::Int(i128::from(*u)),
        (Kind::Decimal, Value::Bytes(b)) => ContentValue::Decimal(utf8(b)?),
        (Kind::Float32 | Kind::Float64, Value::Float(f)) => ContentValue::Float(shortest_f32(*f)),
        (Kind::Float32 | Kind::Float64, Value::Double(d)) => ContentValue::Float(*d),
        (Kind::Bit, Value::Bytes(b)) => {
            if b.len() > 8 {
                return Err("a BIT value longer than 64 bits".into());
            }
            let n = b
                .iter()
                .fold(0u64, |acc, byte| (acc << 8) | u64::from(*byte));
            ContentValue::Int(i128::from(n))
        }
        (Kind::Int, Value::Bytes(b)) => {
            let s = utf8(b)?;
            ContentValue::Int(s.parse::<i128>().map_err(|_| "not an integer".to_owned())?)
        }
        (Kind::Text | Kind::Cast, Value::Bytes(b)) => match std::str::from_utf8(b) {
            Ok(s) => ContentValue::Text(s),
            // The server converts text to the connection's utf8mb4; bytes that still are not
            // UTF-8 (a CAST of binary data) are hashed as bytes, which no text equals.
            Err(_) => ContentValue::Bytes(b),
        },
        (Kind::Bytes, Value::Bytes(b)) => ContentValue::Bytes(b),
        (Kind::Date, Value::Date(y, m, d, ..)) => {
            if *y > 9999 || !civil_ok(*y, *m, *d) {
                return Ok(None);
            }
            ContentValue::Date {
                year: *y,
                month: *m,
                day: *d,
            }
        }
        (Kind::Timestamp, Value::Date(y, mo, d, h, mi, s, us)) => {
            match utc_micros(*y, *mo, *d, *h, *mi, *s, *us) {
                Some(t) => ContentValue::TimestampMicros(t),
                None => return Ok(None),
            }
        }
        (_, other) => return Err(format!("unexpected value {other:?} for a {kind:?} column")),
    }))
}

/// A float's shortest single-precision decimal, as the double it reads as: FLOAT `1.1` hashes
/// as `1.1`, as MySQL and PostgreSQL (`real`) both print it, not as `1.100000023841858`.
fn shortest_f32(f: f32) -> f64 {
    if f.is_finite() {
        f.to_string().parse::<f64>().unwrap_or(f64::from(f))
    } else {
        f64::from(f)
    }
}

/// The text of a DATE/DATETIME the calendar does not have, or `None` for a real one.
fn odd_date_text(kind: Kind, v: &Value) -> Option<String> {
    let Value::Date(y, mo, d, h, mi, s, us) = v else {
        return None;
    };
    let real = *y <= 9999 && civil_ok(*y, *mo, *d);
    match kind {
        Kind::Date if !real => Some(format!("{y:04}-{mo:02}-{d:02}")),
        Kind::Timestamp if !real || utc_micros(*y, *mo, *d, *h, *mi, *s, *us).is_none() => Some(
            format!("{y:04}-{mo:02}-{d:02} {h:02}:{mi:02}:{s:02}.{us:06}"),
        ),
        _ => None,
    }
}

fn civil_ok(y: u16, m: u8, d: u8) -> bool {
    civil_date(y, m, d).is_some()
}

/// The proleptic Gregorian date, when the calendar has it (years 0 to 9999 here).
fn civil_date(y: u16, m: u8, d: u8) -> Option<jiff::civil::Date> {
    if y > 9999 {
        return None;
    }
    let y = i16::try_from(y).ok()?;
    jiff::civil::Date::new(y, i8::try_from(m).ok()?, i8::try_from(d).ok()?).ok()
}

/// Microseconds since 1970-01-01T00:00:00Z of a civil UTC time, or `None` when any field is out
/// of range.
pub(crate) fn utc_micros(y: u16, mo: u8, d: u8, h: u8, mi: u8, s: u8, us: u32) -> Option<i64> {
    if us > 999_999 {
        return None;
    }
    // Civil arithmetic, not a `Timestamp`: the last hours of 9999-12-31 (a common "no end"
    // sentinel) are past jiff's timestamp range but within its civil one.
    let time = jiff::civil::Time::new(
        i8::try_from(h).ok()?,
        i8::try_from(mi).ok()?,
        i8::try_from(s).ok()?,
        i32::try_from(us).ok()?.checked_mul(1_000)?,
    )
    .ok()?;
    let at = civil_date(y, mo, d)?.to_datetime(time);
    let epoch = jiff::civil::DateTime::constant(1970, 1, 1, 0, 0, 0, 0);
    i64::try_from(at.duration_since(epoch).as_micros()).ok()
}
