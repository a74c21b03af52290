//! The canonical decimal: one text for every spelling of a number (`1.50`, `1.5`, `15e-1`).
//!
//! A number without an exponent (what SQL drivers send for DECIMAL and integers) is made
//! canonical by trimming zeros, as slices of its own text; only a number with an exponent
//! builds a new string. The two paths agree: a text and the same text with `e0` appended have
//! the same canonical form (a property test checks it). Pure: no IO.

use super::{ContentError, DECIMAL_LEN_MAX};

/// A canonical decimal: borrowed parts of the input, or a string built for an exponent.
pub(super) enum Canonical<'a> {
    /// `-`? `int` (`0` when empty) and, when `frac` is not empty, `.` `frac`.
    Parts {
        negative: bool,
        int: &'a str,
        frac: &'a str,
    },
    /// The whole canonical text.
    Owned(String),
}

impl Canonical<'_> {
    /// Bytes of the canonical text.
    pub(super) fn len(&self) -> usize {
        match self {
            Canonical::Parts {
                negative,
                int,
                frac,
            } => {
                usize::from(*negative)
                    + int.len().max(1)
                    + if frac.is_empty() { 0 } else { 1 + frac.len() }
            }
            Canonical::Owned(s) => s.len(),
        }
    }

    /// The canonical text's pieces, in order.
    pub(super) fn pieces(&self) -> [&str; 4] {
        match self {
            Canonical::Parts {
                negative,
                int,
                frac,
            } => [
                if *negative { "-" } else { "" },
                if int.is_empty() { "0" } else { int },
                if frac.is_empty() { "" } else { "." },
                frac,
            ],
            Canonical::Owned(s) => [s, "", "", ""],
        }
    }
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
    Ok(canonical(text)?.pieces().concat())
}

/// The canonical form of `text`, borrowing from it when it has no exponent.
pub(super) fn canonical(text: &str) -> Result<Canonical<'_>, ContentError> {
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
    let int = int_part.trim_start_matches('0');
    let frac = frac_part.trim_end_matches('0');
    if int.is_empty() && frac.is_empty() {
        // Zero, whatever its sign or exponent (the exponent must still be well formed).
        if let Some(e) = exponent {
            let digits = e.strip_prefix(['+', '-']).unwrap_or(e);
            if digits.is_empty() || !all_digits(digits) {
                return Err(bad());
            }
        }
        return Ok(Canonical::Parts {
            negative: false,
            int: "",
            frac: "",
        });
    }
    let Some(e) = exponent else {
        let out = Canonical::Parts {
            negative,
            int,
            frac,
        };
        // `.5` becomes `0.5`: one byte longer than its text.
        if out.len() > DECIMAL_LEN_MAX {
            return Err(ContentError::DecimalTooLong);
        }
        return Ok(out);
    };
    // The value is `int_part.frac_part * 10^exp`: place the point in the digit string.
    let exp: i64 = {
        let (sign, digits) = match e.as_bytes().first() {
            Some(b'-') => (-1, &e[1..]),
            Some(b'+') => (1, &e[1..]),
            _ => (1, e),
        };
        if digits.is_empty() || !all_digits(digits) {
            return Err(bad());
        }
        // More exponent digits than the length bound allows can only be too long (or round
        // to zero, which we refuse too rather than guess): cap before parsing.
        let magnitude: i64 = if digits.trim_start_matches('0').len() > 6 {
            return Err(ContentError::DecimalTooLong);
        } else {
            digits.parse().map_err(|_| bad())?
        };
        sign * magnitude
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
    let out = Canonical::Parts {
        negative,
        int: int_digits.trim_start_matches('0'),
        frac: frac_digits.trim_end_matches('0'),
    };
    if out.len() > DECIMAL_LEN_MAX {
        return Err(ContentError::DecimalTooLong);
    }
    Ok(Canonical::Owned(out.pieces().concat()))
}
