//! The `mysql:CONFIG.json` file: parsed strictly (unknown keys, duplicate keys and wrong types
//! are errors naming the key) into a [`MysqlConfig`].
//!
//! The DSN may carry a password. It lives only inside the driver's connection options: the
//! config's `Debug` prints the user, host, port and database and never the password, and no
//! error built here quotes the DSN (a URL error names the problem, never the text).

pub(crate) use crate::error::config_error as config_err;
use std::fmt;
use std::path::{Path, PathBuf};

use mysql_async::{Opts, OptsBuilder, UrlError};
use serde_json::{Map, Value};

use crate::content::CONTENT_VALUES_MAX;
use crate::contract::{LABELS_PER_ITEM_MAX, LABEL_LEN_MAX};
use crate::error::SourceError;
use crate::json::{self, Numbers};

/// Bytes of a config file.
pub(crate) const CONFIG_BYTES_MAX: u64 = 1024 * 1024;
/// Characters of one identifier (MySQL's own limit is 64).
pub(crate) const IDENT_LEN_MAX: usize = 64;
/// Bytes of one SQL predicate (`where` or a label).
pub(crate) const PREDICATE_LEN_MAX: usize = 64 * 1024;
/// The longest `pause_ms`.
pub(crate) const PAUSE_MS_MAX: u64 = 60_000;

const KEYS: &[&str] = &[
    "dsn", "dsn_env", "table", "key", "where", "labels", "content", "pause_ms",
];

/// A parsed `mysql:` source config. `Debug` never shows the password.
#[derive(Clone)]
pub struct MysqlConfig {
    /// The file it was read from (errors name it).
    pub(crate) path: PathBuf,
    /// Connection options, password included: never printed.
    pub(crate) opts: Opts,
    /// The schema (database) of the table: the one named in `table`, else the DSN's.
    pub(crate) schema: String,
    /// The table's name.
    pub(crate) table: String,
    /// The key column.
    pub(crate) key: String,
    /// The scope's SQL predicate, trusted operator SQL.
    pub(crate) where_sql: Option<String>,
    /// Label name and predicate, in the file's order.
    pub(crate) labels: Vec<(String, String)>,
    /// Content columns, in the file's order.
    pub(crate) content: Vec<String>,
    /// A pause before every page but the first, milliseconds.
    pub(crate) pause_ms: u64,
    /// A shard's key range (from the contract, never from the file).
    pub(crate) key_range: Option<crate::contract::KeyRange>,
}

impl fmt::Debug for MysqlConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MysqlConfig")
            .field("path", &self.path)
            .field("dsn", &self.redacted_dsn())
            .field("schema", &self.schema)
            .field("table", &self.table)
            .field("key", &self.key)
            .field("where", &self.where_sql)
            .field("labels", &self.labels)
            .field("content", &self.content)
            .field("pause_ms", &self.pause_ms)
            .field("key_range", &self.key_range)
            .finish()
    }
}

impl MysqlConfig {
    /// Reads and parses a config file; a `dsn_env` is read from the environment now.
    ///
    /// # Errors
    /// `SourceError::Io` when unreadable, `SourceError::Config` naming the key.
    pub fn open(path: &Path) -> Result<MysqlConfig, SourceError> {
        // Bounded while reading, whatever size the file states (a pipe, `/dev/zero`).
        let text = crate::io_bound::read_text(path, CONFIG_BYTES_MAX)?;
        MysqlConfig::parse(path, &text, |name| std::env::var(name).ok())
    }

