//! Integration tests: one binary, through the public API and the real `scanledger` binary.

mod crash;
mod evidence;
#[cfg(feature = "http")]
mod http;
mod props;
mod resume;
mod scenarios;
mod store_files;
mod util;
