//! Declared inputs: a contract or config file read into a serde-derived type under the rules
//! of `json` (duplicate keys refused, numbers exact, nesting bounded), with unknown keys
//! refused (`#[serde(deny_unknown_fields)]` on every struct of the type), and every error
//! placed: the line and column, the field's path, and the word meant for a misspelt key or
//! value. Every format scanledger reads this way words its errors alike:
//!
//! ```text
//! unknown key "limits.max_page"; did you mean "limits.max_pages"?
//! missing required key "source"
//! key "page_size": must be at least 1
//! key "end_signal": must be one of "cursor_absent", "complete_flag" or "both"; did you mean "both"?
//! malformed JSON: trailing comma
//! ```
//!
//! A format checks what serde cannot (bounds, values that exclude each other) after reading,
//! and reports it with [`ConfigError::invalid`], which [`ConfigError::placed`] puts at the key's
//! line and column. Pure: no IO.

use std::fmt;

use serde::de::DeserializeOwned;
use serde_json::Value;

use super::value_de::ValueDe;
use super::{parse, JsonError, Numbers};

/// The error type under `from_value`: serde's words, which [`ConfigError`] classifies.
type DeError = serde::de::value::Error;

/// A contract or config that does not have its declared shape (boxed: an error is rare and
/// a `Result` of it stays small).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.message())]
pub struct ConfigError(Box<Detail>);

#[derive(Debug, Clone, PartialEq, Eq)]
struct Detail {
    /// 1-based line and column of the field (of the fault, for malformed JSON), when known.
    position: Option<(usize, usize)>,
    /// The field's path, as shown.
    field: String,
    /// What is wrong.
    problem: Problem,
    /// The known key (as a path) or value closest in spelling to a misspelt one.
    did_you_mean: Option<String>,
    /// The path as steps, for placing it in the text.
    steps: Vec<Step>,
}

/// What is wrong with a field.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Problem {
    /// The text is not strict JSON (the words say why).
    Malformed(String),
    /// A key the format does not have.
    UnknownKey,
    /// A required key is absent.
    MissingKey,
    /// The value cannot be used (the words say what it must be).
    Invalid(String),
}

/// One step of a field's path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Step {
    Key(String),
    Index(usize),
}

impl ConfigError {
    /// A value that cannot be used, at the dotted path `field` (`limits.max_pages`).
    #[must_use]
    pub fn invalid(field: &str, problem: impl Into<String>) -> ConfigError {
        ConfigError::invalid_at(&field.split('.').collect::<Vec<_>>(), problem)
    }

    /// A value that cannot be used, at the path of these keys (for keys that may hold a dot
    /// themselves, such as a label's name).
    #[must_use]
    pub fn invalid_at(keys: &[&str], problem: impl Into<String>) -> ConfigError {
        let steps: Vec<Step> = keys
            .iter()
            .filter(|k| !k.is_empty())
            .map(|k| Step::Key((*k).to_owned()))
            .collect();
        ConfigError(Box::new(Detail {
            position: None,
            field: render(&steps),
            problem: Problem::Invalid(problem.into()),
            did_you_mean: None,
            steps,
        }))
    }

    /// A required key absent at the dotted path `field`.
    #[must_use]
    pub fn missing(field: &str) -> ConfigError {
        let mut e = ConfigError::invalid(field, "");
        e.0.problem = Problem::MissingKey;
        e
    }

    /// An unknown key at the dotted path `field`, with the closest of `known` (the keys of
    /// its object) as the one meant.
    #[must_use]
    pub fn unknown(field: &str, known: &[&str]) -> ConfigError {
        let mut e = ConfigError::invalid(field, "");
        e.0.problem = Problem::UnknownKey;
        e.0.did_you_mean = e.meant_key(known);
        e
    }

    /// The same error under the object at the path of the keys `parent` (a part of a file
    /// read by itself: one label of a mapping).
    #[must_use]
    pub fn under(mut self, parent: &[&str]) -> ConfigError {
        let d = &mut *self.0;
        let mut steps: Vec<Step> = parent
            .iter()
            .filter(|k| !k.is_empty())
            .map(|k| Step::Key((*k).to_owned()))
            .collect();
        if steps.is_empty() {
            return self;
        }
        if let (Some(m), Problem::UnknownKey) = (&d.did_you_mean, &d.problem) {
            d.did_you_mean = Some(format!("{}.{m}", render(&steps)));
        }
        steps.append(&mut d.steps);
        d.field = render(&steps);
        d.steps = steps;
        self
    }

