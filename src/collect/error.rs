//! The crate-level error: what a scan, a resume or a command of the library could not carry
//! out. It lives above the store (it composes the store's errors) and below the answers, whose
//! own errors (`DiffError`, ...) stand alone.
//!
//! Findings of reconciliation (a duplicate ID, a repeated cursor) are not errors: they are
//! `Violation`s, data in the receipt. An `Error` means an operation could not be carried out:
//! bad input, a source that cannot be read, a store that is corrupt or busy.

use std::path::PathBuf;

use crate::contract::ContractError;
use crate::io_bound::FileError;
use crate::source::SourceError;

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

impl Error {
    /// Whether the error comes from bad input (exit 2) rather than an internal failure (exit 1).
    #[must_use]
    pub fn is_input_error(&self) -> bool {
        match self {
            Error::Contract { .. } | Error::Source(_) | Error::File(_) | Error::Io { .. } => true,
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
