//! The `mcp:CONFIG.json` file: the server to start or reach, what to page (a tool, or one of
//! the protocol's own lists), and the mapping keys it hands to `mapping`.
//!
//! The argument names of the issue (`cursor_arg`, `page_size_arg`, `page_arg`, `offset_arg`,
//! `snapshot_arg`, `after_arg`) are the mapping's `*_param` keys under the names an MCP tool
//! gives them; the `*_param` spellings are refused with the name to use. Secrets (the value of
//! `auth_env`, the values of `env`) live only in [`Secret`]s, whose `Debug` is redacted: no
//! error names a value, only the key or the variable.

use crate::error::config_error as bad;
use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value};

use crate::contract::{closest, CONTRACT_BYTES_MAX, PAGE_SIZE_BYTES_MAX};
use crate::error::SourceError;
use crate::json::{self, Numbers};
use crate::source::mapping::{self, Mapping, ResultFrom};

/// Bytes of the config file.
const CONFIG_BYTES_MAX: u64 = CONTRACT_BYTES_MAX as u64;
/// Words of `command`, and variables of `env`.
const COMMAND_WORDS_MAX: usize = 256;
/// Bytes of one word of `command`, of a tool name, of an env value.
const WORD_LEN_MAX: usize = 64 * 1024;
/// Bytes of the expired marker.
const EXPIRED_MARKER_LEN_MAX: usize = 1024;
/// The default time a server has to start and answer `initialize`, milliseconds.
pub(crate) const INIT_TIMEOUT_MS_DEFAULT: u64 = 30_000;
/// The longest `init_timeout_ms`.
const INIT_TIMEOUT_MS_MAX: u64 = 10 * 60 * 1000;

/// The keys of the MCP source itself; the argument names are translated to mapping keys, the
/// rest are mapping keys (`mapping::KEYS`).
pub(crate) const MCP_KEYS: &[&str] = &[
    "command",
    "url",
    "env",
    "cwd",
    "tool",
    "list",
    "auth_env",
    "expired_marker",
    "max_result_bytes",
    "init_timeout_ms",
    "stderr_log",
    "result_part",
];

/// The MCP names of the mapping's request parameters.
const ARG_KEYS: &[(&str, &str)] = &[
    ("cursor_arg", "cursor_param"),
    ("page_size_arg", "page_size_param"),
    ("page_arg", "page_param"),
    ("offset_arg", "offset_param"),
    ("snapshot_arg", "snapshot_param"),
    ("after_arg", "after_param"),
];

/// A value that must never be shown: a token, an environment value of the child.
#[derive(Clone)]
pub(crate) struct Secret(pub(crate) String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// How the server is reached.
#[derive(Debug, Clone)]
pub(crate) enum Transport {
    /// A child process speaking MCP on its stdin and stdout.
    Command {
        /// The program and its arguments.
        argv: Vec<String>,
        /// Extra environment variables (the child inherits ours besides).
        env: Vec<(String, Secret)>,
        /// The working directory, if not ours.
        cwd: Option<PathBuf>,
        /// Where the child's stderr is appended (bounded); else it is kept in memory only.
        stderr_log: Option<PathBuf>,
    },
    /// A streamable HTTP endpoint.
    Url {
        /// The endpoint.
        url: String,
        /// The bearer token read from `auth_env`.
        bearer: Option<Secret>,
    },
}

/// One of the protocol's own paginated lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListKind {
    /// `tools/list`, IDs the tool names.
    Tools,
    /// `resources/list`, IDs the URIs.
    Resources,
    /// `prompts/list`, IDs the prompt names.
    Prompts,
    /// `resources/templates/list`, IDs the URI templates.
    ResourceTemplates,
}

