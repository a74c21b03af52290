//! The `postgres:CONFIG.json` file: strict parsing, identifier rules and the DSN secret.
//!
//! Owns what the operator wrote and nothing else: no connection, no SQL beyond quoting.
//! Invariants: a `PgConfig` that exists has exactly one DSN (read from the file or from the
//! environment at open time), a table of one or two identifier parts, a key column, at most
//! `LABELS_PER_ITEM_MAX` labels and `CONTENT_VALUES_MAX` content columns. The DSN's password
//! lives only inside `tokio_postgres::Config`; no `Debug`, `Display` or error of this module
//! ever shows it (the raw DSN text is dropped once parsed).
//!
//! Predicates (`where`, `labels`) are SQL written by the operator and are trusted as such: the
//! config file is operator input, like a psql script. They run inside a READ ONLY transaction
//! as one prepared statement (a `;` cannot start a second one).

use crate::error::config_error;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use serde_json::{Map, Value};

use crate::content::CONTENT_VALUES_MAX;
use crate::contract::{LABELS_PER_ITEM_MAX, LABEL_LEN_MAX};
use crate::error::SourceError;

/// Bytes of a config file.
pub(crate) const CONFIG_BYTES_MAX: u64 = 1024 * 1024;
/// Bytes of one SQL predicate (`where` or a label).
pub(crate) const PREDICATE_LEN_MAX: usize = 64 * 1024;
/// Bytes of an identifier: PostgreSQL's NAMEDATALEN - 1. A longer one would be truncated
/// by the server with only a notice, so it is refused here.
pub(crate) const IDENT_LEN_MAX: usize = 63;
/// Longest `page_delay_ms`.
pub(crate) const PAGE_DELAY_MS_MAX: u64 = 60_000;
/// Bytes of an `sslrootcert` PEM file.
pub(crate) const ROOTCERT_BYTES_MAX: u64 = 1024 * 1024;

const KEYS: &[&str] = &[
    "dsn",
    "dsn_env",
    "table",
    "key",
    "where",
    "labels",
    "content",
    "sslrootcert",
    "page_delay_ms",
];

/// A schema-qualified (or search-path) table name, as the server spells its parts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TableName {
    pub(crate) schema: Option<String>,
    pub(crate) name: String,
}

impl TableName {
    /// The name as SQL, every part quoted.
    pub(crate) fn sql(&self) -> String {
        match &self.schema {
            Some(s) => format!("{}.{}", quote_ident(s), quote_ident(&self.name)),
            None => quote_ident(&self.name),
        }
    }
}

impl std::fmt::Display for TableName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.sql())
    }
}

/// A parsed, validated source config.
pub(crate) struct PgConfig {
    /// The config file, for errors.
    pub(crate) path: PathBuf,
    /// Where to connect; holds the password, if any.
    pub(crate) connect: tokio_postgres::Config,
    pub(crate) table: TableName,
    /// The key column, as the server spells it.
    pub(crate) key: String,
    pub(crate) where_sql: Option<String>,
    /// (label name, predicate), in the file's order.
    pub(crate) labels: Vec<(String, String)>,
    /// Content columns, as the server spells them, in the file's order.
    pub(crate) content: Vec<String>,
    /// PEM roots to verify the server certificate against (libpq's verify-full).
    pub(crate) rootcert: Option<PathBuf>,
    pub(crate) page_delay: Duration,
}

impl std::fmt::Debug for PgConfig {
    // Written by hand so that no future field can print the connection secret: only the
    // parts of the DSN that are not secret are shown.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgConfig")
            .field("path", &self.path)
            .field("user", &self.connect.get_user())
            .field("dbname", &self.connect.get_dbname())
            .field(
                "password",
                &self.connect.get_password().map(|_| "<redacted>"),
            )
            .field("table", &self.table.sql())
            .field("key", &self.key)
            .field("where", &self.where_sql)
            .field("labels", &self.labels)
            .field("content", &self.content)
            .field("rootcert", &self.rootcert)
            .field("page_delay", &self.page_delay)
            .finish()
    }
}

