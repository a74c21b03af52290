//! Rendering stored IDs in their original form without loading a run's whole dictionary: the
//! strings of exactly the IDs to print are looked up (and checked) once.

use std::collections::HashMap;

use crate::contract::IdCodecKind;
use crate::store::{ReadError, RunHeader, ScopeKey, Snapshot};

/// Renders a run's u64 IDs in their original form.
#[derive(Debug, Clone)]
pub struct Renderer {
    kind: IdCodecKind,
    prefix: Option<String>,
    strings: HashMap<u64, String>,
}

impl Renderer {
    /// A renderer for `ids` of the run `header` describes; for the `string` codec, their
    /// strings are read from the store (point lookups, each checked against its digest).
    ///
    /// # Errors
    /// `ReadError` when a string is missing or damaged.
    pub fn for_ids(
        snap: &Snapshot<'_>,
        header: &RunHeader,
        ids: impl IntoIterator<Item = u64>,
    ) -> Result<Renderer, ReadError> {
        let kind = header.contract.id_codec;
        let mut strings = HashMap::new();
        if kind == IdCodecKind::String {
            let mut wanted: Vec<u64> = ids.into_iter().collect();
            wanted.sort_unstable();
            wanted.dedup();
            let found = snap.strings(&ScopeKey::of(&header.contract), &wanted)?;
            strings = wanted.into_iter().zip(found).collect();
        }
        Ok(Renderer {
            kind,
            prefix: header.id_prefix.clone(),
            strings,
        })
    }

    /// The original form of an ID (a string ID not looked up prints as `#N`).
    #[must_use]
    pub fn render(&self, id: u64) -> String {
        match self.kind {
            IdCodecKind::Int => id.to_string(),
            IdCodecKind::Signed => crate::codec::signed_of(id).to_string(),
            IdCodecKind::Prefixed => format!("{}{id}", self.prefix.as_deref().unwrap_or("")),
            IdCodecKind::String => self
                .strings
                .get(&id)
                .cloned()
                .unwrap_or_else(|| format!("#{id}")),
        }
    }

    /// The original form as JSON: a number for the `int` and `signed` codecs, a string
    /// otherwise.
    #[must_use]
    pub fn json(&self, id: u64) -> serde_json::Value {
        match self.kind {
            IdCodecKind::Int => serde_json::Value::from(id),
            IdCodecKind::Signed => serde_json::Value::from(crate::codec::signed_of(id)),
            _ => serde_json::Value::String(self.render(id)),
        }
    }

    /// `"FIRST..LAST"` strings of ranges.
    #[must_use]
    pub fn ranges(&self, ranges: &[(u64, u64)]) -> Vec<String> {
        ranges
            .iter()
            .map(|(a, b)| format!("{}..{}", self.render(*a), self.render(*b)))
            .collect()
    }
}
