//! The `http:CONFIG.json` file: its own keys (URL, method, body, headers, authentication,
//! expiry marker, body bound) and the mapping keys it hands to `mapping`.
//!
//! Reading the config reads the secret named by `auth_env` from the environment, once. The
//! secret lives only in a [`Secret`], whose `Debug` is redacted and which no error, log or
//! store ever receives: errors name the variable, never its value.

use crate::error::config_error as bad;
use std::path::Path;

use reqwest::header::{HeaderName, HeaderValue};
use reqwest::{Method, Url};
use serde_json::{Map, Value};

use crate::contract::{CONTRACT_BYTES_MAX, PAGE_SIZE_BYTES_MAX};
use crate::error::SourceError;
use crate::json::{self, Numbers};
use crate::source::mapping::{self, Mapping, Preset};

/// Bytes of the config file.
const CONFIG_BYTES_MAX: u64 = CONTRACT_BYTES_MAX as u64;
/// Bytes of the expired marker.
const EXPIRED_MARKER_LEN_MAX: usize = 1024;
/// Extra headers one config may set.
const HEADERS_MAX: usize = 64;

/// The keys of the HTTP source itself; the rest are mapping keys (`mapping::KEYS`).
pub(crate) const HTTP_KEYS: &[&str] = &[
    "url",
    "method",
    "body",
    "params_in",
    "headers",
    "auth_env",
    "auth_header",
    "auth_scheme",
    "expired_marker",
    "max_body_bytes",
];

/// Where the request parameters (query keys, page size, cursor or position, snapshot) go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ParamsIn {
    /// The URL's query string.
    Query,
    /// Top-level keys of the JSON body.
    Body,
    /// Keys of the JSON body's `variables` object (GraphQL).
    Variables,
}

/// A secret header value read from the environment; never shown.
#[derive(Clone)]
pub(super) struct Secret(HeaderValue);

impl Secret {
    /// The header value to send.
    pub(super) fn value(&self) -> &HeaderValue {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// A parsed config; its parts are the source's own (no reqwest type is part of the API).
#[derive(Debug, Clone)]
pub struct HttpConfig {
    /// The endpoint.
    pub(super) url: Url,
    /// GET or POST.
    pub(super) method: Method,
    /// The POST body template (an object), `None` for GET.
    pub(super) body: Option<Map<String, Value>>,
    /// Where parameters go.
    pub(super) params_in: ParamsIn,
    /// Extra headers, sent on every request.
    pub(super) headers: Vec<(HeaderName, HeaderValue)>,
    /// The authentication header and its value, when `auth_env` is set.
    pub(super) auth: Option<(HeaderName, Secret)>,
    /// A 400 whose body holds these bytes means the cursor expired.
    pub(super) expired_marker: Option<String>,
    /// The response body bound, bytes.
    pub(super) max_body_bytes: u64,
    /// The response mapping.
    pub(super) mapping: Mapping,
}

fn opt_str<'a>(
    path: &Path,
    obj: &'a Map<String, Value>,
    key: &str,
) -> Result<Option<&'a str>, SourceError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(bad(path, format!("key {key:?}: must be a string"))),
    }
}

impl HttpConfig {
    /// Reads and validates a config file, reading the secret it names from the environment.
    ///
    /// # Errors
    /// `SourceError::Io` when unreadable; `SourceError::Config` naming the key otherwise
    /// (including an `auth_env` variable that is not set, named but never shown).
    pub fn read(path: &Path) -> Result<HttpConfig, SourceError> {
        // Bounded while reading, whatever size the file states (a pipe, `/dev/zero`).
        let text = crate::io_bound::read_text(path, CONFIG_BYTES_MAX)?;
        let value = json::parse(&text, Numbers::Any)
            .map_err(|e| bad(path, format!("malformed JSON: {e}")))?;
        HttpConfig::from_value(path, &value, |name| std::env::var_os(name))
    }

