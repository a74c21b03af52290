//! `http:CONFIG.json`: pages from a JSON HTTP API (docs/guide-http.md), with reqwest over rustls (ring).
//!
//! This module owns the wire: building the request (GET with the parameters in the query
//! string, or POST with a JSON body), sending it, reading the body bounded while it streams,
//! and classifying the status (`status`). What the body means is `mapping`'s; whether the scan
//! is complete is the reconciler's; timeouts, retries and backoff are the collector's.
//!
//! Invariants and absences:
//! - The same parameters on every page (AIP-158): the contract's query keys and the page size
//!   are sent with every request; only the cursor (or position) changes.
//! - No response body is ever held past `max_body_bytes`: the length is checked against the
//!   `Content-Length` and again after every chunk.
//! - Redirects are never followed (the cursor and the secret stay with the configured origin;
//!   a 3xx is an invalid page naming the status). No cookies, no system proxy settings, no
//!   decompression.
//! - The secret (`auth_env`) is read once when the source opens; it goes only into the
//!   request's header. No error, `Debug` output, log line or store record holds it, and no
//!   error holds a URL (which carries the cursor) or a response body.
//! - No server-side count: `count` mode traverses. A `total` echoed by a page is not an
//!   authorized count of a snapshot, so it is reconciled (R10), never reported as the answer.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use reqwest::header::{
    HeaderValue, ACCEPT, ACCEPT_ENCODING, CONTENT_ENCODING, CONTENT_TYPE, RETRY_AFTER, USER_AGENT,
};
use reqwest::{Client, Response};
use serde_json::{Map, Value};

use super::mapping::{chain_text, Call};
use super::{FetchError, PageRequest, PageSource};
use crate::contract::{EndSignal, Page};
use crate::source::SourceError;

mod config;
mod status;

use config::{HttpConfig, ParamsIn};

/// Bytes of an error response read to look for the `expired_marker`.
const ERROR_BODY_SCAN_MAX: usize = 64 * 1024;
/// The `User-Agent` sent (some APIs, GitHub's among them, refuse requests without one).
const USER_AGENT_VALUE: &str = concat!("scanledger/", env!("CARGO_PKG_VERSION"));

/// A source reading pages from a JSON HTTP API.
#[derive(Debug)]
pub struct HttpSource {
    path: PathBuf,
    config: HttpConfig,
    client: Client,
}

impl HttpSource {
    /// Reads the config at `path` (and the secret it names) and checks it against the
    /// contract's end signal (see `Mapping::check_end_signal`).
    ///
    /// # Errors
    /// `SourceError::Io` or `SourceError::Config` naming the key; `SourceError::Other` when
    /// the TLS client cannot be built.
    pub fn open(path: &Path, end_signal: EndSignal) -> Result<HttpSource, SourceError> {
        let config = HttpConfig::read(path)?;
        HttpSource::new(path, config, end_signal)
    }

    /// A source over an already parsed config; `path` only names it in errors.
    ///
    /// # Errors
    /// As [`HttpSource::open`].
    pub fn new(
        path: &Path,
        config: HttpConfig,
        end_signal: EndSignal,
    ) -> Result<HttpSource, SourceError> {
        config
            .mapping
            .check_end_signal(end_signal)
            .map_err(|error| SourceError::ConfigFile {
                path: path.to_owned(),
                error,
            })?;
        // The ring provider, installed once per process; a provider installed earlier (by the
        // embedding program, or an earlier source) is kept, which is what `Err` here means.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .tls_backend_rustls()
            .build()
            .map_err(|e| SourceError::Other {
                what: "cannot build the HTTP client".to_owned(),
                source: Box::new(e.without_url()),
            })?;
        Ok(HttpSource {
            path: path.to_owned(),
            config,
            client,
        })
    }

    /// Sends a shard's key range through the config's `key_range_params`.
    ///
    /// # Errors
    /// `SourceError::ConfigFile` when a range is given and the config names no parameters for it.
    pub fn with_key_range(
        mut self,
        path: &Path,
        range: Option<crate::contract::KeyRange>,
    ) -> Result<HttpSource, SourceError> {
        self.config
            .mapping
            .bind_key_range(range)
            .map_err(|error| SourceError::ConfigFile {
                path: path.to_owned(),
                error,
            })?;
        Ok(self)
    }

