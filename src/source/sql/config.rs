//! The config of every SQL source (`postgres:`, `mysql:`, `sqlite:` CONFIG.json, or an inline
//! spec's query, `spec.rs`): parsed strictly into
//! what the core reads (table, key, scope, labels, content, pacing) and the dialect's own
//! connection options.
//!
//! Owns what the operator wrote and nothing else: no connection, no SQL beyond quoting.
//! Invariants: a config that exists has exactly one DSN (from the file or from the environment
//! at open time), a table, a key column, at most `LABELS_PER_ITEM_MAX` labels and
//! `CONTENT_VALUES_MAX` content columns; no error of this module quotes the DSN (it may hold a
//! password), and the DSN's text is dropped once parsed.
//!
//! Predicates (`where`, `labels`) are SQL written by the operator and are trusted as such: the
//! config file is operator input, like a psql script. They run inside a read-only transaction
//! as part of one prepared statement.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Map, Value};

use super::dialect::{Connect, Dialect, TableName};
use crate::content::CONTENT_VALUES_MAX;
use crate::contract::{LABELS_PER_ITEM_MAX, LABEL_LEN_MAX};
use crate::error::{config_error, SourceError};

/// Bytes of a config file.
pub(crate) const CONFIG_BYTES_MAX: u64 = 1024 * 1024;
/// Bytes of one SQL predicate (`where` or a label).
pub(crate) const PREDICATE_LEN_MAX: usize = 64 * 1024;
/// Longest `page_delay_ms` and `pause_ms`.
pub(crate) const PAGE_DELAY_MS_MAX: u64 = 60_000;

/// The keys every SQL config may have; a dialect adds its own ([`Connect::KEYS`]).
const KEYS: &[&str] = &[
    "dsn",
    "dsn_env",
    "table",
    "key",
    "where",
    "labels",
    "content",
    "page_delay_ms",
    "pause_ms",
    "prefetch",
];

/// A parsed, validated SQL source config, less the connection options.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SqlConfig {
    /// The config file, for errors (an inline spec's redacted text).
    pub(crate) path: PathBuf,
    /// The table.
    pub(crate) table: TableName,
    /// The key column, as the server spells it.
    pub(crate) key: String,
    /// The scope's predicate.
    pub(crate) where_sql: Option<String>,
    /// (label name, predicate), in the file's order.
    pub(crate) labels: Vec<(String, String)>,
    /// Content columns, as the server spells them, in the file's order.
    pub(crate) content: Vec<String>,
    /// A pause before every page.
    pub(crate) page_delay: Duration,
    /// A pause before every page but the first.
    pub(crate) pause: Duration,
    /// Send the next page's statement before a page is returned (one page in flight ahead);
    /// `false` reads each page only when asked (to measure what the overlap saves).
    pub(crate) prefetch: bool,
}

impl SqlConfig {
    /// The table as SQL, every part quoted by `D`.
    pub(crate) fn table_sql<D: Dialect>(&self) -> String {
        SqlConfig::table_of::<D>(&self.table)
    }

    /// `table` as SQL, every part quoted by `D`.
    pub(crate) fn table_of<D: Dialect>(table: &TableName) -> String {
        match &table.schema {
            Some(s) => format!("{}.{}", D::quote(s), D::quote(&table.name)),
            None => D::quote(&table.name),
        }
    }

    /// Narrows the scope to integer keys in `ranges` (ascending, disjoint, inclusive): the
    /// config's `where`, `AND` the ranges (a re-read of some partitions).
    pub(crate) fn narrow_to_keys<D: Dialect>(&mut self, ranges: &[(u64, u64)]) {
        let sql = super::key::key_ranges_sql(&D::quote(&self.key), ranges);
        self.where_sql = Some(match &self.where_sql {
            Some(w) => format!("(\n{w}\n) AND {sql}"),
            None => sql,
        });
    }
}

/// Reads and validates a config file; a `dsn_env` is read from the environment now.
///
/// # Errors
/// `SourceError::Io` when unreadable, `SourceError::Config` naming the key that is wrong.
pub(crate) fn open<D: Dialect>(path: &Path) -> Result<(SqlConfig, D::Connect), SourceError> {
    // Bounded while reading, whatever size the file states (a pipe, `/dev/zero`).
    let text = crate::io_bound::read_text(path, CONFIG_BYTES_MAX)?;
    parse::<D>(path, &text, |name| std::env::var(name).ok())
}

/// Parses config text; `path` names the file in errors, `env` reads `dsn_env`.
///
/// # Errors
/// `SourceError::Config` naming the key that is wrong.
pub(crate) fn parse<D: Dialect>(
    path: &Path,
    text: &str,
    env: impl Fn(&str) -> Option<String>,
) -> Result<(SqlConfig, D::Connect), SourceError> {
    let value = crate::json::parse(text, crate::json::Numbers::Integers)
        .map_err(|e| config_error(path, e.to_string()))?;
    let obj = value
        .as_object()
        .ok_or_else(|| config_error(path, "must be a JSON object"))?;
    from_object::<D>(path, obj, env).map_err(|problem| config_error(path, problem))
}

