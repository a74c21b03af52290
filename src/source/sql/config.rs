//! The config of every SQL source (`postgres:`, `mysql:`, `sqlite:` CONFIG.json, or an inline
//! spec's query, `spec.rs`): read through the strict config layer (`json::from_value`: unknown
//! keys refused with the key meant, every error naming the key, a file's at its line and
//! column) into what the core reads (table, key, scope, labels, content, pacing) and the dialect's own
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

use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};

use super::dialect::{Connect, Dialect, TableName};
use crate::content::CONTENT_VALUES_MAX;
use crate::contract::{LABELS_PER_ITEM_MAX, LABEL_LEN_MAX};
use crate::json::{self, ConfigError, Numbers};
use crate::source::SourceError;

/// Bytes of a config file.
pub(crate) const CONFIG_BYTES_MAX: u64 = 1024 * 1024;
/// Bytes of one SQL predicate (`where` or a label).
pub(crate) const PREDICATE_LEN_MAX: usize = 64 * 1024;
/// Longest `page_delay_ms` and `pause_ms`.
pub(crate) const PAGE_DELAY_MS_MAX: u64 = 60_000;

/// The keys every SQL config may have, as written; a dialect adds its own ([`Connect::KEYS`]),
/// read by the dialect from the rest of the object.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SqlFile {
    #[serde(default, deserialize_with = "non_empty_opt")]
    dsn: Option<String>,
    #[serde(default, deserialize_with = "non_empty_opt")]
    dsn_env: Option<String>,
    #[serde(default, deserialize_with = "non_empty_opt")]
    table: Option<String>,
    #[serde(default, deserialize_with = "non_empty_opt")]
    key: Option<String>,
    #[serde(rename = "where", default, deserialize_with = "non_empty_opt")]
    where_sql: Option<String>,
    labels: Option<Map<String, Value>>,
    content: Option<Vec<String>>,
    page_delay_ms: Option<u64>,
    pause_ms: Option<u64>,
    prefetch: Option<bool>,
}

/// An optional string that, when given, must not be empty.
fn non_empty_opt<'de, De: Deserializer<'de>>(d: De) -> Result<Option<String>, De::Error> {
    match Option::<String>::deserialize(d)? {
        Some(s) if s.is_empty() => Err(serde::de::Error::custom("must not be empty")),
        s => Ok(s),
    }
}

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
/// `SourceError::Io` when unreadable, `SourceError::ConfigFile` naming the key that is wrong,
/// at its line and column.
pub(crate) fn open<D: Dialect>(path: &Path) -> Result<(SqlConfig, D::Connect), SourceError> {
    // Bounded while reading, whatever size the file states (a pipe, `/dev/zero`).
    let text = crate::io_bound::read_text(path, CONFIG_BYTES_MAX)?;
    parse::<D>(path, &text, |name| std::env::var(name).ok())
}

/// Parses config text; `path` names the file in errors, `env` reads `dsn_env`.
///
/// # Errors
/// `SourceError::ConfigFile` naming the key that is wrong, at its line and column.
pub(crate) fn parse<D: Dialect>(
    path: &Path,
    text: &str,
    env: impl Fn(&str) -> Option<String>,
) -> Result<(SqlConfig, D::Connect), SourceError> {
    let at = |error: ConfigError| SourceError::ConfigFile {
        path: path.to_owned(),
        error: error.placed(text),
    };
    let value = json::parse(text, Numbers::Integers).map_err(|e| at(e.into()))?;
    let Value::Object(obj) = value else {
        return Err(at(ConfigError::invalid("", "must be a JSON object")));
    };
    from_object::<D>(path, &obj, env).map_err(at)
}

