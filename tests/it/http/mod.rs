//! The HTTP source against a real HTTP server on 127.0.0.1 (`server`), driven through the
//! real `scanledger` binary (and once through the library):
//! - `rules`: every rule (docs/REFERENCE.md §6) that can occur over HTTP;
//! - `wire`: the status classification (429 and 503 with `Retry-After`, 403, 410, an expired
//!   marker, 5xx, a timeout), invalid bodies and the body bound;
//! - `shapes`: GraphQL and POST search endpoints, page-number and offset pagination, configs
//!   refused before any request;
//! - `secret`: the secret named by `auth_env` never leaves the request header.
//!
//! Each test starts its own server with a route table keyed by the cursor (or page, offset)
//! parameter the request carries, in the query string or in the JSON body. A key answers
//! successive requests with successive replies (retries), the last one repeating; a request
//! no route answers gets a 404 (`invalid_page`), so a scan cannot pass by accident.

#![allow(clippy::unwrap_used)] // Tests: a panic is the failure report.

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;
use std::sync::Mutex;

use serde_json::{json, Value};

use crate::util;
use server::{Recorded, Reply, Server};

mod rules;
mod secret;
mod server;
mod shapes;
mod wire;

type TestResult = Result<(), Box<dyn std::error::Error>>;

/// Where a route key is read: a query parameter, else a top-level body key, else a key of
/// the body's `variables`.
fn key_of(req: &Recorded, param: &str) -> Option<String> {
    if let Some(v) = req.param(param) {
        return Some(v.to_owned());
    }
    let body = req.json();
    body.get(param)
        .or_else(|| body.get("variables").and_then(|v| v.get(param)))
        .filter(|v| !v.is_null())
        .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned))
}

/// Replies per route key, and how many requests each key has answered.
type Table = HashMap<Option<String>, (Vec<Reply>, usize)>;

/// A handler answering by the value of `param` (`None`: the request has none).
fn routes(
    param: &'static str,
    table: Vec<(Option<&str>, Vec<Reply>)>,
) -> impl Fn(&Recorded) -> Reply + Send + Sync + 'static {
    let table: Mutex<Table> = Mutex::new(
        table
            .into_iter()
            .map(|(k, v)| (k.map(str::to_owned), (v, 0)))
            .collect(),
    );
    move |req| {
        let mut t = table.lock().unwrap();
        match t.get_mut(&key_of(req, param)) {
            Some((replies, n)) => {
                let r = replies[(*n).min(replies.len() - 1)].clone();
                *n += 1;
                r
            }
            None => Reply::status(404, r#"{"error": "no route"}"#),
        }
    }
}

/// A page of the default mapping: `{"items": [{"id": N}...], "next_page_token": next}`.
fn page(ids: &[u64], next: Option<&str>) -> Reply {
    Reply::json(&json!({
        "items": ids.iter().map(|i| json!({"id": i})).collect::<Vec<_>>(),
        "next_page_token": next,
    }))
}

fn with(mut base: Value, extra: Value) -> Value {
    if let (Value::Object(b), Value::Object(e)) = (&mut base, extra) {
        b.extend(e);
    }
    base
}

/// What one run of the binary printed.
struct Run {
    exit: i32,
    stdout: String,
    stderr: String,
}

impl Run {
    fn receipt(&self) -> Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| {
            panic!(
                "receipt is not JSON ({e}): {}\n{}",
                self.stdout, self.stderr
            )
        })
    }
}

fn kinds(receipt: &Value) -> Vec<String> {
    receipt["violations"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|v| v["kind"].as_str().unwrap_or("").to_owned())
                .collect()
        })
        .unwrap_or_default()
}

fn bin(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Run {
    let store = dir.join("s.redb");
    let mut cmd = Command::new(util::bin());
    cmd.arg("--store").arg(&store).args(args).current_dir(dir);
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

/// Writes the config (with the server's URL) and the contract, and runs a JSON scan.
fn scan(dir: &Path, server: &Server, cfg: Value, contract: Value, env: &[(&str, &str)]) -> Run {
    let cfg = with(json!({"url": server.url("/items")}), cfg);
    util::write(dir, "cfg.json", &cfg.to_string());
    let contract = with(
        json!({"source": "api", "page_size": 2, "limits": {"retries": 1}}),
        contract,
    );
    util::write(dir, "contract.json", &contract.to_string());
    bin(
        dir,
        &[
            "--json",
            "scan",
            "--contract",
            "contract.json",
            "--source",
            "http:cfg.json",
        ],
        env,
    )
}

#[track_caller]
fn expect(run: &Run, exit: i32, status: &str, violations: &[&str]) -> Value {
    let r = run.receipt();
    assert_eq!(
        (
            run.exit,
            r["coverage_status"].as_str().unwrap_or(""),
            kinds(&r)
        ),
        (
            exit,
            status,
            violations
                .iter()
                .map(|s| (*s).to_owned())
                .collect::<Vec<_>>()
        ),
        "receipt: {r:#}\nstderr: {}",
        run.stderr
    );
    r
}