impl PgConfig {
    /// Reads and validates a config file; a `dsn_env` is read from the environment now.
    pub(crate) fn open(path: &Path) -> Result<PgConfig, SourceError> {
        // Bounded while reading, whatever size the file states (a pipe, `/dev/zero`).
        let text = crate::io_bound::read_text(path, CONFIG_BYTES_MAX)?;
        let value = crate::json::parse(&text, crate::json::Numbers::Integers)
            .map_err(|e| config_error(path, e.to_string()))?;
        PgConfig::from_value(path, &value, |name| std::env::var(name).ok())
    }

    /// Validates a parsed config; `env` reads an environment variable (a test may pass its
    /// own).
    pub(crate) fn from_value(
        path: &Path,
        value: &Value,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<PgConfig, SourceError> {
        let err = |problem: String| config_error(path, problem);
        let obj = value
            .as_object()
            .ok_or_else(|| err("must be a JSON object".to_owned()))?;
        if let Some(k) = obj.keys().find(|k| !KEYS.contains(&k.as_str())) {
            return Err(err(format!(
                "unknown key {k:?} (known: {})",
                KEYS.join(", ")
            )));
        }
        let dsn_text = match (string(obj, "dsn", path)?, string(obj, "dsn_env", path)?) {
            (Some(d), None) => d,
            (None, Some(var)) => env(&var).ok_or_else(|| {
                err(format!(
                    "dsn_env: the environment variable {var:?} is not set"
                ))
            })?,
            (Some(_), Some(_)) => return Err(err("give dsn or dsn_env, not both".to_owned())),
            (None, None) => return Err(err("missing key \"dsn\" (or \"dsn_env\")".to_owned())),
        };
        let connect = parse_dsn(&dsn_text).map_err(|problem| err(problem.to_owned()))?;
        drop(dsn_text);

        let table_text =
            string(obj, "table", path)?.ok_or_else(|| err("missing key \"table\"".to_owned()))?;
        let parts = parse_identifier(&table_text).map_err(|p| err(format!("table: {p}")))?;
        let table = match <[String; 2]>::try_from(parts) {
            Ok([schema, name]) => TableName {
                schema: Some(schema),
                name,
            },
            Err(mut parts) if parts.len() == 1 => TableName {
                schema: None,
                name: parts.remove(0),
            },
            Err(_) => {
                return Err(err(
                    "table: expected `name` or `schema.name` (quote a part with \" to keep a dot or upper case)".to_owned(),
                ))
            }
        };
        let key_text =
            string(obj, "key", path)?.ok_or_else(|| err("missing key \"key\"".to_owned()))?;
        let key = column(&key_text).map_err(|p| err(format!("key: {p}")))?;

        let where_sql = string(obj, "where", path)?;
        if let Some(w) = &where_sql {
            predicate(w).map_err(|p| err(format!("where: {p}")))?;
        }

        let mut labels = Vec::new();
        match obj.get("labels") {
            None | Some(Value::Null) => {}
            Some(Value::Object(m)) => {
                if m.len() > LABELS_PER_ITEM_MAX {
                    return Err(err(format!(
                        "labels: at most {LABELS_PER_ITEM_MAX} labels (an item may carry every one)"
                    )));
                }
                for (name, pred) in m {
                    if name.is_empty() || name.len() > LABEL_LEN_MAX {
                        return Err(err(format!(
                            "labels: a label name must have 1 to {LABEL_LEN_MAX} bytes"
                        )));
                    }
                    let Value::String(pred) = pred else {
                        return Err(err(format!(
                            "labels.{name}: must be an SQL predicate as a string"
                        )));
                    };
                    predicate(pred).map_err(|p| err(format!("labels.{name}: {p}")))?;
                    labels.push((name.clone(), pred.clone()));
                }
            }
            Some(_) => {
                return Err(err(
                    "labels: must be an object of NAME: SQL_PREDICATE".to_owned()
                ))
            }
        }

        let mut content = Vec::new();
        match obj.get("content") {
            None | Some(Value::Null) => {}
            Some(Value::Array(cols)) => {
                if cols.len() > CONTENT_VALUES_MAX {
                    return Err(err(format!(
                        "content: at most {CONTENT_VALUES_MAX} columns"
                    )));
                }
                for (i, c) in cols.iter().enumerate() {
                    let Value::String(c) = c else {
                        return Err(err(format!("content[{i}]: must be a column name")));
                    };
                    content.push(column(c).map_err(|p| err(format!("content[{i}]: {p}")))?);
                }
            }
            Some(_) => return Err(err("content: must be an array of column names".to_owned())),
        }

        // A relative certificate path is relative to the config file, so a resume started
        // from another directory reads the same file.
        let rootcert = string(obj, "sslrootcert", path)?.map(|p| {
            let p = PathBuf::from(p);
            match path.parent() {
                Some(dir) if p.is_relative() => dir.join(p),
                _ => p,
            }
        });

        let page_delay = match obj.get("page_delay_ms") {
            None | Some(Value::Null) => Duration::ZERO,
            Some(v) => match v.as_u64() {
                Some(ms) if ms <= PAGE_DELAY_MS_MAX => Duration::from_millis(ms),
                _ => {
                    return Err(err(format!(
                        "page_delay_ms: must be an integer from 0 to {PAGE_DELAY_MS_MAX}"
                    )))
                }
            },
        };

        Ok(PgConfig {
            path: path.to_owned(),
            connect,
            table,
            key,
            where_sql,
            labels,
            content,
            rootcert,
            page_delay,
        })
    }
}

fn string(obj: &Map<String, Value>, key: &str, path: &Path) -> Result<Option<String>, SourceError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if !s.is_empty() => Ok(Some(s.clone())),
        Some(Value::String(_)) => Err(config_error(path, format!("{key}: must not be empty"))),
        Some(_) => Err(config_error(path, format!("{key}: must be a string"))),
    }
}

