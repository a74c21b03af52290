//! The MySQL dialect's connection options and names: the DSN parsed into the driver's options,
//! the table's schema (from the name or the DSN's database), identifiers checked.
//!
//! The DSN may carry a password. It lives only inside the driver's connection options: `Debug`
//! prints the user, host, port and database and never the password, and no error built here
//! quotes the DSN (a URL error names the problem, never the text).

use std::fmt;
use std::path::Path;

use mysql_async::{Opts, OptsBuilder, UrlError};
use serde_json::{Map, Value};

use crate::json::ConfigError;
use crate::source::sql::dialect::{Connect, TableName};

/// Characters of one identifier (MySQL's own limit is 64).
pub(crate) const IDENT_LEN_MAX: usize = 64;

/// The driver's connection options, password included: never printed.
#[derive(Clone)]
pub(crate) struct MyConnect {
    pub(crate) opts: Opts,
}

impl fmt::Debug for MyConnect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.redacted())
    }
}

impl Connect for MyConnect {
    const KEYS: &'static [&'static str] = &[];
    const DSN_KEYS: &'static [&'static str] = &["require_ssl", "verify_ca", "verify_identity"];

    fn inline_dsn(
        base: &str,
        params: &[&str],
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<String, String> {
        Ok(crate::source::sql::spec::url_dsn(
            base,
            params,
            "MYSQL_PWD",
            env,
        ))
    }

    fn parse(dsn: &str, _: &Map<String, Value>, _: &Path) -> Result<MyConnect, ConfigError> {
        let opts = Opts::from_url(dsn).map_err(|e| ConfigError::invalid("dsn", url_problem(&e)))?;
        // A DSN names a TCP server; the driver would otherwise switch to a local socket it
        // discovers, and a user granted for 127.0.0.1 may not be granted for localhost.
        let mut builder = OptsBuilder::from_opts(opts.clone()).prefer_socket(false);
        if opts.pass().is_none() {
            let env = |k: &str| std::env::var(k).ok();
            let file = crate::source::sql::passfile::mycnf_path(&env);
            if let Some(pw) = file.and_then(|f| crate::source::sql::passfile::mycnf_password(&f)) {
                builder = builder.pass(Some(pw));
            }
        }
        Ok(MyConnect {
            opts: builder.into(),
        })
    }

    /// `mysql://USER@HOST:PORT/DB` without the password.
    fn redacted(&self) -> String {
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

    fn database(&self) -> Option<&str> {
        self.opts.db_name()
    }
}

/// The `table` of a config: `db.table`, or `table` in the DSN's database.
pub(crate) fn table(text: &str, connect: &MyConnect) -> Result<TableName, String> {
    let (schema, name) = match text.split_once('.') {
        Some((s, t)) => (s.to_owned(), t.to_owned()),
        None => match connect.database() {
            Some(db) => (db.to_owned(), text.to_owned()),
            None => {
                return Err(
                    "name the schema (\"db.table\") or put a database in the dsn".to_owned(),
                )
            }
        },
    };
    ident(&schema).map_err(|p| format!("schema {p}"))?;
    ident(&name)?;
    Ok(TableName {
        schema: Some(schema),
        name,
    })
}

/// An identifier we can quote: 1 to 64 characters, no NUL (MySQL refuses it in names).
pub(crate) fn ident(name: &str) -> Result<(), String> {
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
