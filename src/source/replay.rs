//! `replay:FILE`: a scripted source, JSON Lines, one response per line (docs/REFERENCE.md §4).
//!
//! Strict by design: a request the file has no line for is an error (exit 2), so a scenario
//! cannot pass by accident. Lines with the same cursor answer successive requests for it
//! (retries); the last one repeats. Every line is parsed up front, so a malformed file fails
//! before the first request, naming the line and the field.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Map, Value};

use super::{FetchError, PageRequest, PageSource};
use crate::contract::{Item, Page, RawId, ITEMS_PER_PAGE_MAX, LABELS_PER_ITEM_MAX};
use crate::error::SourceError;
use crate::reconcile::Request;

/// Bytes of a replay file.
pub(crate) const REPLAY_FILE_BYTES_MAX: u64 = 1 << 30;
/// Milliseconds one line may ask the source to wait.
pub(crate) const DELAY_MS_MAX: u64 = 3_600_000;
/// Lines of a replay file.
pub(crate) const REPLAY_LINES_MAX: usize = 10_000_000;

const LINE_KEYS: &[&str] = &[
    "cursor",
    "after",
    "items",
    "next",
    "complete",
    "snapshot",
    "query",
    "truncated",
    "delay_ms",
    "error",
];

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key {
    Cursor(Option<String>),
    After(String),
}

#[derive(Debug, Clone)]
enum Answer {
    Page(Page),
    Error(&'static str),
}

#[derive(Debug, Clone)]
struct Line {
    answer: Answer,
    delay_ms: u64,
}

/// A replay source read from a file.
#[derive(Debug)]
pub struct ReplaySource {
    path: PathBuf,
    lines: HashMap<Key, (Vec<Line>, usize)>,
}

impl ReplaySource {
    /// Reads and parses a replay file.
    ///
    /// # Errors
    /// `SourceError::Io` when unreadable, `SourceError::Replay` naming line and field.
    pub fn open(path: &Path) -> Result<ReplaySource, SourceError> {
        let io = |source| SourceError::Io {
            path: path.to_owned(),
            source,
        };
        let meta = std::fs::metadata(path).map_err(io)?;
        if meta.len() > REPLAY_FILE_BYTES_MAX {
            return Err(SourceError::Replay {
                path: path.to_owned(),
                line: 0,
                column: None,
                problem: format!(
                    "file is {} bytes, more than the bound of {REPLAY_FILE_BYTES_MAX}",
                    meta.len()
                ),
            });
        }
        let text = std::fs::read_to_string(path).map_err(io)?;
        ReplaySource::parse(path, &text)
    }

