//! The mapping's configuration keys, the presets and their resolution into a [`Mapping`].
//!
//! Resolution order, key by key: an explicit key of the config (a `null` switches a preset's
//! pointer off), else the preset's value, else the default in docs/guide-http.md. Pure: no IO.
//! Invariant: a resolved `Mapping` has valid pointers and parameter names, at most
//! `LABELS_PER_ITEM_MAX` labels, at most `CONTENT_VALUES_MAX` content pointers, and either
//! cursor or positional pagination, never both.

use serde::Deserialize;
use serde_json::{Map, Value};

use super::pointer::{Pointer, Test};
use super::select::Trie;
use super::{ConfigError, Label, Mapping, Paging};
use crate::content::CONTENT_VALUES_MAX;
use crate::contract::{LABELS_PER_ITEM_MAX, LABEL_LEN_MAX};

/// Bytes of one request parameter name.
const PARAM_LEN_MAX: usize = 256;

/// A named set of pointers and parameter names for a common API shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Preset {
    /// GraphQL connections: `first`/`after` in, `nodes` and `pageInfo {hasNextPage,
    /// endCursor}` out; the end cursor counts as next only while `hasNextPage`.
    Relay,
    /// Notion: `start_cursor`/`page_size` in, `results`, `next_cursor`, `has_more` out.
    Notion,
    /// GitHub REST search: `page`/`per_page` page numbers from 1, `items`, `total_count`,
    /// `incomplete_results` (a truncation warning, R9).
    GithubRest,
    /// Jira Cloud enhanced search: `nextPageToken`/`maxResults` in, `issues`,
    /// `nextPageToken`, `isLast`, `total` out (`-1` is unknown).
    Jira,
    /// The MCP pagination convention: `cursor` in, `nextCursor` out, no page size.
    McpList,
}

impl Preset {
    /// The preset's name as configs spell it.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Preset::Relay => "relay",
            Preset::Notion => "notion",
            Preset::GithubRest => "github_rest",
            Preset::Jira => "jira",
            Preset::McpList => "mcp_list",
        }
    }
}

/// `None`: the key is absent; `Some(None)`: the key is `null`; `Some(Some(v))`: set.
type Nullable<T> = Option<Option<T>>;

fn nullable<'de, D: serde::Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<Nullable<T>, D::Error> {
    Option::<T>::deserialize(d).map(Some)
}

/// The mapping keys as a config file holds them, before the preset and defaults apply.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    preset: Option<Preset>,
    #[serde(default, deserialize_with = "nullable")]
    root: Nullable<String>,
    items: Option<String>,
    id: Option<String>,
    #[serde(default, deserialize_with = "nullable")]
    next: Nullable<String>,
    #[serde(default, deserialize_with = "nullable")]
    complete: Nullable<String>,
    #[serde(default, deserialize_with = "nullable")]
    has_more: Nullable<String>,
    #[serde(default, deserialize_with = "nullable")]
    snapshot: Nullable<String>,
    #[serde(default, deserialize_with = "nullable")]
    query: Nullable<String>,
    #[serde(default, deserialize_with = "nullable")]
    total: Nullable<String>,
    #[serde(default, deserialize_with = "nullable")]
    truncated: Nullable<String>,
    labels: Option<Map<String, Value>>,
    content: Option<Vec<String>>,
    #[serde(default, deserialize_with = "nullable")]
    cursor_param: Nullable<String>,
    #[serde(default, deserialize_with = "nullable")]
    page_size_param: Nullable<String>,
    #[serde(default, deserialize_with = "nullable")]
    page_param: Nullable<String>,
    #[serde(default, deserialize_with = "nullable")]
    offset_param: Nullable<String>,
    page_start: Option<u64>,
    #[serde(default, deserialize_with = "nullable")]
    snapshot_param: Nullable<String>,
    #[serde(default, deserialize_with = "nullable")]
    after_param: Nullable<String>,
    key_range_params: Option<RangeParams>,
}

/// `key_range_params`: the request parameters that ask the API for one slice of the keys.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RangeParams {
    lo: String,
    hi: String,
}

/// Every key the mapping reads; a source config splits its own keys from these.
pub const KEYS: &[&str] = &[
    "preset",
    "root",
    "items",
    "id",
    "next",
    "complete",
    "has_more",
    "snapshot",
    "query",
    "total",
    "truncated",
    "labels",
    "content",
    "cursor_param",
    "page_size_param",
    "page_param",
    "offset_param",
    "page_start",
    "snapshot_param",
    "after_param",
    "key_range_params",
];

fn s(v: &str) -> Nullable<String> {
    Some(Some(v.to_owned()))
}

