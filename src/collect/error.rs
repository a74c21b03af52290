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

/// The error's message followed by each cause in its chain that the text does not already
/// say: the crate never repeats a cause in a message, and this never adds one twice. An I/O
/// cause is said in words ([`io_words`]). Every face says an error through it: the CLI's
/// errors, and the stop a run records (`StopCause`).
#[must_use]
pub fn said_once(e: &(dyn std::error::Error + 'static)) -> String {
    let mut msg = e.to_string();
    let mut cause = e.source();
    // A chain is short; the bound only guards against a cyclic one.
    for _ in 0..16 {
        let Some(c) = cause else { break };
        let text = match c.downcast_ref::<std::io::Error>() {
            Some(io) => io_words(io),
            None => c.to_string(),
        };
        if !text.is_empty() && !msg.contains(&text) {
            msg.push_str(": ");
            msg.push_str(&text);
        }
        cause = c.source();
    }
    msg
}

/// An I/O error in words: the operating system's text without its error number, and the
/// common kinds as a sentence would say them.
#[must_use]
pub fn io_words(e: &std::io::Error) -> String {
    use std::io::ErrorKind as K;
    match e.kind() {
        K::NotFound => "no such file or directory".to_owned(),
        K::PermissionDenied => "permission denied".to_owned(),
        K::IsADirectory => "it is a directory".to_owned(),
        K::NotADirectory => "a component of the path is not a directory".to_owned(),
        K::StorageFull => "no space left on the device".to_owned(),
        K::InvalidData => "it is not UTF-8 text".to_owned(),
        _ => {
            let text = e.to_string();
            let text = text.split(" (os error").next().unwrap_or(&text);
            let mut c = text.chars();
            match c.next() {
                Some(f) => f.to_lowercase().chain(c).collect(),
                None => String::new(),
            }
        }
    }
}

/// Bytes below which a cursor is not searched for in an error's text: a short cursor (a page
/// number) would match unrelated text, and the crate's own messages name cursors by their
/// fingerprints anyway; this only guards against a cause from outside (a driver's text).
const CURSOR_SCRUB_MIN: usize = 8;

/// The stop a run records when `e` ended it at `request`, after `pages` pages: the error said
/// once, any longer raw cursor of the request replaced by its fingerprint, made safe and
/// bounded by `StopCause::new`.
#[must_use]
pub fn stop_cause(
    e: &Error,
    request: &crate::reconcile::Request,
    pages: u32,
    at_ms: u64,
) -> crate::store::StopCause {
    let mut message = said_once(e);
    if let crate::reconcile::Request::Cursor(c) = request {
        if c.len() >= CURSOR_SCRUB_MIN && message.contains(c.as_str()) {
            message = message.replace(c.as_str(), &request.describe());
        }
    }
    crate::store::StopCause::new(&message, pages, at_ms)
}
