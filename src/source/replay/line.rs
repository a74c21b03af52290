//! One replay line, parsed straight from its JSON text into typed values (docs/REFERENCE.md §4).
//!
//! Owns the line's grammar: the request key (`cursor` or `after`), the answer (a page or an
//! `error`), `delay_ms`. Items are parsed by `items` without a generic JSON tree. Two modes:
//! [`Mode::Validate`] checks everything and keeps no item (the indexing pass over the whole
//! file), [`Mode::Collect`] keeps what a page needs (a fetch). Both modes accept exactly the
//! same lines, so a line that passed indexing parses when fetched.
//!
//! Strict: a duplicate key anywhere in the line is refused (top level, item objects,
//! generators, the `query`, values skipped inside odd IDs), as is an unknown key; the `query`
//! is read through `json::Strict<false>` (exact integers only). Errors name the field.

use std::fmt;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde::Deserializer;
use serde_json::Value;

use super::items::{Items, ItemsSeed, ITEMS_KEPT_MAX};
use crate::json::{Strict, JSON_DEPTH_MAX};

/// Milliseconds one line may ask the source to wait.
pub(crate) const DELAY_MS_MAX: u64 = 3_600_000;

/// Whether a parse keeps the items or only checks them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mode {
    /// Check every field, keep no item and expand no generator.
    Validate,
    /// Keep what the page needs (items capped one past the page bound).
    Collect,
}

/// The request a line answers.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) enum Key {
    /// `"cursor": null` (the first page) or `"cursor": "c"`.
    Cursor(Option<String>),
    /// `"after": KEY` (a `high_water` request); an integer key in its decimal form.
    After(String),
}

/// A line's failure answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ErrorKind {
    Timeout,
    ServerError,
    ExpiredCursor,
    Forbidden,
}

/// The page fields of a line, before a generator is expanded.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct PageParts {
    pub(super) items: Items,
    pub(super) next: Option<String>,
    pub(super) complete: Option<bool>,
    pub(super) snapshot: Option<String>,
    pub(super) query: Option<Value>,
    pub(super) truncated: bool,
}

/// What a line answers.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Answer {
    Page(PageParts),
    Error(ErrorKind),
}

/// One parsed line.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Parsed {
    pub(super) key: Key,
    pub(super) answer: Answer,
    pub(super) delay_ms: u64,
}

/// Why a line is refused: the 1-based byte column where the parser stopped, and the problem
/// naming the field, without the position (so it is printed once).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct LineError {
    pub(super) column: usize,
    pub(super) problem: String,
}

/// Parses one line (without its line break).
pub(super) fn parse(line: &[u8], mode: Mode) -> Result<Parsed, LineError> {
    // One UTF-8 check of the whole line, so the parser need not check every string again
    // (serde_json's `from_str` reader trusts its input's UTF-8): twice the speed on lines
    // of short string IDs.
    let text = std::str::from_utf8(line).map_err(|e| LineError {
        column: e.valid_up_to() + 1,
        problem: "the line is not UTF-8".to_owned(),
    })?;
    // Items are at most one more than the commas of the line: sizing the list once saves
    // growing it (a copy of the page's items at every doubling) on every fetch. Over-sized
    // for items with labels, and never past the page bound.
    let items_capacity = match mode {
        Mode::Validate => 0,
        Mode::Collect => commas(line).saturating_add(1).min(ITEMS_KEPT_MAX),
    };
    let mut de = serde_json::Deserializer::from_str(text);
    let parsed = LineSeed {
        mode,
        items_capacity,
    }
    .deserialize(&mut de)
    .map_err(|e| line_error(&e))?;
    de.end().map_err(|e| line_error(&e))?;
    Ok(parsed)
}

/// The commas of a line. Summed per 64 bytes as a `u8` (at most 64, so the wrapping sum is
/// exact), which vectorizes; a plain `filter().count()` widens every byte, and a checked sum
/// (`sum::<u8>()` under the build's overflow checks) does not vectorize: ~5 instructions a
/// byte.
fn commas(line: &[u8]) -> usize {
    line.chunks(64)
        .map(|c| {
            usize::from(
                c.iter()
                    .fold(0u8, |n, b| n.wrapping_add(u8::from(*b == b','))),
            )
        })
        .sum()
}

/// serde_json appends " at line L column C" to its messages; the position is kept apart.
fn line_error(e: &serde_json::Error) -> LineError {
    let problem = without_position(&e.to_string()).to_owned();
    LineError {
        column: e.column(),
        problem: if e.is_syntax() || e.is_eof() {
            format!("malformed JSON: {problem}")
        } else {
            problem
        },
    }
}

fn without_position(message: &str) -> &str {
    match message.rfind(" at line ") {
        Some(i) => &message[..i],
        None => message,
    }
}

/// The line's keys, in the order of docs/REFERENCE.md §4.
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

struct LineSeed {
    mode: Mode,
    items_capacity: usize,
}

impl<'de> DeserializeSeed<'de> for LineSeed {
    type Value = Parsed;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Parsed, D::Error> {
        d.deserialize_any(self)
    }
}

