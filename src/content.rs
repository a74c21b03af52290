//! Content digests: the canonical encoding of a record's content, so that the same value read
//! from MySQL, PostgreSQL or a JSON API hashes the same.
//!
//! A source config names content columns (SQL) or pointers (JSON); the source turns each into a
//! [`ContentValue`] and [`record_hash`] hashes the values in the config's order. The encoding is
//! specified in docs/FORMAT.md ("Content digests") so another program can recompute it:
//!
//! `H("scanledger:content:v1" || u32le n || value_1 || ... || value_n)`, each value one tag
//! byte and a payload: `0x00` null; `0x01` number: u32le length + canonical decimal text;
//! `0x02` text: u32le length + UTF-8; `0x03` bytes: u32le length + bytes; `0x04` timestamp:
//! i64le microseconds since 1970-01-01T00:00:00Z; `0x05` date: the ten ASCII bytes
//! `YYYY-MM-DD`; `0x06` a non-finite float: u32le length + `NaN`, `Infinity` or `-Infinity`.
//!
//! Numbers of every SQL type (integers, decimals, booleans as 0 and 1, finite floats by their
//! shortest round-trip decimal) share one canonical decimal form, so `1.50` and `1.5`, `7` and
//! `7.000`, `true` and `1` hash alike. Pure: no IO.

use sha2::{Digest, Sha256};

use crate::digest::{self, Hash};

/// Domain tag of a record's content digest.
pub const CONTENT_DOMAIN: &[u8] = b"scanledger:content:v1";
/// Characters a canonical decimal may have; longer numbers are refused, not truncated.
pub const DECIMAL_LEN_MAX: usize = 1024;
/// Content values one record may have.
pub const CONTENT_VALUES_MAX: usize = 64;

