//! Pointer-directed strict parsing: reads a response body under the rules of `crate::json`
//! (duplicate keys refused at any depth, nesting bounded by `JSON_DEPTH_MAX`, trailing
//! characters refused, any number) but builds only the values the mapping's pointers can
//! reach. Everything else is validated and skipped without allocating, which is most of the
//! cost of a page (see benches/mapping.rs).
//!
//! Invariant (checked by the unit tests and the `mapping` fuzz target): for every input,
//! `parse` fails exactly when `json::parse_slice(bytes, Numbers::Any)` fails, and every
//! pointer of the mapping resolves in its result to the same value as in the full parse.
//! A value a pointer names is built in full (`Build`, the rules of `json` with the depth
//! counted from the document's root); an object on the way to one
//! keeps only the keys on the way; an array on the way keeps its elements up to the highest
//! index on the way (the rest are skipped, so an index past them names nothing in both); the
//! items array keeps every element (up to one past `ITEMS_PER_PAGE_MAX`, all the mapping reads),
//! each reduced by the item pointers.

use std::borrow::Cow;
use std::collections::HashSet;
use std::fmt;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde::Deserializer;

use serde_json::{Map, Value};

use super::pointer::{array_index, Pointer};
use crate::contract::ITEMS_PER_PAGE_MAX;
use crate::json::{JsonError, JSON_DEPTH_MAX};

/// The paths to keep, as a tree of pointer tokens.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Trie {
    /// The whole value here is named by a pointer: build it in full.
    whole: bool,
    /// Paths below, by token.
    children: Vec<(String, Trie)>,
    /// This is the items array: every element is reduced by this trie.
    elements: Option<Box<Trie>>,
}

impl Trie {
    /// Adds the path of `p` below `prefix`.
    pub(super) fn add(&mut self, prefix: &[String], p: &Pointer) {
        self.node(prefix.iter().chain(p.tokens())).whole = true;
    }

    /// Marks the array at `prefix` + `p` as the items array, its elements reduced by `item`.
    pub(super) fn add_items(&mut self, prefix: &[String], p: &Pointer, item: Trie) {
        self.node(prefix.iter().chain(p.tokens())).elements = Some(Box::new(item));
    }

    fn node<'a>(&mut self, tokens: impl Iterator<Item = &'a String>) -> &mut Trie {
        let mut at = self;
        for t in tokens {
            let i = match at.children.iter().position(|(k, _)| k == t) {
                Some(i) => i,
                None => {
                    at.children.push((t.clone(), Trie::default()));
                    at.children.len() - 1
                }
            };
            at = &mut at.children[i].1;
        }
        at
    }

    fn child(&self, key: &str) -> Option<&Trie> {
        self.children.iter().find(|(k, _)| k == key).map(|(_, t)| t)
    }

    /// The highest array index a child names, if any.
    fn max_index(&self) -> Option<usize> {
        self.children
            .iter()
            .filter_map(|(k, _)| array_index(k))
            .max()
    }
}

/// Parses `bytes` strictly, keeping only what `trie` names.
pub(super) fn parse(bytes: &[u8], trie: &Trie) -> Result<Value, JsonError> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let v = Select { trie, depth: 0 }
        .deserialize(&mut de)
        .map_err(|e| json_error(&e))?;
    de.end().map_err(|e| json_error(&e))?;
    Ok(v)
}

fn json_error(e: &serde_json::Error) -> JsonError {
    // serde_json appends " at line L column C"; keep the message alone, as `json` does.
    let full = e.to_string();
    let message = match full.rfind(" at line ") {
        Some(i) => full[..i].to_owned(),
        None => full,
    };
    JsonError {
        line: e.line(),
        column: e.column(),
        message,
    }
}

fn too_deep<E: de::Error>() -> E {
    E::custom(format_args!("nesting deeper than {JSON_DEPTH_MAX} levels"))
}

