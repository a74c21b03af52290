//! Inline SQL source specs, without a config file: `postgres://USER@HOST:PORT/DB?QUERY`,
//! `mysql://USER@HOST:PORT/DB?QUERY` and `sqlite:PATH?QUERY`, where `QUERY` is
//! `table=T&key=K&content=A,B,...` and the other keys of the JSON config that make sense in a
//! URL. The query becomes the same object a config file holds and goes through the same
//! parser (`config::from_object`), so an inline spec and its JSON form make one `SqlConfig`.
//!
//! Invariants: an inline spec never carries a password (a run records its spec, so a
//! password there would be stored and printed): one in the URL, or a `password` key, is
//! refused, and the password comes from the environment instead (`PGPASSWORD`, `MYSQL_PWD`),
//! read at open time, or from a config file's `dsn_env`. No error of this module quotes a
//! password. Values are percent-decoded (`%26` for `&`, `%2B` for `+`; a `+` stays a `+`).

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::config::{self, SqlConfig};
use super::dialect::{Connect, Dialect};
use crate::error::{config_error, SourceError};
use crate::source::inline::{decode, password_refused, short, shown, userinfo};

/// The keys of an inline spec's query that every dialect reads (the JSON config's, less
/// `dsn` and `dsn_env`, which have no place in a URL; `labels` are `label.NAME=PREDICATE` keys).
pub(crate) const QUERY_KEYS: &[&str] = &[
    "table",
    "key",
    "content",
    "where",
    "page_delay_ms",
    "pause_ms",
    "prefetch",
];

/// Bytes of an inline spec.
pub(crate) const SPEC_LEN_MAX: usize = 64 * 1024;

/// Parses an inline spec of dialect `D` (`spec` without its kind's prefix for `sqlite:`, the
/// whole URL otherwise); `env` reads the password's environment variable.
///
/// # Errors
/// `SourceError::Config` or `SourceError::ConfigFile` under the spec's [`shown`] text, naming
/// the key that is wrong.
pub(crate) fn parse<D: Dialect>(
    spec: &str,
    env: impl Fn(&str) -> Option<String>,
) -> Result<(SqlConfig, D::Connect), SourceError> {
    let shown_path = PathBuf::from(shown(spec));
    let fail = |problem: String| config_error(&shown_path, problem);
    if spec.len() > SPEC_LEN_MAX {
        return Err(fail(format!("a spec of more than {SPEC_LEN_MAX} bytes")));
    }
    let (obj, dsn) = to_object::<D>(spec, &env).map_err(fail)?;
    let mut obj = obj;
    obj.insert("dsn".to_owned(), Value::String(dsn));
    config::from_object::<D>(&shown_path, &obj, |_| None).map_err(|error| SourceError::ConfigFile {
        path: shown_path.clone(),
        error,
    })
}

/// The config object an inline spec stands for, and its DSN (with the environment's password).
fn to_object<D: Dialect>(
    spec: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<(Map<String, Value>, String), String> {
    let kind = D::KIND;
    let (base, query) = spec.split_once('?').ok_or_else(|| {
        format!("an inline spec needs a query naming the table and key: {kind}:...?table=T&key=K")
    })?;
    if base.contains('#') || query.contains('#') {
        return Err("a spec cannot hold '#' (write %23)".to_owned());
    }
    if userinfo(base).is_some_and(|(_, info)| info.contains(':')) {
        return Err(password_refused(kind));
    }
    let mut obj = Map::new();
    let mut dsn_params: Vec<&str> = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (raw_key, raw_value) = pair
            .split_once('=')
            .ok_or_else(|| format!("query parameter {:?} has no value (KEY=VALUE)", short(pair)))?;
        let key = decode(raw_key)?;
        if key.eq_ignore_ascii_case("password") || key.eq_ignore_ascii_case("pass") {
            return Err(password_refused(kind));
        }
        if <D::Connect as Connect>::DSN_KEYS.contains(&key.as_str()) {
            dsn_params.push(pair);
            continue;
        }
        // `label.NAME=PREDICATE`: the config file's `labels` object, one member a key.
        if let Some(name) = key.strip_prefix("label.") {
            let labels = obj
                .entry("labels")
                .or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(labels) = labels {
                if labels.contains_key(name) {
                    return Err(format!("label {:?} is given twice", short(name)));
                }
                labels.insert(name.to_owned(), Value::String(decode(raw_value)?));
            }
            continue;
        }
        let known = QUERY_KEYS
            .iter()
            .chain(<D::Connect as Connect>::KEYS)
            .chain(<D::Connect as Connect>::DSN_KEYS)
            .copied()
            .collect::<Vec<_>>();
        if !known.contains(&key.as_str()) {
            let meant = crate::json::closest(&key, &known)
                .map_or_else(String::new, |m| format!("; did you mean {m:?}?"));
            return Err(format!(
                "unknown key {:?}{meant} (an inline spec takes {}, label.NAME)",
                short(&key),
                known.join(", ")
            ));
        }
        let value = decode(raw_value)?;
        if obj.contains_key(&key) {
            return Err(format!("key {key:?} is given twice"));
        }
        obj.insert(key.clone(), typed(&key, value)?);
    }
    if let Some(Value::String(p)) = obj.get("sslrootcert") {
        if !Path::new(p).is_absolute() {
            return Err("sslrootcert: give an absolute path in an inline spec".to_owned());
        }
    }
    let dsn = D::Connect::inline_dsn(base, &dsn_params, env)?;
    Ok((obj, dsn))
}