/// Validates a config object (a file's, or an inline spec's parameters).
///
/// # Errors
/// What is wrong, naming the key.
pub(crate) fn from_object<D: Dialect>(
    path: &Path,
    obj: &Map<String, Value>,
    env: impl Fn(&str) -> Option<String>,
) -> Result<(SqlConfig, D::Connect), ConfigError> {
    let [own, dialect] = <[_; 2]>::try_from(json::split_keys(
        &Value::Object(obj.clone()),
        &[
            json::field_names::<SqlFile>(),
            <D::Connect as Connect>::KEYS,
        ],
    )?)
    .unwrap_or_default();
    let file: SqlFile = json::from_value(&Value::Object(own))?;
    let dsn = match (file.dsn, &file.dsn_env) {
        (Some(d), None) => d,
        (None, Some(var)) => env(var).ok_or_else(|| {
            ConfigError::invalid(
                "dsn_env",
                format!("the environment variable {var:?} is not set"),
            )
        })?,
        (Some(_), Some(_)) => {
            return Err(ConfigError::invalid(
                "dsn_env",
                "give dsn or dsn_env, not both",
            ))
        }
        (None, None) => {
            return Err(ConfigError::invalid(
                "",
                "missing required key \"dsn\" (or \"dsn_env\")",
            ))
        }
    };
    let connect = D::Connect::parse(&dsn, &dialect, path)?;
    drop(dsn);

    // Required, but said after the DSN, which a config needs first.
    let table = file.table.ok_or_else(|| ConfigError::missing("table"))?;
    let table = D::table(&table, &connect).map_err(|p| ConfigError::invalid("table", p.0))?;
    let key = file.key.ok_or_else(|| ConfigError::missing("key"))?;
    let key = D::column(&key).map_err(|p| ConfigError::invalid("key", p.0))?;
    if let Some(w) = &file.where_sql {
        predicate(&["where"], w)?;
    }
    Ok((
        SqlConfig {
            path: path.to_owned(),
            table,
            key,
            where_sql: file.where_sql,
            labels: labels(file.labels)?,
            content: content::<D>(file.content)?,
            page_delay: delay("page_delay_ms", file.page_delay_ms)?,
            pause: delay("pause_ms", file.pause_ms)?,
            prefetch: file.prefetch.unwrap_or(true),
        },
        connect,
    ))
}

fn labels(given: Option<Map<String, Value>>) -> Result<Vec<(String, String)>, ConfigError> {
    let given = given.unwrap_or_default();
    if given.len() > LABELS_PER_ITEM_MAX {
        return Err(ConfigError::invalid(
            "labels",
            format!("at most {LABELS_PER_ITEM_MAX} labels (an item may carry every one)"),
        ));
    }
    let mut labels = Vec::with_capacity(given.len());
    for (name, pred) in given {
        if name.is_empty() || name.len() > LABEL_LEN_MAX {
            return Err(ConfigError::invalid(
                "labels",
                format!("a label name must have 1 to {LABEL_LEN_MAX} bytes"),
            ));
        }
        let Value::String(pred) = pred else {
            return Err(ConfigError::invalid_at(
                &["labels", &name],
                "must be an SQL predicate as a string",
            ));
        };
        predicate(&["labels", &name], &pred)?;
        labels.push((name, pred));
    }
    Ok(labels)
}

fn content<D: Dialect>(given: Option<Vec<String>>) -> Result<Vec<String>, ConfigError> {
    let given = given.unwrap_or_default();
    if given.len() > CONTENT_VALUES_MAX {
        return Err(ConfigError::invalid(
            "content",
            format!("at most {CONTENT_VALUES_MAX} columns"),
        ));
    }
    let mut content: Vec<String> = Vec::with_capacity(given.len());
    for (i, c) in given.iter().enumerate() {
        let at = |p: String| ConfigError::invalid(&format!("content[{i}]"), p);
        let name = D::column(c).map_err(|p| at(p.0))?;
        // The same column twice (as the server compares names) is a mistake.
        if content.iter().any(|x| D::same_column(x, &name)) {
            return Err(at(format!("column {c:?} is named twice")));
        }
        content.push(name);
    }
    Ok(content)
}

fn delay(key: &str, ms: Option<u64>) -> Result<Duration, ConfigError> {
    match ms {
        None => Ok(Duration::ZERO),
        Some(ms) if ms <= PAGE_DELAY_MS_MAX => Ok(Duration::from_millis(ms)),
        Some(_) => Err(ConfigError::invalid(
            key,
            format!("must be an integer from 0 to {PAGE_DELAY_MS_MAX}"),
        )),
    }
}

