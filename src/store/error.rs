//! The store's errors: one type per operation (open, read, write), each naming the file and
//! what failed, with the real cause as `source` (never repeated in the message).

use std::path::PathBuf;

use crate::receipt::RunId;

/// A cause passed along as `source`; the storage engine's own error types stay private.
pub type Cause = Box<dyn std::error::Error + Send + Sync>;

/// Why a store file could not be opened.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    /// The file does not exist and the command does not create one.
    #[error("store {path} does not exist")]
    NotFound {
        /// The file.
        path: PathBuf,
    },
    /// The file's directory does not exist.
    #[error("store {path}: directory {dir} does not exist")]
    NoDirectory {
        /// The file.
        path: PathBuf,
        /// The missing directory.
        dir: PathBuf,
    },
    /// The path names a directory.
    #[error("store {path} is a directory, not a store file")]
    IsDirectory {
        /// The path.
        path: PathBuf,
    },
    /// The file (or its directory) may not be read or written by this user.
    #[error("store {path}: permission denied")]
    PermissionDenied {
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// An existing file of 0 bytes: never taken for an empty store.
    #[error("store {path} is an empty file (0 bytes); remove it or name another path")]
    Empty {
        /// The file.
        path: PathBuf,
    },
    /// A file that scanledger did not write.
    #[error("{path} is not a scanledger store ({why})")]
    NotAStore {
        /// The file.
        path: PathBuf,
        /// What it is instead.
        why: &'static str,
    },
    /// Written by a newer scanledger.
    #[error("store {path} has format version {found}; this build reads versions up to {supported}: upgrade scanledger")]
    NewerFormat {
        /// The file.
        path: PathBuf,
        /// The version in the file.
        found: u32,
        /// The newest this build reads.
        supported: u32,
    },
    /// Written by an older scanledger whose format this build does not read.
    #[error("store {path} has format version {found}, which this build no longer reads; scan again into a new store")]
    OlderFormat {
        /// The file.
        path: PathBuf,
        /// The version in the file.
        found: u32,
    },
    /// Another process writes the store (exit code 5; `--wait` waits for it).
    #[error("store {path} is busy: another process is writing it")]
    Busy {
        /// The file.
        path: PathBuf,
    },
    /// The storage engine found the file damaged.
    #[error("store {path} is damaged: {what}")]
    Damaged {
        /// The file.
        path: PathBuf,
        /// What failed.
        what: String,
        /// The engine's own error, when it gave one.
        #[source]
        source: Option<Cause>,
    },
    /// Reading or writing the file failed.
    #[error("store {path}: {op} failed")]
    Io {
        /// The file.
        path: PathBuf,
        /// What was being done.
        op: &'static str,
        /// The cause.
        #[source]
        source: Cause,
    },
}

/// Why a read of the store failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReadError {
    /// No run with this ID.
    #[error("store {path} has no {run}")]
    UnknownRun {
        /// The file.
        path: PathBuf,
        /// The run asked for.
        run: RunId,
    },
    /// A stored value is damaged (it fails to decode, or disagrees with another).
    #[error("store {path} is damaged: {what}")]
    Damaged {
        /// The file.
        path: PathBuf,
        /// What is damaged: table, run, and how.
        what: String,
        /// The engine's own error, when it gave one.
        #[source]
        source: Option<Cause>,
    },
    /// An earlier failure inside the storage engine closed the store.
    #[error("store {path} was closed after an earlier failure inside the storage engine")]
    Closed {
        /// The file.
        path: PathBuf,
    },
    /// Reading the file failed.
    #[error("store {path}: {op} failed")]
    Io {
        /// The file.
        path: PathBuf,
        /// What was being done.
        op: &'static str,
        /// The cause.
        #[source]
        source: Cause,
    },
}

