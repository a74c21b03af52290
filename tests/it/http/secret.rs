//! The secret named by `auth_env` never leaves the request header, and the HTTP source through
//! the library API.
//!
//! The canary test runs scans that succeed, fail on a page (403), fail on an invalid body,
//! retry after a 429, and stop on a refused config, all with a unique canary token in the
//! environment; then it reads every stdout and stderr, the receipts (`receipt`, `runs`,
//! `export`), and the raw bytes of the store file, and finds the canary in none of them. The
//! server checks that each request did carry it, so the test cannot pass by never sending it.

#![allow(clippy::unwrap_used)] // Tests: a panic is the failure report.

use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use serde_json::{json, Value};

use super::server::{Reply, Server};
use crate::util;

type TestResult = Result<(), Box<dyn std::error::Error>>;

const TOKEN_VAR: &str = "SCANLEDGER_TEST_HTTP_TOKEN";

fn page(ids: &[u64], next: Option<&str>) -> Reply {
    Reply::json(&json!({
        "items": ids.iter().map(|i| json!({"id": i})).collect::<Vec<_>>(),
        "next_page_token": next,
    }))
}

/// Runs the binary with the canary in the environment; returns (exit, stdout + stderr).
fn run(dir: &Path, canary: &str, args: &[&str]) -> (i32, String) {
    let out = Command::new(util::bin())
        .arg("--store")
        .arg(dir.join("s.redb"))
        .args(args)
        .current_dir(dir)
        .env(TOKEN_VAR, canary)
        .output()
        .expect("spawn scanledger");
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

#[test]
fn http_secret_canary_appears_in_no_output_receipt_or_store_byte() -> TestResult {
    let dir = tempfile::tempdir()?;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_nanos();
    let canary = format!("canary-{}-{nanos}", std::process::id());
    let expected = format!("Bearer {canary}");
    let unauthorized = Arc::new(AtomicUsize::new(0));
    let throttled = Arc::new(AtomicUsize::new(0));
    let server = {
        let (unauthorized, throttled) = (unauthorized.clone(), throttled.clone());
        Server::start(move |req| {
            if req.header("authorization") != Some(expected.as_str()) {
                unauthorized.fetch_add(1, Ordering::SeqCst);
                return Reply::status(401, "{}");
            }
            match (req.path.as_str(), req.param("page_token")) {
                ("/ok", None) => page(&[1, 2], Some("c2")),
                ("/ok", Some("c2")) if throttled.fetch_add(1, Ordering::SeqCst) == 0 => {
                    Reply::status(429, "{}").with_header("Retry-After", "0")
                }
                ("/ok", Some("c2")) => page(&[3], None),
                ("/denied", None) => page(&[1], Some("c2")),
                ("/denied", Some(_)) => Reply::status(403, "{\"error\": \"token revoked\"}"),
                // An error body echoing the credential back, as some gateways do.
                ("/garbled", _) => Reply::status(200, &format!("not json {expected}")),
                _ => Reply::status(404, "{}"),
            }
        })
    };
    util::write(
        dir.path(),
        "contract.json",
        r#"{"source": "api", "page_size": 2}"#,
    );
    let cfg = |name: &str, path: &str, extra: Value| {
        let mut c = json!({"url": server.url(path), "auth_env": TOKEN_VAR});
        c.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        util::write(dir.path(), name, &c.to_string());
    };
    cfg("ok.json", "/ok", json!({}));
    cfg("denied.json", "/denied", json!({}));
    cfg("garbled.json", "/garbled", json!({}));
    cfg("refused.json", "/ok", json!({"page_param": "page"}));

    let mut seen = String::new();
    for (args, want_exit) in [
        (
            vec![
                "--json",
                "scan",
                "--contract",
                "contract.json",
                "--source",
                "http:ok.json",
            ],
            0,
        ),
        (
            vec![
                "scan",
                "--contract",
                "contract.json",
                "--source",
                "http:ok.json",
            ],
            0,
        ),
        (
            vec![
                "--json",
                "scan",
                "--contract",
                "contract.json",
                "--source",
                "http:denied.json",
            ],
            3,
        ),
        (
            vec![
                "scan",
                "--contract",
                "contract.json",
                "--source",
                "http:garbled.json",
            ],
            4,
        ),
        (
            vec![
                "--json",
                "scan",
                "--contract",
                "contract.json",
                "--source",
                "http:garbled.json",
            ],
            4,
        ),
        (
            vec![
                "--json",
                "scan",
                "--contract",
                "contract.json",
                "--source",
                "http:refused.json",
            ],
            2,
        ),
        (
            vec![
                "scan",
                "--contract",
                "contract.json",
                "--source",
                "http:refused.json",
            ],
            2,
        ),
        (vec!["--json", "resume", "run-3"], 3),
        (vec!["--json", "runs"], 0),
        (vec!["runs"], 0),
        (vec!["--json", "receipt", "run-1"], 0),
        (vec!["receipt", "run-4"], 4),
        (vec!["--json", "export", "run-1"], 0),
    ] {
        let (exit, text) = run(dir.path(), &canary, &args);
        assert_eq!(exit, want_exit, "{args:?}: {text}");
        seen.push_str(&text);
    }
    assert!(seen.contains("run-4"), "the commands ran: {seen}");
    assert!(
        !seen.contains(&canary),
        "the secret reached the output:\n{seen}"
    );
    assert!(
        !seen.contains("canary-"),
        "part of the secret reached the output"
    );
    let store = std::fs::read(dir.path().join("s.redb"))?;
    assert!(
        !store.windows(canary.len()).any(|w| w == canary.as_bytes()),
        "the secret is in the store file"
    );
    assert_eq!(
        unauthorized.load(Ordering::SeqCst),
        0,
        "a request went without the secret"
    );
    assert!(server.requests().len() >= 8);
    Ok(())
}

#[test]
fn http_source_through_the_library_gives_an_inventory() -> TestResult {
    use scanledger::{collect, Contract, EndSignal, HttpSource};
    let dir = tempfile::tempdir()?;
    let server = Server::start(|req| match req.param("page") {
        Some("1") => Reply::json(
            &json!({"total_count": 3, "incomplete_results": false, "items": [{"id": 7}, {"id": 8}]}),
        ),
        Some("2") => Reply::json(
            &json!({"total_count": 3, "incomplete_results": false, "items": [{"id": 9}]}),
        ),
        _ => Reply::status(404, "{}"),
    });
    let cfg = util::write(
        dir.path(),
        "cfg.json",
        &json!({"url": server.url("/search/issues"), "preset": "github_rest"}).to_string(),
    );
    let mut contract = Contract::new("github-issues");
    contract.end_signal = EndSignal::Total;
    contract.page_size = 2;
    let mut source = HttpSource::open(cfg.as_ref(), contract.end_signal)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let inventory = rt
        .block_on(collect(&contract, &mut source))
        .map_err(|e| e.to_string())?;
    assert_eq!(inventory.len(), 3);
    assert_eq!(inventory.receipt().pages_observed, 2);
    Ok(())
}
