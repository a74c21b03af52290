//! Integration tests: one binary, through the public API and the real `scanledger` binary.

mod crash;
mod evidence;
mod inputs;
mod props;
mod resume;
mod scenarios;
mod store_files;
mod util;