fn preset_keys(p: Preset) -> Raw {
    match p {
        Preset::Relay => Raw {
            items: Some("/nodes".into()),
            id: Some("/id".into()),
            next: s("/pageInfo/endCursor"),
            has_more: s("/pageInfo/hasNextPage"),
            total: s("/totalCount"),
            cursor_param: s("after"),
            page_size_param: s("first"),
            ..Raw::default()
        },
        Preset::Notion => Raw {
            items: Some("/results".into()),
            id: Some("/id".into()),
            next: s("/next_cursor"),
            has_more: s("/has_more"),
            cursor_param: s("start_cursor"),
            page_size_param: s("page_size"),
            ..Raw::default()
        },
        Preset::GithubRest => Raw {
            items: Some("/items".into()),
            id: Some("/id".into()),
            total: s("/total_count"),
            truncated: s("/incomplete_results"),
            page_param: s("page"),
            page_start: Some(1),
            page_size_param: s("per_page"),
            ..Raw::default()
        },
        Preset::Jira => Raw {
            items: Some("/issues".into()),
            id: Some("/id".into()),
            next: s("/nextPageToken"),
            complete: s("/isLast"),
            total: s("/total"),
            cursor_param: s("nextPageToken"),
            page_size_param: s("maxResults"),
            ..Raw::default()
        },
        Preset::McpList => Raw {
            next: s("/nextCursor"),
            cursor_param: s("cursor"),
            page_size_param: Some(None),
            ..Raw::default()
        },
    }
}

fn bad(key: &str, problem: impl Into<String>) -> ConfigError {
    ConfigError::invalid(key, problem)
}

/// One label of `labels`: a pointer within the item and exactly one test.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct LabelSpec {
    pointer: String,
    // `null` is a value a test may compare with: present-and-null is `Some(None)`.
    #[serde(default, deserialize_with = "nullable")]
    eq: Nullable<Value>,
    #[serde(default, deserialize_with = "nullable")]
    ne: Nullable<Value>,
    #[serde(rename = "in")]
    in_: Option<Vec<Value>>,
    exists: Option<bool>,
    truthy: Option<bool>,
}

fn pointer(key: &str, text: &str) -> Result<Pointer, ConfigError> {
    Pointer::parse(text).map_err(|p| bad(key, p))
}

fn opt_pointer(key: &str, v: Nullable<String>) -> Result<Option<Pointer>, ConfigError> {
    v.flatten().map(|t| pointer(key, &t)).transpose()
}

fn param(key: &str, v: Nullable<String>) -> Result<Option<String>, ConfigError> {
    match v.flatten() {
        None => Ok(None),
        Some(p) if p.is_empty() || p.len() > PARAM_LEN_MAX => Err(bad(
            key,
            format!("a parameter name must be 1 to {PARAM_LEN_MAX} bytes"),
        )),
        Some(p) => Ok(Some(p)),
    }
}

/// Parses and resolves the mapping keys of a config object; keys not in [`KEYS`] are refused.
pub(super) fn resolve(obj: &Map<String, Value>) -> Result<Mapping, ConfigError> {
    let raw: Raw = crate::json::from_value(&Value::Object(obj.clone()))?;
    let preset = raw.preset;
    let p = preset.map(preset_keys).unwrap_or_default();
    // Positional pagination is chosen by `page_param`/`offset_param`, explicit or preset;
    // an explicit one overrides a preset's cursor keys, which then no longer apply.
    let explicit_positional =
        matches!(raw.page_param, Some(Some(_))) || matches!(raw.offset_param, Some(Some(_)));
    let explicit_cursor =
        matches!(raw.next, Some(Some(_))) || matches!(raw.cursor_param, Some(Some(_)));
    if explicit_positional && explicit_cursor {
        return Err(bad(
            "next",
            "\"next\"/\"cursor_param\" (cursor pagination) and \"page_param\"/\"offset_param\" (positional pagination) exclude each other",
        ));
    }
    let page_param = param("page_param", raw.page_param.or(p.page_param))?;
    let offset_param = param("offset_param", raw.offset_param.or(p.offset_param))?;
    let paging = match (page_param, offset_param) {
        (Some(_), Some(_)) => {
            return Err(bad(
                "page_param",
                "\"page_param\" and \"offset_param\" exclude each other",
            ))
        }
        (Some(name), None) => Paging::Page {
            param: name,
            start: raw.page_start.or(p.page_start).unwrap_or(1),
        },
        (None, Some(name)) => {
            if raw.page_start.is_some() {
                return Err(bad("page_start", "applies to \"page_param\" only"));
            }
            Paging::Offset { param: name }
        }
        (None, None) => {
            if raw.page_start.is_some() {
                return Err(bad("page_start", "applies to \"page_param\" only"));
            }
            let next = raw
                .next
                .or(p.next)
                .unwrap_or_else(|| Some("/next_page_token".into()));
            let Some(next) = next else {
                return Err(bad(
                    "next",
                    "cursor pagination needs a \"next\" pointer (or set \"page_param\" or \"offset_param\")",
                ));
            };
            Paging::Cursor {
                next: pointer("next", &next)?,
                param: param(
                    "cursor_param",
                    raw.cursor_param
                        .or(p.cursor_param)
                        .or_else(|| s("page_token")),
                )?
                .ok_or_else(|| bad("cursor_param", "cursor pagination needs a parameter name"))?,
            }
        }
    };
    let labels = labels(raw.labels.unwrap_or_default())?;
    let content = raw.content.unwrap_or_default();
    if content.len() > CONTENT_VALUES_MAX {
        return Err(bad(
            "content",
            format!("more than {CONTENT_VALUES_MAX} content pointers"),
        ));
    }
    let content = content
        .iter()
        .map(|t| pointer("content", t))
        .collect::<Result<Vec<_>, _>>()?;
    let mut m = Mapping {
        preset,
        root: opt_pointer("root", raw.root.or(p.root))?,
        items: pointer(
            "items",
            &raw.items.or(p.items).unwrap_or_else(|| "/items".into()),
        )?,
        id: pointer("id", &raw.id.or(p.id).unwrap_or_else(|| "/id".into()))?,
        paging,
        complete: opt_pointer("complete", raw.complete.or(p.complete))?,
        has_more: opt_pointer("has_more", raw.has_more.or(p.has_more))?,
        snapshot: opt_pointer("snapshot", raw.snapshot.or(p.snapshot))?,
        query: opt_pointer("query", raw.query.or(p.query))?,
        total: opt_pointer("total", raw.total.or(p.total))?,
        truncated: opt_pointer("truncated", raw.truncated.or(p.truncated))?,
        labels,
        content,
        page_size_param: param(
            "page_size_param",
            raw.page_size_param
                .or(p.page_size_param)
                .or_else(|| s("page_size")),
        )?,
        snapshot_param: param("snapshot_param", raw.snapshot_param.or(p.snapshot_param))?,
        after_param: param("after_param", raw.after_param.or(p.after_param))?,
        key_range_params: match raw.key_range_params {
            None => None,
            Some(r) => Some((
                param("key_range_params", Some(Some(r.lo)))?.unwrap_or_default(),
                param("key_range_params", Some(Some(r.hi)))?.unwrap_or_default(),
            )),
        },
        key_range: None,
        select: Trie::default(),
    };
    m.check_param_names()?;
    m.select = select_trie(&m);
    Ok(m)
}