    /// The same error with the line and column of its key in `text` (the document it was
    /// read from), when it has none yet and the text holds the key. A missing key is placed
    /// at the object that lacks it (nowhere, for the top level).
    #[must_use]
    pub fn placed(mut self, text: &str) -> ConfigError {
        if self.0.position.is_some() {
            return self;
        }
        let d = &mut *self.0;
        let steps = match d.problem {
            Problem::MissingKey => &d.steps[..d.steps.len().saturating_sub(1)],
            _ => &d.steps[..],
        };
        if !steps.is_empty() {
            d.position = super::locate::locate(text, steps);
        }
        self
    }

    /// 1-based line and column of the field (of the fault, for malformed JSON), when known:
    /// the text was given (`from_str`, [`ConfigError::placed`]) and holds the key.
    #[must_use]
    pub fn position(&self) -> Option<(usize, usize)> {
        self.0.position
    }

    /// The field's path: keys joined by `.`, `[N]` for an array's element
    /// (`limits.max_pages`, `labels.vip`, `items[2].id`); empty for the document itself.
    #[must_use]
    pub fn field(&self) -> &str {
        &self.0.field
    }

    /// What is wrong.
    #[must_use]
    pub fn problem(&self) -> &Problem {
        &self.0.problem
    }

    /// The known key (as a path) or value closest in spelling to a misspelt one.
    #[must_use]
    pub fn did_you_mean(&self) -> Option<&str> {
        self.0.did_you_mean.as_deref()
    }

    /// The one sentence, without the position (which the caller writes as `FILE:LINE:COL:`).
    #[must_use]
    pub fn message(&self) -> String {
        let mut s = self.message_alone();
        if let Some(m) = &self.0.did_you_mean {
            s.push_str(&format!("; did you mean {m:?}?"));
        }
        s
    }

    /// The sentence without the word meant (which a caller may show as a hint).
    #[must_use]
    pub fn message_alone(&self) -> String {
        match &self.0.problem {
            Problem::Malformed(m) => format!("malformed JSON: {m}"),
            Problem::UnknownKey => format!("unknown key {:?}", self.0.field),
            Problem::MissingKey => format!("missing required key {:?}", self.0.field),
            Problem::Invalid(p) if self.0.field.is_empty() => p.clone(),
            Problem::Invalid(p) => format!("key {:?}: {p}", self.0.field),
        }
    }

    /// The known key closest to this (unknown) key's last step, as a path.
    fn meant_key(&self, known: &[&str]) -> Option<String> {
        let Some(Step::Key(last)) = self.0.steps.last() else {
            return None;
        };
        let meant = closest(last, known)?;
        let mut steps = self.0.steps.clone();
        steps.pop();
        steps.push(Step::Key(meant.to_owned()));
        Some(render(&steps))
    }
}

impl From<JsonError> for ConfigError {
    /// Text that is not strict JSON, at its position.
    fn from(e: JsonError) -> ConfigError {
        ConfigError(Box::new(Detail {
            position: Some((e.line, e.column)),
            field: String::new(),
            problem: Problem::Malformed(e.message),
            did_you_mean: None,
            steps: Vec::new(),
        }))
    }
}

impl ConfigError {
    /// Classifies serde's error at `path` into the shared words.
    fn from_serde(value: &Value, e: &serde_path_to_error::Error<DeError>) -> ConfigError {
        let steps: Vec<Step> = e
            .path()
            .iter()
            .filter_map(|s| match s {
                serde_path_to_error::Segment::Map { key } => Some(Step::Key(key.clone())),
                serde_path_to_error::Segment::Seq { index } => Some(Step::Index(*index)),
                _ => None,
            })
            .collect();
        let words = e.inner().to_string();
        let mut out = ConfigError(Box::new(Detail {
            position: None,
            field: render(&steps),
            problem: Problem::Invalid(String::new()),
            did_you_mean: None,
            steps,
        }));
        if let Some(rest) = words.strip_prefix("unknown field `") {
            out.0.problem = Problem::UnknownKey;
            let (_, expected) = split_expected(rest);
            out.0.did_you_mean = out.meant_key(&expected);
        } else if let Some(rest) = words.strip_prefix("missing field `") {
            let name = rest.split('`').next().unwrap_or_default();
            out.0.steps.push(Step::Key(name.to_owned()));
            out.0.field = render(&out.0.steps);
            out.0.problem = Problem::MissingKey;
        } else if let Some(rest) = words.strip_prefix("unknown variant `") {
            let (given, expected) = split_expected(rest);
            out.0.problem = Problem::Invalid(format!("must be {}", one_of(&expected)));
            out.0.did_you_mean = closest(&given, &expected).map(str::to_owned);
        } else if words.starts_with("invalid type: ") || words.starts_with("invalid value: ") {
            let expected = words.rsplit(", expected ").next().unwrap_or_default();
            let integer = matches!(
                expected,
                "u8" | "u16" | "u32" | "u64" | "u128" | "usize" | "i8" | "i16" | "i32" | "i64"
            );
            let found = found_at(value, &out.0.steps, integer);
            out.0.problem =
                Problem::Invalid(format!("must be {}{found}", expected_words(expected)));
        } else {
            // A message of the format's own (`Error::custom` in a `deserialize_with`).
            out.0.problem = Problem::Invalid(words);
        }
        out
    }
}

