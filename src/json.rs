//! Strict JSON input: every JSON text scanledger reads (contracts, replay lines, receipts given
//! to `verify`, source responses) goes through here.
//!
//! `serde_json` alone resolves a duplicate key silently (the last one wins) and turns an integer
//! too large for 64 bits into an `f64`, so two different inputs could read as one value. This
//! module refuses both: a duplicate key is an error naming the key, and under
//! [`Numbers::Integers`] any number that is not an integer in `[-2^63, 2^64)` (a float, `-0`,
//! an exponent, a larger integer) is an error too, so a value that reaches a digest is exact.
//! Nesting is bounded by [`JSON_DEPTH_MAX`]. Pure: no IO; the caller bounds the text's size
//! before parsing.
//!
//! Contracts and config files are read into serde-derived types on top of these rules
//! ([`from_str`]): unknown keys refused, and every error placed and worded alike
//! ([`ConfigError`]: line, column, field path, the key or value meant).

use std::fmt;

mod config;
mod locate;
mod value_de;

pub use config::{closest, field_names, from_str, from_value, split_keys, ConfigError, Problem};

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};

/// Nesting depth of arrays and objects any JSON input may have.
pub const JSON_DEPTH_MAX: u32 = 64;

/// Which numbers an input may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Numbers {
    /// Integers in `[-2^63, 2^64)` only: what contracts, queries and receipts hold.
    Integers,
    /// Any number; floats are kept as `f64` (for source responses, whose other fields we
    /// never digest).
    Any,
}

/// A JSON text that could not be read strictly, with the position `serde_json` reports.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message} at line {line}, column {column}")]
pub struct JsonError {
    /// 1-based line.
    pub line: usize,
    /// 1-based column.
    pub column: usize,
    /// What is wrong, without the position.
    pub message: String,
}

impl JsonError {
    fn from_serde(e: &serde_json::Error) -> JsonError {
        // serde_json appends " at line L column C" to its Display; keep the message alone.
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
}

/// Parses one JSON text strictly.
///
/// ```
/// use scanledger::json::{parse, Numbers};
/// assert!(parse(r#"{"a": 1, "b": [2, 3]}"#, Numbers::Integers).is_ok());
/// let dup = parse(r#"{"a": 1, "a": 2}"#, Numbers::Any).unwrap_err();
/// assert_eq!(dup.message, "duplicate key \"a\"");
/// assert!(parse("100000000000000000000", Numbers::Integers).is_err());
/// assert!(parse("1.5", Numbers::Integers).is_err());
/// assert!(parse("1.5", Numbers::Any).is_ok());
/// ```
///
/// # Errors
/// `JsonError` with the position: malformed JSON, a duplicate key, a number `numbers` refuses,
/// nesting deeper than [`JSON_DEPTH_MAX`], trailing characters.
pub fn parse(text: &str, numbers: Numbers) -> Result<Value, JsonError> {
    parse_slice(text.as_bytes(), numbers)
}

/// [`parse`] over bytes (which must be UTF-8 JSON).
///
/// # Errors
/// As [`parse`].
pub fn parse_slice(bytes: &[u8], numbers: Numbers) -> Result<Value, JsonError> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value = Seed { numbers, depth: 0 }
        .deserialize(&mut de)
        .map_err(|e| JsonError::from_serde(&e))?;
    de.end().map_err(|e| JsonError::from_serde(&e))?;
    Ok(value)
}

/// A `Value` field of a typed (serde-derived) input, read with the rules of this module:
/// duplicate keys refused, numbers per `FLOATS` (false: [`Numbers::Integers`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Strict<const FLOATS: bool>(pub Value);

impl<'de, const FLOATS: bool> Deserialize<'de> for Strict<FLOATS> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let numbers = if FLOATS {
            Numbers::Any
        } else {
            Numbers::Integers
        };
        Seed { numbers, depth: 0 }.deserialize(d).map(Strict)
    }
}

#[derive(Clone, Copy)]
struct Seed {
    numbers: Numbers,
    depth: u32,
}

