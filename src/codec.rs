//! ID codecs: how an ID in its original form maps to a u64 and back (docs/REFERENCE.md §3, docs/FORMAT.md §5).
//!
//! `int` takes non-negative JSON integers as they are. `prefixed` takes a fixed prefix and
//! decimal digits without leading zeros, ordered by number. `string` interns any UTF-8 string
//! into a dense u64 space kept per (source, tenant), so runs over one collection share IDs.
//! An ID that does not fit is an error returned to the caller (R16), never coerced.
//! Pure: the interner lives in memory; the store loads and persists it around a run.

use std::collections::HashMap;

use crate::contract::{IdCodecKind, RawId, ID_LEN_MAX, PREFIX_LEN_MAX};

/// Strings one interner may hold (one per distinct string ID of a collection).
pub const INTERNED_MAX: u64 = 1 << 40;

/// Why an ID does not fit the codec.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CodecError {
    /// The JSON value has the wrong type for the codec.
    #[error("ID {shown} is {found}, the {codec} codec takes {wants}")]
    WrongType {
        /// The ID, shortened.
        shown: String,
        /// What it is.
        found: &'static str,
        /// The codec.
        codec: &'static str,
        /// What the codec takes.
        wants: &'static str,
    },
    /// The ID does not have the contract's (or the learned) prefix.
    #[error("ID {shown} does not start with the prefix {prefix:?}")]
    WrongPrefix {
        /// The ID, shortened.
        shown: String,
        /// The prefix in force.
        prefix: String,
    },
    /// The digits after the prefix are not a u64 without leading zeros.
    #[error("ID {shown}: {problem}")]
    BadDigits {
        /// The ID, shortened.
        shown: String,
        /// What is wrong.
        problem: &'static str,
    },
    /// The ID is longer than `ID_LEN_MAX`.
    #[error("ID of {len_bytes} bytes exceeds the bound of {max_bytes}")]
    TooLong {
        /// Its length.
        len_bytes: usize,
        /// The bound.
        max_bytes: usize,
    },
    /// The interner is full.
    #[error("more than {max} distinct string IDs")]
    InternerFull {
        /// The bound.
        max: u64,
    },
}

fn shorten(s: &str) -> String {
    let mut end = s.len().min(40);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    if end < s.len() {
        format!("{:?}…", &s[..end])
    } else {
        format!("{s:?}")
    }
}

/// The string dictionary of one (source, tenant): string to dense u64 and back.
#[derive(Debug, Clone, Default)]
pub struct Interner {
    by_str: HashMap<String, u64>,
    by_id: Vec<String>,
}

impl Interner {
    /// An empty interner.
    #[must_use]
    pub fn new() -> Interner {
        Interner::default()
    }

    /// Rebuilds from stored pairs; IDs must be dense from 0 in order.
    ///
    /// # Errors
    /// The index of the first string whose ID is out of order.
    pub fn from_ordered(strings: Vec<String>) -> Result<Interner, usize> {
        let mut by_str = HashMap::with_capacity(strings.len());
        for (i, s) in strings.iter().enumerate() {
            if by_str.insert(s.clone(), i as u64).is_some() {
                return Err(i);
            }
        }
        Ok(Interner {
            by_str,
            by_id: strings,
        })
    }

    /// The ID of a string, interning it if new.
    ///
    /// # Errors
    /// `InternerFull` past `INTERNED_MAX`.
    pub fn intern(&mut self, s: &str) -> Result<u64, CodecError> {
        if let Some(id) = self.by_str.get(s) {
            return Ok(*id);
        }
        let id = self.by_id.len() as u64;
        if id >= INTERNED_MAX {
            return Err(CodecError::InternerFull { max: INTERNED_MAX });
        }
        self.by_str.insert(s.to_owned(), id);
        self.by_id.push(s.to_owned());
        Ok(id)
    }

    /// The string of an ID, if interned.
    #[must_use]
    pub fn lookup(&self, id: u64) -> Option<&str> {
        usize::try_from(id)
            .ok()
            .and_then(|i| self.by_id.get(i))
            .map(String::as_str)
    }

    /// Number of strings.
    #[must_use]
    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    /// Whether no string is interned.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    /// The strings with IDs `first` and above, with their IDs: what a page interned, when
    /// `first` is the length before it.
    #[must_use]
    pub fn since(&self, first: usize) -> Vec<(u64, String)> {
        self.by_id
            .get(first..)
            .unwrap_or_default()
            .iter()
            .zip(first..)
            .map(|(s, i)| (i as u64, s.clone()))
            .collect()
    }
}

