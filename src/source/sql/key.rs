//! Keys as the SQL core sees them: the key column's type, a key value, its cursor text, the ID
//! it becomes, and the bounds a contract's `key_range` puts on the statements.
//!
//! Pure: no IO. Invariants: a key value read back from the cursor text this module wrote is the
//! same value; the contract's `key_range` (and its shard) is read in one place, [`span`], and
//! nowhere else in the SQL sources.

use std::cmp::Ordering;

use crate::contract::{IdCodecKind, RawId, Scope};
use crate::source::KEY_RANGES_MAX;

/// The key column's type, as far as keyset pages need it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KeyType {
    /// An integer column holding values in `min..=max`.
    Int {
        /// The smallest value of the type.
        min: i128,
        /// The largest value of the type.
        max: i128,
    },
    /// A text column, ordered by a collation the server applies.
    Text,
    /// A uuid: 16 bytes ordered as bytes, printed and bound as its canonical text.
    #[cfg_attr(not(all(feature = "postgres", feature = "mysql")), allow(dead_code))]
    Uuid,
}

impl KeyType {
    /// A signed integer type of `bits` bits.
    pub(crate) fn signed(bits: u32) -> KeyType {
        let max = (1i128 << (bits - 1)) - 1;
        KeyType::Int { min: -max - 1, max }
    }

    /// An unsigned integer type of `bits` bits.
    #[cfg_attr(not(all(feature = "postgres", feature = "mysql")), allow(dead_code))]
    pub(crate) fn unsigned(bits: u32) -> KeyType {
        KeyType::Int {
            min: 0,
            max: (1i128 << bits) - 1,
        }
    }

    /// Whether the key is an integer.
    pub(crate) fn is_int(self) -> bool {
        matches!(self, KeyType::Int { .. })
    }
}

/// One key value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Key {
    /// An integer key (every SQL integer type fits).
    Int(i128),
    /// A text key, exactly as the server sent it.
    Text(String),
    /// A uuid's 16 bytes.
    Uuid([u8; 16]),
}

impl Key {
    /// Reads a key of type `ty` from its text: a cursor's, or a `high_water` request's (the
    /// codec's rendering of the last ID). `None` when the text is no value of the type.
    pub(crate) fn from_text(ty: KeyType, text: &str) -> Option<Key> {
        match ty {
            KeyType::Int { min, max } => {
                // Only the canonical decimal form: what this module writes.
                let n: i128 = text.parse().ok()?;
                (n.to_string() == text && (min..=max).contains(&n)).then_some(Key::Int(n))
            }
            KeyType::Text => Some(Key::Text(text.to_owned())),
            KeyType::Uuid => parse_uuid(text).map(Key::Uuid),
        }
    }

    /// The ID of the key in its original form; the codec decides whether it fits. A negative
    /// integer is a `RawId::Neg` (the `signed` codec takes it; `int` refuses it, R16).
    pub(crate) fn into_raw_id(self) -> RawId {
        match self {
            Key::Int(n) => match (u64::try_from(n), i64::try_from(n)) {
                (Ok(u), _) => RawId::Int(u),
                (Err(_), Ok(i)) => RawId::Neg(i),
                (Err(_), Err(_)) => RawId::Other(n.to_string()),
            },
            Key::Text(s) => RawId::Str(s),
            Key::Uuid(b) => RawId::Str(uuid_text(&b)),
        }
    }

    /// The order of two keys where the client knows the server's order (integers, uuids);
    /// `None` for text, whose order is the server's collation.
    pub(crate) fn client_cmp(&self, other: &Key) -> Option<Ordering> {
        match (self, other) {
            (Key::Int(a), Key::Int(b)) => Some(a.cmp(b)),
            (Key::Uuid(a), Key::Uuid(b)) => Some(a.cmp(b)),
            _ => None,
        }
    }

    /// The key as a bound parameter.
    pub(crate) fn param(&self) -> Param {
        match self {
            Key::Int(n) => Param::Int(*n),
            Key::Text(s) => Param::Text(s.clone()),
            Key::Uuid(b) => Param::Text(uuid_text(b)),
        }
    }

    /// The key for a message: integers as they are, text quoted and shortened.
    pub(crate) fn shown(&self) -> String {
        match self {
            Key::Int(n) => n.to_string(),
            Key::Text(s) => format!("{:?}", s.chars().take(64).collect::<String>()),
            Key::Uuid(b) => uuid_text(b),
        }
    }
}

/// The text of an item's ID as the next cursor carries it (the page's last key).
pub(crate) fn id_text(id: &RawId) -> String {
    match id {
        RawId::Int(u) => u.to_string(),
        RawId::Neg(i) => i.to_string(),
        RawId::Str(s) | RawId::Other(s) => s.clone(),
    }
}