fn duplicate<E: de::Error>(key: &str) -> E {
    E::custom(format_args!("duplicate key {key:?}"))
}

/// The keys of one object so far, to refuse a duplicate: a short list for the usual small
/// object (no hashing, no allocation past the list), a set past `SEEN_LINEAR_MAX` keys.
struct Seen<'de> {
    few: [Option<Cow<'de, str>>; SEEN_LINEAR_MAX],
    n_few: usize,
    many: HashSet<Cow<'de, str>>,
}

/// Keys kept in a list (on the stack) before a `Seen` switches to a set.
const SEEN_LINEAR_MAX: usize = 16;

impl<'de> Seen<'de> {
    fn new() -> Seen<'de> {
        Seen {
            few: [const { None }; SEEN_LINEAR_MAX],
            n_few: 0,
            many: HashSet::new(),
        }
    }

    fn contains(&self, key: &str) -> bool {
        self.few[..self.n_few]
            .iter()
            .any(|k| k.as_deref() == Some(key))
            || self.many.contains(key)
    }

    fn insert(&mut self, key: Cow<'de, str>) {
        if self.n_few < SEEN_LINEAR_MAX {
            self.few[self.n_few] = Some(key);
            self.n_few += 1;
        } else {
            self.many.insert(key);
        }
    }
}

/// A key, borrowed from the input when it has no escapes.
struct Key<'de>(Cow<'de, str>);

impl<'de> de::Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a key")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v)))
            }
        }
        d.deserialize_str(V)
    }
}

/// Builds the reduced value of one node.
#[derive(Clone, Copy)]
struct Select<'t> {
    trie: &'t Trie,
    depth: u32,
}

impl<'de> DeserializeSeed<'de> for Select<'_> {
    type Value = Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        if self.trie.whole {
            return d.deserialize_any(Build { depth: self.depth });
        }
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Select<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        if self.depth >= JSON_DEPTH_MAX {
            return Err(too_deep());
        }
        let depth = self.depth + 1;
        let mut out = Vec::new();
        if let Some(item) = self.trie.elements.as_deref() {
            // Bounded by the input's size, which the caller bounds before parsing; past one
            // item over the page bound nothing more is kept (the mapping reads no further).
            let keep = ITEMS_PER_PAGE_MAX as usize + 1;
            loop {
                if out.len() < keep {
                    match seq.next_element_seed(Select { trie: item, depth })? {
                        Some(v) => out.push(v),
                        None => break,
                    }
                } else if seq.next_element_seed(Skip { depth })?.is_none() {
                    break;
                }
            }
            return Ok(Value::Array(out));
        }
        let last = self.trie.max_index();
        let mut i = 0usize;
        loop {
            let on_the_way = last.is_some_and(|m| i <= m);
            if on_the_way {
                let seed = self.trie.child(&i.to_string());
                let v = match seed {
                    Some(trie) => seq.next_element_seed(Select { trie, depth })?,
                    None => seq.next_element_seed(Skip { depth })?.map(|()| Value::Null),
                };
                match v {
                    Some(v) => out.push(v),
                    None => break,
                }
            } else if seq.next_element_seed(Skip { depth })?.is_none() {
                break;
            }
            i = i.saturating_add(1);
        }
        Ok(Value::Array(out))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        if self.depth >= JSON_DEPTH_MAX {
            return Err(too_deep());
        }
        let depth = self.depth + 1;
        let mut out = Map::new();
        let mut seen = Seen::new();
        while let Some(Key(key)) = map.next_key::<Key<'de>>()? {
            if seen.contains(&key) {
                return Err(duplicate(&key));
            }
            match self.trie.child(&key) {
                Some(trie) => {
                    let v = map.next_value_seed(Select { trie, depth })?;
                    out.insert(key.clone().into_owned(), v);
                }
                None => map.next_value_seed(Skip { depth })?,
            }
            seen.insert(key);
        }
        Ok(Value::Object(out))
    }
}

