//! Shared helpers of the integration tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The `scanledger` binary cargo built for these tests.
pub(crate) fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_scanledger"))
}

/// Runs the binary with `args`; returns (exit code, stdout, stderr).
pub(crate) fn run(args: &[&str]) -> (i32, String, String) {
    let out: Output = Command::new(bin())
        .args(args)
        .output()
        .expect("spawn scanledger");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Writes `text` to `dir/name` and returns the path as a String.
pub(crate) fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).expect("write fixture");
    p.to_string_lossy().into_owned()
}
