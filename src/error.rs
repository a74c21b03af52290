//! Errors: one crate-wide `Error` and the per-area enums that convert into it.
//!
//! Findings of reconciliation (a duplicate ID, a repeated cursor) are not errors: they are
//! `Violation`s, data in the receipt. An `Error` means an operation could not be carried out:
//! bad input, a source that cannot be read, a store that is corrupt or busy.
//! No message here ever carries a raw continuation cursor: cursors appear only as the short
//! fingerprint `digest::cursor_fingerprint` makes of them.

use std::path::PathBuf;

// Re-exported where it was defined before (`shard::plan` names it here).
pub use crate::contract::ContractError;

/// An input file that could not be read within its bound (`io_bound`): contracts, replay
/// files, receipts given to `verify`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FileError {
    /// The file holds more than the bound; found while reading, whatever its stated size.
    #[error("{path} is larger than {max_bytes} bytes")]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// The bound.
        max_bytes: u64,
    },
    /// A directory where a file is expected.
    #[error("{path} is a directory, not a file")]
    Directory {
        /// The path.
        path: PathBuf,
    },
    /// Not a regular file where one is needed (a replay file is read by offsets, so a pipe
    /// or a device cannot serve it).
    #[error("{path} is not a regular file; {why}")]
    NotRegular {
        /// The path.
        path: PathBuf,
        /// Why a regular file is needed.
        why: &'static str,
    },
    /// The bytes are not UTF-8 text.
    #[error("{path} is not UTF-8 text")]
    NotUtf8 {
        /// The file.
        path: PathBuf,
    },
    /// The file changed while it was being read by offsets.
    #[error(
        "{path} changed while it was being read ({was_bytes} bytes when opened, {now_bytes} now)"
    )]
    Changed {
        /// The file.
        path: PathBuf,
        /// Its size when opened.
        was_bytes: u64,
        /// Its size now.
        now_bytes: u64,
    },
    /// Opening or reading failed.
    #[error("cannot read {path}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

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

/// Every error of the crate.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A contract file that cannot be used.
    #[error("contract {path}: {source}")]
    Contract {
        /// The file (or `-`).
        path: PathBuf,
        /// What is wrong.
        #[source]
        source: ContractError,
    },
    /// A source that cannot be set up or read.
    #[error(transparent)]
    Source(#[from] SourceError),
    /// A store that cannot be opened.
    #[error(transparent)]
    Open(#[from] crate::store::OpenError),
    /// A read of the store failed.
    #[error(transparent)]
    Read(#[from] crate::store::ReadError),
    /// A write to the store failed, or a run cannot be resumed.
    #[error(transparent)]
    Write(#[from] crate::store::WriteError),
    /// Two runs that cannot be diffed.
    #[error(transparent)]
    Diff(#[from] crate::evidence::DiffError),
    /// An input file that could not be read within its bound.
    #[error(transparent)]
    File(#[from] FileError),
    /// A file that could not be read or written (the cause says how).
    #[error("{path}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

impl FileError {
    /// The file at fault.
    #[must_use]
    pub fn path(&self) -> &std::path::Path {
        match self {
            FileError::TooLarge { path, .. }
            | FileError::Directory { path }
            | FileError::NotRegular { path, .. }
            | FileError::NotUtf8 { path }
            | FileError::Changed { path, .. }
            | FileError::Io { path, .. } => path,
        }
    }
}

impl Error {
    /// Whether the error comes from bad input (exit 2) rather than an internal failure (exit 1).
    #[must_use]
    pub fn is_input_error(&self) -> bool {
        match self {
            Error::Contract { .. } | Error::Source(_) | Error::File(_) | Error::Io { .. } => true,
            Error::Diff(e) => !matches!(
                e,
                crate::evidence::DiffError::Read(crate::store::ReadError::Io { .. })
            ),
            Error::Open(e) => !matches!(e, crate::store::OpenError::Io { .. }),
            Error::Read(e) => !matches!(e, crate::store::ReadError::Io { .. }),
            // A damaged file is bad input (the file given), like a damaged read; a failing disk
            // or a failed commit is an internal failure.
            Error::Write(e) => !matches!(
                e,
                crate::store::WriteError::Io { .. } | crate::store::WriteError::Poisoned { .. }
            ),
        }
    }
}

/// Shorthand for results of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A [`SourceError::Config`] for the config file at `path`: what every source's config
/// reader returns for a key it cannot use.
#[cfg(any(
    feature = "postgres",
    feature = "mysql",
    feature = "http",
    feature = "mcp"
))]
pub(crate) fn config_error(path: &std::path::Path, problem: impl Into<String>) -> SourceError {
    SourceError::Config {
        path: path.to_owned(),
        problem: problem.into(),
    }
}
