//! The `mcp:CONFIG.json` file: the server to start or reach, what to page (a tool, or one of
//! the protocol's own lists), and the mapping keys it hands to `mapping`.
//!
//! The argument names of the issue (`cursor_arg`, `page_size_arg`, `page_arg`, `offset_arg`,
//! `snapshot_arg`, `after_arg`) are the mapping's `*_param` keys under the names an MCP tool
//! gives them; the `*_param` spellings are refused with the name to use. Secrets (the value of
//! `auth_env`, the values of `env`) live only in [`Secret`]s, whose `Debug` is redacted: no
//! error names a value, only the key or the variable.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::{json, Map, Value};

use crate::contract::{CONTRACT_BYTES_MAX, PAGE_SIZE_BYTES_MAX};
use crate::error::SourceError;
use crate::json::{self, ConfigError, Numbers};
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

/// The MCP source's own keys, as written (the argument names and the mapping's keys are
/// split off first and read by `mapping`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct McpFile {
    command: Option<Vec<String>>,
    url: Option<String>,
    env: Option<Map<String, Value>>,
    cwd: Option<String>,
    tool: Option<String>,
    list: Option<ListName>,
    auth_env: Option<String>,
    expired_marker: Option<String>,
    max_result_bytes: Option<u64>,
    init_timeout_ms: Option<u64>,
    stderr_log: Option<String>,
    result_part: Option<PartName>,
}

/// `list`, as configs spell it.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
enum ListName {
    Tools,
    Resources,
    Prompts,
    ResourceTemplates,
}

/// `result_part`, as configs spell it.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
enum PartName {
    Auto,
    Structured,
    Wrapped,
    Text,
}

fn bad(field: &str, problem: impl Into<String>) -> ConfigError {
    ConfigError::invalid(field, problem)
}

/// A string key: 1 to `WORD_LEN_MAX` bytes, no NUL.
fn word<'a>(field: &str, v: Option<&'a String>) -> Result<Option<&'a str>, ConfigError> {
    match v {
        None => Ok(None),
        Some(s) if !s.is_empty() && s.len() <= WORD_LEN_MAX && !s.contains('\0') => Ok(Some(s)),
        Some(_) => Err(bad(
            field,
            format!("must be a string of 1 to {WORD_LEN_MAX} bytes"),
        )),
    }
}

fn bounded(field: &str, v: Option<u64>, max: u64) -> Result<Option<u64>, ConfigError> {
    match v {
        Some(n) if !(1..=max).contains(&n) => {
            Err(bad(field, format!("must be an integer from 1 to {max}")))
        }
        other => Ok(other),
    }
}

impl McpConfig {
    /// Reads and validates a config file, reading the secret `auth_env` names.
    ///
    /// # Errors
    /// `SourceError::Io` when unreadable; `SourceError::ConfigFile` naming the key, its line
    /// and column otherwise.
    pub fn read(path: &Path) -> Result<McpConfig, SourceError> {
        let text = crate::io_bound::read_text(path, CONFIG_BYTES_MAX)?;
        let at = |error: ConfigError| SourceError::ConfigFile {
            path: path.to_owned(),
            error: error.placed(&text),
        };
        let value = json::parse(&text, Numbers::Any).map_err(|e| at(e.into()))?;
        McpConfig::resolve(&value, base_of(path), |name| std::env::var_os(name)).map_err(at)
    }

    /// Validates a parsed config; `env` looks up the variable `auth_env` names. A relative
    /// `cwd` or `stderr_log` is taken from the config file's directory.
    ///
    /// # Errors
    /// As [`McpConfig::read`], without positions.
    pub fn from_value(
        path: &Path,
        value: &Value,
        env: impl FnOnce(&str) -> Option<std::ffi::OsString>,
    ) -> Result<McpConfig, SourceError> {
        McpConfig::resolve(value, base_of(path), env).map_err(|error| SourceError::ConfigFile {
            path: path.to_owned(),
            error,
        })
    }

