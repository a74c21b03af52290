//! PostgreSQL's binary values: the one-dimensional arrays a page comes in, keys, and content
//! values in the canonical encoding's terms.
//!
//! Pure: no IO. Invariant: every length read from the server is checked against the bytes
//! left (and an array's element count against the rows the statement may return) before it is
//! used.

use tokio_postgres::types::{FromSql, Type};

use super::connect::quote_ident;
use crate::content::ContentValue;
use crate::source::sql::key::{Key, KeyType};

/// Microseconds from 1970-01-01 to PostgreSQL's epoch, 2000-01-01.
const PG_EPOCH_MICROS: i64 = 946_684_800_000_000;
/// Days from 1970-01-01 to 2000-01-01.
const PG_EPOCH_DAYS: i64 = 10_957;

/// The key type of a column type, when keyset pages can take it.
pub(crate) fn key_type(ty: &Type) -> Option<KeyType> {
    Some(match *ty {
        Type::INT2 => KeyType::signed(16),
        Type::INT4 => KeyType::signed(32),
        Type::INT8 => KeyType::signed(64),
        Type::TEXT | Type::VARCHAR => KeyType::Text,
        Type::UUID => KeyType::Uuid,
        _ => return None,
    })
}

/// How one content column is read and hashed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ContentKind {
    Int2,
    Int4,
    Int8,
    /// `numeric`, read as its text (`1.50`, `NaN`).
    Numeric,
    Float4,
    Float8,
    Bool,
    /// `text`, `varchar`, `char(n)`, `name`.
    Text,
    Bytes,
    /// `timestamptz`, or `timestamp` taken as UTC.
    Timestamp,
    Date,
    /// Any other type, read as its text output (`::text`).
    AsText,
}

impl ContentKind {
    pub(crate) fn of(ty: &Type) -> ContentKind {
        match *ty {
            Type::INT2 => ContentKind::Int2,
            Type::INT4 => ContentKind::Int4,
            Type::INT8 => ContentKind::Int8,
            Type::NUMERIC => ContentKind::Numeric,
            Type::FLOAT4 => ContentKind::Float4,
            Type::FLOAT8 => ContentKind::Float8,
            Type::BOOL => ContentKind::Bool,
            Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME => ContentKind::Text,
            Type::BYTEA => ContentKind::Bytes,
            Type::TIMESTAMP | Type::TIMESTAMPTZ => ContentKind::Timestamp,
            Type::DATE => ContentKind::Date,
            _ => ContentKind::AsText,
        }
    }

    /// The column's select expression.
    pub(crate) fn select(self, column: &str) -> String {
        match self {
            ContentKind::Numeric | ContentKind::AsText => format!("{}::text", quote_ident(column)),
            _ => quote_ident(column),
        }
    }
}

/// One result value in its binary form, whatever its type (`None` for NULL).
pub(crate) struct Raw<'a>(pub(crate) Option<&'a [u8]>);

impl<'a> FromSql<'a> for Raw<'a> {
    fn from_sql(
        _: &Type,
        raw: &'a [u8],
    ) -> Result<Raw<'a>, Box<dyn std::error::Error + Sync + Send>> {
        Ok(Raw(Some(raw)))
    }
    fn from_sql_null(_: &Type) -> Result<Raw<'a>, Box<dyn std::error::Error + Sync + Send>> {
        Ok(Raw(None))
    }
    fn accepts(_: &Type) -> bool {
        true
    }
}

/// One key element of a page.
pub(crate) fn key_of(ty: KeyType, bits: u32, raw: &[u8]) -> Result<Key, String> {
    Ok(match (ty, bits) {
        (KeyType::Int { .. }, 16) => Key::Int(i16::from_be_bytes(fixed(raw)?).into()),
        (KeyType::Int { .. }, 32) => Key::Int(i32::from_be_bytes(fixed(raw)?).into()),
        (KeyType::Int { .. }, _) => Key::Int(i64::from_be_bytes(fixed(raw)?).into()),
        (KeyType::Uuid, _) => Key::Uuid(fixed(raw)?),
        (KeyType::Text, _) => Key::Text(
            std::str::from_utf8(raw)
                .map_err(|_| "a key is not UTF-8".to_owned())?
                .to_owned(),
        ),
    })
}

