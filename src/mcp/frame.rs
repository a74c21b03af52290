//! One message's bound, on both transports, with an answer for every request over it.
//!
//! rmcp drops a stdio line over its bound with a log line, and answers an HTTP body over its
//! bound with a plain-text 413: either way the caller of an oversized request waits forever
//! or cannot tell why. Here a message over `MESSAGE_BYTES_MAX` is read through (never kept:
//! a streaming `Scanner` notes its top-level `id` and whether it is a request, a response or
//! a notification) and answered:
//! - over stdio, the stdin pump hands rmcp a small stand-in line instead: a request becomes
//!   `scanledger/oversized` with the same `id`, which the server and the proxy answer with a
//!   JSON-RPC error naming the bound (`oversized_error`); a response (the client's answer to
//!   a sampling request) becomes an error response with its `id`, so the request it answers
//!   fails instead of waiting; a notification is dropped, with a log line, as JSON-RPC wants;
//! - over HTTP, `http` answers 413 with the JSON-RPC error as `application/json`.
//!
//! Bounds: the line or body kept is at most `MESSAGE_BYTES_MAX`; an `id` kept is at most
//! `ID_BYTES_MAX` (a longer one is not an id a caller can match: the error then has `id:
//! null`); the scanner holds a few counters and those two buffers, whatever it reads.

use rmcp::model::{CustomRequest, ErrorCode};
use rmcp::ErrorData;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWrite, AsyncWriteExt};

/// Bytes of one JSON-RPC message, on stdio (a line) and over HTTP (a body).
pub const MESSAGE_BYTES_MAX: usize = 16 * 1024 * 1024;
/// Bytes of a message's `id` kept to answer it.
const ID_BYTES_MAX: usize = 1024;
/// Bytes of a top-level key kept to recognise it (`id`, `method`, `result`, `error`).
const KEY_BYTES_MAX: usize = 8;
/// The method of the stand-in for an oversized request (stdio).
pub(crate) const OVERSIZED_METHOD: &str = "scanledger/oversized";

/// What kind of message an oversized one was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// It has a `method` and an `id`.
    Request,
    /// It has a `method` and no `id`.
    Notification,
    /// It has `result` or `error`.
    Response,
    /// None of these was seen (not an object, or not JSON-RPC).
    Unknown,
}

/// Where the scanner is in the top-level object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum At {
    /// Before the opening `{`.
    Start,
    /// Expecting a key (or `}`).
    Key,
    /// After a key, expecting `:`.
    Colon,
    /// Expecting a value.
    Value,
    /// Inside a scalar value at depth 1 (a number or a literal).
    Scalar,
    /// After a value, expecting `,` or `}`.
    Next,
    /// Past the top-level value, or it was not an object.
    Done,
}

/// Reads one message as a stream of bytes, keeping only what answering it needs.
#[derive(Debug)]
pub(crate) struct Scanner {
    at: At,
    /// Nesting depth of the byte being read (1 inside the top-level object).
    depth: u32,
    in_string: bool,
    escaped: bool,
    /// The key being read at depth 1, or the last one read.
    key: Vec<u8>,
    key_too_long: bool,
    reading_key: bool,
    /// The raw JSON of the `id` value, while and after it is read.
    id: Vec<u8>,
    id_too_long: bool,
    reading_id: bool,
    has_method: bool,
    has_answer: bool,
    /// Bytes read.
    pub(crate) bytes: u64,
}

impl Default for Scanner {
    fn default() -> Scanner {
        Scanner {
            at: At::Start,
            depth: 0,
            in_string: false,
            escaped: false,
            key: Vec::new(),
            key_too_long: false,
            reading_key: false,
            id: Vec::new(),
            id_too_long: false,
            reading_id: false,
            has_method: false,
            has_answer: false,
            bytes: 0,
        }
    }
}

impl Scanner {
    /// Reads more of the message.
    pub(crate) fn feed(&mut self, bytes: &[u8]) {
        self.bytes = self.bytes.saturating_add(bytes.len() as u64);
        for &b in bytes {
            self.byte(b);
        }
    }

    fn keep_id(&mut self, b: u8) {
        if self.id.len() < ID_BYTES_MAX {
            self.id.push(b);
        } else {
            self.id_too_long = true;
        }
    }