    /// Validates a parsed config; `env` looks up the variable `auth_env` names.
    ///
    /// # Errors
    /// As [`HttpConfig::read`].
    pub fn from_value(
        path: &Path,
        value: &Value,
        env: impl FnOnce(&str) -> Option<std::ffi::OsString>,
    ) -> Result<HttpConfig, SourceError> {
        let Value::Object(obj) = value else {
            return Err(bad(path, "the config must be a JSON object"));
        };
        let mut own = Map::new();
        let mut mapping_keys = Map::new();
        for (k, v) in obj {
            if HTTP_KEYS.contains(&k.as_str()) {
                own.insert(k.clone(), v.clone());
            } else if mapping::KEYS.contains(&k.as_str()) {
                mapping_keys.insert(k.clone(), v.clone());
            } else {
                return Err(bad(path, format!("unknown key {k:?}")));
            }
        }
        let mapping = Mapping::from_config(&mapping_keys).map_err(|e| bad(path, e.to_string()))?;
        let relay = mapping.preset() == Some(Preset::Relay);

        let url_text =
            opt_str(path, &own, "url")?.ok_or_else(|| bad(path, "missing required key \"url\""))?;
        let url = Url::parse(url_text).map_err(|e| bad(path, format!("key \"url\": {e}")))?;
        if url.scheme() != "http" && url.scheme() != "https" {
            return Err(bad(path, "key \"url\": the scheme must be http or https"));
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(bad(
                path,
                "key \"url\": credentials in the URL would be shown; use auth_env",
            ));
        }
        let method = match opt_str(path, &own, "method")? {
            None if relay => Method::POST,
            None | Some("GET") => Method::GET,
            Some("POST") => Method::POST,
            Some(_) => return Err(bad(path, "key \"method\": must be \"GET\" or \"POST\"")),
        };
        let body = match own.get("body") {
            None | Some(Value::Null) if method == Method::POST => Some(Map::new()),
            None | Some(Value::Null) => None,
            Some(Value::Object(b)) if method == Method::POST => Some(b.clone()),
            Some(Value::Object(_)) => {
                return Err(bad(path, "key \"body\": only a POST has a body"))
            }
            Some(_) => return Err(bad(path, "key \"body\": must be a JSON object")),
        };
        let params_in = match opt_str(path, &own, "params_in")? {
            None if relay => ParamsIn::Variables,
            None if method == Method::POST => ParamsIn::Body,
            None | Some("query") => ParamsIn::Query,
            Some("body") => ParamsIn::Body,
            Some("variables") => ParamsIn::Variables,
            Some(_) => {
                return Err(bad(
                    path,
                    "key \"params_in\": must be \"query\", \"body\" or \"variables\"",
                ))
            }
        };
        if params_in != ParamsIn::Query && method != Method::POST {
            return Err(bad(
                path,
                "key \"params_in\": \"body\" and \"variables\" need \"method\": \"POST\"",
            ));
        }
        if params_in == ParamsIn::Variables {
            if let Some(v) = body.as_ref().and_then(|b| b.get("variables")) {
                if !v.is_object() {
                    return Err(bad(path, "key \"body\": \"variables\" must be an object"));
                }
            }
        }
        let auth = auth(path, &own, env)?;
        let headers = headers(path, &own, auth.as_ref().map(|(n, _)| n))?;
        let expired_marker = opt_str(path, &own, "expired_marker")?.map(str::to_owned);
        if expired_marker
            .as_ref()
            .is_some_and(|m| m.is_empty() || m.len() > EXPIRED_MARKER_LEN_MAX)
        {
            return Err(bad(
                path,
                format!("key \"expired_marker\": must be 1 to {EXPIRED_MARKER_LEN_MAX} bytes"),
            ));
        }
        let max_body_bytes = match own.get("max_body_bytes") {
            None | Some(Value::Null) => PAGE_SIZE_BYTES_MAX,
            Some(v) => v.as_u64().filter(|n| (1..=PAGE_SIZE_BYTES_MAX).contains(n)).ok_or_else(|| {
                bad(path, format!("key \"max_body_bytes\": must be an integer from 1 to {PAGE_SIZE_BYTES_MAX}"))
            })?,
        };
        Ok(HttpConfig {
            url,
            method,
            body,
            params_in,
            headers,
            auth,
            expired_marker,
            max_body_bytes,
            mapping,
        })
    }
}

