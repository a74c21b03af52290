//! The deserializer under [`from_value`](super::from_value): a strictly parsed `Value` read
//! into a serde-derived type, where a struct is only ever an object.
//!
//! `serde_json`'s own deserializers hand an array to a derived struct's `visit_seq`, so
//! `"limits": [5]` would read as `max_pages: 5` by position; here a struct takes an object
//! or is refused, and an enum takes a string (a unit variant) or an object of one key.

use std::marker::PhantomData;

use serde::de::value::{MapAccessDeserializer, MapDeserializer, SeqDeserializer};
use serde::de::{self, IntoDeserializer, Unexpected, Visitor};
use serde_json::Value;

/// A borrowed strict value as a serde deserializer.
pub(super) struct ValueDe<'de, E> {
    value: &'de Value,
    error: PhantomData<E>,
}

impl<'de, E> ValueDe<'de, E> {
    pub(super) fn new(value: &'de Value) -> ValueDe<'de, E> {
        ValueDe {
            value,
            error: PhantomData,
        }
    }

    fn unexpected(&self) -> Unexpected<'de> {
        match self.value {
            Value::Null => Unexpected::Unit,
            Value::Bool(b) => Unexpected::Bool(*b),
            Value::Number(n) => match (n.as_u64(), n.as_i64()) {
                (Some(u), _) => Unexpected::Unsigned(u),
                (None, Some(i)) => Unexpected::Signed(i),
                _ => Unexpected::Float(n.as_f64().unwrap_or_default()),
            },
            Value::String(s) => Unexpected::Str(s),
            Value::Array(_) => Unexpected::Seq,
            Value::Object(_) => Unexpected::Map,
        }
    }
}

impl<'de, E: de::Error> IntoDeserializer<'de, E> for ValueDe<'de, E> {
    type Deserializer = Self;
    fn into_deserializer(self) -> Self {
        self
    }
}

impl<'de, E: de::Error> de::Deserializer<'de> for ValueDe<'de, E> {
    type Error = E;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, E> {
        match self.value {
            Value::Null => visitor.visit_unit(),
            Value::Bool(b) => visitor.visit_bool(*b),
            Value::Number(n) => match (n.as_u64(), n.as_i64()) {
                (Some(u), _) => visitor.visit_u64(u),
                (None, Some(i)) => visitor.visit_i64(i),
                _ => visitor.visit_f64(n.as_f64().unwrap_or_default()),
            },
            Value::String(s) => visitor.visit_borrowed_str(s),
            Value::Array(a) => {
                let mut seq = SeqDeserializer::new(a.iter().map(ValueDe::new));
                let out = visitor.visit_seq(&mut seq)?;
                seq.end()?;
                Ok(out)
            }
            Value::Object(o) => {
                let mut map =
                    MapDeserializer::new(o.iter().map(|(k, v)| (k.as_str(), ValueDe::new(v))));
                let out = visitor.visit_map(&mut map)?;
                map.end()?;
                Ok(out)
            }
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, E> {
        match self.value {
            Value::Null => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        _: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, E> {
        match self.value {
            Value::Object(_) => self.deserialize_any(visitor),
            _ => Err(de::Error::invalid_type(self.unexpected(), &visitor)),
        }
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _: &'static str,
        _: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, E> {
        match self.value {
            Value::String(s) => visitor.visit_enum(s.as_str().into_deserializer()),
            Value::Object(o) if o.len() == 1 => {
                let map =
                    MapDeserializer::new(o.iter().map(|(k, v)| (k.as_str(), ValueDe::new(v))));
                visitor.visit_enum(MapAccessDeserializer::new(map))
            }
            _ => Err(de::Error::invalid_type(self.unexpected(), &"a string")),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        visitor: V,
    ) -> Result<V::Value, E> {
        visitor.visit_newtype_struct(self)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf unit unit_struct seq tuple tuple_struct map identifier ignored_any
    }
}
