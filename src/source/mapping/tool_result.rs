//! The MCP side of a mapping: from the JSON of a tool result (`tools/call`) or of a `*/list`
//! result to a `Page`.
//!
//! Pure: no IO, no protocol. Which part of a tool result holds the page is chosen by one rule
//! of precedence (`ResultFrom::Auto`), unless the config names the part:
//! 1. `structuredContent`, when it is present, not `null`, and the mapping's `root`/`items`
//!    pointers name something in it;
//! 2. else, when `structuredContent` is `{"result": STRING}` — the Python SDK's wrapper of a
//!    tool that returns text — the JSON of that string;
//! 3. else `structuredContent` when present (the error then names what it holds);
//! 4. else the JSON text of the first `text` content block.
//!
//! Text is parsed strictly (`crate::json` rules, through `select`) and bounded before
//! parsing. Errors name the part of the result at fault, never a value of it; when a pointer
//! names nothing, [`Mapping::keys_note`] says which keys were there. Whether the result is an
//! error (`isError: true`) is the source's to decide before it maps: an error result is a
//! failed page, never a page.

use serde_json::Value;

use super::pointer::{type_name, Pointer};
use super::{select, Mapping, PageError, Position};
use crate::contract::Page;

/// Which part of a tool result a page came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResultPart {
    /// `structuredContent`.
    Structured,
    /// The JSON text of `structuredContent.result` (the Python SDK's wrapper).
    Wrapped,
    /// The first text content block, parsed as JSON.
    Text,
}

impl ResultPart {
    fn describe(self) -> &'static str {
        match self {
            ResultPart::Structured => "the structuredContent",
            ResultPart::Wrapped => "the JSON text of structuredContent.result",
            ResultPart::Text => "the JSON text of the first text block",
        }
    }
}

/// Which part of a tool result to read (an MCP config's `result_part`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ResultFrom {
    /// The rule of precedence of this module's documentation.
    #[default]
    Auto,
    /// Always `structuredContent`.
    Structured,
    /// Always the JSON text of `structuredContent.result`.
    Wrapped,
    /// Always the first text block.
    Text,
}

impl ResultFrom {
    /// The names configs spell.
    pub const NAMES: &'static [&'static str] = &["auto", "structured", "wrapped", "text"];

    /// The choice a config names.
    #[must_use]
    pub fn parse(name: &str) -> Option<ResultFrom> {
        match name {
            "auto" => Some(ResultFrom::Auto),
            "structured" => Some(ResultFrom::Structured),
            "wrapped" => Some(ResultFrom::Wrapped),
            "text" => Some(ResultFrom::Text),
            _ => None,
        }
    }
}

