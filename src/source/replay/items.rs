//! The `items` of a replay line, parsed straight into `Item`s: integers, strings,
//! `{"id": ..., "labels": [...]}` objects, or the `{"range": [LO, HI], "prefix": ...}`
//! generator, which is kept as its bounds and expanded only when the page is served.
//!
//! Bounded: a list keeps at most `ITEMS_PER_PAGE_MAX + 1` items and an item at most
//! `LABELS_PER_ITEM_MAX + 1` labels (one past the bound, so the reconciler reports R16),
//! reading the rest without keeping it; a generator yields at most `ITEMS_PER_PAGE_MAX + 1`
//! IDs whatever its range, with checked arithmetic up to `u64::MAX`, and its prefix is at most
//! `PREFIX_LEN_MAX` bytes. An integer ID is a `RawId::Int`, or when negative a `RawId::Neg` (the
//! `signed` codec takes it); an ID of another JSON type (fractional, `true`, an array) is kept
//! as `RawId::Other` with a short description for the codec to refuse (R16).

use std::fmt;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde::Deserializer;

use super::line::{Context, KeySeed, Mode, Scalar, ScalarSeed, Skip};
use crate::contract::{Item, RawId, ITEMS_PER_PAGE_MAX, LABELS_PER_ITEM_MAX, PREFIX_LEN_MAX};

/// Items a page keeps: one past the bound, so the reconciler sees the page is too large.
pub(super) const ITEMS_KEPT_MAX: usize = ITEMS_PER_PAGE_MAX as usize + 1;
/// Labels an item keeps: one past the bound, for the same reason.
const LABELS_KEPT_MAX: usize = LABELS_PER_ITEM_MAX + 1;
/// Nesting of a value inside an item (line, `items`, the item), where skipping starts.
const ITEM_DEPTH: u32 = 3;

/// A line's items as parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Items {
    /// Listed items (none kept by `Mode::Validate`).
    List(Vec<Item>),
    /// The IDs `lo..=hi`, as integers or as `prefix` + decimal.
    Range {
        lo: u64,
        hi: u64,
        prefix: Option<String>,
    },
}

impl Items {
    /// The page's items: a list as parsed; a generator expanded, cut one past the page bound.
    pub(super) fn into_items(self) -> Vec<Item> {
        match self {
            Items::List(items) => items,
            Items::Range { lo, hi, prefix } => {
                // hi - lo cannot underflow (the parser refuses hi < lo), and `lo..=hi` stops
                // at `hi` even when it is u64::MAX, where `lo..lo + n` would wrap.
                let n = usize::try_from(hi - lo)
                    .map_or(ITEMS_KEPT_MAX, |d| d.saturating_add(1).min(ITEMS_KEPT_MAX));
                let mut items = Vec::with_capacity(n);
                items.extend((lo..=hi).take(n).map(|id| match &prefix {
                    Some(p) => Item::new(RawId::Str(prefixed(p, id))),
                    None => Item::int(id),
                }));
                items
            }
        }
    }
}

