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
use crate::content::{ContentValue, RecordHasher};
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
    /// `uuid`: read in binary (ordered as its bytes), shown and bound as its canonical text.
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
    /// The first page: `$1` the row limit (and with a key range `$2` its first key, `$3` its
    /// last key).
    pub(crate) first: String,
    /// A page after a key: `$1` the key, `$2` the row limit (with a key range `$3`, `$4`).
    pub(crate) after: String,
    /// `count(*)` of the scope (with a key range `$1`, `$2`).
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

/// The scope's smallest and largest key, `int8` (an integer key only), for `plan`.
pub(crate) fn bounds(config: &PgConfig) -> String {
    let k = quote_ident(&config.key);
    let scope = where_clause(config).map_or(String::new(), |w| format!(" WHERE {w}"));
    format!(
        "SELECT min({k})::int8, max({k})::int8 FROM {}{scope}",
        config.table
    )
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

/// The page statements. A page is one row of arrays, one array per column (the key, each
/// label, each content column), aggregated from the ordered, limited keyset query: the
/// server sends one message per page instead of one per row, which is what lets a scan come
/// close to the rate of `COPY`. An aggregate's input order is not guaranteed by SQL, so
/// integer and uuid keys are checked (and if need be sorted) by the decoder, and text keys,
/// whose order is the column's collation, are ordered inside each aggregate.
///
/// With `ranged`, every statement but the NULL-key check also keeps only the keys of a shard,
/// `key >= $lo AND key <= $last` (bound parameters after the others; `last = hi - 1`, so the
/// range's top can be `i64::MAX`).
pub(crate) fn statements(
    config: &PgConfig,
    key: KeyKind,
    content: &[ContentKind],
    ranged: bool,
) -> Statements {
    let k = quote_ident(&config.key);
    let mut inner = vec![format!("{k} AS sl_k")];
    let mut names = vec!["sl_k".to_owned()];
    for (i, (_, p)) in config.labels.iter().enumerate() {
        inner.push(format!("{} AS sl_l{i}", label_expr(p)));
        names.push(format!("sl_l{i}"));
    }
    for (i, (c, kind)) in config.content.iter().zip(content).enumerate() {
        inner.push(format!("{} AS sl_c{i}", kind.select(c)));
        names.push(format!("sl_c{i}"));
    }
    let order = match key {
        KeyKind::Text => " ORDER BY sl_k",
        _ => "",
    };
    let outer: Vec<String> = names
        .iter()
        .map(|n| format!("array_agg({n}{order})"))
        .collect();
    let (inner, outer) = (inner.join(", "), outer.join(", "));
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
    // The shard's range, its parameters numbered after each statement's own.
    let range = |first_param: u32| {
        format!(
            "{k} >= ${first_param}::int8 AND {k} <= ${}::int8",
            first_param + 1
        )
    };
    let (first_scope, after_scope, count_scope) = if ranged {
        (
            format!(" WHERE {and_scope}{}", range(2)),
            format!("{and_scope}{} AND ", range(3)),
            format!(" WHERE {and_scope}{}", range(1)),
        )
    } else {
        (where_scope.clone(), and_scope.clone(), where_scope)
    };
    Statements {
        first: format!(
            "SELECT {outer} FROM (SELECT {inner} FROM {table}{first_scope} ORDER BY {k} LIMIT $1::int8) sl_page"
        ),
        after: format!(
            "SELECT {outer} FROM (SELECT {inner} FROM {table} WHERE {after_scope}{k} > {bound} ORDER BY {k} LIMIT $2::int8) sl_page"
        ),
        count: format!("SELECT count(*) FROM {table}{count_scope}"),
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

/// What decoding a page produced.
pub(crate) struct Decoded {
    pub(crate) items: Vec<Item>,
    /// The last item's key, to continue from.
    pub(crate) last: Option<KeyParam>,
    /// Whether the query found a row past the page.
    pub(crate) more: bool,
    /// Bytes of the values read.
    pub(crate) size_bytes: u64,
}

/// The elements of a one-dimensional array in PostgreSQL's binary format (`None` for a
/// NULL element); a NULL array (an aggregate over no row) has none. Every length is checked
/// against the bytes left before it is used.
pub(crate) fn array_elements(raw: Option<&[u8]>, max: usize) -> Result<Vec<Option<&[u8]>>, String> {
    let Some(mut raw) = raw else {
        return Ok(Vec::new());
    };
    let mut int = |what: &str| -> Result<i32, String> {
        let (head, rest) = raw
            .split_first_chunk::<4>()
            .ok_or_else(|| format!("array cut short in its {what}"))?;
        raw = rest;
        Ok(i32::from_be_bytes(*head))
    };
    let ndim = int("header")?;
    let _flags = int("header")?;
    let _element_type = int("header")?;
    let len = match ndim {
        0 => 0,
        1 => {
            let len = int("dimension")?;
            let _lower = int("dimension")?;
            usize::try_from(len)
                .ok()
                .filter(|n| *n <= max)
                .ok_or_else(|| format!("array of {len} elements where at most {max} were asked"))?
        }
        n => return Err(format!("array of {n} dimensions where 1 was expected")),
    };
    let mut out = Vec::with_capacity(len);
    for _ in 0..len {
        let (head, rest) = raw
            .split_first_chunk::<4>()
            .ok_or_else(|| "array cut short".to_owned())?;
        let n = i32::from_be_bytes(*head);
        if n < 0 {
            out.push(None);
            raw = rest;
            continue;
        }
        let n = usize::try_from(n).map_err(|_| "bad element length".to_owned())?;
        if n > rest.len() {
            return Err("array element longer than the array".to_owned());
        }
        let (value, rest) = rest.split_at(n);
        out.push(Some(value));
        raw = rest;
    }
    if !raw.is_empty() {
        return Err("bytes after the last array element".to_owned());
    }
    Ok(out)
}

/// One key element, and its order among the page's keys (for integer and uuid keys, whose
/// order the client can check; text keys come ordered by the server's collation).
fn key_of(kind: KeyKind, raw: &[u8]) -> Result<KeyElement, String> {
    Ok(match kind {
        KeyKind::Int2 => (KeyParam::Int(i16::from_be_bytes(fixed(raw)?).into()), None),
        KeyKind::Int4 => (KeyParam::Int(i32::from_be_bytes(fixed(raw)?).into()), None),
        KeyKind::Int8 => (KeyParam::Int(i64::from_be_bytes(fixed(raw)?)), None),
        KeyKind::Uuid => {
            let b: [u8; 16] = fixed(raw)?;
            (KeyParam::Text(uuid_text(&b)), Some(b))
        }
        KeyKind::Text => (
            KeyParam::Text(
                std::str::from_utf8(raw)
                    .map_err(|_| "a key is not UTF-8".to_owned())?
                    .to_owned(),
            ),
            None,
        ),
    })
}

/// A uuid as PostgreSQL prints it: lower-case hex, 8-4-4-4-12.
pub(crate) fn uuid_text(b: &[u8; 16]) -> String {
    let mut s = String::with_capacity(36);
    for (i, byte) in b.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            s.push('-');
        }
        s.push_str(&format!("{byte:02x}"));
    }
    s
}

/// A key and, for a uuid, its bytes (the order the server gives uuids).
pub(crate) type KeyElement = (KeyParam, Option<[u8; 16]>);

/// The order in which a page's elements are its items. The page is the n smallest keys, so
/// the elements go in key order where the client can tell it (integer and uuid keys; text
/// keys come ordered by the server's collation); a page whose keys repeat is refused (the
/// unique index says they cannot).
pub(crate) fn page_order(kind: KeyKind, keys: &[KeyElement]) -> Result<Vec<usize>, String> {
    let mut order: Vec<usize> = (0..keys.len()).collect();
    if kind == KeyKind::Text {
        return Ok(order);
    }
    let cmp = |a: &KeyElement, b: &KeyElement| match (a, b) {
        ((KeyParam::Int(x), _), (KeyParam::Int(y), _)) => x.cmp(y),
        ((_, x), (_, y)) => x.cmp(y),
    };
    if !keys.windows(2).all(|w| cmp(&w[0], &w[1]).is_lt()) {
        order.sort_by(|a, b| cmp(&keys[*a], &keys[*b]));
        if order
            .windows(2)
            .any(|w| cmp(&keys[w[0]], &keys[w[1]]).is_eq())
        {
            return Err("a key appears twice in one page".to_owned());
        }
    }
    Ok(order)
}

/// Decodes a page (one row of arrays) into at most `n` items, in key order. An error is the
/// page's `invalid_page` detail.
pub(crate) fn decode(
    rows: &[Row],
    n: usize,
    key: KeyKind,
    labels: &[(String, String)],
    content: &[ContentKind],
    content_names: &[String],
) -> Result<Decoded, String> {
    let row = match rows {
        [row] => row,
        _ => return Err(format!("{} result rows where one was expected", rows.len())),
    };
    let max = n.saturating_add(1);
    let mut size_bytes = 0u64;
    let mut column = |i: usize| -> Result<Vec<Option<&[u8]>>, String> {
        let raw = row
            .try_get::<usize, Raw<'_>>(i)
            .map_err(|e| format!("column {i}: {e}"))?
            .0;
        size_bytes = size_bytes.saturating_add(raw.map_or(0, |b| b.len() as u64));
        array_elements(raw, max).map_err(|p| format!("column {i}: {p}"))
    };
    let raw_keys = column(0)?;
    let label_cols = (0..labels.len())
        .map(|l| column(1 + l))
        .collect::<Result<Vec<_>, _>>()?;
    let content_cols = (0..content.len())
        .map(|c| column(1 + labels.len() + c))
        .collect::<Result<Vec<_>, _>>()?;
    let m = raw_keys.len();
    if label_cols.iter().chain(&content_cols).any(|c| c.len() != m) {
        return Err("the page's columns have different lengths".to_owned());
    }
    let mut keys = Vec::with_capacity(m);
    for raw in &raw_keys {
        let raw = raw.ok_or_else(|| "a key is NULL".to_owned())?;
        keys.push(key_of(key, raw)?);
    }
    let order = page_order(key, &keys)?;
    let more = m > n;
    let mut items = Vec::with_capacity(m.min(n));
    let mut values = Vec::with_capacity(content.len());
    let mut hasher = RecordHasher::new();
    let mut last = None;
    for &i in order.iter().take(n) {
        let param = &keys[i].0;
        // A negative integer cannot be an `int` ID: it reaches the codec as it is and the
        // reconciler reports the page invalid (R16), naming the value.
        let id = match param {
            KeyParam::Int(v) => {
                u64::try_from(*v).map_or_else(|_| RawId::Other(v.to_string()), RawId::Int)
            }
            KeyParam::Text(s) => RawId::Str(s.clone()),
        };
        let mut names = Vec::new();
        for ((name, _), col) in labels.iter().zip(&label_cols) {
            if col[i] == Some(&[1u8][..]) {
                names.push(name.clone());
            }
        }
        let content_hash = if content.is_empty() {
            None
        } else {
            values.clear();
            for (c, (kind, col)) in content.iter().zip(&content_cols).enumerate() {
                let name = content_names.get(c).map_or("?", String::as_str);
                values.push(content_value(*kind, col[i]).map_err(|p| {
                    format!(
                        "row with key {}: content column {name:?}: {p}",
                        shown(param)
                    )
                })?);
            }
            Some(hasher.hash(&values).map_err(|e| {
                format!(
                    "row with key {}: content cannot be hashed: {e}",
                    shown(param)
                )
            })?)
        };
        items.push(Item {
            id,
            labels: names,
            content: content_hash,
        });
        last = Some(param.clone());
    }
    Ok(Decoded {
        items,
        last,
        more,
        size_bytes,
    })
}

fn shown(key: &KeyParam) -> String {
    match key {
        KeyParam::Int(n) => n.to_string(),
        KeyParam::Text(s) => format!("{:?}", s.chars().take(64).collect::<String>()),
    }
}

fn fixed<const N: usize>(raw: &[u8]) -> Result<[u8; N], String> {
    raw.try_into()
        .map_err(|_| format!("a value of {} bytes where {N} were expected", raw.len()))
}

fn content_value(kind: ContentKind, raw: Option<&[u8]>) -> Result<ContentValue<'_>, String> {
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