/// Builds a whole value under the rules of `json` (as `json::parse_slice` with
/// `Numbers::Any` would), its depth counted from the document's root, so that the first error
/// of the input is the same one.
#[derive(Clone, Copy)]
struct Build {
    depth: u32,
}

impl<'de> DeserializeSeed<'de> for Build {
    type Value = Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Build {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        if self.depth >= JSON_DEPTH_MAX {
            return Err(too_deep());
        }
        let child = Build {
            depth: self.depth + 1,
        };
        let mut out = Vec::new();
        // Bounded by the input's size, which the caller bounds before parsing.
        while let Some(v) = seq.next_element_seed(child)? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        if self.depth >= JSON_DEPTH_MAX {
            return Err(too_deep());
        }
        let child = Build {
            depth: self.depth + 1,
        };
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if out.contains_key(&key) {
                return Err(duplicate(&key));
            }
            let v = map.next_value_seed(child)?;
            out.insert(key, v);
        }
        Ok(Value::Object(out))
    }
}

/// Validates a value under the rules of `json` and keeps nothing of it.
#[derive(Clone, Copy)]
struct Skip {
    depth: u32,
}

impl<'de> DeserializeSeed<'de> for Skip {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Skip {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_borrowed_str<E: de::Error>(self, _: &'de str) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        if self.depth >= JSON_DEPTH_MAX {
            return Err(too_deep());
        }
        let child = Skip {
            depth: self.depth + 1,
        };
        // Bounded by the input's size.
        while seq.next_element_seed(child)?.is_some() {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        if self.depth >= JSON_DEPTH_MAX {
            return Err(too_deep());
        }
        let child = Skip {
            depth: self.depth + 1,
        };
        let mut seen = Seen::new();
        while let Some(Key(key)) = map.next_key::<Key<'de>>()? {
            if seen.contains(&key) {
                return Err(duplicate(&key));
            }
            map.next_value_seed(child)?;
            seen.insert(key);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // Tests: a panic is the failure report.
    use super::*;
    use crate::json::{self, Numbers};
    use crate::source::mapping::{Mapping, Position};
    use serde_json::json;

    fn mapping(cfg: Value) -> Mapping {
        Mapping::from_config(cfg.as_object().unwrap()).unwrap()
    }

    /// The select parse fails exactly when the full parse fails, and maps to the same page.
    #[track_caller]
    fn check_same(m: &Mapping, text: &str) {
        let full = json::parse_slice(text.as_bytes(), Numbers::Any);
        let reduced = parse(text.as_bytes(), &m.select);
        match (&full, &reduced) {
            (Ok(v), Ok(_)) => {
                let want = m.map_value(v, text.len() as u64, &Position::First);
                let got = m.map_body(text.as_bytes(), u64::MAX, &Position::First);
                assert_eq!(got, want, "{text}");
            }
            (Err(a), Err(b)) => assert_eq!(a.message, b.message, "{text}"),
            _ => panic!("{text}: full {full:?}, reduced {reduced:?}"),
        }
    }

    #[test]
    fn select_parse_agrees_with_the_full_strict_parse() {
        let deep = |n: usize| "[".repeat(n) + &"]".repeat(n);
        let m = mapping(
            json!({"complete": "/done", "total": "/meta/total", "query": "/q",
            "labels": {"v": {"pointer": "/tags/1", "eq": "x"}}, "content": ["/body"]}),
        );
        let cases = [
            r#"{"items": [{"id": 1, "tags": ["a", "x"], "body": {"k": [1, 2]}}], "done": true}"#
                .to_owned(),
            r#"{"items": [{"id": 1}], "skip": {"a": 1, "a": 2}}"#.to_owned(),
            r#"{"items": [{"id": 1, "skip": [{"b": 1, "b": 1}]}]}"#.to_owned(),
            r#"{"items": [{"id": 1, "id": 2}]}"#.to_owned(),
            r#"{"items": [], "skip": "bad \u12 escape"}"#.to_owned(),
            r#"{"items": [], "skip": "\uD800"}"#.to_owned(),
            r#"{"items": [], "skip": 1e400, "meta": {"total": 3}}"#.to_owned(),
            r#"{"items": [], "q": {"f": [1, {"g": null}]}, "meta": 5}"#.to_owned(),
            r#"{"items": [{"id": 1, "tags": "notarray"}], "meta": {"total": -1}}"#.to_owned(),
            r#"{"items": {"id": 1}}"#.to_owned(),
            r#"[{"id": 1}]"#.to_owned(),
            r#"{"items": []} x"#.to_owned(),
            r#"{"items": [], "\u0061": 1, "a": 2}"#.to_owned(),
            format!(r#"{{"items": [], "skip": {}}}"#, deep(63)),
            format!(r#"{{"items": [], "skip": {}}}"#, deep(64)),
            format!(r#"{{"items": [], "q": {}}}"#, deep(63)),
            format!(r#"{{"items": [], "q": {}}}"#, deep(64)),
            format!(r#"{{"items": [{{"id": 1, "body": {}}}]}}"#, deep(61)),
            format!(r#"{{"items": [{{"id": 1, "body": {}}}]}}"#, deep(62)),
            format!(r#"{{"items": [{{"id": 1, "tags": [0, {}]}}]}}"#, deep(61)),
            format!(r#"{{"items": [{{"id": 1, "tags": [0, {}]}}]}}"#, deep(62)),
        ];
        let wide = |dup: &str| {
            let keys: Vec<String> = (0..20).map(|i| format!("\"k{i}\": {i}")).collect();
            format!("{{{}, {dup}}}", keys.join(", "))
        };
        let cases = cases.into_iter().chain([
            format!(r#"{{"items": [], "skip": {}}}"#, wide(r#""k3": 0"#)),
            format!(r#"{{"items": [], "skip": {}}}"#, wide(r#""k20": 0"#)),
            format!(
                r#"{{"items": [{{"id": 1, "w": {}}}]}}"#,
                wide(r#""k19": 0"#)
            ),
            // A duplicate of a kept key past the short list, at the top level.
            format!(
                r#"{{"items": [], "done": false, {}, "done": true}}"#,
                (0..20)
                    .map(|i| format!("\"k{i}\": {i}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ]);
        for text in cases {
            check_same(&m, &text);
        }
        // Found by the fuzzer: a whole value deep in the document must hit the depth bound
        // where the full parse does, before a later syntax error.
        let whole = mapping(json!({"items": "", "id": "", "page_param": "p"}));
        check_same(&whole, &("[[\n\n".to_owned() + &"[".repeat(70) + "#"));
        check_same(&whole, &format!("[{}]", deep(63)));
        check_same(&whole, &format!("[{}]", deep(64)));
        let rooted = mapping(json!({"preset": "relay", "root": "/data/0/c"}));
        for text in [
            r#"{"data": [{"c": {"nodes": [{"id": "a"}], "pageInfo": {"hasNextPage": false, "endCursor": "e"}}}, {"c": 1}]}"#,
            r#"{"data": [1]}"#,
            r#"{"data": {"0": {"c": {"nodes": [], "pageInfo": {"hasNextPage": true}}}}}"#,
            r#"{"data": null, "errors": [{"message": "x"}]}"#,
        ] {
            check_same(&rooted, text);
        }
    }

    #[test]
    fn only_the_named_paths_are_built() {
        let m = mapping(json!({"labels": {"v": {"pointer": "/v", "ne": 3}}}));
        let v = parse(
            br#"{"items": [{"id": 1, "v": 2, "blob": "x"}], "extra": {"a": [1, 2]}, "next_page_token": "n"}"#,
            &m.select,
        )
        .unwrap();
        assert_eq!(
            v,
            json!({"items": [{"id": 1, "v": 2}], "next_page_token": "n"})
        );
    }
}
