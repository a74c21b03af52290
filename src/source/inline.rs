//! The shape of inline SQL specs (`postgres://...?table=T&key=K`, `mysql://...?...`,
//! `sqlite:PATH?...`), whatever features the build has: which kind a spec is, its text without
//! a password, its `content` list, and the same spec with other content columns or a file made
//! absolute. Parsing one into a source's config is `sql::spec`'s. Pure: no IO.

/// The kind of an inline SQL spec: `postgres` for `postgres://` and `postgresql://`, `mysql`
/// for `mysql://`, `sqlite` for `sqlite:PATH?QUERY`; `None` for any other spec (a config
/// file's, a run's name).
#[must_use]
pub fn inline_kind(spec: &str) -> Option<&'static str> {
    if spec.starts_with("postgres://") || spec.starts_with("postgresql://") {
        Some("postgres")
    } else if spec.starts_with("mysql://") {
        Some("mysql")
    } else {
        let rest = spec.strip_prefix("sqlite:")?;
        let (path, _) = rest.split_once('?')?;
        (!path.is_empty()).then_some("sqlite")
    }
}

/// The environment variable the password of an inline spec of `kind` is read from.
pub(crate) fn password_env(kind: &str) -> Option<&'static str> {
    match kind {
        "postgres" => Some("PGPASSWORD"),
        "mysql" => Some("MYSQL_PWD"),
        _ => None,
    }
}

/// Why a password cannot be given in an inline spec of `kind`, and how to give it.
pub(crate) fn password_refused(kind: &str) -> String {
    let env =
        password_env(kind).map_or_else(String::new, |v| format!("set {v} in the environment, or "));
    format!(
        "a password cannot be given in the spec (a run records its spec, and commands print it): \
         {env}use a config file {kind}:CONFIG.json whose \"dsn_env\" names an environment variable holding the DSN"
    )
}

/// Refuses an inline spec that holds a password (in its URL's user info, or as a `password`
/// key), before it is printed or recorded anywhere; the error shows the spec without it.
///
/// # Errors
/// `SourceError::Config` saying where the password goes instead.
pub fn refuse_password(spec: &str) -> Result<(), super::SourceError> {
    let Some(kind) = inline_kind(spec) else {
        return Ok(());
    };
    let base = spec.split_once('?').map_or(spec, |(b, _)| b);
    let in_url = userinfo(base).is_some_and(|(_, info)| info.contains(':'));
    let in_query = spec.split_once('?').is_some_and(|(_, q)| {
        pairs(q).any(|p| {
            let k = p.split('=').next().unwrap_or("");
            k.eq_ignore_ascii_case("password") || k.eq_ignore_ascii_case("pass")
        })
    });
    if in_url || in_query {
        return Err(super::SourceError::Config {
            path: shown(spec).into(),
            problem: password_refused(kind),
        });
    }
    Ok(())
}

/// The text an inline spec's errors name it by: the spec with any password cut out of its
/// user info, at most 256 characters.
#[must_use]
pub fn shown(spec: &str) -> String {
    let cut = match userinfo(spec) {
        Some((start, info)) => match info.find(':') {
            Some(colon) => {
                let from = start.saturating_add(colon);
                let to = start.saturating_add(info.len());
                format!("{}{}", &spec[..from], &spec[to..])
            }
            None => spec.to_owned(),
        },
        None => spec.to_owned(),
    };
    // A password given as a query key is cut too (the spec is refused for it, and says so).
    let cut = match cut.split_once('?') {
        Some((base, query)) => {
            let kept: Vec<&str> = pairs(query)
                .filter(|p| {
                    let k = p.split('=').next().unwrap_or("");
                    !k.eq_ignore_ascii_case("password") && !k.eq_ignore_ascii_case("pass")
                })
                .collect();
            format!("{base}?{}", kept.join("&"))
        }
        None => cut,
    };
    cut.chars().take(256).collect()
}