    /// Parses config text; `path` only names the file in errors, `env` looks up `dsn_env`.
    ///
    /// # Errors
    /// `SourceError::Config` naming the key.
    pub fn parse(
        path: &Path,
        text: &str,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<MysqlConfig, SourceError> {
        let bad = |problem: String| config_err(path, problem);
        let v = json::parse(text, Numbers::Integers).map_err(|e| bad(e.to_string()))?;
        let obj = v
            .as_object()
            .ok_or_else(|| bad("the config must be a JSON object".into()))?;
        if let Some(k) = obj.keys().find(|k| !KEYS.contains(&k.as_str())) {
            return Err(bad(format!(
                "unknown key {k:?} (expected one of {})",
                KEYS.join(", ")
            )));
        }
        let dsn = match (opt_str(obj, "dsn"), opt_str(obj, "dsn_env")) {
            (Err(p), _) | (_, Err(p)) => return Err(bad(p)),
            (Ok(Some(_)), Ok(Some(_))) => {
                return Err(bad("give either \"dsn\" or \"dsn_env\", not both".into()))
            }
            (Ok(None), Ok(None)) => {
                return Err(bad("key \"dsn\" (or \"dsn_env\") is required".into()))
            }
            (Ok(Some(dsn)), Ok(None)) => dsn.to_owned(),
            (Ok(None), Ok(Some(name))) => env(name).ok_or_else(|| {
                bad(format!(
                    "key \"dsn_env\": environment variable {name:?} is not set"
                ))
            })?,
        };
        let key_name = if obj.contains_key("dsn") {
            "dsn"
        } else {
            "dsn_env"
        };
        let opts = Opts::from_url(&dsn)
            .map_err(|e| bad(format!("key {key_name:?}: {}", url_problem(&e))))?;
        // A DSN names a TCP server; the driver would otherwise switch to a local socket it
        // discovers, and a user granted for 127.0.0.1 may not be granted for localhost.
        let opts: Opts = OptsBuilder::from_opts(opts).prefer_socket(false).into();

        let table_text = opt_str(obj, "table")
            .map_err(&bad)?
            .ok_or_else(|| bad("key \"table\" is required".into()))?;
        let (schema, table) = match table_text.split_once('.') {
            Some((s, t)) => (s.to_owned(), t.to_owned()),
            None => match opts.db_name() {
                Some(db) => (db.to_owned(), table_text.to_owned()),
                None => return Err(bad(
                    "key \"table\": name the schema (\"db.table\") or put a database in the dsn"
                        .into(),
                )),
            },
        };
        ident(&schema).map_err(|p| bad(format!("key \"table\": schema {p}")))?;
        ident(&table).map_err(|p| bad(format!("key \"table\": {p}")))?;

        let key = opt_str(obj, "key")
            .map_err(&bad)?
            .ok_or_else(|| bad("key \"key\" is required".into()))?
            .to_owned();
        ident(&key).map_err(|p| bad(format!("key \"key\": {p}")))?;

        let where_sql = opt_str(obj, "where").map_err(&bad)?.map(str::to_owned);
        if let Some(w) = &where_sql {
            predicate(w).map_err(|p| bad(format!("key \"where\": {p}")))?;
        }

        let mut labels = Vec::new();
        match obj.get("labels") {
            None | Some(Value::Null) => {}
            Some(Value::Object(m)) => {
                if m.len() > LABELS_PER_ITEM_MAX {
                    return Err(bad(format!(
                        "key \"labels\": more than {LABELS_PER_ITEM_MAX} labels"
                    )));
                }
                for (name, pred) in m {
                    if name.is_empty() || name.len() > LABEL_LEN_MAX {
                        return Err(bad(format!(
                            "key \"labels\": a label name must be 1 to {LABEL_LEN_MAX} bytes"
                        )));
                    }
                    let pred = pred.as_str().ok_or_else(|| {
                        bad(format!(
                            "key \"labels\": label {name:?} must map to an SQL predicate string"
                        ))
                    })?;
                    predicate(pred)
                        .map_err(|p| bad(format!("key \"labels\": label {name:?}: {p}")))?;
                    labels.push((name.clone(), pred.to_owned()));
                }
            }
            Some(_) => {
                return Err(bad(
                    "key \"labels\" must be an object {NAME: SQL_PREDICATE}".into(),
                ))
            }
        }

        let mut content: Vec<String> = Vec::new();
        match obj.get("content") {
            None | Some(Value::Null) => {}
            Some(Value::Array(cols)) => {
                if cols.len() > CONTENT_VALUES_MAX {
                    return Err(bad(format!(
                        "key \"content\": more than {CONTENT_VALUES_MAX} columns"
                    )));
                }
                for c in cols {
                    let c = c.as_str().ok_or_else(|| {
                        bad("key \"content\" must be an array of column names".into())
                    })?;
                    ident(c).map_err(|p| bad(format!("key \"content\": {p}")))?;
                    // MySQL column names compare without case.
                    if content.iter().any(|x| x.eq_ignore_ascii_case(c)) {
                        return Err(bad(format!("key \"content\": column {c:?} is named twice")));
                    }
                    content.push(c.to_owned());
                }
            }
            Some(_) => {
                return Err(bad(
                    "key \"content\" must be an array of column names".into()
                ))
            }
        }

        let pause_ms = match obj.get("pause_ms") {
            None | Some(Value::Null) => 0,
            Some(v) => v.as_u64().filter(|n| *n <= PAUSE_MS_MAX).ok_or_else(|| {
                bad(format!(
                    "key \"pause_ms\" must be an integer from 0 to {PAUSE_MS_MAX}"
                ))
            })?,
        };

        Ok(MysqlConfig {
            path: path.to_owned(),
            opts,
            schema,
            table,
            key,
            where_sql,
            labels,
            content,
            pause_ms,
            key_range: None,
        })
    }

    /// Narrows the scope to integer keys in `ranges` (ascending, disjoint, inclusive): the
    /// config's `where`, `AND` the ranges (see `source::key_ranges_sql`).
    pub fn narrow_to_keys(&mut self, ranges: &[(u64, u64)]) {
        let ranges = crate::source::key_ranges_sql(&super::sql::quote(&self.key), ranges);
        self.where_sql = Some(crate::source::narrowed(self.where_sql.as_deref(), &ranges));
    }

    /// `mysql://USER@HOST:PORT/DB` without the password, for logs and `Debug`.
    #[must_use]
    pub fn redacted_dsn(&self) -> String {
        let user = self.opts.user().unwrap_or("");
        let pass = if self.opts.pass().is_some() {
            ":<redacted>"
        } else {
            ""
        };
        format!(
            "mysql://{user}{pass}@{}:{}/{}",
            self.opts.ip_or_hostname(),
            self.opts.tcp_port(),
            self.opts.db_name().unwrap_or("")
        )
    }
}

fn opt_str<'a>(obj: &'a Map<String, Value>, key: &str) -> Result<Option<&'a str>, String> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if !s.is_empty() => Ok(Some(s)),
        Some(_) => Err(format!("key {key:?} must be a non-empty string")),
    }
}