/// `prefix` followed by the decimal digits of `id`, in one allocation of the exact size.
pub(super) fn prefixed(prefix: &str, id: u64) -> String {
    let mut digits = [0u8; 20];
    let mut start = digits.len();
    let mut n = id;
    loop {
        start -= 1;
        // n % 10 < 10: the cast keeps the value.
        digits[start] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    let mut s = String::with_capacity(prefix.len() + digits.len() - start);
    s.push_str(prefix);
    s.extend(digits[start..].iter().map(|d| char::from(*d)));
    s
}

/// The `items` field.
pub(super) struct ItemsSeed {
    pub(super) mode: Mode,
    /// Items to allocate room for at once (`Mode::Collect`), at most `ITEMS_KEPT_MAX`.
    pub(super) capacity: usize,
}

impl<'de> DeserializeSeed<'de> for ItemsSeed {
    type Value = Items;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Items, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ItemsSeed {
    type Value = Items;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("field \"items\" to be an array or a {\"range\": [LO, HI]} object")
    }

    fn visit_unit<E: de::Error>(self) -> Result<Items, E> {
        Ok(Items::List(Vec::new()))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Items, A::Error> {
        let mut items = Vec::with_capacity(self.capacity.min(ITEMS_KEPT_MAX));
        let mut index = 0usize;
        loop {
            let keep = self.mode == Mode::Collect && items.len() < ITEMS_KEPT_MAX;
            let out = keep.then_some(&mut items);
            if seq.next_element_seed(ItemSeed { index, out })?.is_none() {
                break;
            }
            index = index.saturating_add(1);
        }
        Ok(Items::List(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Items, A::Error> {
        const KEYS: &[&str] = &["range", "prefix"];
        let mut range = None;
        let mut prefix: Option<Option<String>> = None;
        while let Some(idx) = map.next_key_seed(KeySeed {
            names: KEYS,
            context: Context::Generator,
        })? {
            if idx == 0 {
                if range.is_some() {
                    return Err(de::Error::custom("items: duplicate key \"range\""));
                }
                range = Some(map.next_value_seed(RangeSeed)?);
                continue;
            }
            if prefix.is_some() {
                return Err(de::Error::custom("items: duplicate key \"prefix\""));
            }
            let seed = ScalarSeed {
                key: "prefix",
                wants: "a string or null",
                context: Context::Generator,
            };
            let wrong = seed.wrong();
            prefix = Some(match map.next_value_seed(seed)? {
                Scalar::Null => None,
                Scalar::Str(p) if p.len() <= PREFIX_LEN_MAX => Some(p),
                Scalar::Str(p) => {
                    return Err(de::Error::custom(format_args!(
                        "items.prefix: {} bytes, longer than the bound of {PREFIX_LEN_MAX}",
                        p.len()
                    )))
                }
                _ => return Err(wrong),
            });
        }
        let (lo, hi) = range.ok_or_else(|| de::Error::custom("items.range must be [LO, HI]"))?;
        Ok(Items::Range {
            lo,
            hi,
            prefix: prefix.flatten(),
        })
    }
}

/// `[LO, HI]` of a generator: two integers in the u64 space, `LO <= HI`.
struct RangeSeed;

impl<'de> DeserializeSeed<'de> for RangeSeed {
    type Value = (u64, u64);
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(u64, u64), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for RangeSeed {
    type Value = (u64, u64);

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("items.range to be [LO, HI]")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(u64, u64), A::Error> {
        let mut bound = |name: &str| -> Result<u64, A::Error> {
            let seed = ScalarSeed {
                key: "range",
                wants: "[LO, HI]",
                context: Context::Generator,
            };
            match seq.next_element_seed(seed)? {
                Some(Scalar::U64(n)) => Ok(n),
                Some(_) => Err(de::Error::custom(format_args!(
                    "items.range: {name} must be an integer from 0 to 2^64 - 1"
                ))),
                None => Err(de::Error::custom("items.range must be [LO, HI]")),
            }
        };
        let lo = bound("LO")?;
        let hi = bound("HI")?;
        if seq.next_element_seed(Skip { depth: ITEM_DEPTH })?.is_some() {
            return Err(de::Error::custom("items.range must be [LO, HI]"));
        }
        if hi < lo {
            return Err(de::Error::custom("items.range: HI is below LO"));
        }
        Ok((lo, hi))
    }
}

/// One element of `items`, pushed straight onto the page's list when kept (`out`), so the
/// item is built in place rather than moved through the parser.
struct ItemSeed<'a> {
    index: usize,
    out: Option<&'a mut Vec<Item>>,
}

impl<'de> DeserializeSeed<'de> for ItemSeed<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl ItemSeed<'_> {
    fn id(self, id: impl FnOnce() -> RawId) {
        if let Some(out) = self.out {
            out.push(Item::new(id()));
        }
    }
}

impl<'de> Visitor<'de> for ItemSeed<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "items[{}] to be an ID or an item object", self.index)
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<(), E> {
        self.id(|| RawId::Int(v));
        Ok(())
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<(), E> {
        self.id(|| RawId::Str(v.to_owned()));
        Ok(())
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<(), E> {
        self.id(|| RawId::of_i64(v));
        Ok(())
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<(), E> {
        self.id(|| RawId::Other(float_text(v)));
        Ok(())
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<(), E> {
        self.id(|| RawId::Other(v.to_string()));
        Ok(())
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.id(|| RawId::Other("null".to_owned()));
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<(), A::Error> {
        Skip { depth: ITEM_DEPTH }.visit_seq(seq)?;
        self.id(|| RawId::Other("[…]".to_owned()));
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        const KEYS: &[&str] = &["id", "labels"];
        let context = Context::Item(self.index);
        let keep = self.out.is_some();
        let mut id: Option<Option<RawId>> = None;
        let mut labels: Option<Vec<String>> = None;
        while let Some(idx) = map.next_key_seed(KeySeed {
            names: KEYS,
            context,
        })? {
            let key = KEYS[idx];
            let seen = if idx == 0 {
                id.is_some()
            } else {
                labels.is_some()
            };
            if seen {
                return Err(de::Error::custom(format_args!(
                    "{context}duplicate key {key:?}"
                )));
            }
            if idx == 0 {
                id = Some(map.next_value_seed(IdSeed { keep })?);
            } else {
                labels = Some(map.next_value_seed(LabelsSeed {
                    index: self.index,
                    keep,
                })?);
            }
        }
        let id = id.ok_or_else(|| {
            de::Error::custom(format_args!("{context}an item object needs an \"id\""))
        })?;
        if let (Some(out), Some(id)) = (self.out, id) {
            out.push(Item {
                id,
                labels: labels.unwrap_or_default(),
                content: None,
            });
        }
        Ok(())
    }
}

fn float_text(v: f64) -> String {
    serde_json::Number::from_f64(v)
        .map_or_else(|| "a non-finite number".to_owned(), |n| n.to_string())
}

/// The `id` of an item object: as an element of `items`, but an object is only an odd ID.
struct IdSeed {
    keep: bool,
}

impl<'de> DeserializeSeed<'de> for IdSeed {
    type Value = Option<RawId>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Option<RawId>, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for IdSeed {
    type Value = Option<RawId>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an ID")
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Option<RawId>, E> {
        Ok(self.keep.then_some(RawId::Int(v)))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Option<RawId>, E> {
        Ok(self.keep.then(|| RawId::Str(v.to_owned())))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Option<RawId>, E> {
        Ok(self.keep.then(|| RawId::of_i64(v)))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Option<RawId>, E> {
        Ok(self.keep.then(|| RawId::Other(float_text(v))))
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Option<RawId>, E> {
        Ok(self.keep.then(|| RawId::Other(v.to_string())))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Option<RawId>, E> {
        Ok(self.keep.then(|| RawId::Other("null".to_owned())))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Option<RawId>, A::Error> {
        Skip { depth: ITEM_DEPTH }.visit_seq(seq)?;
        Ok(self.keep.then(|| RawId::Other("[…]".to_owned())))
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Option<RawId>, A::Error> {
        Skip { depth: ITEM_DEPTH }.visit_map(map)?;
        Ok(self.keep.then(|| RawId::Other("{…}".to_owned())))
    }
}

/// The `labels` of an item object: null or an array of strings.
struct LabelsSeed {
    index: usize,
    keep: bool,
}

impl LabelsSeed {
    fn wrong<E: de::Error>(&self) -> E {
        E::custom(format_args!(
            "items[{}]: field \"labels\" must be an array of strings",
            self.index
        ))
    }
}

impl<'de> DeserializeSeed<'de> for LabelsSeed {
    type Value = Vec<String>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Vec<String>, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for LabelsSeed {
    type Value = Vec<String>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "items[{}]: field \"labels\" to be an array of strings",
            self.index
        )
    }
    fn visit_unit<E: de::Error>(self) -> Result<Vec<String>, E> {
        Ok(Vec::new())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<String>, A::Error> {
        let mut labels = Vec::new();
        loop {
            let seed = ScalarSeed {
                key: "labels",
                wants: "an array of strings",
                context: Context::Item(self.index),
            };
            match seq.next_element_seed(seed)? {
                None => break,
                Some(Scalar::Str(l)) => {
                    if self.keep && labels.len() < LABELS_KEPT_MAX {
                        labels.push(l);
                    }
                }
                Some(_) => return Err(self.wrong()),
            }
        }
        Ok(labels)
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Vec<String>, E> {
        Err(self.wrong())
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Vec<String>, E> {
        Err(self.wrong())
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Vec<String>, E> {
        Err(self.wrong())
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Vec<String>, E> {
        Err(self.wrong())
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<Vec<String>, E> {
        Err(self.wrong())
    }
    fn visit_map<A: MapAccess<'de>>(self, _: A) -> Result<Vec<String>, A::Error> {
        Err(self.wrong())
    }
}
