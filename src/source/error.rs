//! The sources' error: a source that could not be set up or read (a page's failure is a
//! violation, data in the receipt, never this). Defined here, where it arises; the crate-level
//! `Error` composes it.
//! No message here ever carries a raw continuation cursor: cursors appear only as the short
//! fingerprint `digest::cursor_fingerprint` makes of them.

use std::path::PathBuf;

use crate::io_bound::FileError;

/// A source that could not be set up or read (not a page failure: those are violations).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SourceError {
    /// The `--source` argument is not one of the known kinds.
    #[error(
        "unknown source {spec:?}: expected replay:FILE, sim:KEY=VALUE,..., postgres:CONFIG.json, \
         mysql:CONFIG.json, http:CONFIG.json or mcp:CONFIG.json"
    )]
    UnknownKind {
        /// The argument as given.
        spec: String,
    },
    /// A file could not be read.
    #[error("cannot read {path}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A replay file that cannot be read within its bounds.
    #[error(transparent)]
    File(#[from] FileError),
    /// A line of a replay file is malformed.
    #[error("{}: {problem}", position(path, *line, *column))]
    Replay {
        /// The file.
        path: PathBuf,
        /// 1-based line (0 for the file as a whole).
        line: usize,
        /// 1-based column, when the problem has one (malformed JSON).
        column: Option<usize>,
        /// What is wrong, naming the field.
        problem: String,
    },
    /// The replay file has no line for a request, so the scenario cannot go on.
    #[error("{path}: no line answers the request for {request}")]
    Unanswered {
        /// The file.
        path: PathBuf,
        /// The request, with its cursor as a fingerprint.
        request: String,
    },
    /// A `sim:` parameter is malformed.
    #[error("sim source: {problem}")]
    Sim {
        /// What is wrong.
        problem: String,
    },
    /// A source configuration file (`http:`, `postgres:`, `mysql:`, `mcp:`) cannot be used.
    #[error("{path}: {problem}")]
    Config {
        /// The file.
        path: PathBuf,
        /// What is wrong, naming the key.
        problem: String,
    },
    /// A source configuration file that does not have its declared shape (`json::from_str`):
    /// placed at the key's line and column, worded as every config file's errors are.
    #[error("{}: {error}", position(path, error.position().map_or(0, |p| p.0), error.position().map(|p| p.1)))]
    ConfigFile {
        /// The file.
        path: PathBuf,
        /// What is wrong, where, and the key or value meant.
        error: crate::json::ConfigError,
    },
    /// A source failed in its own way (a driver, a protocol, a custom `PageSource`); the cause
    /// is the source's own error. `what` says what was being done, never with a secret.
    #[error("{what}")]
    Other {
        /// What the source was doing.
        what: String,
        /// The source's own error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

/// `FILE`, `FILE:LINE` or `FILE:LINE:COLUMN`, as compilers name a place in a file.
fn position(path: &std::path::Path, line: usize, column: Option<usize>) -> String {
    match (line, column) {
        (0, _) => path.display().to_string(),
        (l, None) => format!("{}:{l}", path.display()),
        (l, Some(c)) => format!("{}:{l}:{c}", path.display()),
    }
}

/// A [`SourceError::Config`] for the config file at `path`: what every source's config
/// reader returns for a key it cannot use.
#[cfg(any(
    feature = "postgres",
    feature = "mysql",
    feature = "sqlite",
    feature = "http",
    feature = "mcp"
))]
// Only the SQL sources' config readers call it; the re-exports stand under every source feature.
#[cfg_attr(
    not(any(feature = "postgres", feature = "mysql", feature = "sqlite")),
    allow(dead_code)
)]
pub(crate) fn config_error(path: &std::path::Path, problem: impl Into<String>) -> SourceError {
    SourceError::Config {
        path: path.to_owned(),
        problem: problem.into(),
    }
}