/// Parses a DSN (URL or key=value). The driver's own message is shown only when it names an
/// option and nothing else: other parse messages may quote a character of the text, which
/// could be part of the password.
fn parse_dsn(text: &str) -> Result<tokio_postgres::Config, String> {
    tokio_postgres::Config::from_str(text).map_err(|e| {
        let cause = std::error::Error::source(&e).map(ToString::to_string);
        match cause {
            Some(c) if c.starts_with("unknown option `") || c.starts_with("invalid value for option `") => {
                format!("dsn: {c} (sslmode takes disable, prefer or require; see sslrootcert)")
            }
            _ => "dsn: not a connection string (a URL such as postgresql://user@host:5432/db, or key=value pairs)".to_owned(),
        }
    })
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

fn column(text: &str) -> Result<String, String> {
    let mut parts = parse_identifier(text)?;
    if parts.len() != 1 {
        return Err("expected one column name (quote it with \" to keep a dot)".to_owned());
    }
    Ok(parts.remove(0))
}

/// Quotes an identifier for SQL: in double quotes, a double quote doubled.
pub(crate) fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// Splits `a.b` or `"A"."b.c"` into the names the server uses, as SQL reads them: a bare part
/// is folded to lower case, a quoted part is kept exactly (with `""` for a quote).
pub(crate) fn parse_identifier(text: &str) -> Result<Vec<String>, String> {
    let mut parts = Vec::new();
    let mut chars = text.chars().peekable();
    // Bound: every iteration consumes at least one character or returns.
    for _ in 0..=text.len() {
        let mut part = String::new();
        if chars.peek() == Some(&'"') {
            chars.next();
            loop {
                match chars.next() {
                    Some('"') if chars.peek() == Some(&'"') => {
                        chars.next();
                        part.push('"');
                    }
                    Some('"') => break,
                    Some('\0') => return Err("contains a NUL character".to_owned()),
                    Some(c) => part.push(c),
                    None => return Err(format!("{text:?} has an unterminated quote")),
                }
            }
            if part.is_empty() {
                return Err(format!("{text:?} has an empty quoted name"));
            }
        } else {
            while let Some(&c) = chars.peek() {
                if c.is_ascii_alphanumeric() || c == '_' || c == '$' {
                    part.push(c.to_ascii_lowercase());
                    chars.next();
                } else {
                    break;
                }
            }
            if part.is_empty() || part.starts_with(|c: char| c.is_ascii_digit() || c == '$') {
                return Err(format!(
                    "{text:?} is not an identifier (letters, digits, _ and $, not starting with a digit; quote other names with \")"
                ));
            }
        }
        if part.len() > IDENT_LEN_MAX {
            return Err(format!(
                "a name longer than {IDENT_LEN_MAX} bytes would be truncated by the server"
            ));
        }
        parts.push(part);
        match chars.next() {
            None => return Ok(parts),
            Some('.') => {}
            Some(c) => return Err(format!("{text:?}: unexpected {c:?} after a name")),
        }
    }
    Err(format!("{text:?} is not an identifier"))
}