    fn fatal(&self, problem: String) -> FetchError {
        FetchError::Fatal(SourceError::Config {
            path: self.path.clone(),
            problem,
        })
    }

    fn build(&self, call: &Call) -> Result<reqwest::Request, FetchError> {
        let c = &self.config;
        let mut url = c.url.clone();
        let mut body = c.body.clone();
        match (c.params_in, body.as_mut()) {
            (ParamsIn::Body, Some(b)) => {
                for (name, value) in &call.params {
                    b.insert(name.clone(), value.clone());
                }
            }
            (ParamsIn::Variables, Some(b)) => {
                let vars = b
                    .entry("variables")
                    .or_insert_with(|| Value::Object(Map::new()));
                // The config reader refuses a non-object `variables`.
                let Value::Object(vars) = vars else {
                    return Err(self.fatal("key \"body\": \"variables\" must be an object".into()));
                };
                for (name, value) in &call.params {
                    vars.insert(name.clone(), value.clone());
                }
            }
            // The query string, also for a GET (which the config reader allows only here).
            _ => {
                let mut pairs = url.query_pairs_mut();
                for (name, value) in &call.params {
                    pairs.append_pair(name, &param_text(value));
                }
            }
        }
        let mut builder = match body {
            None => self.client.get(url),
            Some(b) => {
                let bytes = serde_json::to_vec(&Value::Object(b))
                    .map_err(|e| other("cannot encode the request body", e))?;
                self.client
                    .request(c.method.clone(), url)
                    .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
                    .body(bytes)
            }
        };
        builder = builder
            .header(ACCEPT, HeaderValue::from_static("application/json"))
            .header(USER_AGENT, HeaderValue::from_static(USER_AGENT_VALUE));
        for (name, value) in &c.headers {
            builder = builder.header(name, value);
        }
        if let Some((name, secret)) = &c.auth {
            builder = builder.header(name, secret.value().clone());
        }
        let mut request = builder
            .build()
            .map_err(|e| other("cannot build the request", e.without_url()))?;
        // The body is read as sent, never decoded: the request asks for no encoding (over any
        // `Accept-Encoding` the config's headers set), and `read_body`'s caller refuses one.
        request
            .headers_mut()
            .insert(ACCEPT_ENCODING, HeaderValue::from_static("identity"));
        Ok(request)
    }