impl ListKind {
    /// The name configs spell.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            ListKind::Tools => "tools",
            ListKind::Resources => "resources",
            ListKind::Prompts => "prompts",
            ListKind::ResourceTemplates => "resource_templates",
        }
    }

    /// The protocol's method.
    #[must_use]
    pub fn method(self) -> &'static str {
        match self {
            ListKind::Tools => "tools/list",
            ListKind::Resources => "resources/list",
            ListKind::Prompts => "prompts/list",
            ListKind::ResourceTemplates => "resources/templates/list",
        }
    }

    /// The items array and the ID within an item, as the protocol names them.
    fn pointers(self) -> (&'static str, &'static str) {
        match self {
            ListKind::Tools => ("/tools", "/name"),
            ListKind::Resources => ("/resources", "/uri"),
            ListKind::Prompts => ("/prompts", "/name"),
            ListKind::ResourceTemplates => ("/resourceTemplates", "/uriTemplate"),
        }
    }
}

/// What the source pages.
#[derive(Debug, Clone)]
pub(crate) enum Target {
    /// A tool, paginated by its arguments.
    Tool(String),
    /// A protocol list.
    List(ListKind),
}

/// A parsed `mcp:` config.
#[derive(Debug, Clone)]
pub struct McpConfig {
    pub(crate) transport: Transport,
    pub(crate) target: Target,
    pub(crate) mapping: Mapping,
    pub(crate) expired_marker: Option<String>,
    pub(crate) max_result_bytes: u64,
    pub(crate) init_timeout_ms: u64,
    /// Which part of a tool result holds the page.
    pub(crate) result_from: ResultFrom,
}

fn text<'a>(
    path: &Path,
    obj: &'a Map<String, Value>,
    key: &str,
) -> Result<Option<&'a str>, SourceError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if !s.is_empty() && s.len() <= WORD_LEN_MAX => Ok(Some(s)),
        Some(_) => Err(bad(
            path,
            format!("key {key:?}: must be a string of 1 to {WORD_LEN_MAX} bytes"),
        )),
    }
}

fn bounded_u64(
    path: &Path,
    obj: &Map<String, Value>,
    key: &str,
    max: u64,
) -> Result<Option<u64>, SourceError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .filter(|n| (1..=max).contains(n))
            .map(Some)
            .ok_or_else(|| {
                bad(
                    path,
                    format!("key {key:?}: must be an integer from 1 to {max}"),
                )
            }),
    }
}

impl McpConfig {
    /// Reads and validates a config file, reading the secret `auth_env` names.
    ///
    /// # Errors
    /// `SourceError::Io` when unreadable; `SourceError::Config` naming the key otherwise.
    pub fn read(path: &Path) -> Result<McpConfig, SourceError> {
        let text = crate::io_bound::read_text(path, CONFIG_BYTES_MAX)?;
        let value = json::parse(&text, Numbers::Any)
            .map_err(|e| bad(path, format!("malformed JSON: {e}")))?;
        McpConfig::from_value(path, &value, |name| std::env::var_os(name))
    }

