//! The `http:CONFIG.json` file: its own keys (URL, method, body, headers, authentication,
//! expiry marker, body bound) and the mapping keys it hands to `mapping`.
//!
//! Reading the config reads the secret named by `auth_env` from the environment, once. The
//! secret lives only in a [`Secret`], whose `Debug` is redacted and which no error, log or
//! store ever receives: errors name the variable, never its value.

use std::path::Path;

use reqwest::header::{HeaderName, HeaderValue};
use reqwest::{Method, Url};
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::contract::{CONTRACT_BYTES_MAX, PAGE_SIZE_BYTES_MAX};
use crate::json::{self, ConfigError, Numbers};
use crate::source::mapping::{self, Mapping, Preset};
use crate::source::SourceError;

/// Bytes of the config file.
const CONFIG_BYTES_MAX: u64 = CONTRACT_BYTES_MAX as u64;
/// Bytes of the expired marker.
const EXPIRED_MARKER_LEN_MAX: usize = 1024;
/// Extra headers one config may set.
const HEADERS_MAX: usize = 64;

/// Where the request parameters (query keys, page size, cursor or position, snapshot) go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
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

/// The HTTP source's own keys, as written (the mapping's are read by `mapping`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HttpFile {
    url: String,
    method: Option<MethodName>,
    body: Option<Value>,
    params_in: Option<ParamsIn>,
    headers: Option<Map<String, Value>>,
    auth_env: Option<String>,
    auth_header: Option<String>,
    auth_scheme: Option<String>,
    expired_marker: Option<String>,
    max_body_bytes: Option<u64>,
}

/// `method`, as configs spell it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
enum MethodName {
    #[serde(rename = "GET")]
    Get,
    #[serde(rename = "POST")]
    Post,
}

impl HttpConfig {
    /// Reads and validates a config file, reading the secret it names from the environment.
    ///
    /// # Errors
    /// `SourceError::Io` or `SourceError::File` when unreadable; `SourceError::ConfigFile`
    /// naming the key, its line and column otherwise (including an `auth_env` variable that
    /// is not set, named but never shown).
    pub fn read(path: &Path) -> Result<HttpConfig, SourceError> {
        // Bounded while reading, whatever size the file states (a pipe, `/dev/zero`).
        let text = crate::io_bound::read_text(path, CONFIG_BYTES_MAX)?;
        let at = |error: ConfigError| SourceError::ConfigFile {
            path: path.to_owned(),
            error: error.placed(&text),
        };
        let value = json::parse(&text, Numbers::Any).map_err(|e| at(e.into()))?;
        HttpConfig::resolve(&value, |name| std::env::var_os(name)).map_err(at)
    }

    /// Validates a parsed config; `env` looks up the variable `auth_env` names.
    ///
    /// # Errors
    /// As [`HttpConfig::read`], without positions.
    pub fn from_value(
        path: &Path,
        value: &Value,
        env: impl FnOnce(&str) -> Option<std::ffi::OsString>,
    ) -> Result<HttpConfig, SourceError> {
        HttpConfig::resolve(value, env).map_err(|error| SourceError::ConfigFile {
            path: path.to_owned(),
            error,
        })
    }