/// Reads `text` strictly into `T`: the rules of [`parse`], then `T`'s declared shape (unknown
/// keys refused where `T` says `deny_unknown_fields`); every error placed in `text`.
///
/// ```
/// #[derive(serde::Deserialize)]
/// #[serde(deny_unknown_fields)]
/// struct Cfg { url: String, retries: Option<u32> }
/// use scanledger::json::{from_str, Numbers};
/// let e = from_str::<Cfg>("{\"url\": \"x\",\n \"retrys\": 2}", Numbers::Integers).err().unwrap();
/// assert_eq!(e.to_string(), "unknown key \"retrys\"; did you mean \"retries\"?");
/// assert_eq!(e.position(), Some((2, 2)));
/// ```
///
/// # Errors
/// [`ConfigError`]: malformed or not strict JSON, an unknown or missing key, a value of the
/// wrong type.
pub fn from_str<T: DeserializeOwned>(text: &str, numbers: Numbers) -> Result<T, ConfigError> {
    let value = parse(text, numbers)?;
    from_value(&value).map_err(|e| e.placed(text))
}

/// Reads an already strict `value` into `T` (as [`from_str`], without positions).
///
/// # Errors
/// As [`from_str`].
pub fn from_value<T: DeserializeOwned>(value: &Value) -> Result<T, ConfigError> {
    serde_path_to_error::deserialize(ValueDe::<DeError>::new(value))
        .map_err(|e| ConfigError::from_serde(value, &e))
}

/// Splits a parsed object's keys between formats read separately (a source's own keys and
/// the mapping's): one object per group, in order. A key of no group is an unknown key, with
/// the closest key of any group as the one meant.
///
/// # Errors
/// [`ConfigError`]: the value is not an object, or holds a key of no group.
pub fn split_keys(
    value: &Value,
    groups: &[&[&str]],
) -> Result<Vec<serde_json::Map<String, Value>>, ConfigError> {
    let Value::Object(obj) = value else {
        return Err(ConfigError::invalid("", "must be a JSON object"));
    };
    let mut out = vec![serde_json::Map::new(); groups.len()];
    for (k, v) in obj {
        match groups.iter().position(|g| g.contains(&k.as_str())) {
            Some(i) => {
                out[i].insert(k.clone(), v.clone());
            }
            None => {
                let known: Vec<&str> = groups.iter().flat_map(|g| g.iter().copied()).collect();
                return Err(ConfigError::unknown_at(k, &known));
            }
        }
    }
    Ok(out)
}

impl ConfigError {
    /// An unknown top-level key `key` (which may hold a dot).
    fn unknown_at(key: &str, known: &[&str]) -> ConfigError {
        let mut e = ConfigError::invalid_at(&[key], "");
        e.0.problem = Problem::UnknownKey;
        e.0.did_you_mean = e.meant_key(known);
        e
    }
}

/// The names of the fields `T` declares (a struct read with serde derive), in their order:
/// the keys a format knows, for [`split_keys`], without a hand-kept list.
///
/// ```
/// #[derive(serde::Deserialize)]
/// struct Cfg { url: String, retries: Option<u32> }
/// assert_eq!(scanledger::json::field_names::<Cfg>(), ["url", "retries"]);
/// ```
#[must_use]
pub fn field_names<T: DeserializeOwned>() -> &'static [&'static str] {
    let mut names: &'static [&'static str] = &[];
    // The derive hands its field list to `deserialize_struct`; the probe keeps it and stops.
    let _ = T::deserialize(FieldProbe(&mut names));
    names
}

struct FieldProbe<'a>(&'a mut &'static [&'static str]);

#[derive(Debug)]
struct Probed;

impl fmt::Display for Probed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("probed")
    }
}

impl std::error::Error for Probed {}

