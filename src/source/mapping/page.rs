//! The response side of a mapping: from a JSON response to a `Page` (the rules are in the
//! module documentation of `mapping`).
//!
//! Pure: no IO. Errors name the pointer and the JSON type found, never a value of the
//! response, so no cursor or secret the body may hold can leak into a violation's detail.

use serde_json::Value;

use super::pointer::{type_name, Pointer};
use super::{select, Mapping, PageError, Paging, Position};
use crate::content::{self, ContentValue};
use crate::contract::{Item, Page, RawId, ITEMS_PER_PAGE_MAX};
use crate::digest;

/// Characters of an unexpected ID kept for the codec's error message.
const OTHER_ID_SHOWN_MAX: usize = 64;

impl Mapping {
    /// Maps a response body: refused past `max_bytes` before parsing, parsed under the rules
    /// of `crate::json` (duplicate keys refused, nesting bounded) while building only what the
    /// mapping's pointers reach, then [`Mapping::map_value`]. The result is the page
    /// `map_value` gives on the fully parsed body.
    ///
    /// # Errors
    /// `PageError`: too large, not strict JSON, or as [`Mapping::map_value`].
    pub fn map_body(&self, body: &[u8], max_bytes: u64, at: &Position) -> Result<Page, PageError> {
        if body.len() as u64 > max_bytes {
            return Err(PageError::TooLarge { max_bytes });
        }
        // Only what the pointers reach is built; the rest is checked as strictly and skipped.
        let v = select::parse(body, &self.select).map_err(PageError::Json)?;
        self.map_value(&v, body.len() as u64, at)
    }

    /// Maps an already parsed response of `size_bytes` bytes, asked for at position `at`.
    ///
    /// # Errors
    /// `PageError` naming the pointer: `root` or `items` naming nothing or not an array, an
    /// item without an ID, a field of the wrong type, a missing `has_more` flag, content that
    /// cannot be hashed.
    pub fn map_value(&self, v: &Value, size_bytes: u64, at: &Position) -> Result<Page, PageError> {
        let base = match &self.root {
            Some(p) => p.get(v).ok_or_else(|| missing("root", p))?,
            None => v,
        };
        let items = self.map_items(base)?;
        let complete = read_bool("complete", self.complete.as_ref(), base)?;
        let has_more = match &self.has_more {
            Some(p) => {
                Some(read_bool("has_more", Some(p), base)?.ok_or_else(|| missing("has_more", p))?)
            }
            None => None,
        };
        let (next, complete) = match &self.paging {
            Paging::Cursor { next, .. } => {
                let cursor = read_cursor(next, base)?;
                match has_more {
                    None => (cursor, complete),
                    // More promised and nothing to continue from: complete false, so R7 fires.
                    Some(true) => {
                        let complete = if cursor.is_none() {
                            complete.or(Some(false))
                        } else {
                            complete
                        };
                        (cursor, complete)
                    }
                    // The end cursor of a last page is not a next.
                    Some(false) => (None, complete.or(Some(true))),
                }
            }
            Paging::Page { .. } | Paging::Offset { .. } => {
                let stop = has_more == Some(false) || complete == Some(true);
                let more = has_more == Some(true) || complete == Some(false);
                let complete = if has_more == Some(false) {
                    complete.or(Some(true))
                } else {
                    complete
                };
                let next = if stop || (items.is_empty() && !more) {
                    None
                } else {
                    self.next_synthetic(at, items.len())
                };
                (next, complete)
            }
        };
        Ok(Page {
            items,
            next,
            complete,
            snapshot: read_text("snapshot", self.snapshot.as_ref(), base)?,
            query: self
                .query
                .as_ref()
                .and_then(|p| p.get(base))
                .filter(|q| !q.is_null())
                .cloned(),
            truncated: read_bool("truncated", self.truncated.as_ref(), base)?.unwrap_or(false),
            total: read_total(self.total.as_ref(), base)?,
            size_bytes,
            columns: None,
        })
    }

    fn map_items(&self, base: &Value) -> Result<Vec<Item>, PageError> {
        let arr = match self.items.get(base) {
            Some(Value::Array(a)) => a,
            Some(other) => return Err(wrong("items", &self.items, "an array", other)),
            None => return Err(missing("items", &self.items)),
        };
        // An oversized page is kept one item past the bound so the reconciler reports it (R16).
        let keep = arr.len().min(ITEMS_PER_PAGE_MAX as usize + 1);
        let mut out = Vec::with_capacity(keep);
        let mut scratch = Vec::new();
        for (index, item) in arr.iter().take(keep).enumerate() {
            let id = match self.id.get(item) {
                None | Some(Value::Null) => {
                    return Err(PageError::NoId {
                        index,
                        pointer: self.id.as_str().to_owned(),
                    })
                }
                Some(v) => raw_id(v),
            };
            let labels = self
                .labels
                .iter()
                .filter(|l| l.test.holds(l.pointer.get(item)))
                .map(|l| l.name.clone())
                .collect();
            let content = if self.content.is_empty() {
                None
            } else {
                Some(self.content_hash(item, index, &mut scratch)?)
            };
            out.push(Item {
                id,
                labels,
                content,
            });
        }
        Ok(out)
    }

