//! Integration tests: one binary, through the public API and the real `scanledger` binary.

mod crash;
mod evidence;
#[cfg(feature = "mysql")]
mod mysql;
mod props;
mod regressions;
mod report;
mod resume;
mod scenarios;
mod store_files;
mod util;