/// A codec with its learned state (the prefix, the interner).
#[derive(Debug, Clone)]
pub struct IdCodec {
    kind: IdCodecKind,
    prefix: Option<String>,
    interner: Interner,
}

impl IdCodec {
    /// A codec of `kind`; `prefix` is the contract's `id_prefix`.
    ///
    /// ```
    /// use scanledger::{IdCodec, IdCodecKind, RawId};
    /// let mut c = IdCodec::new(IdCodecKind::Prefixed, None);
    /// assert_eq!(c.encode(&RawId::Str("customer-4100".into())).unwrap(), 4100);
    /// assert_eq!(c.render(4100), "customer-4100");
    /// assert!(c.encode(&RawId::Str("customer-007".into())).is_err());
    /// ```
    #[must_use]
    pub fn new(kind: IdCodecKind, prefix: Option<String>) -> IdCodec {
        IdCodec {
            kind,
            prefix,
            interner: Interner::new(),
        }
    }

    /// The codec's kind.
    #[must_use]
    pub fn kind(&self) -> IdCodecKind {
        self.kind
    }

    /// The prefix in force (given or learned).
    #[must_use]
    pub fn prefix(&self) -> Option<&str> {
        self.prefix.as_deref()
    }

    /// Sets the learned prefix (when restoring a run).
    pub fn set_prefix(&mut self, prefix: Option<String>) {
        self.prefix = prefix;
    }

    /// The interner (string codec).
    #[must_use]
    pub fn interner(&self) -> &Interner {
        &self.interner
    }

    /// The interner, mutably (the store persists and restores it).
    pub fn interner_mut(&mut self) -> &mut Interner {
        &mut self.interner
    }

    /// Maps an ID in its original form to u64.
    ///
    /// # Errors
    /// `CodecError` when the ID does not fit the codec.
    pub fn encode(&mut self, raw: &RawId) -> Result<u64, CodecError> {
        match (self.kind, raw) {
            (IdCodecKind::Int, RawId::Int(n)) => Ok(*n),
            (IdCodecKind::Int, other) => Err(wrong_type(other, "int", "non-negative integers")),
            (IdCodecKind::Prefixed, RawId::Str(s)) => self.encode_prefixed(s),
            (IdCodecKind::Prefixed, other) => Err(wrong_type(
                other,
                "prefixed",
                "strings such as \"customer-42\"",
            )),
            (IdCodecKind::String, RawId::Str(s)) => {
                if s.is_empty() {
                    return Err(CodecError::BadDigits {
                        shown: "\"\"".to_owned(),
                        problem: "an empty string is not an ID",
                    });
                }
                if s.len() > ID_LEN_MAX {
                    return Err(CodecError::TooLong {
                        len_bytes: s.len(),
                        max_bytes: ID_LEN_MAX,
                    });
                }
                self.interner.intern(s)
            }
            (IdCodecKind::String, other) => Err(wrong_type(other, "string", "strings")),
        }
    }

    fn encode_prefixed(&mut self, s: &str) -> Result<u64, CodecError> {
        if s.len() > ID_LEN_MAX {
            return Err(CodecError::TooLong {
                len_bytes: s.len(),
                max_bytes: ID_LEN_MAX,
            });
        }
        let digits = match &self.prefix {
            Some(p) => s
                .strip_prefix(p.as_str())
                .ok_or_else(|| CodecError::WrongPrefix {
                    shown: shorten(s),
                    prefix: p.clone(),
                })?,
            None => {
                let split = s.trim_end_matches(|c: char| c.is_ascii_digit()).len();
                let (p, d) = s.split_at(split);
                if p.len() > PREFIX_LEN_MAX {
                    return Err(CodecError::BadDigits {
                        shown: shorten(s),
                        problem: "prefix longer than the bound",
                    });
                }
                if d.is_empty() {
                    return Err(CodecError::BadDigits {
                        shown: shorten(s),
                        problem: "no decimal digits after the prefix",
                    });
                }
                self.prefix = Some(p.to_owned());
                d
            }
        };
        decimal(digits).map_err(|problem| CodecError::BadDigits {
            shown: shorten(s),
            problem,
        })
    }

    /// The original form of an ID; a string ID not in the interner prints as `#N`.
    #[must_use]
    pub fn render(&self, id: u64) -> String {
        match self.kind {
            IdCodecKind::Int => id.to_string(),
            IdCodecKind::Prefixed => format!("{}{id}", self.prefix.as_deref().unwrap_or("")),
            IdCodecKind::String => self
                .interner
                .lookup(id)
                .map_or_else(|| format!("#{id}"), str::to_owned),
        }
    }