/// An identifier we can quote: 1 to 64 characters, no NUL (MySQL refuses it in names).
fn ident(name: &str) -> Result<(), String> {
    if name.is_empty() || name.chars().count() > IDENT_LEN_MAX {
        return Err(format!(
            "{name:?} is not an identifier of 1 to {IDENT_LEN_MAX} characters"
        ));
    }
    if name.contains('\0') {
        return Err("an identifier cannot hold a NUL character".into());
    }
    Ok(())
}

fn predicate(sql: &str) -> Result<(), String> {
    if sql.trim().is_empty() || sql.len() > PREDICATE_LEN_MAX {
        return Err(format!(
            "an SQL predicate must be 1 to {PREDICATE_LEN_MAX} bytes"
        ));
    }
    Ok(())
}

/// What is wrong with a DSN, never quoting it (it may hold a password).
fn url_problem(e: &UrlError) -> String {
    match e {
        UrlError::UnsupportedScheme { .. } => "a DSN must start with mysql://".into(),
        UrlError::UnknownParameter { param } => format!("unknown DSN parameter {param:?}"),
        UrlError::InvalidParamValue { param, .. } => {
            format!("DSN parameter {param:?} has an invalid value")
        }
        UrlError::FeatureRequired { param, .. } => {
            format!("DSN parameter {param:?} is not supported by this build")
        }
        UrlError::InvalidPoolConstraints { .. } => "invalid pool_min/pool_max".into(),
        _ => "not a valid mysql://USER[:PASSWORD]@HOST[:PORT]/DATABASE URL".into(),
    }
}