/// Why a write to the store failed. After one, the store refuses writes until reopened.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WriteError {
    /// The store was opened for reading.
    #[error("store {path} was opened read-only")]
    ReadOnly {
        /// The file.
        path: PathBuf,
    },
    /// An earlier write failed; the store refuses writes until it is reopened.
    #[error("store {path} refuses writes after an earlier failed one; open it again")]
    Poisoned {
        /// The file.
        path: PathBuf,
    },
    /// No run with this ID.
    #[error("store {path} has no {run}")]
    UnknownRun {
        /// The file.
        path: PathBuf,
        /// The run asked for.
        run: RunId,
    },
    /// The run is being written by a live process.
    #[error("{run} is being written by another process")]
    RunLive {
        /// The run.
        run: RunId,
    },
    /// Another process has the store open (a compaction needs it alone).
    #[error("store {path} is busy: another process has it open")]
    Busy {
        /// The file.
        path: PathBuf,
    },
    /// The run cannot be resumed; `reason` says why and what to do.
    #[error("{run} cannot be resumed: {reason}")]
    NotResumable {
        /// The run.
        run: RunId,
        /// Why, and what to do instead.
        reason: String,
    },
    /// A stored value is damaged.
    #[error("store {path} is damaged: {what}")]
    Damaged {
        /// The file.
        path: PathBuf,
        /// What is damaged.
        what: String,
        /// The engine's own error, when it gave one.
        #[source]
        source: Option<Cause>,
    },
    /// An earlier failure inside the storage engine closed the store.
    #[error("store {path} was closed after an earlier failure inside the storage engine")]
    Closed {
        /// The file.
        path: PathBuf,
    },
    /// A whole run given to record (`Store::write_merged`) is not one a store can keep: its
    /// shard list is not a plan's; nothing was written.
    #[error("store {path}: the merged run cannot be recorded: {what}")]
    InvalidRun {
        /// The file.
        path: PathBuf,
        /// What is wrong with the run.
        what: String,
    },
    /// Writing the file failed (a full disk, an IO error).
    #[error("store {path}: {op} failed")]
    Io {
        /// The file.
        path: PathBuf,
        /// What was being done.
        op: &'static str,
        /// The cause.
        #[source]
        source: Cause,
    },
}

impl From<ReadError> for WriteError {
    fn from(e: ReadError) -> WriteError {
        match e {
            ReadError::UnknownRun { path, run } => WriteError::UnknownRun { path, run },
            ReadError::Damaged { path, what, source } => WriteError::Damaged { path, what, source },
            ReadError::Closed { path } => WriteError::Closed { path },
            ReadError::Io { path, op, source } => WriteError::Io { path, op, source },
        }
    }
}

/// What an error asks of whoever called: to correct the input (the file or argument given),
/// to wait for another process, or nothing they can do (an internal failure: a failing disk,
/// a failed commit). Every face turns it into its own signal alike (the CLI's exit codes 2, 5
/// and 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorClass {
    /// Bad input: correct what the error names.
    Input,
    /// Another process holds the store or the run: wait, or stop it.
    Busy,
    /// An internal failure.
    Internal,
}

impl OpenError {
    /// The kind of problem as one word, for programs (`store_busy`, `store_not_found`, ...).
    #[must_use]
    pub fn kind(&self) -> &'static str {
        match self {
            OpenError::NotFound { .. } => "store_not_found",
            OpenError::NoDirectory { .. } => "store_no_directory",
            OpenError::IsDirectory { .. } => "store_is_directory",
            OpenError::PermissionDenied { .. } => "store_permission",
            OpenError::Empty { .. } => "store_empty",
            OpenError::NotAStore { .. } => "store_not_a_store",
            OpenError::NewerFormat { .. } => "store_newer_format",
            OpenError::OlderFormat { .. } => "store_older_format",
            OpenError::Busy { .. } => "store_busy",
            OpenError::Damaged { .. } => "store_damaged",
            OpenError::Io { .. } => "store_io",
        }
    }

    /// What the error asks of the caller.
    #[must_use]
    pub fn class(&self) -> ErrorClass {
        match self {
            OpenError::Busy { .. } => ErrorClass::Busy,
            OpenError::Io { .. } => ErrorClass::Internal,
            _ => ErrorClass::Input,
        }
    }

    /// The store file.
    #[must_use]
    pub fn path(&self) -> &std::path::Path {
        match self {
            OpenError::NotFound { path }
            | OpenError::NoDirectory { path, .. }
            | OpenError::IsDirectory { path }
            | OpenError::PermissionDenied { path, .. }
            | OpenError::Empty { path }
            | OpenError::NotAStore { path, .. }
            | OpenError::NewerFormat { path, .. }
            | OpenError::OlderFormat { path, .. }
            | OpenError::Busy { path }
            | OpenError::Damaged { path, .. }
            | OpenError::Io { path, .. } => path,
        }
    }
}

