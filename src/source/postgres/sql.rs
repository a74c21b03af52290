//! The SQL of the PostgreSQL source and the decoding of its rows into items.
//!
//! Owns the statement texts (keyset pages, count, the NULL-key check, the catalog probe) and
//! the binary decoding of result values into IDs, labels and content values. Never talks to
//! the server itself. Invariants: every identifier in a statement is quoted by
//! `config::quote_ident`; operator predicates are parenthesised and end with a newline, so a
//! trailing `--` comment cannot swallow the rest of the statement; a page statement asks for
//! one row more than the page, so the end of the scan is known, never guessed from a short
//! page.

use tokio_postgres::types::{FromSql, Type};
use tokio_postgres::Row;

use super::config::{quote_ident, PgConfig};
use crate::content::{record_hash, ContentValue};
use crate::contract::{Item, RawId};

/// The cursor's version tag: a cursor is `k1:` and the last key in text form.
const CURSOR_TAG: &str = "k1:";
/// Microseconds from 1970-01-01 to PostgreSQL's epoch, 2000-01-01.
const PG_EPOCH_MICROS: i64 = 946_684_800_000_000;
/// Days from 1970-01-01 to 2000-01-01.
const PG_EPOCH_DAYS: i64 = 10_957;

/// The key column's type, as far as keyset pages need it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KeyKind {
    Int2,
    Int4,
    Int8,
    /// `text` or `varchar`.
    Text,
    /// `uuid`, read and compared through its canonical text.
    Uuid,
}

impl KeyKind {
    pub(crate) fn of(ty: &Type) -> Option<KeyKind> {
        Some(match *ty {
            Type::INT2 => KeyKind::Int2,
            Type::INT4 => KeyKind::Int4,
            Type::INT8 => KeyKind::Int8,
            Type::TEXT | Type::VARCHAR => KeyKind::Text,
            Type::UUID => KeyKind::Uuid,
            _ => return None,
        })
    }

    fn is_int(self) -> bool {
        matches!(self, KeyKind::Int2 | KeyKind::Int4 | KeyKind::Int8)
    }
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

    fn select(self, column: &str) -> String {
        match self {
            ContentKind::Numeric | ContentKind::AsText => format!("{}::text", quote_ident(column)),
            _ => quote_ident(column),
        }
    }
}

/// The catalog probe: the key column's type, nullability and whether a unique, non-partial,
/// valid index has exactly that column as its key. `$1` is the quoted table name (resolved
/// by `regclass`, so the search path applies as in psql), `$2` the column name.
pub(crate) const KEY_PROBE: &str = "SELECT a.atttypid::oid, a.attnotnull, \
     pg_catalog.format_type(a.atttypid, a.atttypmod), \
     EXISTS (SELECT 1 FROM pg_catalog.pg_index i WHERE i.indrelid = a.attrelid \
       AND i.indisunique AND i.indisvalid AND i.indpred IS NULL \
       AND i.indnkeyatts = 1 AND i.indkey[0] = a.attnum) \
     FROM pg_catalog.pg_attribute a \
     WHERE a.attrelid = $1::text::regclass AND a.attname = $2 \
       AND a.attnum > 0 AND NOT a.attisdropped";

/// The statement texts of one config.
pub(crate) struct Statements {
    /// The first page: `$1` the row limit.
    pub(crate) first: String,
    /// A page after a key: `$1` the key, `$2` the row limit.
    pub(crate) after: String,
    /// `count(*)` of the scope.
    pub(crate) count: String,
    /// Whether a row of the scope has a NULL key (such a row cannot be reached by key).
    pub(crate) null_keys: String,
}

fn where_clause(config: &PgConfig) -> Option<String> {
    config.where_sql.as_ref().map(|w| format!("({w}\n)"))
}

/// A label's select expression: NULL counts as false.
pub(crate) fn label_expr(predicate: &str) -> String {
    format!("(({predicate}\n) IS TRUE)")
}

/// A `where` check alone, to name the key when the server refuses it.
pub(crate) fn where_probe(config: &PgConfig) -> Option<String> {
    where_clause(config).map(|w| format!("SELECT 1 FROM {} WHERE {w} LIMIT 0", config.table))
}

/// A label check alone.
pub(crate) fn label_probe(config: &PgConfig, predicate: &str) -> String {
    format!(
        "SELECT {} FROM {} LIMIT 0",
        label_expr(predicate),
        config.table
    )
}

/// The content columns alone, to learn their types.
pub(crate) fn content_probe(config: &PgConfig) -> String {
    let cols: Vec<String> = config.content.iter().map(|c| quote_ident(c)).collect();
    format!("SELECT {} FROM {} LIMIT 0", cols.join(", "), config.table)
}

