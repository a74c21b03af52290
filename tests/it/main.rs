//! Integration tests: one binary, through the public API and the real `scanledger` binary.

mod cli_errors;
mod cli_surface;
mod cli_terminal;
mod crash;
mod evidence;
mod props;
mod report;
mod resume;
mod scenarios;
mod store_files;
mod util;
