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

mod acc;
mod decimal;
mod enc;

pub use acc::{entry, leaf_hash, root, ContentAcc, CONTENT_ACC_LEN};
pub use decimal::canonical_decimal;
pub use enc::RecordHasher;

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
    RecordHasher::new().hash(values)
}

impl RecordHasher {
    /// [`record_hash`] with this hasher's buffer: a source hashing many records keeps one
    /// hasher, so a record costs no allocation.
    ///
    /// ```
    /// use scanledger::content::{record_hash, ContentValue as V, RecordHasher};
    /// let mut h = RecordHasher::new();
    /// let row = [V::Text("a@example.com"), V::Int(7)];
    /// assert_eq!(h.hash(&row).unwrap(), record_hash(&row).unwrap());
    /// ```
    ///
    /// # Errors
    /// As [`record_hash`].
    pub fn hash(&mut self, values: &[ContentValue<'_>]) -> Result<[u8; 32], ContentError> {
        self.begin_record(values.len())?;
        for v in values {
            self.add_value(v)?;
        }
        Ok(self.record_digest())
    }

    /// Starts a record of `n` values, to be given one by one with [`RecordHasher::add_value`]
    /// (a source that reads values one at a time needs no buffer of them).
    ///
    /// # Errors
    /// `TooLarge` for more than `CONTENT_VALUES_MAX` values.
    pub fn begin_record(&mut self, n: usize) -> Result<(), ContentError> {
        if n > CONTENT_VALUES_MAX {
            return Err(ContentError::TooLarge {
                what: "more than 64 values",
            });
        }
        self.begin(n);
        self.put(CONTENT_DOMAIN);
        self.put(&len32(n)?.to_le_bytes());
        Ok(())
    }

    /// Adds the record's next value.
    ///
    /// # Errors
    /// As [`record_hash`], for this value.
    pub fn add_value(&mut self, v: &ContentValue<'_>) -> Result<(), ContentError> {
        self.count();
        encode(v, self)
    }

    /// The digest of the record begun last; it must have been given the number of values it
    /// was begun with.
    #[must_use]
    pub fn record_digest(&self) -> [u8; 32] {
        self.finish()
    }
}

fn len32(n: usize) -> Result<u32, ContentError> {
    u32::try_from(n).map_err(|_| ContentError::TooLarge {
        what: "a value over 4 GiB",
    })
}

/// A tagged value: tag, u32le length, payload.
fn put(e: &mut RecordHasher, tag: u8, payload: &[u8]) -> Result<(), ContentError> {
    put_pieces(e, tag, &[payload])
}

/// A tagged value whose payload is the concatenation of `pieces`.
fn put_pieces(e: &mut RecordHasher, tag: u8, pieces: &[&[u8]]) -> Result<(), ContentError> {
    let len = pieces
        .iter()
        .try_fold(0usize, |n, p| n.checked_add(p.len()));
    let len = len.ok_or(ContentError::TooLarge {
        what: "a value over 4 GiB",
    })?;
    e.put(&[tag]);
    e.put(&len32(len)?.to_le_bytes());
    for p in pieces {
        e.put(p);
    }
    Ok(())
}

/// A canonical decimal as a tagged number, written without building its text when the input
/// has no exponent.
fn put_decimal(e: &mut RecordHasher, text: &str) -> Result<(), ContentError> {
    let c = decimal::canonical(text)?;
    let [a, b, c2, d] = c.pieces();
    put_pieces(
        e,
        0x01,
        &[a.as_bytes(), b.as_bytes(), c2.as_bytes(), d.as_bytes()],
    )
}

/// The decimal digits of `i` (with `-` when negative) in `buf`; i128 has at most 39 digits.
fn int_text(i: i128, buf: &mut [u8; 40]) -> &[u8] {
    let mut n = i.unsigned_abs();
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b'0' + u8::try_from(n % 10).unwrap_or(0);
        n /= 10;
        if n == 0 {
            break;
        }
    }
    if i < 0 {
        at -= 1;
        buf[at] = b'-';
    }
    &buf[at..]
}

/// Two ASCII digits of `n` (0 to 99).
fn two_digits(n: u8) -> [u8; 2] {
    [b'0' + (n / 10) % 10, b'0' + n % 10]
}