fn auth(
    path: &Path,
    own: &Map<String, Value>,
    env: impl FnOnce(&str) -> Option<std::ffi::OsString>,
) -> Result<Option<(HeaderName, Secret)>, SourceError> {
    let Some(var) = opt_str(path, own, "auth_env")? else {
        for k in ["auth_header", "auth_scheme"] {
            if own.get(k).is_some_and(|v| !v.is_null()) {
                return Err(bad(path, format!("key {k:?}: needs \"auth_env\"")));
            }
        }
        return Ok(None);
    };
    let header = opt_str(path, own, "auth_header")?.unwrap_or("Authorization");
    let name = HeaderName::from_bytes(header.as_bytes())
        .map_err(|_| bad(path, "key \"auth_header\": not a valid header name"))?;
    let scheme = match opt_str(path, own, "auth_scheme")? {
        Some(s) => s,
        None if name == reqwest::header::AUTHORIZATION => "Bearer",
        None => "",
    };
    let secret = env(var).ok_or_else(|| {
        bad(
            path,
            format!("key \"auth_env\": the environment variable {var:?} is not set"),
        )
    })?;
    let secret = secret.into_string().map_err(|_| {
        bad(
            path,
            format!("key \"auth_env\": the environment variable {var:?} is not UTF-8"),
        )
    })?;
    if secret.is_empty() {
        return Err(bad(
            path,
            format!("key \"auth_env\": the environment variable {var:?} is empty"),
        ));
    }
    let text = if scheme.is_empty() {
        secret
    } else {
        format!("{scheme} {secret}")
    };
    let mut value = HeaderValue::from_str(&text).map_err(|_| {
        bad(path, format!("key \"auth_env\": the value of {var:?} cannot be sent in a header (control characters or non-ASCII)"))
    })?;
    // Sensitive values are never indexed by HTTP/2's header compression nor shown by `http`'s
    // own `Debug`.
    value.set_sensitive(true);
    Ok(Some((name, Secret(value))))
}

