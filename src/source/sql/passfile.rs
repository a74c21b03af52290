//! The password a DSN lacks, from the user's password file, as the database's own client
//! reads it: PostgreSQL's `.pgpass` (`PGPASSFILE`, else `$HOME/.pgpass`) and the `[client]`
//! group of MySQL's `$HOME/.my.cnf` (then a `[scanledger]` group, which wins).
//!
//! Invariants: a file is read only when the DSN carries no password, and only up to
//! [`PASSFILE_BYTES_MAX`]; a file that is missing, unreadable, too long or not a regular file
//! gives no password (the connection then fails as it would without one), and a file whose
//! permissions its client would refuse (`.pgpass` readable by group or others, `.my.cnf`
//! writable by others) is skipped with a warning that names the file and never its content.
//! Nothing here returns an error: a password file is a fallback, never a reason to stop.

use std::path::{Path, PathBuf};

/// Bytes read of a password file; a longer one is skipped with a warning.
pub(crate) const PASSFILE_BYTES_MAX: u64 = 1024 * 1024;

/// Where a connection goes, as the password files match it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Target<'a> {
    pub(crate) host: &'a str,
    pub(crate) port: u16,
    pub(crate) database: &'a str,
    pub(crate) user: &'a str,
}

/// The `.pgpass` file's path: `PGPASSFILE`, else `$HOME/.pgpass`.
pub(crate) fn pgpass_path(env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    env("PGPASSFILE")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .or_else(|| home(env).map(|h| h.join(".pgpass")))
}

/// The MySQL option file read: `$HOME/.my.cnf`.
pub(crate) fn mycnf_path(env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    home(env).map(|h| h.join(".my.cnf"))
}

fn home(env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    env("HOME").filter(|h| !h.is_empty()).map(PathBuf::from)
}

/// The password `.pgpass` gives `target`, if the file at `path` may be used and has a line
/// for it.
pub(crate) fn pgpass_password(path: &Path, target: Target<'_>) -> Option<String> {
    // libpq ignores a password file that its group or others may read or write.
    let text = read(
        path,
        0o077,
        "readable or writable by group or others (chmod 600 it)",
    )?;
    pgpass_lookup(&text, target)
}

/// The password of the `[client]` (then `[scanledger]`) group of the option file at `path`.
pub(crate) fn mycnf_password(path: &Path) -> Option<String> {
    // The MySQL client ignores an option file that others may write.
    let text = read(path, 0o002, "writable by others (chmod 600 it)")?;
    mycnf_lookup(&text)
}

/// The file's text, unless it is missing, not a regular file, too long, or its mode has any
/// of `refused_mode`'s bits (then it is skipped with a warning saying `why`).
fn read(path: &Path, refused_mode: u32, why: &str) -> Option<String> {
    let meta = std::fs::metadata(path).ok()?;
    if !meta.is_file() {
        tracing::warn!(file = %path.display(), "password file skipped: not a regular file");
        return None;
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if meta.permissions().mode() & refused_mode != 0 {
            tracing::warn!(file = %path.display(), "password file skipped: {why}");
            return None;
        }
    }
    #[cfg(not(unix))]
    let _ = (refused_mode, why);
    match crate::io_bound::read_text(path, PASSFILE_BYTES_MAX) {
        Ok(text) => Some(text),
        Err(e) => {
            tracing::warn!(file = %path.display(), "password file skipped: {e}");
            None
        }
    }
}

/// The password of the first `.pgpass` line matching `target`: `host:port:database:user:password`,
/// each of the first four a value or `*`, `\` escaping `:` and `\`, `#` starting a comment line.
pub(crate) fn pgpass_lookup(text: &str, target: Target<'_>) -> Option<String> {
    let port = target.port.to_string();
    let wanted = [target.host, port.as_str(), target.database, target.user];
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(pgpass_fields)
        .find(|f| f[..4].iter().zip(wanted).all(|(f, w)| f == "*" || f == w))
        .map(|[.., password]| password)
        .filter(|p| !p.is_empty())
}

/// A `.pgpass` line's five fields, unescaped; `None` for a line with fewer.
fn pgpass_fields(line: &str) -> Option<[String; 5]> {
    let line = line.strip_suffix('\r').unwrap_or(line);
    let mut fields: [String; 5] = Default::default();
    let mut at = 0usize;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => fields[at].push(chars.next().unwrap_or('\\')),
            // The password (the last field) may hold unescaped colons.
            ':' if at < 4 => at = at.saturating_add(1),
            c => fields[at].push(c),
        }
    }
    (at == 4).then_some(fields)
}