    /// [`McpConfig::from_value`] with the error as the config layer's (for a file that holds
    /// this config inside its own: the proxy's).
    pub(crate) fn resolve_at(
        path: &Path,
        value: &Value,
        env: impl FnOnce(&str) -> Option<std::ffi::OsString>,
    ) -> Result<McpConfig, ConfigError> {
        McpConfig::resolve(value, base_of(path), env)
    }

    fn resolve(
        value: &Value,
        base: &Path,
        env: impl FnOnce(&str) -> Option<std::ffi::OsString>,
    ) -> Result<McpConfig, ConfigError> {
        if let Value::Object(obj) = value {
            // The HTTP spellings of the arguments, refused with the MCP name to use.
            if let Some((arg, param)) = ARG_KEYS.iter().find(|(_, p)| obj.contains_key(*p)) {
                return Err(bad(
                    param,
                    format!("an MCP tool takes arguments; the key is {arg:?}"),
                ));
            }
        }
        let args: Vec<&str> = ARG_KEYS.iter().map(|(a, _)| *a).collect();
        let mapping_names: Vec<&str> = mapping::KEYS
            .iter()
            .copied()
            .filter(|k| !k.ends_with("_param"))
            .collect();
        let [own, arg_keys, mut mapping_keys] = <[_; 3]>::try_from(json::split_keys(
            value,
            &[json::field_names::<McpFile>(), &args, &mapping_names],
        )?)
        .unwrap_or_default();
        for (arg, v) in arg_keys {
            if let Some((_, param)) = ARG_KEYS.iter().find(|(a, _)| *a == arg) {
                mapping_keys.insert((*param).to_owned(), v);
            }
        }
        let own: McpFile = json::from_value(&Value::Object(own))?;
        let transport = transport(&own, base, env)?;
        let (target, mapping) = target(&own, &mapping_keys)?;
        let expired_marker = word("expired_marker", own.expired_marker.as_ref())?;
        if expired_marker.is_some_and(|m| m.len() > EXPIRED_MARKER_LEN_MAX) {
            return Err(bad(
                "expired_marker",
                format!("at most {EXPIRED_MARKER_LEN_MAX} bytes"),
            ));
        }
        let result_from = match own.result_part {
            None | Some(PartName::Auto) => ResultFrom::Auto,
            Some(PartName::Structured) => ResultFrom::Structured,
            Some(PartName::Wrapped) => ResultFrom::Wrapped,
            Some(PartName::Text) => ResultFrom::Text,
        };
        if result_from != ResultFrom::Auto && matches!(target, Target::List(_)) {
            return Err(bad(
                "result_part",
                "applies to a tool's results, not to a protocol list",
            ));
        }
        Ok(McpConfig {
            result_from,
            transport,
            target,
            mapping,
            expired_marker: expired_marker.map(str::to_owned),
            max_result_bytes: bounded(
                "max_result_bytes",
                own.max_result_bytes,
                PAGE_SIZE_BYTES_MAX,
            )?
            .unwrap_or(PAGE_SIZE_BYTES_MAX),
            init_timeout_ms: bounded("init_timeout_ms", own.init_timeout_ms, INIT_TIMEOUT_MS_MAX)?
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

fn base_of(path: &Path) -> &Path {
    path.parent().unwrap_or_else(|| Path::new("."))
}

fn transport(
    own: &McpFile,
    base: &Path,
    env: impl FnOnce(&str) -> Option<std::ffi::OsString>,
) -> Result<Transport, ConfigError> {
    let url = word("url", own.url.as_ref())?;
    match (&own.command, url) {
        (Some(_), Some(_)) => Err(bad("url", "keys \"command\" and \"url\" exclude each other: give one")),
        (None, None) => Err(bad(
            "",
            "missing the server: give \"command\": [PROGRAM, ARG...] (stdio) or \"url\": \"http://HOST:PORT/mcp\" (streamable HTTP)",
        )),
        (Some(words), None) => {
            if own.auth_env.is_some() {
                return Err(bad("auth_env", "applies to \"url\" only"));
            }
            if words.is_empty() || words.len() > COMMAND_WORDS_MAX {
                return Err(bad(
                    "command",
                    format!("must be an array of 1 to {COMMAND_WORDS_MAX} strings, the program first"),
                ));
            }
            if words.iter().any(|w| w.is_empty() || w.len() > WORD_LEN_MAX || w.contains('\0')) {
                return Err(bad("command", "every word must be a non-empty string"));
            }
            let env = match &own.env {
                None => Vec::new(),
                Some(vars) if vars.len() <= COMMAND_WORDS_MAX => vars
                    .iter()
                    .map(|(k, v)| match v {
                        Value::String(s) if !k.is_empty() && !k.contains(['=', '\0']) && s.len() <= WORD_LEN_MAX && !s.contains('\0') => {
                            Ok((k.clone(), Secret(s.clone())))
                        }
                        _ => Err(bad("env", format!("{k:?} must name a variable and map it to a string"))),
                    })
                    .collect::<Result<Vec<_>, _>>()?,
                Some(_) => return Err(bad("env", format!("at most {COMMAND_WORDS_MAX} variables"))),
            };
            Ok(Transport::Command {
                argv: words.clone(),
                env,
                cwd: word("cwd", own.cwd.as_ref())?.map(|c| base.join(c)),
                stderr_log: word("stderr_log", own.stderr_log.as_ref())?.map(|c| base.join(c)),
            })
        }
        (None, Some(url)) => {
            for (k, set) in [("env", own.env.is_some()), ("cwd", own.cwd.is_some()), ("stderr_log", own.stderr_log.is_some())] {
                if set {
                    return Err(bad(k, "applies to \"command\" only"));
                }
            }
            let parsed = reqwest::Url::parse(url).map_err(|e| bad("url", e.to_string()))?;
            if parsed.scheme() != "http" && parsed.scheme() != "https" {
                return Err(bad("url", "the scheme must be http or https"));
            }
            if !parsed.username().is_empty() || parsed.password().is_some() {
                return Err(bad("url", "credentials in the URL would be shown; use auth_env"));
            }
            let bearer = match word("auth_env", own.auth_env.as_ref())? {
                None => None,
                Some(var) => {
                    let v = env(var)
                        .ok_or_else(|| bad("auth_env", format!("the environment variable {var:?} is not set")))?
                        .into_string()
                        .map_err(|_| bad("auth_env", format!("the environment variable {var:?} is not UTF-8")))?;
                    if v.is_empty() || v.chars().any(char::is_control) {
                        return Err(bad("auth_env", format!("the value of {var:?} is empty or holds control characters")));
                    }
                    Some(Secret(v))
                }
            };
            Ok(Transport::Url { url: url.to_owned(), bearer })
        }
    }
}

fn target(
    own: &McpFile,
    mapping_keys: &Map<String, Value>,
) -> Result<(Target, Mapping), ConfigError> {
    match (word("tool", own.tool.as_ref())?, own.list) {
        (Some(_), Some(_)) => Err(bad("list", "keys \"tool\" and \"list\" exclude each other: give one")),
        (None, None) => Err(bad(
            "",
            "missing what to page: give \"tool\": NAME, or \"list\": \"tools\" | \"resources\" | \"prompts\" | \"resource_templates\"",
        )),
        (Some(tool), None) => Ok((Target::Tool(tool.to_owned()), Mapping::from_config(mapping_keys)?)),
        (None, Some(list)) => {
            let kind = match list {
                ListName::Tools => ListKind::Tools,
                ListName::Resources => ListKind::Resources,
                ListName::Prompts => ListKind::Prompts,
                ListName::ResourceTemplates => ListKind::ResourceTemplates,
            };
            // The protocol fixes the list's shape: only labels and content may be added.
            if let Some(k) = mapping_keys.keys().find(|k| *k != "labels" && *k != "content") {
                return Err(bad(
                    k,
                    "a protocol list has a fixed shape (opaque nextCursor, server-chosen page size); only \"labels\" and \"content\" apply",
                ));
            }
            let (items, id) = kind.pointers();
            let mut keys = json!({"preset": "mcp_list", "items": items, "id": id});
            if let Value::Object(m) = &mut keys {
                m.extend(mapping_keys.clone());
            }
            let keys = keys.as_object().cloned().unwrap_or_default();
            Ok((Target::List(kind), Mapping::from_config(&keys)?))
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