    /// Parses an ID given in its original form without interning (`--range`, `--exclude`):
    /// only the exact text `render` writes for it is an ID (`customer-7` and `7`, never
    /// `customer-007`, `+7` or `007`), so no other text can stand for it.
    ///
    /// ```
    /// use scanledger::{IdCodec, IdCodecKind};
    /// let c = IdCodec::new(IdCodecKind::Prefixed, Some("customer-".into()));
    /// assert_eq!(c.parse_existing("customer-7"), Some(7));
    /// assert_eq!(c.parse_existing("customer-007"), None);
    /// assert_eq!(IdCodec::new(IdCodecKind::Int, None).parse_existing("+7"), None);
    /// ```
    #[must_use]
    pub fn parse_existing(&self, text: &str) -> Option<u64> {
        let id = match self.kind {
            IdCodecKind::Int => text.parse().ok(),
            IdCodecKind::Prefixed => {
                let digits = match &self.prefix {
                    Some(p) => text.strip_prefix(p.as_str())?,
                    None => text,
                };
                digits.parse().ok()
            }
            IdCodecKind::String => self.interner.by_str.get(text).copied(),
        }?;
        // The canonical form only: what renders back to the text given.
        (self.render(id) == text).then_some(id)
    }
}

/// The value of the decimal digits after a prefix, in one pass: digits only, no leading
/// zero, within 64 bits (the problems in that order, as a prefixed ID reports them).
fn decimal(digits: &str) -> Result<u64, &'static str> {
    let bytes = digits.as_bytes();
    if bytes.is_empty() {
        return Err("expected decimal digits after the prefix");
    }
    // Up to 19 digits cannot pass u64::MAX (10^19 - 1 < 2^64): no check per digit (the
    // wrapping operations never wrap here; they only skip the build's overflow checks).
    let (head, tail) = bytes.split_at(bytes.len().min(19));
    let mut value = 0u64;
    for b in head {
        let digit = b.wrapping_sub(b'0');
        if digit > 9 {
            return Err("expected decimal digits after the prefix");
        }
        value = value.wrapping_mul(10).wrapping_add(u64::from(digit));
    }
    let mut value = Some(value);
    for b in tail {
        let digit = b.wrapping_sub(b'0');
        if digit > 9 {
            return Err("expected decimal digits after the prefix");
        }
        value = value
            .and_then(|v| v.checked_mul(10))
            .and_then(|v| v.checked_add(u64::from(digit)));
    }
    if bytes.len() > 1 && bytes[0] == b'0' {
        return Err("leading zeros are not allowed");
    }
    value.ok_or("number does not fit 64 bits")
}

fn wrong_type(raw: &RawId, codec: &'static str, wants: &'static str) -> CodecError {
    let (shown, found) = match raw {
        RawId::Int(n) => (n.to_string(), "an integer"),
        RawId::Str(s) => (shorten(s), "a string"),
        RawId::Other(s) => (shorten(s), "neither a non-negative integer nor a string"),
    };
    CodecError::WrongType {
        shown,
        found,
        codec,
        wants,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixed_digits_are_read_in_one_pass_with_the_problems_in_order() {
        for (digits, want) in [
            ("0", Ok(0)),
            ("7", Ok(7)),
            ("4100", Ok(4100)),
            ("18446744073709551615", Ok(u64::MAX)),
            ("9999999999999999999", Ok(9_999_999_999_999_999_999)),
            ("10000000000000000000", Ok(10_000_000_000_000_000_000)),
            (
                "1844674407370955161a",
                Err("expected decimal digits after the prefix"),
            ),
            ("", Err("expected decimal digits after the prefix")),
            ("12a", Err("expected decimal digits after the prefix")),
            ("+5", Err("expected decimal digits after the prefix")),
            ("0x1", Err("expected decimal digits after the prefix")),
            ("٣", Err("expected decimal digits after the prefix")),
            ("007", Err("leading zeros are not allowed")),
            ("00", Err("leading zeros are not allowed")),
            (
                "018446744073709551616",
                Err("leading zeros are not allowed"),
            ),
            ("18446744073709551616", Err("number does not fit 64 bits")),
            (
                "99999999999999999999999",
                Err("number does not fit 64 bits"),
            ),
        ] {
            assert_eq!(decimal(digits), want, "{digits:?}");
        }
        let mut c = IdCodec::new(IdCodecKind::Prefixed, Some("customer-".to_owned()));
        assert_eq!(c.encode(&RawId::Str("customer-42".into())), Ok(42));
        assert_eq!(
            c.encode(&RawId::Str("customer-042".into())),
            Err(CodecError::BadDigits {
                shown: "\"customer-042\"".to_owned(),
                problem: "leading zeros are not allowed"
            })
        );
    }
}