pub(crate) fn statements(config: &PgConfig, key: KeyKind, content: &[ContentKind]) -> Statements {
    let k = quote_ident(&config.key);
    let mut select = vec![match key {
        KeyKind::Uuid => format!("{k}::text"),
        _ => k.clone(),
    }];
    select.extend(config.labels.iter().map(|(_, p)| label_expr(p)));
    select.extend(
        config
            .content
            .iter()
            .zip(content)
            .map(|(c, kind)| kind.select(c)),
    );
    let select = select.join(", ");
    let table = &config.table;
    let bound = match key {
        KeyKind::Int2 | KeyKind::Int4 | KeyKind::Int8 => "$1::int8",
        KeyKind::Text => "$1::text",
        KeyKind::Uuid => "$1::text::uuid",
    };
    let scope = where_clause(config);
    let and_scope = scope
        .as_ref()
        .map_or(String::new(), |w| format!("{w} AND "));
    let where_scope = scope
        .as_ref()
        .map_or(String::new(), |w| format!(" WHERE {w}"));
    Statements {
        first: format!("SELECT {select} FROM {table}{where_scope} ORDER BY {k} LIMIT $1::int8"),
        after: format!(
            "SELECT {select} FROM {table} WHERE {and_scope}{k} > {bound} ORDER BY {k} LIMIT $2::int8"
        ),
        count: format!("SELECT count(*) FROM {table}{where_scope}"),
        null_keys: format!("SELECT EXISTS (SELECT 1 FROM {table} WHERE {and_scope}{k} IS NULL)"),
    }
}

/// A key as a page request carries it: an integer for integer keys, text otherwise.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum KeyParam {
    Int(i64),
    Text(String),
}

impl KeyParam {
    /// Reads the key text of a `high_water` request (the codec's rendering of the last ID).
    pub(crate) fn from_text(kind: KeyKind, text: &str) -> Option<KeyParam> {
        if kind.is_int() {
            text.parse().ok().map(KeyParam::Int)
        } else {
            Some(KeyParam::Text(text.to_owned()))
        }
    }

    /// Reads a cursor this source made; `None` for anything else.
    pub(crate) fn from_cursor(kind: KeyKind, cursor: &str) -> Option<KeyParam> {
        KeyParam::from_text(kind, cursor.strip_prefix(CURSOR_TAG)?)
    }

    /// The cursor that continues after this key.
    pub(crate) fn cursor(&self) -> String {
        match self {
            KeyParam::Int(n) => format!("{CURSOR_TAG}{n}"),
            KeyParam::Text(s) => format!("{CURSOR_TAG}{s}"),
        }
    }
}

/// One result value in its binary form, whatever its type (`None` for NULL).
struct Raw<'a>(Option<&'a [u8]>);

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

/// What decoding a page's rows produced.
pub(crate) struct Decoded {
    pub(crate) items: Vec<Item>,
    /// The last item's key, to continue from.
    pub(crate) last: Option<KeyParam>,
    /// Bytes of the values read, with the protocol's 4-byte length of each.
    pub(crate) size_bytes: u64,
}

/// Decodes at most `n` rows of a page into items. An error names the row and column and is
/// the page's `invalid_page` detail.
pub(crate) fn decode(
    rows: &[Row],
    n: usize,
    key: KeyKind,
    labels: &[(String, String)],
    content: &[ContentKind],
    content_names: &[String],
) -> Result<Decoded, String> {
    let mut items = Vec::with_capacity(n.min(rows.len()));
    let mut last = None;
    let mut size_bytes = 0u64;
    let mut values = Vec::with_capacity(content.len());
    for (r, row) in rows.iter().take(n).enumerate() {
        let get = |i: usize| -> Result<Option<&[u8]>, String> {
            row.try_get::<usize, Raw<'_>>(i)
                .map(|raw| raw.0)
                .map_err(|e| format!("row {r}, column {i}: {e}"))
        };
        let raw_key = get(0)?.ok_or_else(|| format!("row {r}: the key is NULL"))?;
        size_bytes = size_bytes.saturating_add(4 + raw_key.len() as u64);
        let param = match key {
            KeyKind::Int2 => KeyParam::Int(i64::from(i16::from_be_bytes(fixed(raw_key, r)?))),
            KeyKind::Int4 => KeyParam::Int(i64::from(i32::from_be_bytes(fixed(raw_key, r)?))),
            KeyKind::Int8 => KeyParam::Int(i64::from_be_bytes(fixed(raw_key, r)?)),
            KeyKind::Text | KeyKind::Uuid => KeyParam::Text(
                std::str::from_utf8(raw_key)
                    .map_err(|_| format!("row {r}: the key is not UTF-8"))?
                    .to_owned(),
            ),
        };
        // A negative integer cannot be an `int` ID: it reaches the codec as it is and the
        // reconciler reports the page invalid (R16), naming the value.
        let id = match &param {
            KeyParam::Int(n) => {
                u64::try_from(*n).map_or_else(|_| RawId::Other(n.to_string()), RawId::Int)
            }
            KeyParam::Text(s) => RawId::Str(s.clone()),
        };
        let mut names = Vec::new();
        for (l, (name, _)) in labels.iter().enumerate() {
            let v = get(1 + l)?;
            size_bytes = size_bytes.saturating_add(5);
            if v == Some(&[1u8][..]) {
                names.push(name.clone());
            }
        }
        let content_hash = if content.is_empty() {
            None
        } else {
            values.clear();
            for (c, kind) in content.iter().enumerate() {
                let raw = get(1 + labels.len() + c)?;
                size_bytes = size_bytes.saturating_add(4 + raw.map_or(0, |b| b.len() as u64));
                let name = content_names.get(c).map_or("?", String::as_str);
                values.push(content_value(*kind, raw).map_err(|p| {
                    format!(
                        "row with key {}: content column {name:?}: {p}",
                        shown(&param)
                    )
                })?);
            }
            Some(record_hash(&values).map_err(|e| {
                format!(
                    "row with key {}: content cannot be hashed: {e}",
                    shown(&param)
                )
            })?)
        };
        items.push(Item {
            id,
            labels: names,
            content: content_hash,
        });
        last = Some(param);
    }
    Ok(Decoded {
        items,
        last,
        size_bytes,
    })
}