    /// Validates a parsed config; `env` looks up the variable `auth_env` names. A relative
    /// `cwd` or `stderr_log` is taken from the config file's directory.
    ///
    /// # Errors
    /// As [`McpConfig::read`].
    pub fn from_value(
        path: &Path,
        value: &Value,
        env: impl FnOnce(&str) -> Option<std::ffi::OsString>,
    ) -> Result<McpConfig, SourceError> {
        let Value::Object(obj) = value else {
            return Err(bad(path, "the config must be a JSON object"));
        };
        let mut own = Map::new();
        let mut mapping_keys = Map::new();
        for (k, v) in obj {
            if MCP_KEYS.contains(&k.as_str()) {
                own.insert(k.clone(), v.clone());
            } else if let Some((_, param)) = ARG_KEYS.iter().find(|(arg, _)| arg == k) {
                mapping_keys.insert((*param).to_owned(), v.clone());
            } else if let Some((arg, _)) = ARG_KEYS.iter().find(|(_, param)| param == k) {
                return Err(bad(
                    path,
                    format!("key {k:?}: an MCP tool takes arguments; the key is {arg:?}"),
                ));
            } else if mapping::KEYS.contains(&k.as_str()) {
                mapping_keys.insert(k.clone(), v.clone());
            } else {
                let mut known: Vec<&str> = MCP_KEYS.to_vec();
                known.extend(ARG_KEYS.iter().map(|(a, _)| *a));
                known.extend(mapping::KEYS.iter().filter(|k| !k.ends_with("_param")));
                let hint = closest(k, &known)
                    .map(|c| format!("; did you mean {c:?}?"))
                    .unwrap_or_default();
                return Err(bad(path, format!("unknown key {k:?}{hint}")));
            }
        }
        let base = path.parent().unwrap_or_else(|| Path::new("."));
        let transport = transport(path, &own, base, env)?;
        let (target, mapping) = target(path, &own, &mapping_keys)?;
        let expired_marker = text(path, &own, "expired_marker")?.map(str::to_owned);
        if expired_marker
            .as_ref()
            .is_some_and(|m| m.len() > EXPIRED_MARKER_LEN_MAX)
        {
            return Err(bad(
                path,
                format!("key \"expired_marker\": at most {EXPIRED_MARKER_LEN_MAX} bytes"),
            ));
        }
        let result_from = match text(path, &own, "result_part")? {
            None => ResultFrom::Auto,
            Some(name) => ResultFrom::parse(name).ok_or_else(|| {
                bad(
                    path,
                    format!(
                        "key \"result_part\": must be one of {}",
                        ResultFrom::NAMES.join(", ")
                    ),
                )
            })?,
        };
        if result_from != ResultFrom::Auto && matches!(target, Target::List(_)) {
            return Err(bad(
                path,
                "key \"result_part\": applies to a tool's results, not to a protocol list",
            ));
        }
        Ok(McpConfig {
            result_from,
            transport,
            target,
            mapping,
            expired_marker,
            max_result_bytes: bounded_u64(path, &own, "max_result_bytes", PAGE_SIZE_BYTES_MAX)?
                .unwrap_or(PAGE_SIZE_BYTES_MAX),
            init_timeout_ms: bounded_u64(path, &own, "init_timeout_ms", INIT_TIMEOUT_MS_MAX)?
                .unwrap_or(INIT_TIMEOUT_MS_DEFAULT),
        })
    }

    /// The list this config follows, if it follows one of the protocol's.
    #[must_use]
    pub fn list(&self) -> Option<ListKind> {
        match self.target {
            Target::List(k) => Some(k),
            Target::Tool(_) => None,
        }
    }
}

