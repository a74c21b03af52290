//! Where the crate's errors were defined before each moved beside the code that raises it:
//! re-exports only, for the code that still names them here (it shrinks as that code moves).
//! `ContractError` is the contract's, `FileError` (no longer here) the bounded reader's,
//! `SourceError` the sources', and the crate-level `Error` the collector's.

// Each re-export is used only under the features whose code still names it here.
#![allow(unused_imports)]

pub(crate) use crate::collect::Error;
pub(crate) use crate::contract::ContractError;
#[cfg(any(
    feature = "postgres",
    feature = "mysql",
    feature = "sqlite",
    feature = "http",
    feature = "mcp"
))]
pub(crate) use crate::source::config_error;
pub(crate) use crate::source::SourceError;