/// A query value as the JSON config would hold it.
fn typed(key: &str, value: String) -> Result<Value, String> {
    Ok(match key {
        "content" => Value::Array(
            value
                .split(',')
                .map(|c| Value::String(c.to_owned()))
                .collect(),
        ),
        "page_delay_ms" | "pause_ms" => match value.parse::<u64>() {
            Ok(n) => Value::from(n),
            Err(_) => Value::String(value),
        },
        "prefetch" => match value.as_str() {
            "true" => Value::Bool(true),
            "false" => Value::Bool(false),
            _ => return Err("prefetch: must be true or false".to_owned()),
        },
        _ => Value::String(value),
    })
}

/// A URL DSN (`postgres://`, `mysql://`) with the driver's own query parameters, and the
/// password from `var` in the environment when it is set (percent-encoded into the user info).
#[cfg_attr(not(any(feature = "postgres", feature = "mysql")), allow(dead_code))]
pub(crate) fn url_dsn(
    base: &str,
    params: &[&str],
    var: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> String {
    let mut dsn = base.to_owned();
    if let (Some(pw), Some(start)) = (env(var), base.find("://").and_then(|i| i.checked_add(3))) {
        let enc = percent_encoding::utf8_percent_encode(&pw, percent_encoding::NON_ALPHANUMERIC);
        dsn = match userinfo(base) {
            Some((s, user)) => {
                let end = s.saturating_add(user.len());
                format!("{}:{enc}{}", &base[..end], &base[end..])
            }
            None => format!("{}:{enc}@{}", &base[..start], &base[start..]),
        };
    }
    if !params.is_empty() {
        dsn.push('?');
        dsn.push_str(&params.join("&"));
    }
    dsn
}

#[cfg(all(test, feature = "postgres", feature = "mysql"))]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)] // Tests: a failed expectation is the report.

    use std::path::Path;

    use serde_json::json;

    use super::parse;
    use crate::source::mysql::MyDialect;
    use crate::source::postgres::PgDialect;
    use crate::source::sql::config::from_object;

    fn no_env(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn an_inline_spec_makes_the_config_its_json_form_makes() {
        let spec = "postgres://app@127.0.0.1:5432/test?table=public.orders&key=id\
                    &content=email,amount&where=amount%20%3E%200%20AND%20a%2Bb%20%3C%203\
                    &page_delay_ms=5&prefetch=false&sslmode=disable\
                    &label.big=amount%20%3E%20100&label.gmail=email%20LIKE%20'%25gmail%25'";
        let (inline, inline_connect) = parse::<PgDialect>(spec, no_env).unwrap();
        let json = json!({
            "dsn": "postgres://app@127.0.0.1:5432/test?sslmode=disable",
            "table": "public.orders", "key": "id", "content": ["email", "amount"],
            "where": "amount > 0 AND a+b < 3", "page_delay_ms": 5, "prefetch": false,
            "labels": {"big": "amount > 100", "gmail": "email LIKE '%gmail%'"},
        });
        let (mut file, file_connect) =
            from_object::<PgDialect>(Path::new("pg.json"), json.as_object().unwrap(), no_env)
                .unwrap();
        file.path.clone_from(&inline.path);
        assert_eq!(inline, file);
        assert_eq!(
            format!("{inline_connect:?}"),
            format!("{file_connect:?}"),
            "the same connection options"
        );
        let my = "mysql://root@127.0.0.1:3306/test?table=orders&key=id&content=a";
        let (c, _) = parse::<MyDialect>(my, no_env).unwrap();
        assert_eq!(c.table.schema.as_deref(), Some("test"));
        assert_eq!(c.content, vec!["a".to_owned()]);
    }

    #[test]
    fn a_wrong_key_is_named_with_the_key_meant() {
        let e = parse::<PgDialect>("postgres://u@h/db?tables=t&key=id", no_env)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(r#"unknown key "tables"; did you mean "table"?"#),
            "{e}"
        );
        assert!(e.starts_with("postgres://u@h/db?tables=t&key=id: "), "{e}");
        let e = parse::<PgDialect>("postgres://u@h/db?table=t", no_env)
            .unwrap_err()
            .to_string();
        assert!(e.contains(r#"missing required key "key""#), "{e}");
        let e = parse::<PgDialect>("postgres://u@h/db", no_env)
            .unwrap_err()
            .to_string();
        assert!(e.contains("table=T&key=K"), "{e}");
        let e = parse::<PgDialect>("postgres://u@h/db?table=t&key=id&key=x", no_env)
            .unwrap_err()
            .to_string();
        assert!(e.contains(r#"key "key" is given twice"#), "{e}");
        let e = parse::<PgDialect>(
            "postgres://u@h/db?table=t&key=id&label.a=x&label.a=y",
            no_env,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains(r#"label "a" is given twice"#), "{e}");
        let e = parse::<PgDialect>("postgres://u@h/db?table=t&key=id&label.=x", no_env)
            .unwrap_err()
            .to_string();
        assert!(e.contains("a label name must have"), "{e}");
        // The JSON form suggests too.
        let json = json!({"dsn": "host=h", "table": "t", "key": "id", "contnet": ["a"]});
        let e = from_object::<PgDialect>(Path::new("c.json"), json.as_object().unwrap(), no_env)
            .unwrap_err()
            .to_string();
        assert!(e.contains(r#"did you mean "content"?"#), "{e}");
    }

    #[test]
    fn a_password_is_refused_and_never_shown_and_the_environment_gives_it() {
        for spec in [
            "postgres://u:hunter2canary@h/db?table=t&key=id",
            "postgres://u@h/db?table=t&key=id&password=hunter2canary",
        ] {
            let e = parse::<PgDialect>(spec, no_env).unwrap_err().to_string();
            assert!(!e.contains("hunter2canary"), "{e}");
            assert!(e.contains("PGPASSWORD") && e.contains("dsn_env"), "{e}");
            let e = crate::source::refuse_password(spec)
                .unwrap_err()
                .to_string();
            assert!(
                !e.contains("hunter2canary") && e.contains("PGPASSWORD"),
                "{e}"
            );
        }
        let e = parse::<MyDialect>("mysql://root:hunter2canary@h/db?table=t&key=id", no_env)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("MYSQL_PWD") && !e.contains("hunter2canary"),
            "{e}"
        );
        // From the environment: in the driver's options, never in the config's text or Debug.
        let env = |v: &str| (v == "PGPASSWORD").then(|| "p@ss:w/rd".to_owned());
        let (c, connect) = parse::<PgDialect>("postgres://u@h/db?table=t&key=id", env).unwrap();
        assert_eq!(connect.config.get_password(), Some("p@ss:w/rd".as_bytes()));
        assert!(!format!("{c:?}{connect:?}").contains("p@ss"));
        let env = |v: &str| (v == "MYSQL_PWD").then(|| "s3cret".to_owned());
        let (_, connect) = parse::<MyDialect>("mysql://root@h/db?table=t&key=id", env).unwrap();
        assert_eq!(connect.opts.pass(), Some("s3cret"));
    }
}