    fn byte(&mut self, b: u8) {
        if self.at == At::Done {
            return;
        }
        if self.in_string {
            if self.reading_id {
                self.keep_id(b);
            }
            if self.escaped {
                self.escaped = false;
                if self.reading_key {
                    self.key_byte(b);
                }
            } else if b == b'\\' {
                self.escaped = true;
                if self.reading_key {
                    self.key_byte(b);
                }
            } else if b == b'"' {
                self.in_string = false;
                self.end_string();
            } else if self.reading_key {
                self.key_byte(b);
            }
            return;
        }
        if self.at == At::Scalar {
            if matches!(b, b',' | b'}' | b' ' | b'\t' | b'\r' | b'\n') {
                self.reading_id = false;
                self.at = At::Next;
            } else {
                if self.reading_id {
                    self.keep_id(b);
                }
                return;
            }
        }
        match b {
            b' ' | b'\t' | b'\r' | b'\n' => {}
            b'"' => {
                self.in_string = true;
                if self.depth == 1 && self.at == At::Key {
                    self.reading_key = true;
                    self.key.clear();
                    self.key_too_long = false;
                } else if self.depth == 1 && self.at == At::Value {
                    self.at = At::Next;
                    self.value_starts(b);
                }
            }
            b'{' | b'[' => {
                if self.at == At::Start {
                    self.at = if b == b'{' { At::Key } else { At::Done };
                } else if self.depth == 1 && self.at == At::Value {
                    self.at = At::Next;
                }
                self.depth = self.depth.saturating_add(1);
            }
            b'}' | b']' => {
                self.depth = self.depth.saturating_sub(1);
                if self.depth == 0 {
                    self.at = At::Done;
                }
            }
            b':' if self.depth == 1 && self.at == At::Colon => self.at = At::Value,
            b',' if self.depth == 1 => self.at = At::Key,
            _ if self.depth == 1 && self.at == At::Value => {
                self.at = At::Scalar;
                self.value_starts(b);
            }
            _ if self.at == At::Start => self.at = At::Done,
            _ => {}
        }
    }

    fn key_byte(&mut self, b: u8) {
        if self.key.len() < KEY_BYTES_MAX {
            self.key.push(b);
        } else {
            self.key_too_long = true;
        }
    }

    /// The first byte of a value at depth 1.
    fn value_starts(&mut self, b: u8) {
        if !self.key_too_long && self.key == b"id" {
            self.id.clear();
            self.id_too_long = false;
            self.reading_id = true;
            self.keep_id(b);
        }
    }

    fn end_string(&mut self) {
        if self.reading_key {
            self.reading_key = false;
            self.at = At::Colon;
            if !self.key_too_long {
                match self.key.as_slice() {
                    b"method" => self.has_method = true,
                    b"result" | b"error" => self.has_answer = true,
                    _ => {}
                }
            }
        } else if self.reading_id {
            self.reading_id = false;
        }
    }

    /// The message's `id`, when it is a string or a number a caller can match.
    pub(crate) fn id(&self) -> Option<Value> {
        if self.id_too_long || self.reading_id || self.id.is_empty() {
            return None;
        }
        match serde_json::from_slice::<Value>(&self.id) {
            Ok(v @ (Value::String(_) | Value::Number(_))) => Some(v),
            _ => None,
        }
    }

    /// What kind of message it was.
    pub(crate) fn kind(&self) -> Kind {
        match (self.has_method, self.has_answer, self.id().is_some()) {
            (true, _, true) => Kind::Request,
            (true, _, false) => Kind::Notification,
            (false, true, _) => Kind::Response,
            (false, false, _) => Kind::Unknown,
        }
    }

    /// The error an oversized message is answered with.
    pub(crate) fn error(&self) -> ErrorData {
        too_large(self.bytes)
    }
}

/// The error naming the bound.
fn too_large(bytes: u64) -> ErrorData {
    ErrorData::new(
        ErrorCode::INVALID_REQUEST,
        format!(
            "the message is {bytes} bytes or more, over the bound of {MESSAGE_BYTES_MAX} bytes (16 MiB) per JSON-RPC message; it was not read"
        ),
        Some(json!({"max_bytes": MESSAGE_BYTES_MAX, "bytes": bytes})),
    )
}

/// A JSON-RPC error response as JSON (`id` null when it could not be read).
pub(crate) fn error_response(id: Option<Value>, error: &ErrorData) -> Value {
    json!({"jsonrpc": "2.0", "id": id.unwrap_or(Value::Null), "error": error})
}

/// The answer to the stand-in of an oversized request, if `request` is one.
pub(crate) fn oversized_error(request: &CustomRequest) -> Option<ErrorData> {
    if request.method != OVERSIZED_METHOD {
        return None;
    }
    let bytes = request
        .params
        .as_ref()
        .and_then(|p| p.get("bytes"))
        .and_then(Value::as_u64)
        .unwrap_or(0);
    Some(too_large(bytes))
}

/// The line rmcp is given in place of an oversized message, if any.
fn stand_in(scan: &Scanner) -> Option<Value> {
    match scan.kind() {
        Kind::Request => Some(
            json!({"jsonrpc": "2.0", "id": scan.id(), "method": OVERSIZED_METHOD,
            "params": {"bytes": scan.bytes}}),
        ),
        Kind::Response => scan.id().map(|id| error_response(Some(id), &scan.error())),
        Kind::Notification | Kind::Unknown => None,
    }
}

