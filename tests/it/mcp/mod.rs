//! MCP through real peers, never mocks:
//! - `client`: the `mcp:` source against a paginated server written with the Python SDK
//!   (`tests/peers/paged_server.py`, over stdio): every rule (docs/REFERENCE.md §6) that can
//!   occur over MCP gives the same violations as the same pages over replay; fault modes
//!   (a filter dropped on page 3, a repeated cursor, an expired cursor, `isError` on a page, a
//!   dead server, a two-page `tools/list`); the child's stderr and environment never shown;
//! - `rmcp_peer`: the source against an `rmcp` server in the test process, over streamable
//!   HTTP (revoked access, a result over the bound, `resources/list`);
//! - `server`, `proxy`: our server and proxy driven by the Python SDK's client over stdio and
//!   streamable HTTP;
//! - `surface`: the proxy as a drop-in — every list whole, the surface passed through,
//!   sampling, progress, list changes — in front of the Python SDK's servers and of
//!   `@modelcontextprotocol/server-everything`;
//! - `oversized`: a request over the message bound gets an error naming it;
//! - `conformance`: the official conformance suite against `scanledger mcp --http`, and
//!   against upstreams directly and through the proxy.
//!
//! A test that needs Python's `mcp` (or npx) says "SKIPPED" loudly when it is missing, and
//! fails when CI is set.

#![allow(clippy::unwrap_used, clippy::expect_used)] // Tests: a panic is the failure report.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use serde_json::{json, Value};

use crate::util;

mod client;
mod conformance;
mod oversized;
mod proxy;
mod rmcp_peer;
mod server;
mod surface;

/// The peers' folder.
pub(crate) fn peers() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers")
}

/// Whether Python's `mcp` 2.x SDK can be imported: SKIPPED without it, a failure under CI.
pub(crate) fn python_mcp() -> bool {
    static OK: OnceLock<Result<(), String>> = OnceLock::new();
    let ok = OK.get_or_init(|| {
        let out = Command::new("python3")
            .args(["-c", "from mcp.server.mcpserver import MCPServer; from mcp.client.session import ClientSession"])
            .output();
        match out {
            Ok(o) if o.status.success() => Ok(()),
            Ok(o) => Err(String::from_utf8_lossy(&o.stderr).into_owned()),
            Err(e) => Err(e.to_string()),
        }
    });
    match ok {
        Ok(()) => true,
        Err(e) if std::env::var_os("CI").is_some() => {
            panic!(
                "Python's mcp SDK is not importable, and CI is set (pip install 'mcp==2.3.0'): {e}"
            )
        }
        Err(e) => {
            eprintln!(
                "SKIPPED: Python's mcp SDK is not importable (pip install 'mcp==2.3.0'): {e}"
            );
            false
        }
    }
}

/// What one run of the binary printed.
pub(crate) struct Run {
    pub(crate) exit: i32,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

impl Run {
    pub(crate) fn receipt(&self) -> Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| {
            panic!(
                "receipt is not JSON ({e}): {}\n{}",
                self.stdout, self.stderr
            )
        })
    }
}

/// Runs the binary in `dir` with the store `dir/s.redb`.
pub(crate) fn bin(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Run {
    let mut cmd = Command::new(util::bin());
    cmd.arg("--store")
        .arg(dir.join("s.redb"))
        .args(args)
        .current_dir(dir);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("spawn scanledger");
    Run {
        exit: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

pub(crate) fn kinds(receipt: &Value) -> Vec<String> {
    receipt["violations"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|v| v["kind"].as_str().unwrap_or("").to_owned())
                .collect()
        })
        .unwrap_or_default()
}

pub(crate) fn with(mut base: Value, extra: Value) -> Value {
    if let (Value::Object(b), Value::Object(e)) = (&mut base, extra) {
        b.extend(e);
    }
    base
}

/// An `mcp:` config starting the Python peer on `scenario` (written beside it).
pub(crate) fn peer_config(dir: &Path, name: &str, scenario: &Value, extra: Value) -> String {
    let sc = util::write(dir, &format!("{name}.scenario.json"), &scenario.to_string());
    let cfg = with(
        json!({
            "command": ["python3", peers().join("paged_server.py").to_string_lossy(), sc],
            "tool": "search_items",
        }),
        extra,
    );
    util::write(dir, &format!("{name}.mcp.json"), &cfg.to_string());
    format!("mcp:{name}.mcp.json")
}

/// Writes `contract` and scans `source` with `--json`.
pub(crate) fn scan(
    dir: &Path,
    name: &str,
    contract: &Value,
    source: &str,
    env: &[(&str, &str)],
) -> Run {
    util::write(dir, &format!("{name}.contract.json"), &contract.to_string());
    bin(
        dir,
        &[
            "--json",
            "scan",
            "--contract",
            &format!("{name}.contract.json"),
            "--source",
            source,
        ],
        env,
    )
}