/// Validates a config object (a file's, or an inline spec's parameters).
///
/// # Errors
/// What is wrong, naming the key.
pub(crate) fn from_object<D: Dialect>(
    path: &Path,
    obj: &Map<String, Value>,
    env: impl Fn(&str) -> Option<String>,
) -> Result<(SqlConfig, D::Connect), String> {
    let known = KEYS
        .iter()
        .chain(<D::Connect as Connect>::KEYS)
        .copied()
        .collect::<Vec<_>>();
    if let Some(k) = obj.keys().find(|k| !known.contains(&k.as_str())) {
        let meant = crate::json::closest(k, &known)
            .map_or_else(String::new, |m| format!("; did you mean {m:?}?"));
        return Err(format!(
            "unknown key {k:?}{meant} (known: {})",
            known.join(", ")
        ));
    }
    let dsn = match (string(obj, "dsn")?, string(obj, "dsn_env")?) {
        (Some(d), None) => d.to_owned(),
        (None, Some(var)) => env(var)
            .ok_or_else(|| format!("dsn_env: the environment variable {var:?} is not set"))?,
        (Some(_), Some(_)) => return Err("give dsn or dsn_env, not both".to_owned()),
        (None, None) => return Err("missing key \"dsn\" (or \"dsn_env\")".to_owned()),
    };
    let connect = D::Connect::parse(&dsn, obj, path)?;
    drop(dsn);

    let table_text = string(obj, "table")?.ok_or("missing key \"table\"")?;
    let table = D::table(table_text, &connect).map_err(|p| format!("table: {p}"))?;
    let key_text = string(obj, "key")?.ok_or("missing key \"key\"")?;
    let key = D::column(key_text).map_err(|p| format!("key: {p}"))?;

    let where_sql = string(obj, "where")?.map(str::to_owned);
    if let Some(w) = &where_sql {
        predicate(w).map_err(|p| format!("where: {p}"))?;
    }
    Ok((
        SqlConfig {
            path: path.to_owned(),
            table,
            key,
            where_sql,
            labels: labels(obj)?,
            content: content::<D>(obj)?,
            page_delay: delay(obj, "page_delay_ms")?,
            pause: delay(obj, "pause_ms")?,
            prefetch: match obj.get("prefetch") {
                None | Some(Value::Null) => true,
                Some(Value::Bool(b)) => *b,
                Some(_) => return Err("prefetch: must be true or false".to_owned()),
            },
        },
        connect,
    ))
}

fn labels(obj: &Map<String, Value>) -> Result<Vec<(String, String)>, String> {
    let mut labels = Vec::new();
    match obj.get("labels") {
        None | Some(Value::Null) => {}
        Some(Value::Object(m)) => {
            if m.len() > LABELS_PER_ITEM_MAX {
                return Err(format!(
                    "labels: at most {LABELS_PER_ITEM_MAX} labels (an item may carry every one)"
                ));
            }
            for (name, pred) in m {
                if name.is_empty() || name.len() > LABEL_LEN_MAX {
                    return Err(format!(
                        "labels: a label name must have 1 to {LABEL_LEN_MAX} bytes"
                    ));
                }
                let Value::String(pred) = pred else {
                    return Err(format!(
                        "labels.{name}: must be an SQL predicate as a string"
                    ));
                };
                predicate(pred).map_err(|p| format!("labels.{name}: {p}"))?;
                labels.push((name.clone(), pred.clone()));
            }
        }
        Some(_) => return Err("labels: must be an object of NAME: SQL_PREDICATE".to_owned()),
    }
    Ok(labels)
}

fn content<D: Dialect>(obj: &Map<String, Value>) -> Result<Vec<String>, String> {
    let mut content: Vec<String> = Vec::new();
    match obj.get("content") {
        None | Some(Value::Null) => {}
        Some(Value::Array(cols)) => {
            if cols.len() > CONTENT_VALUES_MAX {
                return Err(format!("content: at most {CONTENT_VALUES_MAX} columns"));
            }
            for (i, c) in cols.iter().enumerate() {
                let Value::String(c) = c else {
                    return Err(format!("content[{i}]: must be a column name"));
                };
                let name = D::column(c).map_err(|p| format!("content[{i}]: {p}"))?;
                // The same column twice (as the server compares names) is a mistake.
                if content.iter().any(|x| D::same_column(x, &name)) {
                    return Err(format!("content[{i}]: column {c:?} is named twice"));
                }
                content.push(name);
            }
        }
        Some(_) => return Err("content: must be an array of column names".to_owned()),
    }
    Ok(content)
}

fn delay(obj: &Map<String, Value>, key: &str) -> Result<Duration, String> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(Duration::ZERO),
        Some(v) => match v.as_u64() {
            Some(ms) if ms <= PAGE_DELAY_MS_MAX => Ok(Duration::from_millis(ms)),
            _ => Err(format!(
                "{key}: must be an integer from 0 to {PAGE_DELAY_MS_MAX}"
            )),
        },
    }
}

/// A string key: absent, or a non-empty string.
pub(crate) fn string<'a>(
    obj: &'a Map<String, Value>,
    key: &str,
) -> Result<Option<&'a str>, String> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if !s.is_empty() => Ok(Some(s)),
        Some(Value::String(_)) => Err(format!("{key}: must not be empty")),
        Some(_) => Err(format!("{key}: must be a string")),
    }
}

fn predicate(sql: &str) -> Result<(), String> {
    if sql.len() > PREDICATE_LEN_MAX {
        return Err(format!("longer than {PREDICATE_LEN_MAX} bytes"));
    }
    if sql.contains('\0') {
        return Err("contains a NUL character".to_owned());
    }
    if sql.trim().is_empty() {
        return Err("is empty".to_owned());
    }
    Ok(())
}