/// A dialect's string key: absent, or a non-empty string.
///
/// # Errors
/// The value is not a string, or is empty.
pub(crate) fn string<'a>(
    obj: &'a Map<String, Value>,
    key: &str,
) -> Result<Option<&'a str>, ConfigError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if !s.is_empty() => Ok(Some(s)),
        Some(Value::String(_)) => Err(ConfigError::invalid(key, "must not be empty")),
        Some(_) => Err(ConfigError::invalid(key, "must be a string")),
    }
}

/// An SQL predicate the operator wrote, at the path `keys`.
fn predicate(keys: &[&str], sql: &str) -> Result<(), ConfigError> {
    let problem = if sql.len() > PREDICATE_LEN_MAX {
        format!("longer than {PREDICATE_LEN_MAX} bytes")
    } else if sql.contains('\0') {
        "contains a NUL character".to_owned()
    } else if sql.trim().is_empty() {
        "is empty".to_owned()
    } else {
        return Ok(());
    };
    Err(ConfigError::invalid_at(keys, problem))
}

#[cfg(all(test, feature = "sqlite"))]
mod tests {
    #![allow(clippy::unwrap_used)] // Tests: a panic is the failure report.
    use super::*;
    use crate::source::sqlite::LiteDialect;

    fn refused(text: &str) -> String {
        parse::<LiteDialect>(Path::new("c.json"), text, |_| None)
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn a_config_file_error_is_placed_and_worded_as_every_config_files() {
        let base = "{\"dsn\": \"a.db\", \"table\": \"t\", \"key\": \"id\",\n ";
        assert_eq!(
            refused(&format!("{base}\"tables\": 1}}")),
            "c.json:2:2: unknown key \"tables\"; did you mean \"table\"?"
        );
        assert_eq!(
            refused(&format!("{base}\"where\": \" \"}}")),
            "c.json:2:2: key \"where\": is empty"
        );
        assert_eq!(
            refused(&format!("{base}\"labels\": {{\"a.b\": 1}}}}")),
            "c.json:2:13: key \"labels.a.b\": must be an SQL predicate as a string"
        );
        assert_eq!(
            refused(&format!("{base}\"content\": [\"a\", 2]}}")),
            "c.json:2:19: key \"content[1]\": must be a string, not an integer"
        );
        assert_eq!(
            refused(&format!("{base}\"pause_ms\": 60001}}")),
            "c.json:2:2: key \"pause_ms\": must be an integer from 0 to 60000"
        );
        assert_eq!(
            refused("{\"dsn\": \"a.db\", \"key\": \"id\"}"),
            "c.json: missing required key \"table\""
        );
        assert_eq!(
            refused("{\"table\": \"t\", \"key\": \"id\"}"),
            "c.json: missing required key \"dsn\" (or \"dsn_env\")"
        );
        assert_eq!(
            refused("{\"dsn_env\": \"NOPE\", \"table\": \"t\", \"key\": \"id\"}"),
            "c.json:1:2: key \"dsn_env\": the environment variable \"NOPE\" is not set"
        );
        assert_eq!(
            refused("{\"dsn\": \"a.db\", \"table\": \"\", \"key\": \"id\"}"),
            "c.json:1:17: key \"table\": must not be empty"
        );
        // PostgreSQL's own key is unknown to SQLite.
        assert!(refused(&format!("{base}\"sslrootcert\": \"x\"}}")).contains("unknown key"));
        assert_eq!(refused("[]"), "c.json: must be a JSON object");
        let (c, connect) = parse::<LiteDialect>(
            Path::new("/d/c.json"),
            &format!("{base}\"labels\": {{\"x\": \"a > 1\"}}, \"prefetch\": false}}"),
            |_| None,
        )
        .unwrap();
        assert_eq!(c.labels, [("x".to_owned(), "a > 1".to_owned())]);
        assert!(!c.prefetch);
        assert_eq!(connect.path, Path::new("/d/a.db"));
    }
}
