//! The proxy's config file: `{"upstream": {...}, "store": PATH, "paginated": {TOOL: {...}}}`.
//!
//! `upstream` takes the server keys of an `mcp:` source config (`command`, `env`, `cwd`,
//! `stderr_log`, or `url`, `auth_env`; `init_timeout_ms`). Each paginated tool takes the
//! mapping keys of an `mcp:` config (`cursor_arg`, `page_size_arg`, `items`, `id`, `next`,
//! ...; `expired_marker`, `max_result_bytes`) plus an optional `contract` (limits, end signal,
//! codec — `string` unless it says otherwise —, policies; never `query`, which is each call's
//! arguments) and `keep_items`. A relative
//! `store` is taken from the config file's directory.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::contract::{closest, Contract, CONTRACT_BYTES_MAX};
use crate::error::SourceError;
use crate::json::{self, Numbers};
use crate::source::mcp::McpConfig;

/// Tools one proxy may declare paginated.
const PAGINATED_MAX: usize = 256;
/// The keys of the file.
const KEYS: &[&str] = &["upstream", "store", "paginated"];
/// The keys of `upstream`.
const UPSTREAM_KEYS: &[&str] = &[
    "command",
    "url",
    "env",
    "cwd",
    "stderr_log",
    "auth_env",
    "init_timeout_ms",
];

/// One paginated tool.
#[derive(Debug, Clone)]
pub(crate) struct Paged {
    /// Its `mcp:` config (transport copied from `upstream`, unused: the session is shared).
    pub(crate) config: McpConfig,
    /// The contract every call runs under; the call's arguments become its query.
    pub(crate) contract: Contract,
    /// The argument names the proxy sends itself (cursor, page size, page, offset, ...).
    pub(crate) own_args: Vec<String>,
    /// Whether the answer carries the items themselves, not only their IDs.
    pub(crate) keep_items: bool,
}

/// A parsed proxy config.
#[derive(Debug, Clone)]
pub(crate) struct ProxyConfig {
    /// The file (names the config in errors).
    pub(crate) path: PathBuf,
    /// How to reach the upstream (the first tool's, or one made from `upstream` alone).
    pub(crate) upstream: McpConfig,
    /// The store runs are recorded in, if any.
    pub(crate) store: Option<PathBuf>,
    /// The paginated tools, by name.
    pub(crate) paginated: Vec<(String, Paged)>,
}

fn bad(path: &Path, problem: impl Into<String>) -> SourceError {
    SourceError::Config {
        path: path.to_owned(),
        problem: problem.into(),
    }
}

fn unknown(path: &Path, key: &str, known: &[&str], at: &str) -> SourceError {
    let hint = closest(key, known)
        .map(|c| format!("; did you mean {c:?}?"))
        .unwrap_or_default();
    bad(path, format!("{at}unknown key {key:?}{hint}"))
}

impl ProxyConfig {
    /// Reads and validates the file (and the secret `auth_env` names).
    ///
    /// # Errors
    /// `SourceError` naming the file and the key.
    pub(crate) fn read(path: &Path) -> Result<ProxyConfig, SourceError> {
        let text = crate::io_bound::read_text(path, CONTRACT_BYTES_MAX as u64)?;
        let v = json::parse(&text, Numbers::Any)
            .map_err(|e| bad(path, format!("malformed JSON: {e}")))?;
        let Value::Object(obj) = v else {
            return Err(bad(path, "the proxy config must be a JSON object"));
        };
        if let Some(k) = obj.keys().find(|k| !KEYS.contains(&k.as_str())) {
            return Err(unknown(path, k, KEYS, ""));
        }
        let Some(Value::Object(up)) = obj.get("upstream") else {
            return Err(bad(path, "missing key \"upstream\": {\"command\": [PROGRAM, ARG...]} or {\"url\": \"http://HOST:PORT/mcp\"}"));
        };
        if let Some(k) = up.keys().find(|k| !UPSTREAM_KEYS.contains(&k.as_str())) {
            return Err(unknown(path, k, UPSTREAM_KEYS, "upstream: "));
        }
        let base = path.parent().unwrap_or_else(|| Path::new("."));
        let store = match obj.get("store") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) if !s.is_empty() => Some(base.join(s)),
            Some(_) => return Err(bad(path, "key \"store\": must be a path (a string)")),
        };
        let with_tool = |tool: &str, extra: &Map<String, Value>| {
            let mut m = up.clone();
            m.insert("tool".into(), Value::from(tool));
            m.extend(extra.clone());
            Value::Object(m)
        };
        let upstream =
            McpConfig::from_value(path, &with_tool("-", &Map::new()), |n| std::env::var_os(n))?;
        let paginated_obj = match obj.get("paginated") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(p)) if p.len() <= PAGINATED_MAX => p.clone(),
            Some(_) => {
                return Err(bad(
                    path,
                    format!(
                    "key \"paginated\": an object of at most {PAGINATED_MAX} TOOL: MAPPING entries"
                ),
                ))
            }
        };
        let mut paginated = Vec::with_capacity(paginated_obj.len());
        for (tool, spec) in paginated_obj {
            let at = |p: String| bad(path, format!("paginated.{tool}: {p}"));
            let Value::Object(mut spec) = spec else {
                return Err(at("must be an object of mapping keys".into()));
            };
            for k in UPSTREAM_KEYS.iter().chain(&["tool", "list"]) {
                if spec.contains_key(*k) {
                    return Err(at(format!(
                        "key {k:?} belongs to \"upstream\" (one session serves every tool)"
                    )));
                }
            }
            let mut contract = match spec.remove("contract") {
                None | Some(Value::Null) => Map::new(),
                Some(Value::Object(c)) => c,
                Some(_) => return Err(at("key \"contract\": must be a contract object".into())),
            };
            if contract.contains_key("query") {
                return Err(at(
                    "key \"contract\": no \"query\": each call's arguments are the query".into(),
                ));
            }
            contract
                .entry("source")
                .or_insert_with(|| Value::from(tool.as_str()));
            // MCP tools name their items by strings far more often than by numbers.
            contract
                .entry("id_codec")
                .or_insert_with(|| Value::from("string"));
            let contract = Contract::from_json(&Value::Object(contract).to_string())
                .map_err(|e| at(format!("contract: {e}")))?;
            let keep_items = match spec.remove("keep_items") {
                None | Some(Value::Null) => false,
                Some(Value::Bool(b)) => b,
                Some(_) => return Err(at("key \"keep_items\": true or false".into())),
            };
            let config =
                McpConfig::from_value(path, &with_tool(&tool, &spec), |n| std::env::var_os(n))
                    .map_err(|e| at(e.to_string()))?;
            let own_args: Vec<String> = config.mapping.sent_names().map(str::to_owned).collect();
            paginated.push((
                tool,
                Paged {
                    config,
                    contract,
                    own_args,
                    keep_items,
                },
            ));
        }
        Ok(ProxyConfig {
            path: path.to_owned(),
            upstream,
            store,
            paginated,
        })
    }
}