fn wrong<E: de::Error>(key: &str, wants: &str) -> E {
    E::custom(format_args!("field {key:?} must be {wants}"))
}

impl<'de> Visitor<'de> for LineSeed {
    type Value = Parsed;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object (a replay line)")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Parsed, A::Error> {
        let mut f = Fields::default();
        // Keys seen so far, one bit per index of LINE_KEYS: a second one is refused before
        // its value is read, so the error points at the key.
        let mut seen = 0u32;
        const _: () = assert!(LINE_KEYS.len() <= 32);
        while let Some(idx) = map.next_key_seed(KeySeed {
            names: LINE_KEYS,
            context: Context::Line,
        })? {
            let key = LINE_KEYS[idx];
            if seen & (1 << idx) != 0 {
                return Err(de::Error::custom(format_args!("duplicate key {key:?}")));
            }
            seen |= 1 << idx;
            let scalar = |map: &mut A, wants| {
                map.next_value_seed(ScalarSeed {
                    key,
                    wants,
                    context: Context::Line,
                })
            };
            match key {
                "cursor" => f.cursor = Some(string_or_null(key, scalar(&mut map, STR_OR_NULL)?)?),
                "after" => {
                    let wants = "a string or an integer";
                    f.after = Some(match scalar(&mut map, wants)? {
                        Scalar::Str(s) => s,
                        Scalar::U64(n) => n.to_string(),
                        Scalar::I64(n) => n.to_string(),
                        _ => return Err(wrong(key, wants)),
                    });
                }
                "items" => {
                    f.items = Some(map.next_value_seed(ItemsSeed {
                        mode: self.mode,
                        capacity: self.items_capacity,
                    })?);
                }
                "next" => f.next = string_or_null(key, scalar(&mut map, STR_OR_NULL)?)?,
                "snapshot" => f.snapshot = string_or_null(key, scalar(&mut map, STR_OR_NULL)?)?,
                "complete" => f.complete = bool_or_null(key, scalar(&mut map, BOOL_OR_NULL)?)?,
                "truncated" => {
                    f.truncated =
                        bool_or_null(key, scalar(&mut map, BOOL_OR_NULL)?)?.unwrap_or(false);
                }
                "delay_ms" => {
                    let wants = "an integer from 0 to 3600000";
                    f.delay_ms = match scalar(&mut map, wants)? {
                        Scalar::Null => 0,
                        Scalar::U64(n) if n <= DELAY_MS_MAX => n,
                        _ => return Err(wrong(key, wants)),
                    };
                }
                "error" => {
                    let wants =
                        "\"timeout\", \"server_error\", \"expired_cursor\" or \"forbidden\"";
                    f.error = Some(match scalar(&mut map, wants)? {
                        Scalar::Str(s) => match s.as_str() {
                            "timeout" => ErrorKind::Timeout,
                            "server_error" => ErrorKind::ServerError,
                            "expired_cursor" => ErrorKind::ExpiredCursor,
                            "forbidden" => ErrorKind::Forbidden,
                            _ => return Err(wrong(key, wants)),
                        },
                        _ => return Err(wrong(key, wants)),
                    });
                }
                _ => {
                    // "query": strict JSON, so the echo compared with the contract is exact.
                    let v = map.next_value::<Strict<false>>().map_err(|e| {
                        de::Error::custom(format_args!(
                            "field \"query\": {}",
                            without_position(&e.to_string())
                        ))
                    })?;
                    f.query = Some(v.0).filter(|v| !v.is_null());
                }
            }
        }
        f.into_parsed()
    }
}

const STR_OR_NULL: &str = "a string or null";
const BOOL_OR_NULL: &str = "a boolean or null";

fn string_or_null<E: de::Error>(key: &str, s: Scalar) -> Result<Option<String>, E> {
    match s {
        Scalar::Null => Ok(None),
        Scalar::Str(s) => Ok(Some(s)),
        _ => Err(wrong(key, STR_OR_NULL)),
    }
}

fn bool_or_null<E: de::Error>(key: &str, s: Scalar) -> Result<Option<bool>, E> {
    match s {
        Scalar::Null => Ok(None),
        Scalar::Bool(b) => Ok(Some(b)),
        _ => Err(wrong(key, BOOL_OR_NULL)),
    }
}

/// A line's fields as its keys gave them (a key absent and a key null read alike, except
/// `cursor`, whose null is the first page's request).
#[derive(Default)]
struct Fields {
    cursor: Option<Option<String>>,
    after: Option<String>,
    items: Option<Items>,
    next: Option<String>,
    complete: Option<bool>,
    snapshot: Option<String>,
    query: Option<Value>,
    truncated: bool,
    delay_ms: u64,
    error: Option<ErrorKind>,
}