fn encode(v: &ContentValue<'_>, e: &mut RecordHasher) -> Result<(), ContentError> {
    match v {
        ContentValue::Null => e.put(&[0x00]),
        ContentValue::Bool(b) => put(e, 0x01, if *b { b"1" } else { b"0" })?,
        ContentValue::Int(i) => put(e, 0x01, int_text(*i, &mut [0; 40]))?,
        ContentValue::Decimal(text) => put_decimal(e, text)?,
        ContentValue::Float(f) if f.is_finite() => {
            // Rust's `Display` for f64 is the shortest text that round-trips, in plain
            // notation; the canonical decimal of that text is the hashed form.
            put_decimal(e, &f.to_string())?;
        }
        ContentValue::Float(f) => {
            let name: &[u8] = if f.is_nan() {
                b"NaN"
            } else if *f > 0.0 {
                b"Infinity"
            } else {
                b"-Infinity"
            };
            put(e, 0x06, name)?;
        }
        ContentValue::Text(s) => put(e, 0x02, s.as_bytes())?,
        ContentValue::Bytes(b) => put(e, 0x03, b)?,
        ContentValue::TimestampMicros(us) => {
            e.put(&[0x04]);
            e.put(&us.to_le_bytes());
        }
        ContentValue::Date { year, month, day } => {
            if *year > 9999 || !(1..=12).contains(month) || !(1..=31).contains(day) {
                return Err(ContentError::BadDate {
                    year: *year,
                    month: *month,
                    day: *day,
                });
            }
            let [c, y] =
                [*year / 100, *year % 100].map(|n| two_digits(u8::try_from(n).unwrap_or(0)));
            let (m, d) = (two_digits(*month), two_digits(*day));
            e.put(&[
                0x05, c[0], c[1], y[0], y[1], b'-', m[0], m[1], b'-', d[0], d[1],
            ]);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // Tests: a panic is the failure report.
    use super::*;
    use crate::digest::{self, Hash};
    use sha2::Digest as _;

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

    #[test]
    fn integers_hash_as_their_decimal_text() {
        for i in [
            0i128,
            7,
            -7,
            10,
            -10,
            i128::from(u64::MAX),
            i128::MAX,
            i128::MIN,
        ] {
            assert_eq!(int_text(i, &mut [0; 40]), i.to_string().as_bytes(), "{i}");
            assert_eq!(
                record_hash(&[ContentValue::Int(i)]).unwrap(),
                record_hash(&[ContentValue::Decimal(&i.to_string())]).unwrap()
            );
        }
    }

    #[test]
    fn a_long_text_crosses_the_encoders_buffer() {
        // The same value set, split differently across values, must not collide, and a value
        // longer than the buffer hashes as the plain SHA-256 of the encoding says.
        let long = "x".repeat(10_000);
        let mut want = sha2::Sha256::new();
        want.update(CONTENT_DOMAIN);
        want.update(1u32.to_le_bytes());
        want.update([0x02]);
        want.update(10_000u32.to_le_bytes());
        want.update(long.as_bytes());
        let want: [u8; 32] = want.finalize().into();
        assert_eq!(record_hash(&[ContentValue::Text(&long)]).unwrap(), want);
    }

    proptest::proptest! {
        /// The borrowed path (no exponent) and the general path (the same text with `e0`)
        /// give the same canonical form, and both hash alike.
        #[test]
        fn a_decimal_without_exponent_is_canonical_as_with_e0(
            sign in "[-+]?", int in "[0-9]{0,30}", point in proptest::bool::ANY,
            frac in "[0-9]{0,30}",
        ) {
            let text = format!("{sign}{int}{}{frac}", if point { "." } else { "" });
            let plain = canonical_decimal(&text);
            let general = canonical_decimal(&format!("{text}e0"));
            // The same form, or the same kind of refusal (the message quotes each text).
            let kind = |r: &Result<String, ContentError>| match r {
                Ok(s) => Ok(s.clone()),
                Err(e) => Err(std::mem::discriminant(e)),
            };
            proptest::prop_assert_eq!(kind(&plain), kind(&general), "{}", text);
            if plain.is_ok() {
                proptest::prop_assert_eq!(
                    record_hash(&[ContentValue::Decimal(&text)]).unwrap(),
                    record_hash(&[ContentValue::Decimal(&format!("{text}e0"))]).unwrap()
                );
            }
        }

        /// The entry's one-buffer hash is the three-part hash the format defines.
        #[test]
        fn entry_is_the_defined_hash(key in proptest::collection::vec(proptest::num::u8::ANY, 0..70),
                                     content in proptest::array::uniform32(proptest::num::u8::ANY)) {
            let mut h = sha2::Sha256::new();
            h.update([0x03]);
            h.update(&key);
            h.update(content);
            let want: [u8; 32] = h.finalize().into();
            proptest::prop_assert_eq!(entry(&key, &content), want);
        }

        /// The limb sum equals the byte-by-byte sum modulo 2^256.
        #[test]
        fn the_accumulator_sum_is_bytewise(a in proptest::array::uniform32(proptest::num::u8::ANY),
                                           b in proptest::array::uniform32(proptest::num::u8::ANY)) {
            let mut acc = ContentAcc::default();
            acc.add(&a);
            acc.add(&b);
            let mut want = [0u8; 32];
            let mut carry = 0u16;
            for i in 0..32 {
                let s = u16::from(a[i]) + u16::from(b[i]) + carry;
                want[i] = (s & 0xff) as u8;
                carry = s >> 8;
            }
            proptest::prop_assert_eq!(&acc.0[..32], &want[..]);
        }
    }
}
