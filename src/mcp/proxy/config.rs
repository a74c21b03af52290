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

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::contract::{Contract, CONTRACT_BYTES_MAX};
use crate::error::SourceError;
use crate::json::{self, ConfigError, Numbers};
use crate::source::mcp::McpConfig;

/// Tools one proxy may declare paginated.
const PAGINATED_MAX: usize = 256;
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

/// The file's keys, as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ProxyFile {
    upstream: Map<String, Value>,
    store: Option<String>,
    paginated: Option<Map<String, Value>>,
}

fn bad(field: &str, problem: impl Into<String>) -> ConfigError {
    ConfigError::invalid(field, problem)
}

impl ProxyConfig {
    /// Reads and validates the file (and the secret `auth_env` names).
    ///
    /// # Errors
    /// `SourceError::ConfigFile` naming the key, its line and column; `SourceError::Io` or
    /// `SourceError::File` when unreadable.
    pub(crate) fn read(path: &Path) -> Result<ProxyConfig, SourceError> {
        let text = crate::io_bound::read_text(path, CONTRACT_BYTES_MAX as u64)?;
        let at = |error: ConfigError| SourceError::ConfigFile {
            path: path.to_owned(),
            error: error.placed(&text),
        };
        let v = json::parse(&text, Numbers::Any).map_err(|e| at(e.into()))?;
        resolve(path, &v).map_err(at)
    }
}

fn resolve(path: &Path, v: &Value) -> Result<ProxyConfig, ConfigError> {
    let file: ProxyFile = json::from_value(v)?;
    let up = file.upstream;
    if let Some(k) = up.keys().find(|k| !UPSTREAM_KEYS.contains(&k.as_str())) {
        return Err(ConfigError::unknown(k, UPSTREAM_KEYS).under(&["upstream"]));
    }
    let base = path.parent().unwrap_or_else(|| Path::new("."));
    let store = match file.store {
        None => None,
        Some(s) if !s.is_empty() => Some(base.join(s)),
        Some(_) => return Err(bad("store", "must be a path (a non-empty string)")),
    };
    let with_tool = |tool: &str, extra: &Map<String, Value>| {
        let mut m = up.clone();
        m.insert("tool".into(), Value::from(tool));
        m.extend(extra.clone());
        Value::Object(m)
    };
    let upstream =
        McpConfig::resolve_at(path, &with_tool("-", &Map::new()), |n| std::env::var_os(n))
            .map_err(|e| e.under(&["upstream"]))?;
    let paginated_obj = file.paginated.unwrap_or_default();
    if paginated_obj.len() > PAGINATED_MAX {
        return Err(bad(
            "paginated",
            format!("at most {PAGINATED_MAX} TOOL: MAPPING entries"),
        ));
    }
    let mut paginated = Vec::with_capacity(paginated_obj.len());
    for (tool, spec) in paginated_obj {
        let paged = paged(path, &tool, spec, &with_tool)
            .map_err(|e| e.under(&["paginated", tool.as_str()]))?;
        paginated.push((tool, paged));
    }
    Ok(ProxyConfig {
        path: path.to_owned(),
        upstream,
        store,
        paginated,
    })
}

/// One paginated tool's entry.
fn paged(
    path: &Path,
    tool: &str,
    spec: Value,
    with_tool: &dyn Fn(&str, &Map<String, Value>) -> Value,
) -> Result<Paged, ConfigError> {
    let Value::Object(mut spec) = spec else {
        return Err(bad("", "must be an object of mapping keys"));
    };
    for k in UPSTREAM_KEYS.iter().chain(&["tool", "list"]) {
        if spec.contains_key(*k) {
            return Err(bad(
                k,
                "belongs to \"upstream\" (one session serves every tool)",
            ));
        }
    }
    let mut contract = match spec.remove("contract") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(c)) => c,
        Some(_) => return Err(bad("contract", "must be a contract object")),
    };
    if contract.contains_key("query") {
        return Err(bad(
            "contract.query",
            "each call's arguments are the query: leave it out",
        ));
    }
    contract
        .entry("source")
        .or_insert_with(|| Value::from(tool));
    // MCP tools name their items by strings far more often than by numbers.
    contract
        .entry("id_codec")
        .or_insert_with(|| Value::from("string"));
    let contract = Contract::from_json(&Value::Object(contract).to_string())
        .map_err(|e| bad("contract", e.to_string()))?;
    let keep_items = match spec.remove("keep_items") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => b,
        Some(_) => return Err(bad("keep_items", "must be true or false")),
    };
    let config = McpConfig::resolve_at(path, &with_tool(tool, &spec), |n| std::env::var_os(n))?;
    let own_args: Vec<String> = config.mapping.sent_names().map(str::to_owned).collect();
    Ok(Paged {
        config,
        contract,
        own_args,
        keep_items,
    })
}