    fn resolve(
        value: &Value,
        env: impl FnOnce(&str) -> Option<std::ffi::OsString>,
    ) -> Result<HttpConfig, ConfigError> {
        let [own, mapping_keys] = <[_; 2]>::try_from(json::split_keys(
            value,
            &[json::field_names::<HttpFile>(), mapping::KEYS],
        )?)
        .unwrap_or_default();
        let mut own: HttpFile = json::from_value(&Value::Object(own))?;
        let mapping = Mapping::from_config(&mapping_keys)?;
        let relay = mapping.preset() == Some(Preset::Relay);

        let url = Url::parse(&own.url).map_err(|e| bad("url", e.to_string()))?;
        if url.scheme() != "http" && url.scheme() != "https" {
            return Err(bad("url", "the scheme must be http or https"));
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(bad(
                "url",
                "credentials in the URL would be shown; use auth_env",
            ));
        }
        let method = match own.method {
            None if relay => Method::POST,
            None | Some(MethodName::Get) => Method::GET,
            Some(MethodName::Post) => Method::POST,
        };
        let body = match own.body.take() {
            None | Some(Value::Null) if method == Method::POST => Some(Map::new()),
            None | Some(Value::Null) => None,
            Some(Value::Object(b)) if method == Method::POST => Some(b),
            Some(Value::Object(_)) => return Err(bad("body", "only a POST has a body")),
            Some(_) => return Err(bad("body", "must be a JSON object")),
        };
        let params_in = match own.params_in {
            Some(p) => p,
            None if relay => ParamsIn::Variables,
            None if method == Method::POST => ParamsIn::Body,
            None => ParamsIn::Query,
        };
        if params_in != ParamsIn::Query && method != Method::POST {
            return Err(bad(
                "params_in",
                "\"body\" and \"variables\" need \"method\": \"POST\"",
            ));
        }
        if params_in == ParamsIn::Variables {
            if let Some(v) = body.as_ref().and_then(|b| b.get("variables")) {
                if !v.is_object() {
                    return Err(bad("body", "\"variables\" must be an object"));
                }
            }
        }
        let auth = auth(&own, env)?;
        let headers = headers(own.headers.take(), auth.as_ref().map(|(n, _)| n))?;
        if own
            .expired_marker
            .as_ref()
            .is_some_and(|m| m.is_empty() || m.len() > EXPIRED_MARKER_LEN_MAX)
        {
            return Err(bad(
                "expired_marker",
                format!("must be 1 to {EXPIRED_MARKER_LEN_MAX} bytes"),
            ));
        }
        let max_body_bytes = match own.max_body_bytes {
            None => PAGE_SIZE_BYTES_MAX,
            Some(n) if (1..=PAGE_SIZE_BYTES_MAX).contains(&n) => n,
            Some(_) => {
                return Err(bad(
                    "max_body_bytes",
                    format!("must be an integer from 1 to {PAGE_SIZE_BYTES_MAX}"),
                ))
            }
        };
        Ok(HttpConfig {
            url,
            method,
            body,
            params_in,
            headers,
            auth,
            expired_marker: own.expired_marker,
            max_body_bytes,
            mapping,
        })
    }
}

fn bad(key: &str, problem: impl Into<String>) -> ConfigError {
    ConfigError::invalid(key, problem)
}

fn auth(
    own: &HttpFile,
    env: impl FnOnce(&str) -> Option<std::ffi::OsString>,
) -> Result<Option<(HeaderName, Secret)>, ConfigError> {
    let Some(var) = own.auth_env.as_deref() else {
        for (k, v) in [
            ("auth_header", &own.auth_header),
            ("auth_scheme", &own.auth_scheme),
        ] {
            if v.is_some() {
                return Err(bad(k, "needs \"auth_env\""));
            }
        }
        return Ok(None);
    };
    let header = own.auth_header.as_deref().unwrap_or("Authorization");
    let name = HeaderName::from_bytes(header.as_bytes())
        .map_err(|_| bad("auth_header", "not a valid header name"))?;
    let scheme = match own.auth_scheme.as_deref() {
        Some(s) => s,
        None if name == reqwest::header::AUTHORIZATION => "Bearer",
        None => "",
    };
    let secret = env(var).ok_or_else(|| {
        bad(
            "auth_env",
            format!("the environment variable {var:?} is not set"),
        )
    })?;
    let secret = secret.into_string().map_err(|_| {
        bad(
            "auth_env",
            format!("the environment variable {var:?} is not UTF-8"),
        )
    })?;
    if secret.is_empty() {
        return Err(bad(
            "auth_env",
            format!("the environment variable {var:?} is empty"),
        ));
    }
    let text = if scheme.is_empty() {
        secret
    } else {
        format!("{scheme} {secret}")
    };
    let mut value = HeaderValue::from_str(&text).map_err(|_| {
        bad(
            "auth_env",
            format!(
                "the value of {var:?} cannot be sent in a header (control characters or non-ASCII)"
            ),
        )
    })?;
    // Sensitive values are never indexed by HTTP/2's header compression nor shown by `http`'s
    // own `Debug`.
    value.set_sensitive(true);
    Ok(Some((name, Secret(value))))
}

fn headers(
    obj: Option<Map<String, Value>>,
    auth: Option<&HeaderName>,
) -> Result<Vec<(HeaderName, HeaderValue)>, ConfigError> {
    let Some(obj) = obj else {
        return Ok(Vec::new());
    };
    if obj.len() > HEADERS_MAX {
        return Err(bad("headers", format!("more than {HEADERS_MAX} headers")));
    }
    let mut out = Vec::with_capacity(obj.len());
    for (k, v) in obj {
        let at = |problem: &str| ConfigError::invalid_at(&["headers", &k], problem);
        let name =
            HeaderName::from_bytes(k.as_bytes()).map_err(|_| at("not a valid header name"))?;
        if Some(&name) == auth {
            return Err(at("is the auth_header, which auth_env fills"));
        }
        let v = v
            .as_str()
            .and_then(|s| HeaderValue::from_str(s).ok())
            .ok_or_else(|| at("must be a printable ASCII string"))?;
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