/// One content value, already read from the source in its own type.
#[derive(Debug, Clone, PartialEq)]
pub enum ContentValue<'a> {
    /// SQL NULL or JSON null (or an absent pointer).
    Null,
    /// A boolean: hashed as the number 0 or 1.
    Bool(bool),
    /// An integer of any SQL integer type.
    Int(i128),
    /// A decimal in text form (`-12.340`, `1E+3`): hashed by its canonical decimal.
    Decimal(&'a str),
    /// A float: finite values by their shortest round-trip decimal, others by name.
    Float(f64),
    /// Text.
    Text(&'a str),
    /// Bytes.
    Bytes(&'a [u8]),
    /// A point in time, in microseconds since the Unix epoch, UTC (a value without a zone is
    /// taken as UTC by the source).
    TimestampMicros(i64),
    /// A calendar date, `YYYY-MM-DD`.
    Date {
        /// Year, 0 to 9999.
        year: u16,
        /// Month, 1 to 12.
        month: u8,
        /// Day, 1 to 31.
        day: u8,
    },
}

/// A content value that cannot be encoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ContentError {
    /// A decimal's text is not a decimal number.
    #[error("{text:?} is not a decimal number")]
    NotADecimal {
        /// The text, cut to 64 characters.
        text: String,
    },
    /// A decimal whose canonical form would be longer than `DECIMAL_LEN_MAX`.
    #[error("a decimal of more than {DECIMAL_LEN_MAX} digits cannot be hashed exactly")]
    DecimalTooLong,
    /// More than `CONTENT_VALUES_MAX` values, or a value longer than 4 GiB.
    #[error("content is too large to hash: {what}")]
    TooLarge {
        /// What is too large.
        what: &'static str,
    },
    /// A date outside 0000-01-01 .. 9999-12-31.
    #[error("date {year}-{month}-{day} is not a valid calendar date")]
    BadDate {
        /// Year.
        year: u16,
        /// Month.
        month: u8,
        /// Day.
        day: u8,
    },
}

/// The content digest of one record: its values, in the config's order.
///
/// ```
/// use scanledger::content::{record_hash, ContentValue as V};
/// let pg = record_hash(&[V::Text("a@example.com"), V::Decimal("1.50"), V::Bool(true)]).unwrap();
/// let my = record_hash(&[V::Text("a@example.com"), V::Decimal("1.5"), V::Int(1)]).unwrap();
/// assert_eq!(pg, my);
/// assert_ne!(pg, record_hash(&[V::Text("a@example.com"), V::Decimal("1.51"), V::Int(1)]).unwrap());
/// ```
///
/// # Errors
/// `ContentError` for a value that has no canonical encoding (see the variants).
pub fn record_hash(values: &[ContentValue<'_>]) -> Result<[u8; 32], ContentError> {
    if values.len() > CONTENT_VALUES_MAX {
        return Err(ContentError::TooLarge {
            what: "more than 64 values",
        });
    }
    let mut h = Sha256::new();
    h.update(CONTENT_DOMAIN);
    h.update(len32(values.len())?.to_le_bytes());
    for v in values {
        encode(v, &mut h)?;
    }
    Ok(h.finalize().into())
}

fn len32(n: usize) -> Result<u32, ContentError> {
    u32::try_from(n).map_err(|_| ContentError::TooLarge {
        what: "a value over 4 GiB",
    })
}

fn put(h: &mut Sha256, tag: u8, payload: &[u8]) -> Result<(), ContentError> {
    h.update([tag]);
    h.update(len32(payload.len())?.to_le_bytes());
    h.update(payload);
    Ok(())
}

fn encode(v: &ContentValue<'_>, h: &mut Sha256) -> Result<(), ContentError> {
    match v {
        ContentValue::Null => h.update([0x00]),
        ContentValue::Bool(b) => put(h, 0x01, if *b { b"1" } else { b"0" })?,
        ContentValue::Int(i) => put(h, 0x01, i.to_string().as_bytes())?,
        ContentValue::Decimal(text) => put(h, 0x01, canonical_decimal(text)?.as_bytes())?,
        ContentValue::Float(f) if f.is_finite() => {
            // Rust's `Display` for f64 is the shortest text that round-trips, in plain
            // notation; the canonical decimal of that text is the hashed form.
            put(h, 0x01, canonical_decimal(&f.to_string())?.as_bytes())?;
        }
        ContentValue::Float(f) => {
            let name: &[u8] = if f.is_nan() {
                b"NaN"
            } else if *f > 0.0 {
                b"Infinity"
            } else {
                b"-Infinity"
            };
            put(h, 0x06, name)?;
        }
        ContentValue::Text(s) => put(h, 0x02, s.as_bytes())?,
        ContentValue::Bytes(b) => put(h, 0x03, b)?,
        ContentValue::TimestampMicros(us) => {
            h.update([0x04]);
            h.update(us.to_le_bytes());
        }
        ContentValue::Date { year, month, day } => {
            if *year > 9999 || !(1..=12).contains(month) || !(1..=31).contains(day) {
                return Err(ContentError::BadDate {
                    year: *year,
                    month: *month,
                    day: *day,
                });
            }
            h.update([0x05]);
            h.update(format!("{year:04}-{month:02}-{day:02}").as_bytes());
        }
    }
    Ok(())
}

/// The canonical text of a decimal number: an optional `-` (never for zero), the integer
/// digits without leading zeros (`0` when none), and a `.` with the fraction's digits when
/// the fraction is not zero, without trailing zeros; no exponent, no `+`.
///
/// ```
/// use scanledger::content::canonical_decimal;
/// assert_eq!(canonical_decimal("001.500").unwrap(), "1.5");
/// assert_eq!(canonical_decimal("-0.00").unwrap(), "0");
/// assert_eq!(canonical_decimal("1.5E+3").unwrap(), "1500");
/// assert_eq!(canonical_decimal("-12e-4").unwrap(), "-0.0012");
/// assert!(canonical_decimal("1.2.3").is_err());
/// ```
///
/// # Errors
/// `NotADecimal` for text that is not `[+-]digits[.digits][(e|E)[+-]digits]` (digits on at
/// least one side of the point); `DecimalTooLong` when the canonical form would exceed
/// `DECIMAL_LEN_MAX` characters.
pub fn canonical_decimal(text: &str) -> Result<String, ContentError> {
    let bad = || ContentError::NotADecimal {
        text: text.chars().take(64).collect(),
    };
    if text.len() > DECIMAL_LEN_MAX {
        return Err(ContentError::DecimalTooLong);
    }
    let (negative, rest) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    let (mantissa, exponent) = match rest.find(['e', 'E']) {
        Some(i) => (&rest[..i], Some(&rest[i + 1..])),
        None => (rest, None),
    };
    let (int_part, frac_part) = match mantissa.find('.') {
        Some(i) => (&mantissa[..i], &mantissa[i + 1..]),
        None => (mantissa, ""),
    };
    let all_digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if (int_part.is_empty() && frac_part.is_empty())
        || !all_digits(int_part)
        || !all_digits(frac_part)
    {
        return Err(bad());
    }
    if int_part.bytes().chain(frac_part.bytes()).all(|b| b == b'0') {
        // Zero, whatever its sign or exponent (the exponent must still be well formed).
        if let Some(e) = exponent {
            let digits = e.strip_prefix(['+', '-']).unwrap_or(e);
            if digits.is_empty() || !all_digits(digits) {
                return Err(bad());
            }
        }
        return Ok("0".to_owned());
    }
    // The value is `int_part.frac_part * 10^exp`: place the point in the digit string.
    let exp: i64 = match exponent {
        None => 0,
        Some(e) => {
            let (sign, digits) = match e.as_bytes().first() {
                Some(b'-') => (-1, &e[1..]),
                Some(b'+') => (1, &e[1..]),
                _ => (1, e),
            };
            if digits.is_empty() || !all_digits(digits) {
                return Err(bad());
            }
            // More exponent digits than the length bound allows can only be too long (or
            // round to zero, which we refuse too rather than guess): cap before parsing.
            let magnitude: i64 = if digits.trim_start_matches('0').len() > 6 {
                return Err(ContentError::DecimalTooLong);
            } else {
                digits.parse().map_err(|_| bad())?
            };
            sign * magnitude
        }
    };
    let digits: String = format!("{int_part}{frac_part}");
    // Position of the decimal point counted from the left of `digits`.
    let int_len = i64::try_from(int_part.len()).map_err(|_| ContentError::DecimalTooLong)?;
    let point = int_len + exp;
    let n = i64::try_from(digits.len()).map_err(|_| ContentError::DecimalTooLong)?;
    let max = i64::try_from(DECIMAL_LEN_MAX).map_err(|_| ContentError::DecimalTooLong)?;
    if point > max || point < -max {
        return Err(ContentError::DecimalTooLong);
    }
    let (int_digits, frac_digits): (String, String) = if point <= 0 {
        let zeros = "0".repeat(usize::try_from(-point).map_err(|_| ContentError::DecimalTooLong)?);
        (String::new(), format!("{zeros}{digits}"))
    } else if point >= n {
        let zeros =
            "0".repeat(usize::try_from(point - n).map_err(|_| ContentError::DecimalTooLong)?);
        (format!("{digits}{zeros}"), String::new())
    } else {
        let p = usize::try_from(point).map_err(|_| ContentError::DecimalTooLong)?;
        (digits[..p].to_owned(), digits[p..].to_owned())
    };
    let int_digits = int_digits.trim_start_matches('0');
    let frac_digits = frac_digits.trim_end_matches('0');
    let mut out = String::with_capacity(int_digits.len() + frac_digits.len() + 3);
    if negative && !(int_digits.is_empty() && frac_digits.is_empty()) {
        out.push('-');
    }
    out.push_str(if int_digits.is_empty() {
        "0"
    } else {
        int_digits
    });
    if !frac_digits.is_empty() {
        out.push('.');
        out.push_str(frac_digits);
    }
    if out.len() > DECIMAL_LEN_MAX {
        return Err(ContentError::DecimalTooLong);
    }
    Ok(out)
}

// Per-leaf content accumulators: what a run keeps of its records' contents, never the rows.
//
// Each record with a content digest adds `e = H(0x03 || key || content)` to the accumulator of
// its leaf, where `key` is the ID's `u64le` for the `int` and `prefixed` codecs and the
// string's digest for `string` (so two stores that interned differently agree), and the leaf
// is the ID's partition, or the string's bucket (docs/FORMAT.md §4b). An accumulator is 64
// bytes: the sum of the `e`s modulo 2^256 (little-endian) and their XOR. Both are independent
// of order, so two runs over the same records agree whatever their pages, and a leaf whose
// accumulators differ holds a record whose content differs (or an ID one side lacks).

/// Bytes of one leaf's accumulator.
pub const CONTENT_ACC_LEN: usize = 64;

/// One leaf's accumulator: sum (mod 2^256, little-endian) then XOR of the entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContentAcc(pub [u8; CONTENT_ACC_LEN]);

impl Default for ContentAcc {
    fn default() -> ContentAcc {
        ContentAcc([0; CONTENT_ACC_LEN])
    }
}

impl ContentAcc {
    /// Adds one record's entry.
    pub fn add(&mut self, entry: &Hash) {
        let mut carry = 0u16;
        for (i, b) in entry.iter().enumerate() {
            let s = u16::from(self.0[i]) + u16::from(*b) + carry;
            self.0[i] = (s & 0xff) as u8;
            carry = s >> 8;
        }
        for (i, b) in entry.iter().enumerate() {
            self.0[32 + i] ^= b;
        }
    }
}

/// A record's entry: `H(0x03 || key || content)`.
#[must_use]
pub fn entry(key: &[u8], content: &Hash) -> Hash {
    let mut h = Sha256::new();
    h.update([0x03]);
    h.update(key);
    h.update(content);
    h.finalize().into()
}

/// The leaf of a content accumulator: `H(0x02 || u64le leaf || accumulator)`.
#[must_use]
pub fn leaf_hash(leaf: u64, acc: &ContentAcc) -> Hash {
    let mut h = Sha256::new();
    h.update([0x02]);
    h.update(leaf.to_le_bytes());
    h.update(acc.0);
    h.finalize().into()
}

/// The content root of a run: the RFC 6962 tree over its non-empty leaves, ascending.
#[must_use]
pub fn root<'a>(leaves: impl IntoIterator<Item = (u64, &'a ContentAcc)>) -> Hash {
    let hashes: Vec<Hash> = leaves.into_iter().map(|(l, a)| leaf_hash(l, a)).collect();
    digest::merkle_root_of_leaves(hashes.iter())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // Tests: a panic is the failure report.
    use super::*;

    #[test]
    fn canonical_decimals() {
        for (text, want) in [
            ("0", "0"),
            ("-0", "0"),
            ("+0.000", "0"),
            (".5", "0.5"),
            ("5.", "5"),
            ("1.50", "1.5"),
            ("0001.0500", "1.05"),
            ("-1.50", "-1.5"),
            ("1e3", "1000"),
            ("1.5E-7", "0.00000015"),
            ("123.456e1", "1234.56"),
            ("123.456e-5", "0.00123456"),
            (
                "12345678901234567890123456789",
                "12345678901234567890123456789",
            ),
            ("0e999999", "0"),
        ] {
            assert_eq!(canonical_decimal(text).as_deref(), Ok(want), "{text}");
        }
        for text in [
            "", "-", ".", "1.2.3", "1e", "e5", "0x10", "1,5", " 1", "NaN", "1e+-3",
        ] {
            assert!(
                matches!(
                    canonical_decimal(text),
                    Err(ContentError::NotADecimal { .. })
                ),
                "{text}"
            );
        }
        for text in ["1e2000", "1e-2000", "1e9999999999"] {
            assert_eq!(
                canonical_decimal(text),
                Err(ContentError::DecimalTooLong),
                "{text}"
            );
        }
    }

    #[test]
    fn numbers_of_every_type_share_one_form() {
        let h = |v: ContentValue<'_>| record_hash(&[v]).unwrap();
        assert_eq!(h(ContentValue::Int(7)), h(ContentValue::Decimal("7.000")));
        assert_eq!(h(ContentValue::Bool(true)), h(ContentValue::Int(1)));
        assert_eq!(
            h(ContentValue::Float(0.25)),
            h(ContentValue::Decimal("0.250"))
        );
        assert_eq!(h(ContentValue::Float(-0.0)), h(ContentValue::Int(0)));
        assert_ne!(h(ContentValue::Int(7)), h(ContentValue::Text("7")));
        assert_ne!(h(ContentValue::Null), h(ContentValue::Text("")));
        assert_ne!(
            h(ContentValue::Float(f64::NAN)),
            h(ContentValue::Text("NaN"))
        );
    }

    #[test]
    fn order_and_count_of_values_matter() {
        let a = record_hash(&[ContentValue::Text("x"), ContentValue::Text("y")]).unwrap();
        let b = record_hash(&[ContentValue::Text("y"), ContentValue::Text("x")]).unwrap();
        let c = record_hash(&[ContentValue::Text("xy")]).unwrap();
        assert_ne!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn dates_and_timestamps() {
        let d = ContentValue::Date {
            year: 2026,
            month: 11,
            day: 29,
        };
        assert!(record_hash(&[d]).is_ok());
        let bad = ContentValue::Date {
            year: 2026,
            month: 13,
            day: 1,
        };
        assert!(matches!(
            record_hash(&[bad]),
            Err(ContentError::BadDate { .. })
        ));
        assert_ne!(
            record_hash(&[ContentValue::TimestampMicros(0)]).unwrap(),
            record_hash(&[ContentValue::TimestampMicros(1)]).unwrap()
        );
    }

    #[test]
    fn accumulation_is_order_independent_and_sensitive() {
        let es: Vec<Hash> = (0u8..50).map(|i| digest::sha256(&[i])).collect();
        let mut a = ContentAcc::default();
        let mut b = ContentAcc::default();
        for e in &es {
            a.add(e);
        }
        for e in es.iter().rev() {
            b.add(e);
        }
        assert_eq!(a, b);
        let mut c = ContentAcc::default();
        for e in &es[1..] {
            c.add(e);
        }
        assert_ne!(a, c);
        // The sum carries across bytes.
        let mut d = ContentAcc::default();
        d.add(&[0xff; 32]);
        d.add(&[0x01; 32]);
        assert_eq!(d.0[0], 0x00);
        assert_eq!(d.0[1], 0x01);
    }
}