/// Copies `input` to `output` line by line, each line at most `MESSAGE_BYTES_MAX` bytes; a
/// longer line is read through and replaced by its stand-in (or dropped, with a log line).
/// Ends at the end of `input` or when `output` is closed.
pub(crate) async fn pump<R, W>(input: R, mut output: W)
where
    R: tokio::io::AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut input = tokio::io::BufReader::with_capacity(64 * 1024, input);
    let mut line: Vec<u8> = Vec::new();
    let mut over: Option<Scanner> = None;
    // Bounded by the input: every pass consumes at least one byte, or ends.
    loop {
        let (taken, ended) = {
            let Ok(available) = input.fill_buf().await else {
                return;
            };
            if available.is_empty() {
                return;
            }
            let newline = available.iter().position(|b| *b == b'\n');
            let take = newline.map_or(available.len(), |i| i + 1);
            let chunk = &available[..take];
            if let Some(scan) = over.as_mut() {
                scan.feed(chunk);
            } else if line.len().saturating_add(take) > MESSAGE_BYTES_MAX {
                let mut scan = Scanner::default();
                scan.feed(&line);
                scan.feed(chunk);
                line = Vec::new();
                over = Some(scan);
            } else {
                line.extend_from_slice(chunk);
            }
            (take, newline.is_some())
        };
        input.consume(taken);
        if !ended {
            continue;
        }
        let out = match over.take() {
            None => std::mem::take(&mut line),
            Some(scan) => {
                let Some(v) = stand_in(&scan) else {
                    tracing::warn!(
                        bytes = scan.bytes,
                        "a message over the bound of {MESSAGE_BYTES_MAX} bytes with no id to answer (a notification, or not JSON-RPC) was dropped"
                    );
                    continue;
                };
                tracing::warn!(
                    bytes = scan.bytes,
                    "a message over the bound of {MESSAGE_BYTES_MAX} bytes was answered with an error"
                );
                let mut l = v.to_string().into_bytes();
                l.push(b'\n');
                l
            }
        };
        if output.write_all(&out).await.is_err() || output.flush().await.is_err() {
            return;
        }
    }
}

/// This process's stdin and stdout as an MCP transport whose every request gets an answer:
/// stdin goes through [`pump`] (one owned task, ended with the returned guard).
pub(crate) fn stdio() -> (
    (tokio::io::DuplexStream, tokio::io::Stdout),
    tokio::task::JoinHandle<()>,
) {
    let (reader, writer) = tokio::io::duplex(64 * 1024);
    let task = tokio::spawn(pump(tokio::io::stdin(), writer));
    ((reader, tokio::io::stdout()), task)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // Tests: a panic is the failure report.
    use super::*;

    fn scan(text: &str) -> Scanner {
        let mut s = Scanner::default();
        // In odd pieces, as a pipe delivers them.
        for piece in text.as_bytes().chunks(3) {
            s.feed(piece);
        }
        s
    }

    #[test]
    fn the_id_and_kind_are_found_wherever_they_are() {
        let big = "x".repeat(5000);
        for (text, id, kind) in [
            (
                format!(
                    r#"{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{{"a":"{big}"}}}}"#
                ),
                Some(json!(7)),
                Kind::Request,
            ),
            (
                format!(
                    r#"{{"method":"tools/call","params":{{"id":1,"s":"\"}}{big}"}}, "id" : "r-\"9\""}}"#
                ),
                Some(json!("r-\"9\"")),
                Kind::Request,
            ),
            (
                format!(
                    r#"{{"jsonrpc":"2.0","method":"notifications/x","params":{{"id":3,"t":"{big}"}}}}"#
                ),
                None,
                Kind::Notification,
            ),
            (
                format!(r#"{{"jsonrpc":"2.0","id":-12,"result":{{"content":"{big}"}}}}"#),
                Some(json!(-12)),
                Kind::Response,
            ),
            (
                format!(r#"[{{"id":1,"method":"m","x":"{big}"}}]"#),
                None,
                Kind::Unknown,
            ),
            (
                format!(r#"{{"id":{{"n":1}},"method":"m","x":"{big}"}}"#),
                None,
                Kind::Notification,
            ),
            (
                format!(r#"{{"id":"{big}","method":"m"}}"#),
                None,
                Kind::Notification,
            ),
        ] {
            let s = scan(&text);
            assert_eq!((s.id(), s.kind()), (id, kind), "{}", &text[..80]);
            assert_eq!(s.bytes, text.len() as u64);
        }
    }

    #[tokio::test]
    async fn an_oversized_line_is_replaced_by_its_stand_in_and_the_rest_passes() {
        let big = "y".repeat(MESSAGE_BYTES_MAX);
        let input = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}}\n{{\"jsonrpc\":\"2.0\",\"method\":\"tools/call\",\"params\":{{\"t\":\"{big}\"}},\"id\":42}}\n{{\"jsonrpc\":\"2.0\",\"method\":\"notifications/n\",\"params\":{{\"t\":\"{big}\"}}}}\n{{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}}\n"
        );
        let mut out = Vec::new();
        pump(input.as_bytes(), &mut out).await;
        let lines: Vec<Value> = String::from_utf8(out)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 3, "{lines:?}");
        assert_eq!(lines[0]["id"], 1);
        assert_eq!(
            (&lines[1]["id"], &lines[1]["method"]),
            (&json!(42), &json!(OVERSIZED_METHOD))
        );
        assert!(lines[1]["params"]["bytes"].as_u64().unwrap() > MESSAGE_BYTES_MAX as u64);
        assert_eq!(lines[2]["id"], 2);
    }
}
