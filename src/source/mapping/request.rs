//! The request side of a mapping: from a `PageRequest` to named parameters and a position.
//!
//! Pure: no IO. Invariant: a position is always of the mapping's own paging (a cursor for
//! cursor pagination, a page number or an offset for positional pagination, or an after-key).

use serde_json::Value;

use super::pointer::type_name;
use super::{Call, ConfigError, Mapping, Paging, Position, RequestError};
use crate::digest;
use crate::reconcile::Request;
use crate::source::PageRequest;

impl Mapping {
    /// The parameters of one request and the position it asks for.
    ///
    /// # Errors
    /// `RequestError`: a stored cursor this mapping did not make, a query that is not an
    /// object or reuses a parameter name, a `high_water` request the mapping cannot make.
    pub fn call(&self, req: &PageRequest) -> Result<Call, RequestError> {
        let position = self.position(&req.request)?;
        let mut params: Vec<(String, Value)> = Vec::new();
        match &req.query {
            Value::Null => {}
            Value::Object(q) => {
                for (k, v) in q {
                    if self.param_names().any(|n| n == k) {
                        return Err(RequestError::ParamCollision { name: k.clone() });
                    }
                    params.push((k.clone(), v.clone()));
                }
            }
            other => {
                return Err(RequestError::QueryNotObject {
                    found: type_name(other),
                })
            }
        }
        if let Some(name) = &self.page_size_param {
            params.push((name.clone(), Value::from(req.page_size)));
        }
        match (&position, &self.paging) {
            (Position::First, _) => {}
            (Position::Cursor(c), Paging::Cursor { param, .. }) => {
                params.push((param.clone(), Value::from(c.as_str())));
            }
            (Position::Page(n), Paging::Page { param, .. })
            | (Position::Offset(n), Paging::Offset { param }) => {
                params.push((param.clone(), Value::from(*n)));
            }
            (Position::After(k), _) => {
                let name = self
                    .after_param
                    .as_ref()
                    .ok_or(RequestError::NoAfterParam)?;
                params.push((name.clone(), Value::from(k.as_str())));
            }
            // `position` only makes positions of the mapping's own paging.
            _ => unreachable!("invariant: a position of another paging"),
        }
        if let (Some(name), Some(s)) = (&self.snapshot_param, &req.snapshot) {
            params.push((name.clone(), Value::from(s.as_str())));
        }
        if let (Some((lo, hi)), Some(r)) = (&self.key_range_params, &self.key_range) {
            params.push((lo.clone(), Value::from(r.lo)));
            // A range to the end of the ID space (2^64 - 1 included) has no upper bound to
            // send: `hi` would leave that ID out.
            if !r.to_end() {
                params.push((hi.clone(), Value::from(r.hi)));
            }
        }
        Ok(Call { params, position })
    }

    /// Sends `range` on every request through the config's `key_range_params` (the API
    /// answers only the IDs `lo <= id < hi`, or `lo <= id` when no `hi` is sent: a range to the
    /// end of the ID space sends none); `None` sends nothing.
    ///
    /// # Errors
    /// `ConfigError` at `key_range_params` when a range is asked of a config that names no
    /// parameters for it: the API cannot be asked for a slice, so the scan is refused.
    pub fn bind_key_range(
        &mut self,
        range: Option<crate::contract::KeyRange>,
    ) -> Result<(), ConfigError> {
        if range.is_some() && self.key_range_params.is_none() {
            return Err(ConfigError::invalid("key_range_params", "the contract has a key_range, but this config names no key_range_params {\"lo\": PARAM, \"hi\": PARAM}: the API cannot be asked for one slice of the keys, so the shard cannot be scanned"));
        }
        self.key_range = range;
        Ok(())
    }

    fn position(&self, req: &Request) -> Result<Position, RequestError> {
        Ok(match (req, &self.paging) {
            (Request::After(k), Paging::Cursor { .. }) => {
                if self.after_param.is_none() {
                    return Err(RequestError::NoAfterParam);
                }
                Position::After(k.clone())
            }
            (Request::After(_), _) => return Err(RequestError::NoAfterParam),
            (Request::First, Paging::Cursor { .. }) => Position::First,
            (Request::Cursor(c), Paging::Cursor { .. }) => Position::Cursor(c.clone()),
            (Request::First, Paging::Page { start, .. }) => Position::Page(*start),
            (Request::First, Paging::Offset { .. }) => Position::Offset(0),
            (Request::Cursor(c), Paging::Page { .. }) => {
                Position::Page(parse_synthetic(c, "p:").ok_or_else(|| foreign(c, "page-number"))?)
            }
            (Request::Cursor(c), Paging::Offset { .. }) => {
                Position::Offset(parse_synthetic(c, "o:").ok_or_else(|| foreign(c, "offset"))?)
            }
        })
    }

    /// Every parameter name the mapping itself sends (cursor or position, page size,
    /// snapshot, after-key): a caller's query may not use them.
    pub fn sent_names(&self) -> impl Iterator<Item = &str> {
        self.param_names()
    }

    /// Every parameter name the mapping itself sends.
    fn param_names(&self) -> impl Iterator<Item = &str> {
        let paging = match &self.paging {
            Paging::Cursor { param, .. }
            | Paging::Page { param, .. }
            | Paging::Offset { param } => param.as_str(),
        };
        [
            Some(paging),
            self.page_size_param.as_deref(),
            self.snapshot_param.as_deref(),
            self.after_param.as_deref(),
            self.key_range_params.as_ref().map(|(lo, _)| lo.as_str()),
            self.key_range_params.as_ref().map(|(_, hi)| hi.as_str()),
        ]
        .into_iter()
        .flatten()
    }

    /// Refuses two of the mapping's own parameters sharing a name.
    pub(super) fn check_param_names(&self) -> Result<(), ConfigError> {
        let names: Vec<&str> = self.param_names().collect();
        for (i, a) in names.iter().enumerate() {
            if names[..i].contains(a) {
                return Err(ConfigError::invalid(
                    "page_size_param",
                    format!("the parameter name {a:?} is used twice"),
                ));
            }
        }
        Ok(())
    }
}

fn foreign(cursor: &str, paging: &'static str) -> RequestError {
    RequestError::ForeignCursor {
        cursor: digest::cursor_fingerprint(Some(cursor)),
        paging,
    }
}

/// `prefix` + decimal digits without leading zeros, as `next_synthetic` writes them.
fn parse_synthetic(c: &str, prefix: &str) -> Option<u64> {
    let digits = c.strip_prefix(prefix)?;
    if digits.is_empty()
        || !digits.bytes().all(|b| b.is_ascii_digit())
        || (digits.len() > 1 && digits.starts_with('0'))
    {
        return None;
    }
    digits.parse().ok()
}

impl Mapping {
    /// The synthetic cursor of the position after a page of `n_items` asked at `at`, for a
    /// positional mapping. A position of another kind (a caller's mistake: `call` makes only
    /// the mapping's own) is taken as the first page, so the traversal stays well defined.
    pub(super) fn next_synthetic(&self, at: &Position, n_items: usize) -> Option<String> {
        match (&self.paging, at) {
            (Paging::Page { .. }, Position::Page(n)) => Some(format!("p:{}", n.saturating_add(1))),
            (Paging::Page { start, .. }, _) => Some(format!("p:{}", start.saturating_add(1))),
            (Paging::Offset { .. }, Position::Offset(n)) => {
                Some(format!("o:{}", n.saturating_add(n_items as u64)))
            }
            (Paging::Offset { .. }, _) => Some(format!("o:{n_items}")),
            (Paging::Cursor { .. }, _) => None,
        }
    }
}