/// Keys a note lists; past them it says how many more.
const KEYS_SHOWN_MAX: usize = 32;
/// Bytes of one key a note shows.
const KEY_SHOWN_LEN_MAX: usize = 64;

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
        self.map_tool_result_from(result, size_bytes, max_bytes, at, ResultFrom::Auto)
    }

    /// [`Mapping::map_tool_result`] from the part `from` names.
    ///
    /// # Errors
    /// As [`Mapping::map_tool_result`]; the part `from` names is absent.
    pub fn map_tool_result_from(
        &self,
        result: &Value,
        size_bytes: u64,
        max_bytes: u64,
        at: &Position,
        from: ResultFrom,
    ) -> Result<(Page, ResultPart), PageError> {
        let (part, text_or_value) = self.choose(result, from)?;
        let page = match text_or_value {
            Chosen::Value(v) => self.map_value(v, size_bytes, at)?,
            Chosen::Text(text) => {
                if text.len() as u64 > max_bytes {
                    return Err(PageError::TooLarge { max_bytes });
                }
                let v = select::parse(text.as_bytes(), &self.select).map_err(PageError::Json)?;
                self.map_value(&v, size_bytes, at)?
            }
        };
        Ok((page, part))
    }

    /// Whether the page pointers (`root`, then `items`) name something in `v`.
    fn holds_items(&self, v: &Value) -> bool {
        let base = match &self.root {
            Some(p) => p.get(v),
            None => Some(v),
        };
        base.and_then(|b| self.items.get(b)).is_some()
    }

    /// The part of `result` to read, by `from`.
    fn choose<'r>(
        &self,
        result: &'r Value,
        from: ResultFrom,
    ) -> Result<(ResultPart, Chosen<'r>), PageError> {
        let Value::Object(obj) = result else {
            return Err(PageError::ToolResult {
                problem: format!("the result is {}, not an object", type_name(result)),
            });
        };
        let structured = obj.get("structuredContent").filter(|v| !v.is_null());
        let wrapped = structured.and_then(wrapped_text);
        let text = || first_text(obj.get("content")).map(|t| (ResultPart::Text, Chosen::Text(t)));
        match from {
            ResultFrom::Auto => match (structured, wrapped) {
                (Some(s), _) if self.holds_items(s) => {
                    Ok((ResultPart::Structured, Chosen::Value(s)))
                }
                (Some(_), Some(w)) => Ok((ResultPart::Wrapped, Chosen::Text(w))),
                (Some(s), None) => Ok((ResultPart::Structured, Chosen::Value(s))),
                (None, _) => text(),
            },
            ResultFrom::Structured => structured
                .map(|s| (ResultPart::Structured, Chosen::Value(s)))
                .ok_or_else(|| PageError::ToolResult {
                    problem: "result_part is \"structured\" but the result has no structuredContent"
                        .into(),
                }),
            ResultFrom::Wrapped => wrapped
                .map(|w| (ResultPart::Wrapped, Chosen::Text(w)))
                .ok_or_else(|| PageError::ToolResult {
                    problem: "result_part is \"wrapped\" but structuredContent is not {\"result\": STRING}"
                        .into(),
                }),
            ResultFrom::Text => text(),
        }
    }

    /// The page a tool result holds, parsed in full (for keeping its items), from the part
    /// `from` names.
    #[must_use]
    pub fn result_page<'r>(
        &self,
        result: &'r Value,
        from: ResultFrom,
    ) -> Option<std::borrow::Cow<'r, Value>> {
        match self.choose(result, from).ok()?.1 {
            Chosen::Value(v) => Some(std::borrow::Cow::Borrowed(v)),
            Chosen::Text(t) => crate::json::parse(t, crate::json::Numbers::Any)
                .ok()
                .map(std::borrow::Cow::Owned),
        }
    }

    /// For an error of a pointer that names nothing in a tool result: which keys the part of
    /// the result it was read from holds where the pointer stops (`None` for other errors).
    #[must_use]
    pub fn keys_note(&self, result: &Value, from: ResultFrom, e: &PageError) -> Option<String> {
        let PageError::Missing { what, pointer } = e else {
            return None;
        };
        let (part, _) = self.choose(result, from).ok()?;
        let page = self.result_page(result, from)?;
        let base = match (&self.root, *what) {
            (_, "root") | (None, _) => &*page,
            (Some(r), _) => r.get(&page)?,
        };
        let p = Pointer::parse(pointer).ok()?;
        let (reached, at) = walk(base, &p);
        let there = match at {
            Value::Object(m) if m.is_empty() => "an empty object".to_owned(),
            Value::Object(m) => {
                let mut keys: Vec<String> = m
                    .keys()
                    .take(KEYS_SHOWN_MAX)
                    .map(|k| format!("{:?}", shortened(k)))
                    .collect();
                if m.len() > KEYS_SHOWN_MAX {
                    keys.push(format!("and {} more", m.len() - KEYS_SHOWN_MAX));
                }
                format!("the keys {}", keys.join(", "))
            }
            other => format!("{}, not an object", type_name(other)),
        };
        Some(format!("{} holds {there} at {reached:?}", part.describe()))
    }
}

/// A part of a tool result: a value, or JSON text still to parse.
enum Chosen<'r> {
    Value(&'r Value),
    Text(&'r str),
}

/// The string of `{"result": STRING}`, the Python SDK's structured wrapper of a text result.
fn wrapped_text(v: &Value) -> Option<&str> {
    match v {
        Value::Object(m) if m.len() == 1 => m.get("result").and_then(Value::as_str),
        _ => None,
    }
}

/// How far `p` reaches in `v`: the pointer text up to there, and the value there.
fn walk<'v>(v: &'v Value, p: &Pointer) -> (String, &'v Value) {
    let mut at = v;
    let mut reached = String::new();
    for t in p.tokens() {
        let next = match at {
            Value::Object(m) => m.get(t),
            Value::Array(a) => super::pointer::array_index(t).and_then(|i| a.get(i)),
            _ => None,
        };
        let Some(n) = next else {
            break;
        };
        reached.push('/');
        reached.push_str(&t.replace('~', "~0").replace('/', "~1"));
        at = n;
    }
    (reached, at)
}

