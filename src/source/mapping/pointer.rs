//! JSON pointers (RFC 6901), parsed once at configuration time, and the value tests of labels.
//!
//! A pointer is split into its reference tokens when the configuration is read, so mapping a
//! page walks tokens instead of re-parsing text for every item. Pure: no IO.
//! Invariant: a `Pointer` has at most `JSON_DEPTH_MAX` tokens (deeper values cannot exist in a
//! strictly parsed response) and its text is at most `POINTER_LEN_MAX` bytes.

use serde_json::Value;

use crate::json::JSON_DEPTH_MAX;

/// Bytes of one pointer's text.
pub const POINTER_LEN_MAX: usize = 1024;

/// A JSON pointer: `""` (the whole value) or `/token/token...`, with `~1` for `/` and `~0`
/// for `~` inside a token. A token walks into an object by key, or into an array by a decimal
/// index without leading zeros.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pointer {
    text: String,
    tokens: Vec<String>,
}

impl Pointer {
    /// Parses a pointer.
    ///
    /// # Errors
    /// A sentence saying what is wrong: not starting with `/`, a bad `~` escape, too long,
    /// too deep.
    pub fn parse(text: &str) -> Result<Pointer, String> {
        if text.len() > POINTER_LEN_MAX {
            return Err(format!(
                "a pointer of {} bytes is longer than the bound of {POINTER_LEN_MAX}",
                text.len()
            ));
        }
        if text.is_empty() {
            return Ok(Pointer {
                text: String::new(),
                tokens: Vec::new(),
            });
        }
        let Some(rest) = text.strip_prefix('/') else {
            return Err(format!(
                "{text:?} is not a JSON pointer: it must be \"\" or start with \"/\""
            ));
        };
        let mut tokens = Vec::new();
        for raw in rest.split('/') {
            if tokens.len() >= JSON_DEPTH_MAX as usize {
                return Err(format!(
                    "{text:?} is deeper than {JSON_DEPTH_MAX} levels, which no response can have"
                ));
            }
            tokens.push(
                unescape(raw).ok_or_else(|| {
                    format!("{text:?}: \"~\" must be followed by 0 or 1 (RFC 6901)")
                })?,
            );
        }
        Ok(Pointer {
            text: text.to_owned(),
            tokens,
        })
    }

    /// The pointer as written.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The pointer's reference tokens, unescaped.
    pub(super) fn tokens(&self) -> &[String] {
        &self.tokens
    }

    /// The value the pointer names in `v`, if there is one.
    #[must_use]
    pub fn get<'v>(&self, v: &'v Value) -> Option<&'v Value> {
        let mut at = v;
        for t in &self.tokens {
            at = match at {
                Value::Object(m) => m.get(t)?,
                Value::Array(a) => a.get(array_index(t)?)?,
                _ => return None,
            };
        }
        Some(at)
    }
}

fn unescape(raw: &str) -> Option<String> {
    if !raw.contains('~') {
        return Some(raw.to_owned());
    }
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c == '~' {
            match chars.next() {
                Some('0') => out.push('~'),
                Some('1') => out.push('/'),
                _ => return None,
            }
        } else {
            out.push(c);
        }
    }
    Some(out)
}

/// RFC 6901 array index: `0`, or decimal digits without a leading zero (no sign, no `-`).
pub(super) fn array_index(t: &str) -> Option<usize> {
    if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) || (t.len() > 1 && t.starts_with('0'))
    {
        return None;
    }
    t.parse().ok()
}

/// The name of a JSON value's type, for messages that must not repeat the value itself.
#[must_use]
pub fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A label's test of the value at its pointer.
#[derive(Debug, Clone, PartialEq)]
pub enum Test {
    /// The value is present and equal (numbers by value: `3` equals `3.0`).
    Eq(Value),
    /// The value is absent or not equal: a record without the field is labelled.
    Ne(Value),
    /// The value is present and equal to one of these.
    In(Vec<Value>),
    /// `true`: present and not null; `false`: absent or null.
    Exists(bool),
    /// `true`: `true`, a non-zero number, a non-empty string, array or object; `false`: the
    /// rest, absent included.
    Truthy(bool),
}