    /// Reads the body of a 2xx response, refusing it as soon as it passes the bound.
    async fn read_body(&self, resp: &mut Response) -> Result<Vec<u8>, FetchError> {
        let max = self.config.max_body_bytes;
        let too_large = || FetchError::InvalidPage {
            detail: format!("the response body is over the bound of {max} bytes"),
        };
        if resp.content_length().is_some_and(|n| n > max) {
            return Err(too_large());
        }
        let mut body = Vec::with_capacity(
            usize::try_from(resp.content_length().unwrap_or(0).min(max)).unwrap_or(0),
        );
        // Bounded: every turn adds a chunk, and the total is checked against `max` each time;
        // the collector's per-page timeout bounds a server that trickles.
        while let Some(chunk) = resp.chunk().await.map_err(transport)? {
            if (body.len() as u64).saturating_add(chunk.len() as u64) > max {
                return Err(too_large());
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }

    /// Whether an error response's body holds the expired marker; reads at most
    /// `ERROR_BODY_SCAN_MAX` bytes of it and never keeps them.
    async fn holds_expired_marker(&self, resp: &mut Response) -> bool {
        let Some(marker) = &self.config.expired_marker else {
            return false;
        };
        let mut seen: Vec<u8> = Vec::new();
        while let Ok(Some(chunk)) = resp.chunk().await {
            let room = ERROR_BODY_SCAN_MAX.saturating_sub(seen.len());
            seen.extend_from_slice(&chunk[..chunk.len().min(room)]);
            if seen.len() >= ERROR_BODY_SCAN_MAX {
                break;
            }
        }
        seen.windows(marker.len()).any(|w| w == marker.as_bytes())
    }
}

/// Refuses a response whose body is encoded (`Content-Encoding` other than `identity`): the
/// source asks for `identity` and never decodes, so a gzip body is never read as JSON text and
/// a plain body labelled `br` is never taken as what its label says. An invalid page (R16),
/// naming the encoding (at most 64 printable characters of the header).
fn refuse_encoded(resp: &Response) -> Result<(), FetchError> {
    for value in resp.headers().get_all(CONTENT_ENCODING) {
        let text = value.to_str().unwrap_or("(not text)");
        let encoded = text
            .split(',')
            .map(str::trim)
            .any(|e| !e.is_empty() && !e.eq_ignore_ascii_case("identity"));
        if encoded {
            let shown: String = text
                .chars()
                .filter(|c| c.is_ascii_graphic() || *c == ' ')
                .take(64)
                .collect();
            return Err(FetchError::InvalidPage {
                detail: format!(
                    "the response body is encoded ({shown:?}, Content-Encoding); this source asks for identity (Accept-Encoding: identity) and does not decode"
                ),
            });
        }
    }
    Ok(())
}

/// A failure of the source itself (not of a page), with its cause chained.
fn other(what: &str, e: impl std::error::Error + Send + Sync + 'static) -> FetchError {
    FetchError::Fatal(SourceError::Other {
        what: what.to_owned(),
        source: Box::new(e),
    })
}

/// A request parameter as text: a string as it is, anything else as compact JSON (`3`,
/// `true`, `null`, `["a","b"]`, `{"k":1}`).
fn param_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A failure to talk to the server: a timeout, or a transient server error (connection refused
/// or reset, a body cut short). Nothing of the error (which names the URL) is kept.
fn transport(e: reqwest::Error) -> FetchError {
    if e.is_timeout() {
        FetchError::Timeout
    } else {
        FetchError::ServerError
    }
}

impl PageSource for HttpSource {
    async fn fetch(&mut self, req: &PageRequest) -> Result<Page, FetchError> {
        let call = self
            .config
            .mapping
            .call(req)
            .map_err(|e| self.fatal(e.to_string()))?;
        let request = self.build(&call)?;
        let mut resp = self.client.execute(request).await.map_err(transport)?;
        let status = resp.status();
        if !status.is_success() {
            let retry_after = resp
                .headers()
                .get(RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            let marker = status.as_u16() == 400 && self.holds_expired_marker(&mut resp).await;
            return Err(status::classify(
                status.as_u16(),
                retry_after.as_deref(),
                SystemTime::now(),
                marker,
            ));
        }
        refuse_encoded(&resp)?;
        let body = self.read_body(&mut resp).await?;
        self.config
            .mapping
            .map_body(&body, self.config.max_body_bytes, &call.position)
            .map_err(|e| FetchError::InvalidPage {
                detail: chain_text(&e),
            })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // Tests: a panic is the failure report.
    use super::*;
    use serde_json::json;

    #[test]
    fn parameters_are_text_as_documented() {
        for (v, want) in [
            (json!("a b&c"), "a b&c"),
            (json!(3), "3"),
            (json!(-2.5), "-2.5"),
            (json!(true), "true"),
            (Value::Null, "null"),
            (json!(["a", "b"]), r#"["a","b"]"#),
            (json!({"k": 1}), r#"{"k":1}"#),
        ] {
            assert_eq!(param_text(&v), want);
        }
    }

    #[test]
    fn the_source_debug_output_redacts_the_secret() {
        let cfg = HttpConfig::from_value(
            Path::new("cfg.json"),
            &json!({"url": "http://127.0.0.1:9/x", "auth_env": "T"}),
            |_| Some("canary-debug-4e1".into()),
        )
        .unwrap();
        let source = HttpSource::new(Path::new("cfg.json"), cfg, EndSignal::CursorAbsent).unwrap();
        let shown = format!("{source:?} {source:#?}");
        assert!(shown.contains("Secret(<redacted>)"), "{shown}");
        assert!(!shown.contains("canary"), "{shown}");
    }
}