/// The byte offset and text of a URL's user info: what precedes the last `@` before the
/// query (not only within the authority, so a password holding a raw `/` is still found).
pub(crate) fn userinfo(spec: &str) -> Option<(usize, &str)> {
    let start = spec.find("://")?.checked_add(3)?;
    let rest = &spec[start..];
    let end = rest.find(['?', '#']).unwrap_or(rest.len());
    let at = rest[..end].rfind('@')?;
    Some((start, &rest[..at]))
}

/// Percent-decodes a query key or value (`+` is a plus, not a space).
pub(crate) fn decode(text: &str) -> Result<String, String> {
    percent_encoding::percent_decode_str(text)
        .decode_utf8()
        .map(std::borrow::Cow::into_owned)
        .map_err(|_| format!("{:?} is not UTF-8 once percent-decoded", short(text)))
}

/// At most 64 characters of `text`, for a message.
pub(crate) fn short(text: &str) -> String {
    text.chars().take(64).collect()
}

/// An inline spec's query pairs, raw (`KEY=VALUE` still percent-encoded).
fn pairs(query: &str) -> impl Iterator<Item = &str> {
    query.split('&').filter(|p| !p.is_empty())
}

/// `spec` with its `content` set to `columns` (joined by commas, each percent-encoded),
/// replacing any it named. `None` when `spec` is not an inline SQL spec.
#[must_use]
pub fn with_content(spec: &str, columns: &[String]) -> Option<String> {
    inline_kind(spec)?;
    let (base, query) = spec.split_once('?')?;
    const SET: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
        .remove(b'_')
        .remove(b'-')
        .remove(b'.');
    let cols: Vec<String> = columns
        .iter()
        .map(|c| percent_encoding::utf8_percent_encode(c, SET).to_string())
        .collect();
    let mut kept: Vec<&str> = pairs(query)
        .filter(|p| p.split('=').next() != Some("content"))
        .collect();
    let content = format!("content={}", cols.join(","));
    kept.push(&content);
    Some(format!("{base}?{}", kept.join("&")))
}

/// The two sides' content columns of `migration verify --content COLS`: `email=mail,amount`
/// gives `["email", "amount"]` for the from-side and `["mail", "amount"]` for the to-side (a
/// pair names a column renamed by the migration).
///
/// # Errors
/// What is wrong with `cols`: an empty name, more than `CONTENT_VALUES_MAX` columns.
pub fn content_pairs(cols: &str) -> Result<(Vec<String>, Vec<String>), String> {
    let mut from = Vec::new();
    let mut to = Vec::new();
    for (i, item) in cols.split(',').enumerate() {
        if i >= crate::content::CONTENT_VALUES_MAX {
            return Err(format!(
                "at most {} content columns",
                crate::content::CONTENT_VALUES_MAX
            ));
        }
        let (a, b) = item.split_once('=').unwrap_or((item, item));
        if a.is_empty() || b.is_empty() {
            return Err(format!(
                "{:?}: each item is a column (amount) or a from-side column and its to-side name (email=mail)",
                short(item)
            ));
        }
        from.push(a.to_owned());
        to.push(b.to_owned());
    }
    Ok((from, to))
}

/// The `content` columns an inline spec names (empty when it names none); `None` when `spec`
/// is not an inline SQL spec or its `content` is not UTF-8.
#[must_use]
pub fn inline_content(spec: &str) -> Option<Vec<String>> {
    inline_kind(spec)?;
    let (_, query) = spec.split_once('?')?;
    match pairs(query).find_map(|p| p.strip_prefix("content=")) {
        Some(v) => decode(v)
            .ok()
            .map(|v| v.split(',').map(str::to_owned).collect()),
        None => Some(Vec::new()),
    }
}

/// The scope name of an inline spec: its kind and table (`postgres:orders`); `None` for any
/// other spec, or one without a readable `table`.
pub(crate) fn scope_name(spec: &str) -> Option<String> {
    let kind = inline_kind(spec)?;
    let (_, query) = spec.split_once('?')?;
    let table = decode(pairs(query).find_map(|p| p.strip_prefix("table="))?).ok()?;
    (!table.is_empty()).then(|| format!("{kind}:{}", short(&table)))
}