impl Seed {
    fn child<E: de::Error>(self) -> Result<Seed, E> {
        if self.depth >= JSON_DEPTH_MAX {
            return Err(E::custom(format_args!(
                "nesting deeper than {JSON_DEPTH_MAX} levels"
            )));
        }
        Ok(Seed {
            numbers: self.numbers,
            depth: self.depth + 1,
        })
    }
}

impl<'de> DeserializeSeed<'de> for Seed {
    type Value = Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Seed {
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
        match self.numbers {
            // serde_json hands over a float for any number with a fraction or an exponent,
            // for `-0`, and for an integer outside [-2^63, 2^64): none is exact as an integer.
            Numbers::Integers => Err(E::custom(
                "a number that is not an integer in [-2^63, 2^64) (a fraction, an exponent, -0 or a larger integer) cannot be represented exactly",
            )),
            Numbers::Any => Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number)),
        }
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

    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        self.deserialize(d)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let child = self.child()?;
        let mut out = Vec::new();
        // Bounded by the input's size, which the caller bounds before parsing.
        while let Some(v) = seq.next_element_seed(child)? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let child = self.child()?;
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if out.contains_key(&key) {
                return Err(de::Error::custom(format_args!("duplicate key {key:?}")));
            }
            let v = map.next_value_seed(child)?;
            out.insert(key, v);
        }
        Ok(Value::Object(out))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // Tests: a panic is the failure report.
    use super::*;

    #[track_caller]
    fn check_err(text: &str, numbers: Numbers, want: &str) {
        match parse(text, numbers) {
            Ok(v) => panic!("{text} parsed as {v}"),
            Err(e) => assert!(e.message.contains(want), "{text}: {e}"),
        }
    }

    #[test]
    fn duplicate_keys_are_refused_at_any_depth() {
        check_err(r#"{"a":1,"a":1}"#, Numbers::Any, "duplicate key \"a\"");
        check_err(
            r#"{"x":[{"b":{"c":1,"c":2}}]}"#,
            Numbers::Integers,
            "duplicate key \"c\"",
        );
        // Keys that differ only by an escape are the same key.
        check_err(r#"{"a":1,"\u0061":2}"#, Numbers::Any, "duplicate key");
    }

    #[test]
    fn integers_only_refuses_inexact_numbers() {
        for text in [
            "1.0",
            "1e2",
            "-0",
            "100000000000000000000",
            "-9223372036854775809",
            "1.5e-7",
        ] {
            check_err(text, Numbers::Integers, "cannot be represented exactly");
        }
        for (text, v) in [
            ("18446744073709551615", Value::from(u64::MAX)),
            ("-9223372036854775808", Value::from(i64::MIN)),
            ("0", Value::from(0u64)),
            ("-1", Value::from(-1i64)),
        ] {
            assert_eq!(parse(text, Numbers::Integers), Ok(v));
        }
    }

    #[test]
    fn depth_is_bounded() {
        let ok = "[".repeat(64) + &"]".repeat(64);
        assert!(parse(&ok, Numbers::Any).is_ok());
        let deep = "[".repeat(65) + &"]".repeat(65);
        check_err(&deep, Numbers::Any, "nesting deeper than 64");
    }

    #[test]
    fn errors_carry_the_position_once() {
        let e = parse("{\n  \"a\": 1,\n  \"a\": 2}", Numbers::Any).unwrap_err();
        assert_eq!((e.line, e.column), (3, 5));
        assert_eq!(e.to_string(), "duplicate key \"a\" at line 3, column 5");
        check_err("[1,]", Numbers::Any, "trailing comma");
        check_err("1 2", Numbers::Any, "trailing characters");
    }

    #[test]
    fn strict_wraps_typed_fields() {
        #[derive(Deserialize)]
        struct Line {
            q: Strict<false>,
        }
        let line: Line = serde_json::from_str(r#"{"q": {"a": 1}}"#).unwrap();
        assert_eq!(line.q.0, serde_json::json!({"a": 1}));
        assert!(serde_json::from_str::<Line>(r#"{"q": {"a": 1, "a": 2}}"#).is_err());
        assert!(serde_json::from_str::<Line>(r#"{"q": 1.5}"#).is_err());
    }
}