/// A key as a note shows it: terminal-safe, at most `KEY_SHOWN_LEN_MAX` bytes.
fn shortened(k: &str) -> String {
    let safe = crate::receipt::terminal_safe(k).into_owned();
    if safe.len() <= KEY_SHOWN_LEN_MAX {
        return safe;
    }
    let mut cut = KEY_SHOWN_LEN_MAX;
    while !safe.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}…", &safe[..cut])
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

    #[test]
    fn the_python_sdks_result_wrapper_of_json_text_is_read_and_a_part_can_be_forced() {
        let text = "{\"items\": [{\"id\": 1}, {\"id\": 2}, {\"id\": 3}], \"next\": null}";
        let wrapped = json!({"structuredContent": {"result": text},
            "content": [{"type": "text", "text": "{\"items\": [], \"next\": \"t\"}"}]});
        check(wrapped.clone(), Ok((3, None, ResultPart::Wrapped)));
        let m = mapping();
        for (from, want) in [
            (ResultFrom::Wrapped, Ok(3)),
            (ResultFrom::Text, Ok(0)),
            (ResultFrom::Structured, Err("names nothing")),
        ] {
            let got = m
                .map_tool_result_from(&wrapped, 100, 1 << 20, &Position::First, from)
                .map(|(p, _)| p.items.len())
                .map_err(|e| e.to_string());
            match (got, want) {
                (Ok(n), Ok(w)) => assert_eq!(n, w, "{from:?}"),
                (Err(e), Err(w)) => assert!(e.contains(w), "{from:?}: {e}"),
                (got, want) => panic!("{from:?}: {got:?} vs {want:?}"),
            }
        }
        // Structured content that holds the items wins over the wrapper's shape.
        check(
            json!({"structuredContent": {"items": [{"id": 1}], "result": "x"}}),
            Ok((1, None, ResultPart::Structured)),
        );
        let e = m
            .map_tool_result_from(
                &json!({"content": []}),
                1,
                64,
                &Position::First,
                ResultFrom::Wrapped,
            )
            .unwrap_err();
        assert!(e.to_string().contains("not {\"result\": STRING}"), "{e}");
    }

    #[test]
    fn a_pointer_that_names_nothing_is_told_the_keys_that_were_there() {
        let m = mapping();
        for (result, note) in [
            (
                json!({"structuredContent": {"tickets": [], "cursor": null}}),
                "the structuredContent holds the keys \"tickets\", \"cursor\" at \"\"",
            ),
            (
                json!({"structuredContent": {"result": "{\"data\": {\"rows\": []}}"}}),
                "the JSON text of structuredContent.result holds the keys \"data\" at \"\"",
            ),
            (
                json!({"content": [{"type": "text", "text": "[1, 2]"}]}),
                "the JSON text of the first text block holds an array, not an object at \"\"",
            ),
        ] {
            let e = m
                .map_tool_result(&result, 10, 1 << 20, &Position::First)
                .unwrap_err();
            assert_eq!(
                m.keys_note(&result, ResultFrom::Auto, &e).as_deref(),
                Some(note),
                "{result}"
            );
        }
        let deep = Mapping::from_config(json!({"items": "/data/rows/items"}).as_object().unwrap())
            .unwrap();
        let result = json!({"structuredContent": {"data": {"rows": {"a": 1, "b": 2}}}});
        let e = deep
            .map_tool_result(&result, 10, 1 << 20, &Position::First)
            .unwrap_err();
        assert_eq!(
            deep.keys_note(&result, ResultFrom::Auto, &e).as_deref(),
            Some("the structuredContent holds the keys \"a\", \"b\" at \"/data/rows\"")
        );
    }
}