fn transport(
    path: &Path,
    own: &Map<String, Value>,
    base: &Path,
    env: impl FnOnce(&str) -> Option<std::ffi::OsString>,
) -> Result<Transport, SourceError> {
    let url = text(path, own, "url")?;
    match (own.get("command").filter(|v| !v.is_null()), url) {
        (Some(_), Some(_)) => Err(bad(path, "keys \"command\" and \"url\" exclude each other: give one")),
        (None, None) => Err(bad(
            path,
            "missing the server: give \"command\": [PROGRAM, ARG...] (stdio) or \"url\": \"http://HOST:PORT/mcp\" (streamable HTTP)",
        )),
        (Some(cmd), None) => {
            for k in ["auth_env"] {
                if own.get(k).is_some_and(|v| !v.is_null()) {
                    return Err(bad(path, format!("key {k:?}: applies to \"url\" only")));
                }
            }
            let argv = match cmd {
                Value::Array(words) if !words.is_empty() && words.len() <= COMMAND_WORDS_MAX => words
                    .iter()
                    .map(|w| match w {
                        Value::String(s) if !s.is_empty() && s.len() <= WORD_LEN_MAX && !s.contains('\0') => Ok(s.clone()),
                        _ => Err(bad(path, "key \"command\": every word must be a non-empty string")),
                    })
                    .collect::<Result<Vec<_>, _>>()?,
                _ => {
                    return Err(bad(
                        path,
                        format!("key \"command\": must be an array of 1 to {COMMAND_WORDS_MAX} strings, the program first"),
                    ))
                }
            };
            let env = match own.get("env") {
                None | Some(Value::Null) => Vec::new(),
                Some(Value::Object(vars)) if vars.len() <= COMMAND_WORDS_MAX => vars
                    .iter()
                    .map(|(k, v)| match v {
                        Value::String(s) if !k.is_empty() && !k.contains(['=', '\0']) && s.len() <= WORD_LEN_MAX && !s.contains('\0') => {
                            Ok((k.clone(), Secret(s.clone())))
                        }
                        _ => Err(bad(path, format!("key \"env\": {k:?} must name a variable and map it to a string"))),
                    })
                    .collect::<Result<Vec<_>, _>>()?,
                Some(_) => return Err(bad(path, "key \"env\": must be an object of NAME: VALUE strings")),
            };
            Ok(Transport::Command {
                argv,
                env,
                cwd: text(path, own, "cwd")?.map(|c| base.join(c)),
                stderr_log: text(path, own, "stderr_log")?.map(|c| base.join(c)),
            })
        }
        (None, Some(url)) => {
            for k in ["env", "cwd", "stderr_log"] {
                if own.get(k).is_some_and(|v| !v.is_null()) {
                    return Err(bad(path, format!("key {k:?}: applies to \"command\" only")));
                }
            }
            let parsed = reqwest::Url::parse(url).map_err(|e| bad(path, format!("key \"url\": {e}")))?;
            if parsed.scheme() != "http" && parsed.scheme() != "https" {
                return Err(bad(path, "key \"url\": the scheme must be http or https"));
            }
            if !parsed.username().is_empty() || parsed.password().is_some() {
                return Err(bad(path, "key \"url\": credentials in the URL would be shown; use auth_env"));
            }
            let bearer = match text(path, own, "auth_env")? {
                None => None,
                Some(var) => {
                    let v = env(var)
                        .ok_or_else(|| bad(path, format!("key \"auth_env\": the environment variable {var:?} is not set")))?
                        .into_string()
                        .map_err(|_| bad(path, format!("key \"auth_env\": the environment variable {var:?} is not UTF-8")))?;
                    if v.is_empty() || v.chars().any(char::is_control) {
                        return Err(bad(path, format!("key \"auth_env\": the value of {var:?} is empty or holds control characters")));
                    }
                    Some(Secret(v))
                }
            };
            Ok(Transport::Url { url: url.to_owned(), bearer })
        }
    }
}