/// The paths of every pointer the mapping reads, for `select::parse`.
fn select_trie(m: &Mapping) -> Trie {
    let prefix: Vec<String> = m
        .root
        .as_ref()
        .map(|r| r.tokens().to_vec())
        .unwrap_or_default();
    let mut item = Trie::default();
    item.add(&[], &m.id);
    for l in &m.labels {
        item.add(&[], &l.pointer);
    }
    for c in &m.content {
        item.add(&[], c);
    }
    let mut t = Trie::default();
    t.add_items(&prefix, &m.items, item);
    let next = match &m.paging {
        Paging::Cursor { next, .. } => Some(next),
        _ => None,
    };
    for p in [
        next,
        m.complete.as_ref(),
        m.has_more.as_ref(),
        m.snapshot.as_ref(),
        m.query.as_ref(),
        m.total.as_ref(),
        m.truncated.as_ref(),
    ]
    .into_iter()
    .flatten()
    {
        t.add(&prefix, p);
    }
    t
}

fn labels(obj: Map<String, Value>) -> Result<Vec<Label>, ConfigError> {
    if obj.len() > LABELS_PER_ITEM_MAX {
        return Err(bad(
            "labels",
            format!("more than {LABELS_PER_ITEM_MAX} labels"),
        ));
    }
    let mut out = Vec::with_capacity(obj.len());
    for (name, spec) in obj {
        // A label's name may hold a dot: its path is two keys, never split.
        let at = |problem: &str| ConfigError::invalid_at(&["labels", &name], problem);
        if name.is_empty() || name.len() > LABEL_LEN_MAX {
            return Err(at(&format!(
                "a label name must be 1 to {LABEL_LEN_MAX} bytes"
            )));
        }
        let spec: LabelSpec =
            crate::json::from_value(&spec).map_err(|e| e.under(&["labels", &name]))?;
        let tests = [
            spec.eq.map(|v| Test::Eq(v.unwrap_or(Value::Null))),
            spec.ne.map(|v| Test::Ne(v.unwrap_or(Value::Null))),
            spec.in_.map(Test::In),
            spec.exists.map(Test::Exists),
            spec.truthy.map(Test::Truthy),
        ];
        let mut given = tests.into_iter().flatten();
        let test = given
            .next()
            .ok_or_else(|| at("needs one test: eq, ne, in, exists or truthy"))?;
        if given.next().is_some() {
            return Err(at("give exactly one test"));
        }
        out.push(Label {
            pointer: Pointer::parse(&spec.pointer).map_err(|p| at(&p))?,
            name,
            test,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod keys_tests {
    #[test]
    fn keys_are_the_declared_fields() {
        // `KEYS` is public (a source config splits its own keys from these); it is the
        // declared shape's field list, never a second list that could drift from it.
        assert_eq!(super::KEYS, crate::json::field_names::<super::Raw>());
    }
}