    /// Parses replay text; `path` only names the file in errors.
    ///
    /// # Errors
    /// `SourceError::Replay` naming line and field.
    pub fn parse(path: &Path, text: &str) -> Result<ReplaySource, SourceError> {
        let mut lines: HashMap<Key, (Vec<Line>, usize)> = HashMap::new();
        for (i, raw) in text.lines().enumerate() {
            let line_no = i + 1;
            if line_no > REPLAY_LINES_MAX {
                return Err(err(
                    path,
                    line_no,
                    None,
                    format!("more than {REPLAY_LINES_MAX} lines"),
                ));
            }
            if raw.trim().is_empty() {
                continue;
            }
            let (key, line) =
                parse_line(raw).map_err(|(column, p)| err(path, line_no, column, p))?;
            lines.entry(key).or_default().0.push(line);
        }
        if lines.is_empty() {
            return Err(err(path, 0, None, "the file has no lines".to_owned()));
        }
        Ok(ReplaySource {
            path: path.to_owned(),
            lines,
        })
    }
}

fn err(path: &Path, line: usize, column: Option<usize>, problem: String) -> SourceError {
    SourceError::Replay {
        path: path.to_owned(),
        line,
        column,
        problem,
    }
}

/// One line: its JSON is read strictly (a duplicate key is refused), and a malformed one is
/// reported at its column, the line being the file's.
fn parse_line(raw: &str) -> Result<(Key, Line), (Option<usize>, String)> {
    let v = crate::json::parse(raw, crate::json::Numbers::Any)
        .map_err(|e| (Some(e.column), format!("malformed JSON: {}", e.message)))?;
    line_of(raw, &v).map_err(|p| (None, p))
}

fn line_of(raw: &str, v: &Value) -> Result<(Key, Line), String> {
    let obj = v.as_object().ok_or("a line must be a JSON object")?;
    for k in obj.keys() {
        if !LINE_KEYS.contains(&k.as_str()) {
            let hint = crate::contract::closest(k, LINE_KEYS)
                .map(|c| format!("; did you mean {c:?}?"))
                .unwrap_or_default();
            return Err(format!("unknown key {k:?}{hint}"));
        }
    }
    let key = match (obj.get("cursor"), obj.get("after")) {
        (Some(_), Some(_)) => {
            return Err("a line has either \"cursor\" or \"after\", not both".into())
        }
        (Some(Value::Null), None) => Key::Cursor(None),
        (Some(Value::String(s)), None) => Key::Cursor(Some(s.clone())),
        (Some(_), None) => return Err("field \"cursor\" must be a string or null".into()),
        (None, Some(Value::String(s))) => Key::After(s.clone()),
        (None, Some(Value::Number(n))) => Key::After(n.to_string()),
        (None, Some(_)) => return Err("field \"after\" must be a string or a number".into()),
        (None, None) => return Err("a line needs a \"cursor\" (or \"after\") key".into()),
    };
    let delay_ms = match obj.get("delay_ms") {
        None | Some(Value::Null) => 0,
        Some(v) => v.as_u64().filter(|n| *n <= DELAY_MS_MAX).ok_or_else(|| {
            format!("field \"delay_ms\" must be an integer from 0 to {DELAY_MS_MAX}")
        })?,
    };
    if let Some(e) = obj.get("error") {
        let kind = match e.as_str() {
            Some("timeout") => "timeout",
            Some("server_error") => "server_error",
            Some("expired_cursor") => "expired_cursor",
            Some("forbidden") => "forbidden",
            _ => {
                return Err(
                    "field \"error\" must be \"timeout\", \"server_error\", \"expired_cursor\" or \"forbidden\"".into(),
                )
            }
        };
        return Ok((
            key,
            Line {
                answer: Answer::Error(kind),
                delay_ms,
            },
        ));
    }
    let items = match obj.get("items") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(a)) => parse_items(a)?,
        Some(Value::Object(o)) => parse_range(o)?,
        Some(_) => {
            return Err("field \"items\" must be an array or a {\"range\": ...} object".into())
        }
    };
    let next = match obj.get("next") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return Err("field \"next\" must be a string or null".into()),
    };
    let complete = match obj.get("complete") {
        None | Some(Value::Null) => None,
        Some(Value::Bool(b)) => Some(*b),
        Some(_) => return Err("field \"complete\" must be a boolean".into()),
    };
    let snapshot = match obj.get("snapshot") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return Err("field \"snapshot\" must be a string or null".into()),
    };
    let truncated = match obj.get("truncated") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err("field \"truncated\" must be a boolean".into()),
    };
    let page = Page {
        items,
        next,
        complete,
        snapshot,
        query: obj.get("query").filter(|v| !v.is_null()).cloned(),
        truncated,
        size_bytes: raw.len() as u64,
        total: None,
    };
    Ok((
        key,
        Line {
            answer: Answer::Page(page),
            delay_ms,
        },
    ))
}

fn raw_id(v: &Value) -> RawId {
    match v {
        Value::String(s) => RawId::Str(s.clone()),
        Value::Number(n) => n
            .as_u64()
            .map_or_else(|| RawId::Other(n.to_string()), RawId::Int),
        other => RawId::Other(other.to_string()),
    }
}