impl serde::de::Error for Probed {
    fn custom<M: fmt::Display>(_: M) -> Probed {
        Probed
    }
}

impl<'de> serde::Deserializer<'de> for FieldProbe<'_> {
    type Error = Probed;

    fn deserialize_any<V: serde::de::Visitor<'de>>(self, _: V) -> Result<V::Value, Probed> {
        Err(Probed)
    }

    fn deserialize_struct<V: serde::de::Visitor<'de>>(
        self,
        _: &'static str,
        fields: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Probed> {
        *self.0 = fields;
        Err(Probed)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map enum identifier ignored_any
    }
}

/// The path as it is shown: keys joined by `.`, indices as `[N]`.
fn render(steps: &[Step]) -> String {
    let mut s = String::new();
    for step in steps {
        match step {
            Step::Key(k) => {
                if !s.is_empty() {
                    s.push('.');
                }
                s.push_str(k);
            }
            Step::Index(i) => s.push_str(&format!("[{i}]")),
        }
    }
    s
}

/// From serde's "`given`, expected `a`, `b` or `c`" (after the opening backtick): the word
/// given and the words expected. serde words these alike since 1.0 (pinned by a test below).
fn split_expected(rest: &str) -> (String, Vec<&str>) {
    let (given, tail) = rest.split_once('`').unwrap_or((rest, ""));
    let expected = tail
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|w| !w.is_empty())
        .collect();
    (given.to_owned(), expected)
}

/// `"a"`, `"a" or "b"`, `one of "a", "b" or "c"`.
fn one_of(words: &[&str]) -> String {
    let quoted: Vec<String> = words.iter().map(|w| format!("{w:?}")).collect();
    match quoted.as_slice() {
        [] => "nothing".to_owned(),
        [one] => one.clone(),
        [init @ .., last] => {
            let lead = if init.len() > 1 { "one of " } else { "" };
            format!("{lead}{} or {last}", init.join(", "))
        }
    }
}

/// serde's name of an expected type in words a config's author reads.
fn expected_words(expected: &str) -> String {
    match expected {
        "u8" => "a non-negative integer up to 255".to_owned(),
        "u16" => "a non-negative integer up to 65535".to_owned(),
        "u32" => "a non-negative integer up to 4294967295".to_owned(),
        "u64" | "u128" | "usize" => "a non-negative integer".to_owned(),
        "i8" | "i16" | "i32" | "i64" | "i128" | "isize" => "an integer".to_owned(),
        "f32" | "f64" => "a number".to_owned(),
        "a boolean" => "true or false".to_owned(),
        "a map" => "an object".to_owned(),
        "a sequence" => "an array".to_owned(),
        e if e.starts_with("struct ") => "an object".to_owned(),
        e => e.to_owned(),
    }
}

/// `, not KIND` for the JSON value at `steps` (its type only, never its text).
fn found_at(value: &Value, steps: &[Step], integer: bool) -> String {
    let mut v = value;
    for step in steps {
        let next = match (step, v) {
            (Step::Key(k), Value::Object(o)) => o.get(k),
            (Step::Index(i), Value::Array(a)) => a.get(*i),
            _ => None,
        };
        match next {
            Some(n) => v = n,
            None => return String::new(),
        }
    }
    let kind = match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        // An integer of the wrong size: "must be" says which sizes fit.
        Value::Number(n) if n.is_u64() && integer => return String::new(),
        Value::Number(n) if n.is_u64() => "an integer",
        Value::Number(n) if n.is_i64() => "a negative integer",
        Value::Number(_) => "a number with a fraction",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    };
    format!(", not {kind}")
}

/// The known word closest in spelling to `word`, when it is close enough to be a typo: at
/// most one edit in three characters (and at least one), by Levenshtein distance.
///
/// ```text
/// closest("page_sise", CONTRACT_KEYS) == Some("page_size")
/// closest("colour", CONTRACT_KEYS) == None
/// ```
#[must_use]
pub fn closest<'k>(word: &str, known: &[&'k str]) -> Option<&'k str> {
    // Words longer than any key cannot be a typo of one; the bound also caps the work.
    if word.chars().count() > 64 {
        return None;
    }
    let budget = (word.chars().count() / 3).max(1);
    known
        .iter()
        .map(|k| (edit_distance(word, k), *k))
        .filter(|(d, _)| *d <= budget)
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