/// A statement parameter, whatever the dialect binds it as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Param {
    /// An integer (a key, a bound, a row limit).
    Int(i128),
    /// Text (a text key; a uuid's canonical text).
    Text(String),
}

/// A uuid as PostgreSQL prints it: lower-case hex, 8-4-4-4-12.
pub(crate) fn uuid_text(b: &[u8; 16]) -> String {
    let mut s = String::with_capacity(36);
    for (i, byte) in b.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            s.push('-');
        }
        s.push_str(&format!("{byte:02x}"));
    }
    s
}

/// The bytes of a uuid in its canonical text (lower- or upper-case hex, 8-4-4-4-12).
pub(crate) fn parse_uuid(text: &str) -> Option<[u8; 16]> {
    let bytes = text.as_bytes();
    if bytes.len() != 36 {
        return None;
    }
    let mut out = [0u8; 16];
    let mut digits = bytes
        .iter()
        .enumerate()
        .filter(|(i, _)| !matches!(i, 8 | 13 | 18 | 23));
    for (i, b) in bytes.iter().enumerate() {
        if matches!(i, 8 | 13 | 18 | 23) && *b != b'-' {
            return None;
        }
    }
    for byte in &mut out {
        let hi = hex(*digits.next()?.1)?;
        let lo = hex(*digits.next()?.1)?;
        *byte = (hi << 4) | lo;
    }
    Some(out)
}

fn hex(b: u8) -> Option<u8> {
    char::from(b)
        .to_digit(16)
        .and_then(|d| u8::try_from(d).ok())
}

/// The inclusive key bounds a scope puts on the statements; an end is `None` when it is open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Span {
    /// The first key, or `None`: no lower bound.
    pub(crate) lo: Option<i128>,
    /// The last key, or `None`: no upper bound.
    pub(crate) last: Option<i128>,
}

/// The one place the SQL sources read a contract's `key_range`: the key bounds of its
/// statements, in key values under `codec` (`int`: the ID is the key; `signed`: the ID is the
/// key plus 2^63), or `None` for a scope without a range.
///
/// A shard of a plan is open at the plan's outer ends: shard 0 has no lower bound and the last
/// shard no upper bound, so a row whose key lies outside the plan's key space (a negative key
/// under `int`, say) is read by a shard and judged by the rules there (R16 when its ID cannot
/// be in the shard), exactly as a single scan would judge it, never left in no shard.
pub(crate) fn span(scope: &Scope, codec: IdCodecKind) -> Option<Span> {
    let range = scope.key_range?;
    let key_of = |id: u64| -> i128 {
        match codec {
            IdCodecKind::Signed => i128::from(crate::codec::signed_of(id)),
            _ => i128::from(id),
        }
    };
    let lo = key_of(range.lo);
    let last = key_of(range.last());
    let (first_shard, last_shard) = match &scope.shard {
        Some(s) => (s.index == 0, s.index.saturating_add(1) >= s.count),
        None => (false, false),
    };
    Some(Span {
        lo: (!first_shard).then_some(lo),
        last: (!last_shard).then_some(last),
    })
}

impl Span {
    /// The bounds within the column's type `ty`, as parameters: a bound past the type's end is
    /// dropped (it excludes no value), and a span that holds no value of the type becomes the
    /// empty span `max..=min`.
    pub(crate) fn params(self, ty: KeyType) -> (Option<i128>, Option<i128>) {
        let KeyType::Int { min, max } = ty else {
            return (self.lo, self.last);
        };
        let lo = self.lo.filter(|lo| *lo > min);
        let last = self.last.filter(|last| *last < max);
        let empty = self.lo.is_some_and(|lo| lo > max)
            || self.last.is_some_and(|last| last < min)
            || matches!((self.lo, self.last), (Some(lo), Some(last)) if lo > last);
        if empty {
            // No value is both >= max and <= min when the type has two values or more.
            return (Some(max), Some(min));
        }
        (lo, last)
    }
}

/// `(K BETWEEN a AND b OR ...)` over at most [`KEY_RANGES_MAX`] hulls of `ranges` (ascending,
/// disjoint, inclusive, in IDs of the `int` codec); `quoted_key` is the key column already
/// quoted by the source's dialect. The bounds are integers we format ourselves, so nothing of
/// the input reaches the SQL text.
pub(crate) fn key_ranges_sql(quoted_key: &str, ranges: &[(u64, u64)]) -> String {
    let per_hull = ranges.len().div_ceil(KEY_RANGES_MAX).max(1);
    let hulls: Vec<String> = ranges
        .chunks(per_hull)
        .filter_map(|c| Some((c.first()?.0, c.last()?.1)))
        .map(|(lo, hi)| format!("{quoted_key} BETWEEN {lo} AND {hi}"))
        .collect();
    if hulls.is_empty() {
        // No range: no row.
        return "1 = 0".to_owned();
    }
    format!("({})", hulls.join(" OR "))
}