fn headers(
    path: &Path,
    own: &Map<String, Value>,
    auth: Option<&HeaderName>,
) -> Result<Vec<(HeaderName, HeaderValue)>, SourceError> {
    let obj = match own.get("headers") {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Object(o)) => o,
        Some(_) => return Err(bad(path, "key \"headers\": must be an object of strings")),
    };
    if obj.len() > HEADERS_MAX {
        return Err(bad(
            path,
            format!("key \"headers\": more than {HEADERS_MAX} headers"),
        ));
    }
    let mut out = Vec::with_capacity(obj.len());
    for (k, v) in obj {
        let name = HeaderName::from_bytes(k.as_bytes()).map_err(|_| {
            bad(
                path,
                format!("key \"headers\": {k:?} is not a valid header name"),
            )
        })?;
        if Some(&name) == auth {
            return Err(bad(
                path,
                format!("key \"headers\": {k:?} is the auth_header, which auth_env fills"),
            ));
        }
        let v = v
            .as_str()
            .and_then(|s| HeaderValue::from_str(s).ok())
            .ok_or_else(|| {
                bad(
                    path,
                    format!("key \"headers\": the value of {k:?} must be a printable ASCII string"),
                )
            })?;
        out.push((name, v));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // Tests: a panic is the failure report.
    use super::*;
    use serde_json::json;

    fn parse(v: Value, env: Option<&str>) -> Result<HttpConfig, String> {
        HttpConfig::from_value(Path::new("cfg.json"), &v, |_| env.map(Into::into))
            .map_err(|e| e.to_string())
    }

    #[test]
    fn defaults_and_presets_choose_method_and_placement() {
        let c = parse(json!({"url": "http://127.0.0.1:1/items"}), None).unwrap();
        assert_eq!(
            (c.method.clone(), c.params_in, c.body.is_none()),
            (Method::GET, ParamsIn::Query, true)
        );
        assert_eq!(c.max_body_bytes, PAGE_SIZE_BYTES_MAX);
        let c = parse(json!({"url": "https://api.github.com/graphql", "preset": "relay", "root": "/data/viewer/repositories",
            "body": {"query": "query($first: Int!, $after: String) { viewer { repositories(first: $first, after: $after) { nodes { id } pageInfo { hasNextPage endCursor } } } }"}}), None).unwrap();
        assert_eq!(
            (c.method.clone(), c.params_in),
            (Method::POST, ParamsIn::Variables)
        );
        let c = parse(json!({"url": "https://api.notion.com/v1/search", "preset": "notion", "method": "POST"}), None).unwrap();
        assert_eq!(
            (c.params_in, c.body.clone()),
            (ParamsIn::Body, Some(Map::new()))
        );
    }

    #[test]
    fn the_secret_is_read_once_and_never_shown() {
        let c = parse(
            json!({"url": "http://h/", "auth_env": "TOKEN"}),
            Some("canary-7f3a"),
        )
        .unwrap();
        let (name, secret) = c.auth.clone().unwrap();
        assert_eq!(name, reqwest::header::AUTHORIZATION);
        assert_eq!(secret.value().to_str().unwrap(), "Bearer canary-7f3a");
        assert!(secret.value().is_sensitive());
        assert!(!format!("{c:?}").contains("canary"), "{c:?}");
        let c = parse(
            json!({"url": "http://h/", "auth_env": "TOKEN", "auth_header": "X-Api-Key"}),
            Some("canary-7f3a"),
        )
        .unwrap();
        assert_eq!(c.auth.unwrap().1.value().to_str().unwrap(), "canary-7f3a");
        let e = parse(json!({"url": "http://h/", "auth_env": "TOKEN"}), None).unwrap_err();
        assert!(e.contains("\"TOKEN\" is not set"), "{e}");
        let e = parse(
            json!({"url": "http://h/", "auth_env": "TOKEN"}),
            Some("canary\n7f3a"),
        )
        .unwrap_err();
        assert!(e.contains("cannot be sent") && !e.contains("canary"), "{e}");
    }

    #[test]
    fn bad_configs_name_the_key() {
        for (cfg, words) in [
            (json!({}), "missing required key \"url\""),
            (json!({"url": "ftp://h/"}), "http or https"),
            (json!({"url": "http://u:p@h/"}), "credentials"),
            (
                json!({"url": "http://h/", "methd": "GET"}),
                "unknown key \"methd\"",
            ),
            (
                json!({"url": "http://h/", "method": "PUT"}),
                "\"GET\" or \"POST\"",
            ),
            (json!({"url": "http://h/", "body": {}}), "only a POST"),
            (
                json!({"url": "http://h/", "params_in": "body"}),
                "need \"method\": \"POST\"",
            ),
            (
                json!({"url": "http://h/", "method": "POST", "params_in": "variables", "body": {"variables": 1}}),
                "must be an object",
            ),
            (
                json!({"url": "http://h/", "auth_header": "X"}),
                "needs \"auth_env\"",
            ),
            (
                json!({"url": "http://h/", "headers": {"bad name": "x"}}),
                "not a valid header name",
            ),
            (
                json!({"url": "http://h/", "max_body_bytes": 0}),
                "max_body_bytes",
            ),
            (
                json!({"url": "http://h/", "expired_marker": ""}),
                "expired_marker",
            ),
            (json!({"url": "http://h/", "items": "x"}), "key \"items\""),
            (json!([]), "must be a JSON object"),
        ] {
            let e = parse(cfg.clone(), None).unwrap_err();
            assert!(e.contains(words), "{cfg}: {e}");
            assert!(e.starts_with("cfg.json: "), "{e}");
        }
    }
}