fn target(
    path: &Path,
    own: &Map<String, Value>,
    mapping_keys: &Map<String, Value>,
) -> Result<(Target, Mapping), SourceError> {
    let map_err = |e: mapping::ConfigError| bad(path, e.to_string());
    match (text(path, own, "tool")?, own.get("list").filter(|v| !v.is_null())) {
        (Some(_), Some(_)) => Err(bad(path, "keys \"tool\" and \"list\" exclude each other: give one")),
        (None, None) => Err(bad(
            path,
            "missing what to page: give \"tool\": NAME, or \"list\": \"tools\" | \"resources\" | \"prompts\" | \"resource_templates\"",
        )),
        (Some(tool), None) => Ok((
            Target::Tool(tool.to_owned()),
            Mapping::from_config(mapping_keys).map_err(map_err)?,
        )),
        (None, Some(list)) => {
            let kind = match list.as_str() {
                Some("tools") => ListKind::Tools,
                Some("resources") => ListKind::Resources,
                Some("prompts") => ListKind::Prompts,
                Some("resource_templates") => ListKind::ResourceTemplates,
                _ => {
                    return Err(bad(
                        path,
                        "key \"list\": must be \"tools\", \"resources\", \"prompts\" or \"resource_templates\"",
                    ))
                }
            };
            // The protocol fixes the list's shape: only labels and content may be added.
            if let Some(k) = mapping_keys.keys().find(|k| *k != "labels" && *k != "content") {
                return Err(bad(
                    path,
                    format!("key {k:?}: a protocol list has a fixed shape (opaque nextCursor, server-chosen page size); only \"labels\" and \"content\" apply"),
                ));
            }
            let (items, id) = kind.pointers();
            let mut keys = json!({"preset": "mcp_list", "items": items, "id": id});
            if let Value::Object(m) = &mut keys {
                m.extend(mapping_keys.clone());
            }
            let keys = keys.as_object().cloned().unwrap_or_default();
            Ok((Target::List(kind), Mapping::from_config(&keys).map_err(map_err)?))
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // Tests: a panic is the failure report.
    use super::*;

    fn parse(v: Value, env: Option<&str>) -> Result<McpConfig, String> {
        McpConfig::from_value(Path::new("/cfg/m.json"), &v, |_| env.map(Into::into))
            .map_err(|e| e.to_string())
    }

    #[test]
    fn secrets_are_never_shown_and_paths_are_taken_from_the_config() {
        let c = parse(json!({"command": ["srv"], "env": {"TOKEN": "canary-env-1"}, "cwd": "work", "stderr_log": "e.log", "tool": "t"}), None).unwrap();
        let shown = format!("{c:?}");
        assert!(
            !shown.contains("canary") && shown.contains("Secret(<redacted>)"),
            "{shown}"
        );
        let Transport::Command {
            cwd, stderr_log, ..
        } = &c.transport
        else {
            panic!("{shown}")
        };
        assert_eq!(
            (cwd.as_deref(), stderr_log.as_deref()),
            (Some(Path::new("/cfg/work")), Some(Path::new("/cfg/e.log")))
        );
        let c = parse(
            json!({"url": "http://127.0.0.1:1/mcp", "auth_env": "T", "tool": "t"}),
            Some("canary-bearer-2"),
        )
        .unwrap();
        assert!(!format!("{c:?}").contains("canary"));
        let e = parse(
            json!({"url": "http://127.0.0.1:1/mcp", "auth_env": "T", "tool": "t"}),
            Some("bad\nvalue"),
        )
        .unwrap_err();
        assert!(
            e.contains("control characters") && !e.contains("bad\n"),
            "{e}"
        );
    }

    #[test]
    fn the_argument_names_are_the_mappings_parameters() {
        let c = parse(json!({"command": ["srv"], "tool": "t", "cursor_arg": "after", "page_size_arg": "first"}), None).unwrap();
        let mut sent: Vec<&str> = c.mapping.sent_names().collect();
        sent.sort_unstable();
        assert_eq!(sent, ["after", "first"]);
        for (cfg, words) in [
            (
                json!({"command": ["srv"], "tool": "t", "page_param": "p"}),
                "the key is \"page_arg\"",
            ),
            (
                json!({"command": ["srv"], "tool": "t", "env": {"A=B": "x"}}),
                "must name a variable",
            ),
            (
                json!({"command": ["srv"], "tool": "t", "auth_env": "T"}),
                "applies to \"url\" only",
            ),
            (
                json!({"url": "http://h/mcp", "tool": "t", "cwd": "x"}),
                "applies to \"command\" only",
            ),
            (
                json!({"command": ["srv"], "tool": "t", "max_result_bytes": 0}),
                "max_result_bytes",
            ),
            (
                json!({"command": ["srv", ""], "tool": "t"}),
                "non-empty string",
            ),
        ] {
            let e = parse(cfg.clone(), None).unwrap_err();
            assert!(e.contains(words), "{cfg}: {e}");
        }
    }
}