impl Fields {
    /// The line: its request key (exactly one of `cursor` and `after`) and its answer.
    fn into_parsed<E: de::Error>(self) -> Result<Parsed, E> {
        let key = match (self.cursor, self.after) {
            (Some(_), Some(_)) => {
                return Err(de::Error::custom(
                    "a line has either \"cursor\" or \"after\", not both",
                ))
            }
            (Some(c), None) => Key::Cursor(c),
            (None, Some(a)) => Key::After(a),
            (None, None) => {
                return Err(de::Error::custom(
                    "a line needs a \"cursor\" (or \"after\") key",
                ))
            }
        };
        let answer = match self.error {
            Some(kind) => Answer::Error(kind),
            None => Answer::Page(PageParts {
                items: self.items.unwrap_or(Items::List(Vec::new())),
                next: self.next,
                complete: self.complete,
                snapshot: self.snapshot,
                query: self.query,
                truncated: self.truncated,
            }),
        };
        Ok(Parsed {
            key,
            answer,
            delay_ms: self.delay_ms,
        })
    }
}

/// Where in a line a value is, to name it in errors.
#[derive(Debug, Clone, Copy)]
pub(super) enum Context {
    /// The line's own fields.
    Line,
    /// The `index`-th element of `items`.
    Item(usize),
    /// The `{"range": ..., "prefix": ...}` generator.
    Generator,
}

impl fmt::Display for Context {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Context::Line => Ok(()),
            Context::Item(i) => write!(f, "items[{i}]: "),
            Context::Generator => f.write_str("items: "),
        }
    }
}

/// A key of an object whose keys are known: its index in `names`. An unknown key is refused,
/// named with its context.
pub(super) struct KeySeed {
    pub(super) names: &'static [&'static str],
    pub(super) context: Context,
}

impl<'de> DeserializeSeed<'de> for KeySeed {
    type Value = usize;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<usize, D::Error> {
        d.deserialize_str(self)
    }
}

impl Visitor<'_> for KeySeed {
    type Value = usize;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a key")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<usize, E> {
        self.names.iter().position(|n| *n == v).ok_or_else(|| {
            let shown: String = v.chars().take(64).collect();
            match crate::contract::closest(v, self.names) {
                Some(meant) => E::custom(format_args!(
                    "{}unknown key {shown:?}; did you mean {meant:?}?",
                    self.context
                )),
                None => E::custom(format_args!(
                    "{}unknown key {shown:?} (known: {})",
                    self.context,
                    self.names.join(", ")
                )),
            }
        })
    }
}

/// A scalar field's value; an array or an object where a scalar belongs is refused at once
/// with the field's name.
#[derive(Debug)]
pub(super) enum Scalar {
    Null,
    Bool(bool),
    U64(u64),
    I64(i64),
    /// A number with a fraction or an exponent, or an integer past 64 bits.
    Float,
    Str(String),
}

pub(super) struct ScalarSeed {
    pub(super) key: &'static str,
    pub(super) wants: &'static str,
    pub(super) context: Context,
}

impl ScalarSeed {
    /// The error for a value of the wrong type.
    pub(super) fn wrong<E: de::Error>(&self) -> E {
        E::custom(format_args!(
            "{}field {:?} must be {}",
            self.context, self.key, self.wants
        ))
    }
}

impl<'de> DeserializeSeed<'de> for ScalarSeed {
    type Value = Scalar;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Scalar, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ScalarSeed {
    type Value = Scalar;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}field {:?} to be {}",
            self.context, self.key, self.wants
        )
    }
    fn visit_unit<E: de::Error>(self) -> Result<Scalar, E> {
        Ok(Scalar::Null)
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Scalar, E> {
        Ok(Scalar::Bool(v))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Scalar, E> {
        Ok(Scalar::U64(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Scalar, E> {
        Ok(Scalar::I64(v))
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Scalar, E> {
        Ok(Scalar::Float)
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Scalar, E> {
        Ok(Scalar::Str(v.to_owned()))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, _seq: A) -> Result<Scalar, A::Error> {
        Err(self.wrong())
    }
    fn visit_map<A: MapAccess<'de>>(self, _map: A) -> Result<Scalar, A::Error> {
        Err(self.wrong())
    }
}

/// Reads and discards any JSON value, still refusing duplicate keys and nesting past
/// `JSON_DEPTH_MAX` (for values kept only as a short description, such as an ID that is an
/// array). Memory: the keys of the object being read, bounded by the line.
#[derive(Clone, Copy)]
pub(super) struct Skip {
    pub(super) depth: u32,
}

impl<'de> DeserializeSeed<'de> for Skip {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl Skip {
    fn child<E: de::Error>(self) -> Result<Skip, E> {
        if self.depth >= JSON_DEPTH_MAX {
            return Err(E::custom(format_args!(
                "nesting deeper than {JSON_DEPTH_MAX} levels"
            )));
        }
        Ok(Skip {
            depth: self.depth + 1,
        })
    }
}

impl<'de> Visitor<'de> for Skip {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let child = self.child()?;
        // Bounded by the line, which the reader bounds.
        while seq.next_element_seed(child)?.is_some() {}
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let child = self.child()?;
        let mut seen = std::collections::HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            if seen.contains(&key) {
                let shown: String = key.chars().take(64).collect();
                return Err(de::Error::custom(format_args!("duplicate key {shown:?}")));
            }
            seen.insert(key);
            map.next_value_seed(child)?;
        }
        Ok(())
    }
}