/// The `password` option of the `[client]` group, overridden by a `[scanledger]` group's; a
/// value may be quoted (`'…'` or `"…"`, with `\` escapes inside double quotes) and an unquoted
/// one ends at a ` #` comment. Option names are case-insensitive and `-` equals `_`.
pub(crate) fn mycnf_lookup(text: &str) -> Option<String> {
    let mut group = String::new();
    // The last value in each group wins, as in the MySQL client.
    let (mut client, mut ours) = (None, None);
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            group = name.trim().to_ascii_lowercase();
            continue;
        }
        let slot = match group.as_str() {
            "client" => &mut client,
            "scanledger" => &mut ours,
            _ => continue,
        };
        let Some((name, value)) = line.split_once('=') else {
            continue;
        };
        if name.trim().to_ascii_lowercase().replace('-', "_") == "password" {
            *slot = Some(option_value(value.trim()));
        }
    }
    ours.or(client).filter(|v| !v.is_empty())
}

/// An option file value: quoted, or up to a `#` comment, trimmed.
fn option_value(raw: &str) -> String {
    let mut chars = raw.chars();
    match chars.next() {
        Some(q @ ('\'' | '"')) => {
            let mut out = String::new();
            while let Some(c) = chars.next() {
                match c {
                    c if c == q => break,
                    '\\' if q == '"' => match chars.next() {
                        Some('n') => out.push('\n'),
                        Some('t') => out.push('\t'),
                        Some('r') => out.push('\r'),
                        Some('b') => out.push('\u{8}'),
                        Some('s') => out.push(' '),
                        Some(c) => out.push(c),
                        None => out.push('\\'),
                    },
                    c => out.push(c),
                }
            }
            out
        }
        _ => raw
            .split_once('#')
            .map_or(raw, |(value, _)| value)
            .trim()
            .to_owned(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // Tests: a failed expectation is the report.

    use super::*;

    const T: Target<'static> = Target {
        host: "db.example",
        port: 5432,
        database: "app",
        user: "reader",
    };

    #[test]
    fn pgpass_takes_the_first_matching_line_with_wildcards_and_escapes() {
        let text = "# comment\n\
                    other:5432:app:reader:wrong\n\
                    db.example:5433:app:reader:wrongport\n\
                    db.example:*:app:reader:pa\\:ss\\\\w:rd\n\
                    *:*:*:*:fallback\n";
        assert_eq!(pgpass_lookup(text, T).as_deref(), Some("pa:ss\\w:rd"));
        let other = Target {
            user: "writer",
            ..T
        };
        assert_eq!(pgpass_lookup(text, other).as_deref(), Some("fallback"));
        assert_eq!(pgpass_lookup("db.example:5432:app\n", T), None);
        assert_eq!(pgpass_lookup("", T), None);
        assert_eq!(
            pgpass_lookup("*:*:*:*:\n", T),
            None,
            "an empty password is none"
        );
        assert_eq!(
            pgpass_lookup("db.example:5432:app:reader:crlf\r\n", T).as_deref(),
            Some("crlf")
        );
    }

    #[test]
    fn mycnf_reads_client_then_scanledger_and_quotes() {
        let text = "[mysqld]\npassword=server\n[client]\nuser = x\npassword = \"a b\\\"c\" \n";
        assert_eq!(mycnf_lookup(text).as_deref(), Some("a b\"c"));
        let text = "[scanledger]\npassword=mine # comment\n[client]\nPassword='x#y'\n";
        assert_eq!(mycnf_lookup(text).as_deref(), Some("mine"));
        assert_eq!(mycnf_lookup("[client]\nuser=x\n"), None);
        assert_eq!(mycnf_lookup("password=outside\n"), None);
    }

    #[cfg(unix)]
    #[test]
    fn a_file_others_can_read_is_skipped_and_a_private_one_is_read() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(".pgpass");
        std::fs::write(&path, "*:*:*:*:secret\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(pgpass_password(&path, T), None);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(pgpass_password(&path, T).as_deref(), Some("secret"));
        assert_eq!(pgpass_password(dir.path(), T), None, "a directory");
        let env = |k: &str| (k == "HOME").then(|| dir.path().display().to_string());
        assert_eq!(pgpass_path(&env), Some(path));
        let cnf = dir.path().join(".my.cnf");
        std::fs::write(&cnf, "[client]\npassword=s\n").unwrap();
        std::fs::set_permissions(&cnf, std::fs::Permissions::from_mode(0o646)).unwrap();
        assert_eq!(mycnf_password(&cnf), None);
        std::fs::set_permissions(&cnf, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(mycnf_password(&cnf).as_deref(), Some("s"));
        assert_eq!(mycnf_path(&env), Some(cnf));
    }
}
