//! An MCP request over the message bound got no answer. Over stdio rmcp
//! dropped a 20 MiB line with a log line and the caller waited forever; over streamable HTTP
//! the answer was a plain-text 413 that no client can match to its request. These tests send
//! such a request as a client would — over stdio with its `id` after the 20 MiB of
//! parameters, over HTTP as one POST — and require a JSON-RPC error with the request's `id`
//! naming the bound, while the session goes on answering.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{json, Value};

use super::server::HttpServer;
use crate::util;

type TestResult = Result<(), Box<dyn std::error::Error>>;

/// A tools/call of about 20 MiB whose `id` comes last.
fn oversized_call(id: u64) -> String {
    let filler = "z".repeat(20 * 1024 * 1024);
    format!(
        r#"{{"jsonrpc":"2.0","method":"tools/call","params":{{"name":"get_receipt","arguments":{{"run_id":"{filler}"}}}},"id":{id}}}"#
    )
}

#[track_caller]
fn check_error(answer: &Value, id: u64) {
    assert_eq!(answer["id"], id, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("over the bound of 16777216 bytes"),
        "{answer}"
    );
    assert_eq!(answer["error"]["data"]["max_bytes"], 16_777_216);
}

#[test]
fn an_oversized_request_over_stdio_gets_an_error_naming_the_bound() -> TestResult {
    let dir = tempfile::tempdir()?;
    let mut child = Command::new(util::bin())
        .arg("--store")
        .arg(dir.path().join("s.redb"))
        .arg("mcp")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel::<Value>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Ok(v) = serde_json::from_str(&line) {
                if tx.send(v).is_err() {
                    return;
                }
            }
        }
    });
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    writeln!(stdin, "{init}")?;
    let first = rx.recv_timeout(Duration::from_secs(30))?;
    assert_eq!(first["id"], 1, "{first}");
    writeln!(
        stdin,
        "{}",
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
    )?;
    writeln!(stdin, "{}", oversized_call(7))?;
    writeln!(
        stdin,
        "{}",
        json!({"jsonrpc": "2.0", "id": 8, "method": "ping"})
    )?;
    stdin.flush()?;
    // Both are answered; the ping's answer shows the session went on.
    let mut answers = Vec::new();
    while answers.len() < 2 {
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(v) if v.get("id").is_some() => answers.push(v),
            Ok(_) => {}
            Err(_) => panic!("no answer to every request within 60 s: {answers:?}"),
        }
    }
    answers.sort_by_key(|a| a["id"].as_u64());
    check_error(&answers[0], 7);
    assert_eq!(answers[1]["result"], json!({}), "{}", answers[1]);
    drop(stdin);
    let _ = child.wait();
    Ok(())
}

#[test]
fn an_oversized_request_over_http_gets_a_json_rpc_error_naming_the_bound() -> TestResult {
    let dir = tempfile::tempdir()?;
    let args: Vec<String> = [
        util::bin().to_string_lossy().as_ref(),
        "--store",
        dir.path().join("s.redb").to_string_lossy().as_ref(),
        "mcp",
        "--http",
        "127.0.0.1:0",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    let server = HttpServer::start(&args);
    let addr = server
        .url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_owned();
    let body = oversized_call(9);
    let mut conn = TcpStream::connect(&addr)?;
    conn.set_read_timeout(Some(Duration::from_secs(60)))?;
    write!(
        conn,
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )?;
    // The server may answer before it has read the whole body, and close.
    let _ = conn.write_all(body.as_bytes());
    let mut response = Vec::new();
    let _ = conn.read_to_end(&mut response);
    let text = String::from_utf8_lossy(&response);
    let (head, answer) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    assert!(head.starts_with("HTTP/1.1 413"), "{head}");
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: application/json"),
        "{head}"
    );
    check_error(&serde_json::from_str(answer.trim())?, 9);
    Ok(())
}