impl ReadError {
    /// The kind of problem as one word, for programs (`unknown_run`, `store_damaged`, ...).
    #[must_use]
    pub fn kind(&self) -> &'static str {
        match self {
            ReadError::UnknownRun { .. } => "unknown_run",
            ReadError::Damaged { .. } | ReadError::Closed { .. } => "store_damaged",
            ReadError::Io { .. } => "store_io",
        }
    }

    /// What the error asks of the caller.
    #[must_use]
    pub fn class(&self) -> ErrorClass {
        match self {
            ReadError::Io { .. } => ErrorClass::Internal,
            _ => ErrorClass::Input,
        }
    }

    /// The store file.
    #[must_use]
    pub fn path(&self) -> &std::path::Path {
        match self {
            ReadError::UnknownRun { path, .. }
            | ReadError::Damaged { path, .. }
            | ReadError::Closed { path }
            | ReadError::Io { path, .. } => path,
        }
    }
}

impl WriteError {
    /// The kind of problem as one word, for programs (`store_busy`, `not_resumable`, ...).
    #[must_use]
    pub fn kind(&self) -> &'static str {
        match self {
            WriteError::UnknownRun { .. } => "unknown_run",
            WriteError::NotResumable { .. } => "not_resumable",
            WriteError::RunLive { .. } | WriteError::Busy { .. } => "store_busy",
            WriteError::ReadOnly { .. } => "internal",
            WriteError::Damaged { .. } | WriteError::Closed { .. } => "store_damaged",
            WriteError::Poisoned { .. } | WriteError::InvalidRun { .. } | WriteError::Io { .. } => {
                "store_io"
            }
        }
    }

    /// What the error asks of the caller.
    #[must_use]
    pub fn class(&self) -> ErrorClass {
        match self {
            WriteError::UnknownRun { .. }
            | WriteError::NotResumable { .. }
            | WriteError::Damaged { .. }
            | WriteError::Closed { .. } => ErrorClass::Input,
            WriteError::RunLive { .. } | WriteError::Busy { .. } => ErrorClass::Busy,
            _ => ErrorClass::Internal,
        }
    }
}

/// What went wrong inside the engine, before the operation names it.
#[derive(Debug)]
pub(crate) enum Failure {
    /// A value or the file is damaged (a decode failure, a caught engine panic).
    Damaged { what: String, source: Option<Cause> },
    /// The store was closed after an earlier caught panic.
    Closed,
    /// IO failed.
    Io { op: &'static str, source: Cause },
}

impl Failure {
    pub(crate) fn damaged(what: impl Into<String>) -> Failure {
        Failure::Damaged {
            what: what.into(),
            source: None,
        }
    }

    pub(crate) fn into_read(self, path: &std::path::Path) -> ReadError {
        let path = path.to_owned();
        match self {
            Failure::Damaged { what, source } => ReadError::Damaged { path, what, source },
            Failure::Closed => ReadError::Closed { path },
            Failure::Io { op, source } => ReadError::Io { path, op, source },
        }
    }

    pub(crate) fn into_write(self, path: &std::path::Path) -> WriteError {
        let path = path.to_owned();
        match self {
            Failure::Damaged { what, source } => WriteError::Damaged { path, what, source },
            Failure::Closed => WriteError::Closed { path },
            Failure::Io { op, source } => WriteError::Io { path, op, source },
        }
    }

    pub(crate) fn into_open(self, path: &std::path::Path) -> OpenError {
        let path = path.to_owned();
        match self {
            Failure::Damaged { what, source } => OpenError::Damaged { path, what, source },
            Failure::Closed => OpenError::Damaged {
                path,
                what: "the storage engine failed while opening it".to_owned(),
                source: None,
            },
            Failure::Io { op, source } => OpenError::Io { path, op, source },
        }
    }
}