    fn content_hash(
        &self,
        item: &Value,
        index: usize,
        texts: &mut Vec<String>,
    ) -> Result<[u8; 32], PageError> {
        // Numbers and nested values need owned text that the borrowed `ContentValue`s point
        // into: render them first (checking each number, so an error names its pointer),
        // then borrow.
        texts.clear();
        for p in &self.content {
            let text = match p.get(item) {
                Some(Value::Number(n)) => {
                    let text = n.to_string();
                    content::canonical_decimal(&text).map_err(|source| PageError::Content {
                        index,
                        pointer: p.as_str().to_owned(),
                        source,
                    })?;
                    text
                }
                Some(v @ (Value::Object(_) | Value::Array(_))) => digest::canonical_json(v),
                _ => String::new(),
            };
            texts.push(text);
        }
        let values: Vec<ContentValue<'_>> = self
            .content
            .iter()
            .zip(texts.iter())
            .map(|(p, text)| match p.get(item) {
                None | Some(Value::Null) => ContentValue::Null,
                Some(Value::Bool(b)) => ContentValue::Bool(*b),
                Some(Value::Number(_)) => ContentValue::Decimal(text),
                Some(Value::String(s)) => ContentValue::Text(s),
                Some(Value::Object(_) | Value::Array(_)) => ContentValue::Text(text),
            })
            .collect();
        // What is left to fail is a value over 4 GiB, which a bounded body cannot hold.
        content::record_hash(&values).map_err(|source| PageError::Content {
            index,
            pointer: self.content[0].as_str().to_owned(),
            source,
        })
    }
}

fn raw_id(v: &Value) -> RawId {
    match v {
        Value::String(s) => RawId::Str(s.clone()),
        Value::Number(n) => match (n.as_u64(), n.as_i64()) {
            (Some(u), _) => RawId::Int(u),
            (None, Some(i)) => RawId::Neg(i),
            (None, None) => RawId::Other(n.to_string()),
        },
        other => {
            let mut shown = other.to_string();
            if shown.len() > OTHER_ID_SHOWN_MAX {
                let mut cut = OTHER_ID_SHOWN_MAX;
                while !shown.is_char_boundary(cut) {
                    cut -= 1;
                }
                shown.truncate(cut);
                shown.push('…');
            }
            RawId::Other(shown)
        }
    }
}

fn missing(what: &'static str, p: &Pointer) -> PageError {
    PageError::Missing {
        what,
        pointer: p.as_str().to_owned(),
    }
}

fn wrong(what: &'static str, p: &Pointer, expected: &'static str, found: &Value) -> PageError {
    PageError::WrongType {
        what,
        pointer: p.as_str().to_owned(),
        expected,
        found: type_name(found),
    }
}

fn read_bool(
    what: &'static str,
    p: Option<&Pointer>,
    base: &Value,
) -> Result<Option<bool>, PageError> {
    let Some(p) = p else { return Ok(None) };
    match p.get(base) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(other) => Err(wrong(what, p, "a boolean", other)),
    }
}

fn read_cursor(p: &Pointer, base: &Value) -> Result<Option<String>, PageError> {
    match p.get(base) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.is_empty() => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(Value::Number(n)) => Ok(Some(n.to_string())),
        Some(other) => Err(wrong("next", p, "a string", other)),
    }
}

fn read_text(
    what: &'static str,
    p: Option<&Pointer>,
    base: &Value,
) -> Result<Option<String>, PageError> {
    let Some(p) = p else { return Ok(None) };
    match p.get(base) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(Value::Number(n)) => Ok(Some(n.to_string())),
        Some(other) => Err(wrong(what, p, "a string", other)),
    }
}

fn read_total(p: Option<&Pointer>, base: &Value) -> Result<Option<u64>, PageError> {
    let Some(p) = p else { return Ok(None) };
    match p.get(base) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) if n.is_u64() => Ok(n.as_u64()),
        // A negative total (Jira Cloud's -1) means unknown, never a count.
        Some(Value::Number(n)) if n.is_i64() => Ok(None),
        Some(other) => Err(wrong("total", p, "an integer", other)),
    }
}