/// The file of a `sqlite:PATH?QUERY` spec.
pub(crate) fn sqlite_file(spec: &str) -> Option<&str> {
    (inline_kind(spec)? == "sqlite")
        .then(|| {
            spec.strip_prefix("sqlite:")?
                .split_once('?')
                .map(|(p, _)| p)
        })
        .flatten()
}

/// `spec` with the file it names replaced by `file` (a config file's path, or an inline
/// `sqlite:` spec's database, whose query is kept).
#[must_use]
pub fn spec_with_file(spec: &str, file: &std::path::Path) -> String {
    let Some((kind, _)) = super::spec_file(spec) else {
        return spec.to_owned();
    };
    match spec.split_once('?').filter(|_| sqlite_file(spec).is_some()) {
        Some((_, query)) => format!("{kind}:{}?{query}", file.display()),
        None => format!("{kind}:{}", file.display()),
    }
}

/// `spec` as a run records it: the file of a file-backed spec (a replay, a config, a SQLite
/// database) made absolute, so a resume from another directory finds the same file; any other
/// spec, or one whose file cannot be found, as it is.
#[must_use]
pub fn recordable_spec(spec: &str) -> String {
    match super::spec_file(spec) {
        Some((_, path)) => std::fs::canonicalize(path)
            .map_or_else(|_| spec.to_owned(), |p| spec_with_file(spec, &p)),
        None => spec.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // Tests: a panic is the failure report.
    use super::*;

    #[test]
    fn inline_specs_are_known_by_their_form() {
        assert_eq!(
            inline_kind("postgres://u@h:5432/db?table=t"),
            Some("postgres")
        );
        assert_eq!(inline_kind("postgresql://u@h/db?table=t"), Some("postgres"));
        assert_eq!(inline_kind("mysql://root@h/db?table=t"), Some("mysql"));
        assert_eq!(inline_kind("sqlite:a.db?table=t&key=id"), Some("sqlite"));
        assert_eq!(inline_kind("sqlite:cfg.json"), None);
        assert_eq!(inline_kind("postgres:pg.json"), None);
        assert_eq!(inline_kind("run-3"), None);
    }

    #[test]
    fn a_password_is_cut_from_the_shown_spec() {
        assert_eq!(
            shown("postgres://u:hunter2@h:5432/db?table=t"),
            "postgres://u@h:5432/db?table=t"
        );
        assert_eq!(
            shown("mysql://root@h/db?x=a:b@c"),
            "mysql://root@h/db?x=a:b@c"
        );
        assert_eq!(
            shown("postgres://u:p/w@h/db?table=t"),
            "postgres://u@h/db?table=t"
        );
        assert!(refuse_password("postgres://u:p/w@h/db?table=t&key=id").is_err());
        assert!(refuse_password("postgres://u@h:5432/db?table=t&key=id").is_ok());
        assert!(refuse_password("mysql://root@h/db?table=t&key=id&Password=x").is_err());
    }

    #[test]
    fn content_pairs_name_each_sides_column() {
        let (from, to) = content_pairs("email=mail,amount").unwrap();
        assert_eq!(from, vec!["email".to_owned(), "amount".to_owned()]);
        assert_eq!(to, vec!["mail".to_owned(), "amount".to_owned()]);
        assert!(content_pairs("a,,b").is_err());
        assert!(content_pairs("a=").is_err());
        assert!(content_pairs(&vec!["c"; 65].join(",")).is_err());
    }

    #[test]
    fn content_is_read_and_replaced_in_the_query() {
        let s = "postgres://u@h/db?table=t&content=a,b&key=id";
        assert_eq!(inline_content(s), Some(vec!["a".into(), "b".into()]));
        let w = with_content(s, &["mail".into(), "n m".into()]).unwrap();
        assert_eq!(w, "postgres://u@h/db?table=t&key=id&content=mail,n%20m");
        assert_eq!(inline_content(&w), Some(vec!["mail".into(), "n m".into()]));
        assert_eq!(inline_content("sqlite:x.db?table=t"), Some(vec![]));
        assert_eq!(with_content("postgres:pg.json", &[]), None);
    }
}
