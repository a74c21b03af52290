//! The PostgreSQL dialect's connection options and identifier rules: the DSN (and
//! `sslrootcert`) parsed, identifiers split and quoted as SQL reads them.
//!
//! Invariants: the DSN's password lives only inside `tokio_postgres::Config`; no `Debug` or
//! error of this module ever shows it (the driver's parse messages are shown only when they
//! name an option and nothing else).

use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde_json::{Map, Value};

use crate::json::ConfigError;
use crate::source::sql::dialect::{Connect, TableName};

/// Bytes of an identifier: PostgreSQL's NAMEDATALEN - 1. A longer one would be truncated
/// by the server with only a notice, so it is refused here.
pub(crate) const IDENT_LEN_MAX: usize = 63;
/// Bytes of an `sslrootcert` PEM file.
pub(crate) const ROOTCERT_BYTES_MAX: u64 = 1024 * 1024;

/// Where and how to connect.
#[derive(Clone)]
pub(crate) struct PgConnect {
    /// Holds the password, if any.
    pub(crate) config: tokio_postgres::Config,
    /// TLS through rustls, with the roots of `sslrootcert` (or the platform's).
    pub(crate) tls: tokio_postgres_rustls::MakeRustlsConnect,
    /// PEM roots to verify the server certificate against (libpq's verify-full).
    pub(crate) rootcert: Option<PathBuf>,
}

impl std::fmt::Debug for PgConnect {
    // Written by hand so that no future field can print the connection secret: only the
    // parts of the DSN that are not secret are shown.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgConnect")
            .field("user", &self.config.get_user())
            .field("dbname", &self.config.get_dbname())
            .field(
                "password",
                &self.config.get_password().map(|_| "<redacted>"),
            )
            .field("rootcert", &self.rootcert)
            .finish()
    }
}

impl Connect for PgConnect {
    const KEYS: &'static [&'static str] = &["sslrootcert"];
    const DSN_KEYS: &'static [&'static str] = &["sslmode", "connect_timeout", "application_name"];

    fn inline_dsn(
        base: &str,
        params: &[&str],
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<String, String> {
        Ok(crate::source::sql::spec::url_dsn(
            base,
            params,
            "PGPASSWORD",
            env,
        ))
    }

    fn parse(dsn: &str, obj: &Map<String, Value>, path: &Path) -> Result<PgConnect, ConfigError> {
        let mut config = parse_dsn(dsn)?;
        if config.get_password().is_none() {
            if let Some(pw) = pgpass(&config, &|k| std::env::var(k).ok()) {
                config.password(pw);
            }
        }
        // A relative certificate path is relative to the config file, so a resume started
        // from another directory reads the same file.
        let rootcert = crate::source::sql::config::string(obj, "sslrootcert")?.map(|p| {
            let p = PathBuf::from(p);
            match path.parent() {
                Some(dir) if p.is_relative() => dir.join(p),
                _ => p,
            }
        });
        let tls = super::tls::connector(rootcert.as_deref())?;
        Ok(PgConnect {
            config,
            tls,
            rootcert,
        })
    }

    fn redacted(&self) -> String {
        let host = self
            .config
            .get_hosts()
            .first()
            .map(|h| match h {
                tokio_postgres::config::Host::Tcp(h) => h.clone(),
                tokio_postgres::config::Host::Unix(p) => p.display().to_string(),
            })
            .unwrap_or_default();
        let port = self.config.get_ports().first().copied().unwrap_or(5432);
        format!(
            "postgresql://{}{}@{host}:{port}/{}",
            self.config.get_user().unwrap_or(""),
            if self.config.get_password().is_some() {
                ":<redacted>"
            } else {
                ""
            },
            self.config.get_dbname().unwrap_or("")
        )
    }

    fn database(&self) -> Option<&str> {
        self.config.get_dbname()
    }
}

/// The password `.pgpass` gives the DSN's first host, as libpq reads it (a Unix socket is
/// `localhost`, the database defaults to the user's name).
fn pgpass(config: &tokio_postgres::Config, env: &dyn Fn(&str) -> Option<String>) -> Option<String> {
    use crate::source::sql::passfile;
    let user = config.get_user()?;
    let host = match config.get_hosts().first() {
        Some(tokio_postgres::config::Host::Tcp(h)) => h.as_str(),
        _ => "localhost",
    };
    let target = passfile::Target {
        host,
        port: config.get_ports().first().copied().unwrap_or(5432),
        database: config.get_dbname().unwrap_or(user),
        user,
    };
    passfile::pgpass_password(&passfile::pgpass_path(env)?, target)
}

/// Parses a DSN (URL or key=value). The driver's own message is shown only when it names an
/// option and nothing else: other parse messages may quote a character of the text, which
/// could be part of the password.
fn parse_dsn(text: &str) -> Result<tokio_postgres::Config, ConfigError> {
    tokio_postgres::Config::from_str(text).map_err(|e| {
        let cause = std::error::Error::source(&e).map(ToString::to_string);
        ConfigError::invalid("dsn", match cause {
            Some(c) if c.starts_with("unknown option `") || c.starts_with("invalid value for option `") => {
                format!("{c} (sslmode takes disable, prefer or require; see sslrootcert)")
            }
            _ => "not a connection string (a URL such as postgresql://user@host:5432/db, or key=value pairs)".to_owned(),
        })
    })
}

/// The `table` of a config: `name` or `schema.name`.
pub(crate) fn table(text: &str) -> Result<TableName, String> {
    let parts = parse_identifier(text)?;
    match <[String; 2]>::try_from(parts) {
        Ok([schema, name]) => Ok(TableName {
            schema: Some(schema),
            name,
        }),
        Err(mut parts) if parts.len() == 1 => Ok(TableName {
            schema: None,
            name: parts.remove(0),
        }),
        Err(_) => Err(
            "expected `name` or `schema.name` (quote a part with \" to keep a dot or upper case)"
                .to_owned(),
        ),
    }
}

/// One column name.
pub(crate) fn column(text: &str) -> Result<String, String> {
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // Tests: a failed expectation is the report.

    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn pgpass_matches_the_dsns_host_port_database_and_user() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("pass");
        std::fs::write(
            &file,
            "db.example:5433:app:reader:tcp\nlocalhost:5432:reader:reader:socket\n",
        )
        .unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        let shown = file.display().to_string();
        let env = |k: &str| (k == "PGPASSFILE").then(|| shown.clone());
        let pw = |dsn: &str| super::pgpass(&super::parse_dsn(dsn).unwrap(), &env);
        assert_eq!(
            pw("postgresql://reader@db.example:5433/app").as_deref(),
            Some("tcp")
        );
        assert_eq!(pw("postgresql://reader@db.example/app"), None, "port 5432");
        assert_eq!(
            pw("host=/run/postgresql user=reader").as_deref(),
            Some("socket"),
            "a socket is localhost, the database the user's name"
        );
        let c = super::parse_dsn("postgresql://reader@db.example:5433/app").unwrap();
        assert_eq!(super::pgpass(&c, &|_| None), None, "no HOME, no PGPASSFILE");
    }
}
