//! The SQLite dialect's connection options and names: the database file (a config's `dsn`, or
//! an inline spec's `PATH`), the table's schema (`main` unless named), identifiers checked.
//!
//! A SQLite file has no password: nothing here is secret, but the path is still shown only as
//! the operator wrote it (made absolute).

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::json::ConfigError;
use crate::source::sql::dialect::{Connect, TableName};

/// Characters of one identifier (SQLite has no limit of its own; a name this long is a
/// mistake).
pub(crate) const IDENT_LEN_MAX: usize = 1024;

/// The database file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LiteConnect {
    /// Absolute, or relative to the config file's directory.
    pub(crate) path: PathBuf,
}

impl Connect for LiteConnect {
    const KEYS: &'static [&'static str] = &[];
    const DSN_KEYS: &'static [&'static str] = &[];

    /// `dsn` is the database file's path; a relative one is relative to the config file.
    fn parse(dsn: &str, _: &Map<String, Value>, path: &Path) -> Result<LiteConnect, ConfigError> {
        let file = PathBuf::from(dsn.strip_prefix("sqlite:").unwrap_or(dsn));
        if file.as_os_str().is_empty() {
            return Err(ConfigError::invalid(
                "dsn",
                "must be the path of the SQLite database file",
            ));
        }
        let file = match path.parent() {
            Some(dir) if file.is_relative() => dir.join(file),
            _ => file,
        };
        Ok(LiteConnect { path: file })
    }

    /// `sqlite:PATH` as an absolute path (a resume from another directory opens the same file).
    fn inline_dsn(
        base: &str,
        _: &[&str],
        _: &dyn Fn(&str) -> Option<String>,
    ) -> Result<String, String> {
        let file = base.strip_prefix("sqlite:").unwrap_or(base);
        if file.is_empty() {
            return Err("the spec names no database file (sqlite:PATH?table=T&key=K)".to_owned());
        }
        let abs = std::path::absolute(file)
            .map_err(|e| format!("the database path cannot be made absolute: {e}"))?;
        abs.to_str()
            .map(str::to_owned)
            .ok_or_else(|| "the database path is not UTF-8".to_owned())
    }

    fn redacted(&self) -> String {
        format!("sqlite:{}", self.path.display())
    }

    fn database(&self) -> Option<&str> {
        None
    }
}

/// The `table` of a config: `name`, or `schema.name` (`main`, `temp`).
pub(crate) fn table(text: &str) -> Result<TableName, String> {
    let (schema, name) = match text.split_once('.') {
        Some((s, t)) => (Some(s.to_owned()), t.to_owned()),
        None => (None, text.to_owned()),
    };
    if let Some(s) = &schema {
        ident(s).map_err(|p| format!("schema {p}"))?;
    }
    ident(&name)?;
    Ok(TableName { schema, name })
}

/// An identifier we can quote: 1 to `IDENT_LEN_MAX` characters, no NUL.
pub(crate) fn ident(name: &str) -> Result<(), String> {
    if name.is_empty() || name.chars().count() > IDENT_LEN_MAX {
        return Err(format!(
            "{:?} is not an identifier of 1 to {IDENT_LEN_MAX} characters",
            name.chars().take(64).collect::<String>()
        ));
    }
    if name.contains('\0') {
        return Err("an identifier cannot hold a NUL character".into());
    }
    Ok(())
}

/// An identifier quoted for SQLite: `"name"`, a `"` doubled.
pub(crate) fn quote(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}