impl Test {
    /// Whether the value at the pointer (`None` when absent) passes the test.
    #[must_use]
    pub fn holds(&self, v: Option<&Value>) -> bool {
        match self {
            Test::Eq(want) => v.is_some_and(|v| json_eq(v, want)),
            Test::Ne(want) => !v.is_some_and(|v| json_eq(v, want)),
            Test::In(set) => v.is_some_and(|v| set.iter().any(|w| json_eq(v, w))),
            Test::Exists(want) => v.is_some_and(|v| !v.is_null()) == *want,
            Test::Truthy(want) => v.is_some_and(truthy) == *want,
        }
    }
}

fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

/// JSON equality with numbers compared by value at the top level: integers exactly, otherwise
/// as `f64` (`3`, `3.0` and `3e0` are equal; `2^53 + 1` and `2^53` are not).
fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            if let (Some(x), Some(y)) = (x.as_i64(), y.as_i64()) {
                return x == y;
            }
            if let (Some(x), Some(y)) = (x.as_u64(), y.as_u64()) {
                return x == y;
            }
            if x.is_f64() || y.is_f64() {
                return x.as_f64() == y.as_f64();
            }
            // One is an i64 below zero and the other a u64 above i64::MAX.
            false
        }
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // Tests: a panic is the failure report.
    use super::*;
    use serde_json::json;

    #[test]
    fn pointers_follow_rfc_6901() {
        let doc = json!({"a/b": {"m~n": [10, 20]}, "": 1, "l": [{"id": 7}]});
        let get = |p: &str| Pointer::parse(p).unwrap().get(&doc).cloned();
        assert_eq!(get(""), Some(doc.clone()));
        assert_eq!(get("/a~1b/m~0n/1"), Some(json!(20)));
        assert_eq!(get("/"), Some(json!(1)));
        assert_eq!(get("/l/0/id"), Some(json!(7)));
        for absent in ["/l/01/id", "/l/+0", "/l/-", "/l/1", "/x", "/l/0/id/deeper"] {
            assert_eq!(get(absent), None, "{absent}");
        }
        assert!(Pointer::parse("items").is_err());
        assert!(Pointer::parse("/a~2").is_err());
        assert!(Pointer::parse(&"/a".repeat(65)).is_err());
        assert!(Pointer::parse(&"/".repeat(POINTER_LEN_MAX + 1)).is_err());
    }

    #[test]
    fn label_tests_hold_as_documented() {
        let three = json!(3);
        let cases: &[(Test, Option<Value>, bool)] = &[
            (Test::Eq(json!(3)), Some(json!(3.0)), true),
            (Test::Eq(json!(3)), Some(json!("3")), false),
            (Test::Eq(json!(3)), None, false),
            (Test::Ne(json!(3)), None, true),
            (Test::Ne(json!(3)), Some(json!(2)), true),
            (Test::Ne(json!(3)), Some(three.clone()), false),
            (Test::Eq(json!(u64::MAX)), Some(json!(-1)), false),
            (Test::In(vec![json!("a"), json!(2)]), Some(json!(2)), true),
            (Test::In(vec![json!("a")]), None, false),
            (Test::Exists(true), Some(Value::Null), false),
            (Test::Exists(false), None, true),
            (Test::Exists(true), Some(json!(0)), true),
            (Test::Truthy(true), Some(json!(0)), false),
            (Test::Truthy(true), Some(json!("x")), true),
            (Test::Truthy(false), Some(json!([])), true),
            (Test::Truthy(false), None, true),
        ];
        for (test, v, want) in cases {
            assert_eq!(test.holds(v.as_ref()), *want, "{test:?} on {v:?}");
        }
    }
}