/// Levenshtein distance over chars, one row at a time.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().take(65).collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = if ca == *cb {
                diagonal
            } else {
                1 + diagonal.min(above).min(row[j])
            };
            diagonal = above;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // Tests: a panic is the failure report.
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)] // Read for their shape only.
    struct Doc {
        source: String,
        limits: Option<Limits>,
        end: Option<End>,
        items: Option<Vec<Limits>>,
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Limits {
        max_pages: Option<u32>,
        retries: Option<u32>,
    }

    #[derive(Debug, Deserialize)]
    #[serde(rename_all = "snake_case")]
    enum End {
        CursorAbsent,
        CompleteFlag,
        Both,
    }

    #[track_caller]
    fn check(text: &str, want: &str, position: Option<(usize, usize)>) {
        let e = from_str::<Doc>(text, Numbers::Integers).unwrap_err();
        assert_eq!(e.to_string(), want, "{text}");
        assert_eq!(e.position(), position, "{text}");
    }

    #[test]
    fn every_error_is_worded_alike_and_placed() {
        check(
            "{\"source\": \"s\",\n  \"limits\": {\"max_page\": 1}}",
            "unknown key \"limits.max_page\"; did you mean \"limits.max_pages\"?",
            Some((2, 14)),
        );
        check(
            "{\"source\": \"s\", \"colour\": 1}",
            "unknown key \"colour\"",
            Some((1, 17)),
        );
        check("{\"limits\": {}}", "missing required key \"source\"", None);
        check(
            "{\"source\": 5}",
            "key \"source\": must be a string, not an integer",
            Some((1, 2)),
        );
        check(
            "{\"source\": \"s\", \"end\": \"bot\"}",
            "key \"end\": must be one of \"cursor_absent\", \"complete_flag\" or \"both\"; did you mean \"both\"?",
            Some((1, 17)),
        );
        check(
            "{\"source\": \"s\", \"limits\": {\"retries\": -1}}",
            "key \"limits.retries\": must be a non-negative integer up to 4294967295, not a negative integer",
            Some((1, 28)),
        );
        check(
            "{\"source\": \"s\", \"items\": [{}, {\"retries\": \"x\"}]}",
            "key \"items[1].retries\": must be a non-negative integer up to 4294967295, not a string",
            Some((1, 32)),
        );
        check(
            "{\"source\": \"s\",\n \"source\": \"t\"}",
            "malformed JSON: duplicate key \"source\"",
            Some((2, 9)),
        );
        check("{\"source\": 1.5}", "malformed JSON: a number that is not an integer in [-2^63, 2^64) (a fraction, an exponent, -0 or a larger integer) cannot be represented exactly", Some((1, 14)));
    }

    #[test]
    fn serde_words_are_the_ones_this_module_reads() {
        // The classification reads serde's own messages; a serde that words them otherwise
        // fails here, not in a user's terminal.
        let v: Value = serde_json::json!({"source": "s", "limits": {"max_pagez": 1}});
        let e =
            serde_path_to_error::deserialize::<_, Doc>(ValueDe::<DeError>::new(&v)).unwrap_err();
        assert_eq!(
            e.inner().to_string(),
            "unknown field `max_pagez`, expected `max_pages` or `retries`"
        );
        let v: Value = serde_json::json!({});
        let e =
            serde_path_to_error::deserialize::<_, Doc>(ValueDe::<DeError>::new(&v)).unwrap_err();
        assert_eq!(e.inner().to_string(), "missing field `source`");
        // A struct is an object, never an array read by position.
        check(
            "{\"source\": \"s\", \"limits\": [5, 1]}",
            "key \"limits\": must be an object, not an array",
            Some((1, 17)),
        );
    }

    #[test]
    fn field_names_and_split_keys() {
        assert_eq!(field_names::<Limits>(), ["max_pages", "retries"]);
        let v = serde_json::json!({"a": 1, "x": 2, "b": 3});
        let parts = split_keys(&v, &[&["a", "b"], &["x"]]).unwrap();
        assert_eq!(parts[0].len(), 2);
        assert_eq!(parts[1].len(), 1);
        let e = split_keys(&serde_json::json!({"xx": 1}), &[&["a"], &["xy"]]).unwrap_err();
        assert_eq!(e.to_string(), "unknown key \"xx\"; did you mean \"xy\"?");
        let e = ConfigError::invalid("y", "bad").under(&["mapping"]);
        assert_eq!(e.field(), "mapping.y");
    }

    #[test]
    fn closest_is_a_typo_or_nothing() {
        let known = ["page_size", "source", "tenant"];
        assert_eq!(closest("page_sise", &known), Some("page_size"));
        assert_eq!(closest("tenat", &known), Some("tenant"));
        assert_eq!(closest("colour", &known), None);
    }
}