fn shown(key: &KeyParam) -> String {
    match key {
        KeyParam::Int(n) => n.to_string(),
        KeyParam::Text(s) => format!("{:?}", s.chars().take(64).collect::<String>()),
    }
}

fn fixed<const N: usize>(raw: &[u8], row: usize) -> Result<[u8; N], String> {
    raw.try_into().map_err(|_| {
        format!(
            "row {row}: a value of {} bytes where {N} were expected",
            raw.len()
        )
    })
}

fn content_value(kind: ContentKind, raw: Option<&[u8]>) -> Result<ContentValue<'_>, String> {
    let Some(raw) = raw else {
        return Ok(ContentValue::Null);
    };
    let text = |raw| std::str::from_utf8(raw).map_err(|_| "not UTF-8".to_owned());
    Ok(match kind {
        ContentKind::Int2 => ContentValue::Int(i16::from_be_bytes(fixed(raw, 0)?).into()),
        ContentKind::Int4 => ContentValue::Int(i32::from_be_bytes(fixed(raw, 0)?).into()),
        ContentKind::Int8 => ContentValue::Int(i64::from_be_bytes(fixed(raw, 0)?).into()),
        ContentKind::Numeric => match text(raw)? {
            "NaN" => ContentValue::Float(f64::NAN),
            "Infinity" => ContentValue::Float(f64::INFINITY),
            "-Infinity" => ContentValue::Float(f64::NEG_INFINITY),
            t => ContentValue::Decimal(t),
        },
        ContentKind::Float4 => {
            let f = f32::from_be_bytes(fixed(raw, 0)?);
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
        ContentKind::Float8 => ContentValue::Float(f64::from_be_bytes(fixed(raw, 0)?)),
        ContentKind::Bool => ContentValue::Bool(raw.first().is_some_and(|b| *b != 0)),
        ContentKind::Text | ContentKind::AsText => ContentValue::Text(text(raw)?),
        ContentKind::Bytes => ContentValue::Bytes(raw),
        ContentKind::Timestamp => match i64::from_be_bytes(fixed(raw, 0)?) {
            i64::MAX => ContentValue::Text("infinity"),
            i64::MIN => ContentValue::Text("-infinity"),
            us => ContentValue::TimestampMicros(
                us.checked_add(PG_EPOCH_MICROS)
                    .ok_or_else(|| "timestamp out of range".to_owned())?,
            ),
        },
        ContentKind::Date => match i32::from_be_bytes(fixed(raw, 0)?) {
            i32::MAX => ContentValue::Text("infinity"),
            i32::MIN => ContentValue::Text("-infinity"),
            days => {
                let (year, month, day) = civil_from_days(i64::from(days) + PG_EPOCH_DAYS);
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

/// The proleptic Gregorian date of a day count since 1970-01-01 (H. Hinnant's algorithm).
pub(crate) fn civil_from_days(z: i64) -> (i64, u8, u8) {
    // PostgreSQL dates span about ±6 million years, so none of these can overflow an i64.
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    // month is in 1..=12 and day in 1..=31 by construction.
    (year, month as u8, day as u8)
}
