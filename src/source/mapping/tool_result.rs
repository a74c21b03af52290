//! The MCP side of a mapping: from the JSON of a tool result (`tools/call`) or of a `*/list`
//! result to a `Page`.
//!
//! Pure: no IO, no protocol. A tool result is mapped from its `structuredContent` when that is
//! present and not `null`, else from the JSON text of its first `text` content block, parsed
//! strictly (`crate::json` rules, through `select`) and bounded before parsing. Errors name
//! the part of the result at fault, never a value of it. Whether the result is an error
//! (`isError: true`) is the source's to decide before it maps: an error result is a failed
//! page, never a page.

use serde_json::Value;

use super::pointer::type_name;
use super::{select, Mapping, PageError, Position};
use crate::contract::Page;

/// Which part of a tool result a page came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResultPart {
    /// `structuredContent`.
    Structured,
    /// The first text content block, parsed as JSON.
    Text,
}

impl Mapping {
    /// Maps the JSON of a tool result of `size_bytes` bytes, asked for at position `at`; a
    /// text block longer than `max_bytes` is refused before it is parsed.
    ///
    /// ```
    /// use scanledger::mapping::{Mapping, Position};
    /// let cfg = serde_json::json!({"items": "/issues", "next": "/next"});
    /// let m = Mapping::from_config(cfg.as_object().unwrap()).unwrap();
    /// let result = serde_json::json!({"content": [{"type": "text",
    ///     "text": "{\"issues\": [{\"id\": 7}], \"next\": null}"}]});
    /// let (page, _) = m.map_tool_result(&result, 80, 1 << 20, &Position::First).unwrap();
    /// assert_eq!((page.items.len(), page.next), (1, None));
    /// ```
    ///
    /// # Errors
    /// `PageError`: the result is not an object, has neither structured content nor a text
    /// block, the text is over the bound or not strict JSON, or as [`Mapping::map_value`].
    pub fn map_tool_result(
        &self,
        result: &Value,
        size_bytes: u64,
        max_bytes: u64,
        at: &Position,
    ) -> Result<(Page, ResultPart), PageError> {
        let Value::Object(obj) = result else {
            return Err(PageError::ToolResult {
                problem: format!("the result is {}, not an object", type_name(result)),
            });
        };
        if let Some(structured) = obj.get("structuredContent").filter(|v| !v.is_null()) {
            return Ok((
                self.map_value(structured, size_bytes, at)?,
                ResultPart::Structured,
            ));
        }
        let text = first_text(obj.get("content"))?;
        if text.len() as u64 > max_bytes {
            return Err(PageError::TooLarge { max_bytes });
        }
        let v = select::parse(text.as_bytes(), &self.select).map_err(PageError::Json)?;
        Ok((self.map_value(&v, size_bytes, at)?, ResultPart::Text))
    }
}

impl Mapping {
    /// The items array of a parsed page (under `root` when set), as the source sent it.
    #[must_use]
    pub fn items_of<'v>(&self, page: &'v Value) -> Option<&'v [Value]> {
        let base = match &self.root {
            Some(p) => p.get(page)?,
            None => page,
        };
        self.items.get(base)?.as_array().map(Vec::as_slice)
    }
}

/// The page a tool result holds, parsed in full (for keeping its items): its
/// `structuredContent`, or the strict JSON of its first text block.
#[must_use]
pub fn tool_result_page(result: &Value) -> Option<std::borrow::Cow<'_, Value>> {
    if let Some(s) = result.get("structuredContent").filter(|v| !v.is_null()) {
        return Some(std::borrow::Cow::Borrowed(s));
    }
    let text = first_text(result.get("content")).ok()?;
    crate::json::parse(text, crate::json::Numbers::Any)
        .ok()
        .map(std::borrow::Cow::Owned)
}

/// The text of the first content block of type `text`.
fn first_text(content: Option<&Value>) -> Result<&str, PageError> {
    let blocks = match content {
        None | Some(Value::Null) => &[][..],
        Some(Value::Array(a)) => a.as_slice(),
        Some(other) => {
            return Err(PageError::ToolResult {
                problem: format!("\"content\" is {}, not an array", type_name(other)),
            })
        }
    };
    for (index, block) in blocks.iter().enumerate() {
        if block.get("type").and_then(Value::as_str) != Some("text") {
            continue;
        }
        return match block.get("text") {
            Some(Value::String(s)) => Ok(s),
            other => Err(PageError::ToolResult {
                problem: format!(
                    "content block {index} is of type text but its \"text\" is {}",
                    other.map_or("absent", type_name)
                ),
            }),
        };
    }
    Err(PageError::ToolResult {
        problem: "the result has neither \"structuredContent\" nor a text content block".into(),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // Tests: a panic is the failure report.
    use super::*;
    use serde_json::json;

    fn mapping() -> Mapping {
        let cfg = json!({"items": "/items", "next": "/next"});
        Mapping::from_config(cfg.as_object().unwrap()).unwrap()
    }

    #[track_caller]
    fn check(result: Value, want: Result<(usize, Option<&str>, ResultPart), &str>) {
        let got = mapping().map_tool_result(&result, 100, 64, &Position::First);
        match (got, want) {
            (Ok((page, part)), Ok((n, next, want_part))) => {
                assert_eq!(
                    (page.items.len(), page.next.as_deref(), part),
                    (n, next, want_part)
                );
                assert_eq!(page.size_bytes, 100);
            }
            (Err(e), Err(words)) => assert!(e.to_string().contains(words), "{e}"),
            (got, want) => panic!("got {got:?}, want {want:?}"),
        }
    }

    #[test]
    fn structured_content_comes_first_then_the_first_text_block() {
        let page = json!({"items": [{"id": 1}], "next": "c2"});
        check(
            json!({"structuredContent": page, "content": [{"type": "text", "text": "not json"}]}),
            Ok((1, Some("c2"), ResultPart::Structured)),
        );
        check(
            json!({"structuredContent": null, "content": [{"type": "image", "data": "", "mimeType": "image/png"},
                {"type": "text", "text": "{\"items\": [{\"id\": 1}, {\"id\": 2}]}"}]}),
            Ok((2, None, ResultPart::Text)),
        );
    }

    #[test]
    fn a_result_without_a_page_names_what_is_missing() {
        check(json!([]), Err("the result is an array, not an object"));
        check(
            json!({"content": []}),
            Err("neither \"structuredContent\" nor a text content block"),
        );
        check(
            json!({"content": {}}),
            Err("\"content\" is an object, not an array"),
        );
        check(
            json!({"content": [{"type": "text", "text": 3}]}),
            Err("its \"text\" is a number"),
        );
        check(
            json!({"content": [{"type": "text", "text": "{\"items\": [], \"next\": \"x\", \"pad\": \"................................................\"}"}]}),
            Err("over the bound of 64 bytes"),
        );
        check(
            json!({"content": [{"type": "text", "text": "{\"items\": [], \"items\": []}"}]}),
            Err("not strict JSON"),
        );
        check(
            json!({"structuredContent": {"items": 1}}),
            Err("expected an array"),
        );
    }
}