fn parse_items(a: &[Value]) -> Result<Vec<Item>, String> {
    // An oversized page is kept one item past the bound so the reconciler reports it (R16).
    let keep = a.len().min(ITEMS_PER_PAGE_MAX as usize + 1);
    let mut items = Vec::with_capacity(keep);
    for (i, v) in a.iter().take(keep).enumerate() {
        match v {
            Value::Object(o) => {
                items.push(parse_item_object(o).map_err(|p| format!("items[{i}]: {p}"))?)
            }
            other => items.push(Item {
                id: raw_id(other),
                labels: Vec::new(),
                content: None,
            }),
        }
    }
    Ok(items)
}

fn parse_item_object(o: &Map<String, Value>) -> Result<Item, String> {
    for k in o.keys() {
        if k != "id" && k != "labels" {
            return Err(format!(
                "unknown key {k:?} (an item has \"id\" and \"labels\")"
            ));
        }
    }
    let id = raw_id(o.get("id").ok_or("an item object needs an \"id\"")?);
    let labels = match o.get("labels") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(ls)) => {
            // Over the bound: keep one more so the reconciler reports it (R16).
            let mut out = Vec::with_capacity(ls.len().min(LABELS_PER_ITEM_MAX + 1));
            for l in ls.iter().take(LABELS_PER_ITEM_MAX + 1) {
                out.push(
                    l.as_str()
                        .ok_or("field \"labels\" must hold strings")?
                        .to_owned(),
                );
            }
            out
        }
        Some(_) => return Err("field \"labels\" must be an array of strings".into()),
    };
    Ok(Item {
        id,
        labels,
        content: None,
    })
}

fn parse_range(o: &Map<String, Value>) -> Result<Vec<Item>, String> {
    for k in o.keys() {
        if k != "range" && k != "prefix" {
            return Err(format!(
                "items: unknown key {k:?} (a generator has \"range\" and \"prefix\")"
            ));
        }
    }
    let bounds = o
        .get("range")
        .and_then(Value::as_array)
        .filter(|a| a.len() == 2)
        .ok_or("items.range must be [LO, HI]")?;
    let lo = bounds[0]
        .as_u64()
        .ok_or("items.range: LO must be a non-negative integer")?;
    let hi = bounds[1]
        .as_u64()
        .ok_or("items.range: HI must be a non-negative integer")?;
    if hi < lo {
        return Err("items.range: HI is below LO".into());
    }
    let prefix = match o.get("prefix") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.as_str()),
        Some(_) => return Err("items.prefix must be a string".into()),
    };
    // A range past the page bound is cut one item past it so the reconciler reports R16
    // without allocating the whole range.
    let n = (hi - lo)
        .saturating_add(1)
        .min(u64::from(ITEMS_PER_PAGE_MAX) + 1);
    Ok((lo..lo + n)
        .map(|id| Item {
            id: match prefix {
                Some(p) => RawId::Str(format!("{p}{id}")),
                None => RawId::Int(id),
            },
            labels: Vec::new(),
            content: None,
        })
        .collect())
}

impl PageSource for ReplaySource {
    async fn fetch(&mut self, req: &PageRequest) -> Result<Page, FetchError> {
        let key = match &req.request {
            Request::First => Key::Cursor(None),
            Request::Cursor(c) => Key::Cursor(Some(c.clone())),
            Request::After(k) => Key::After(k.clone()),
        };
        let Some((lines, next_idx)) = self.lines.get_mut(&key) else {
            return Err(FetchError::Fatal(SourceError::Unanswered {
                path: self.path.clone(),
                request: req.request.describe(),
            }));
        };
        // Lines answer successive requests; the last one repeats.
        let idx = (*next_idx).min(lines.len() - 1);
        *next_idx = next_idx.saturating_add(1);
        let line = lines[idx].clone();
        if line.delay_ms > 0 {
            tokio::time::sleep(Duration::from_millis(line.delay_ms)).await;
        }
        match line.answer {
            Answer::Page(page) => Ok(page),
            Answer::Error("timeout") => Err(FetchError::Timeout),
            Answer::Error("expired_cursor") => Err(FetchError::ExpiredCursor),
            Answer::Error("forbidden") => Err(FetchError::Forbidden),
            Answer::Error(_) => Err(FetchError::ServerError),
        }
    }
}