/// The bits of an integer key type (16, 32 or 64).
pub(crate) fn int_bits(ty: KeyType) -> u32 {
    match ty {
        KeyType::Int { max, .. } if max <= i128::from(i16::MAX) => 16,
        KeyType::Int { max, .. } if max <= i128::from(i32::MAX) => 32,
        _ => 64,
    }
}

fn fixed<const N: usize>(raw: &[u8]) -> Result<[u8; N], String> {
    raw.try_into()
        .map_err(|_| format!("a value of {} bytes where {N} were expected", raw.len()))
}

/// One content value.
pub(crate) fn content_value(
    kind: ContentKind,
    raw: Option<&[u8]>,
) -> Result<ContentValue<'_>, String> {
    let Some(raw) = raw else {
        return Ok(ContentValue::Null);
    };
    let text = |raw| std::str::from_utf8(raw).map_err(|_| "not UTF-8".to_owned());
    Ok(match kind {
        ContentKind::Int2 => ContentValue::Int(i16::from_be_bytes(fixed(raw)?).into()),
        ContentKind::Int4 => ContentValue::Int(i32::from_be_bytes(fixed(raw)?).into()),
        ContentKind::Int8 => ContentValue::Int(i64::from_be_bytes(fixed(raw)?).into()),
        ContentKind::Numeric => match text(raw)? {
            "NaN" => ContentValue::Float(f64::NAN),
            "Infinity" => ContentValue::Float(f64::INFINITY),
            "-Infinity" => ContentValue::Float(f64::NEG_INFINITY),
            t => ContentValue::Decimal(t),
        },
        ContentKind::Float4 => {
            let f = f32::from_be_bytes(fixed(raw)?);
            // A real is hashed by its own shortest decimal (`0.1`, not the f64 widening
            // `0.10000000149011612`), as it was written.
            if f.is_finite() {
                ContentValue::Float(
                    f.to_string()
                        .parse()
                        .map_err(|_| "unreadable real".to_owned())?,
                )
            } else {
                ContentValue::Float(f64::from(f))
            }
        }
        ContentKind::Float8 => ContentValue::Float(f64::from_be_bytes(fixed(raw)?)),
        ContentKind::Bool => ContentValue::Bool(raw.first().is_some_and(|b| *b != 0)),
        ContentKind::Text | ContentKind::AsText => ContentValue::Text(text(raw)?),
        ContentKind::Bytes => ContentValue::Bytes(raw),
        ContentKind::Timestamp => match i64::from_be_bytes(fixed(raw)?) {
            i64::MAX => ContentValue::Text("infinity"),
            i64::MIN => ContentValue::Text("-infinity"),
            us => ContentValue::TimestampMicros(
                us.checked_add(PG_EPOCH_MICROS)
                    .ok_or_else(|| "timestamp out of range".to_owned())?,
            ),
        },
        ContentKind::Date => match i32::from_be_bytes(fixed(raw)?) {
            i32::MAX => ContentValue::Text("infinity"),
            i32::MIN => ContentValue::Text("-infinity"),
            days => {
                let (year, month, day) = civil_from_days(i64::from(days) + PG_EPOCH_DAYS)
                    .ok_or_else(|| format!("date {days} days from 2000-01-01 cannot be hashed"))?;
                ContentValue::Date {
                    year: u16::try_from(year)
                        .ok()
                        .filter(|y| *y <= 9999)
                        .ok_or_else(|| format!("date in year {year} cannot be hashed"))?,
                    month,
                    day,
                }
            }
        },
    })
}

/// The proleptic Gregorian date of a day count since 1970-01-01, when it falls in the years
/// -9999 to 9999 (PostgreSQL's dates span about ±6 million years; none past 9999 can be
/// hashed anyway).
pub(crate) fn civil_from_days(z: i64) -> Option<(i64, u8, u8)> {
    let epoch = jiff::civil::Date::constant(1970, 1, 1);
    let date = epoch
        .checked_add(jiff::Span::new().try_days(z).ok()?)
        .ok()?;
    // The month is in 1..=12 and the day in 1..=31.
    Some((
        i64::from(date.year()),
        u8::try_from(date.month()).ok()?,
        u8::try_from(date.day()).ok()?,
    ))
}
