//! Verify (docs/REFERENCE.md §7): recompute a receipt from a run's stored evidence and compare.
//!
//! Pure: the caller loads the run (contract, record, ID and label bitmaps, page log, stored
//! root and leaves) and hands it over as `Evidence`; nothing here reads a file or a clock.
//! What is recomputed rather than copied: the query digest (from the stored scope), the
//! cursor chain digest, page and record counts (from the page log), the unique count,
//! partitions and Merkle root (from the ID bitmaps), the labels (from the label bitmaps), the
//! status and conclusion (from the violations), and the duplicates (records minus unique IDs).
//! The stored root and leaves are checked against the bitmaps too, because `diff` trusts them.
//! A merged run's shard list comes from its record; its ranges must cover the key space as a
//! plan's do, and when the run is verified every shard must have been merged verified, with
//! the unique count and Merkle root of the merged IDs in its range (a shard's own receipt's).
//! Every field of the receipt is compared; the first mismatch in field order is the verdict.

use serde_json::Value;

use crate::contract::Contract;
use crate::digest::{self, Hash};
use crate::receipt::{Receipt, RunMeta, ShardEntry, ShardFinding};
use crate::reconcile::{Reconciler, Status};

/// Characters of a value shown in a mismatch before it is shortened.
const SHOWN_CHARS_MAX: usize = 120;
/// How a mismatch shows a key that one side does not have.
const ABSENT: &str = "(absent)";

/// One page of the page log, as verify needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageEvidence {
    /// `digest::cursor_hash` of the page's `next` cursor.
    pub cursor_hash: Hash,
    /// Items on the page.
    pub n_items: u32,
}

/// A run's stored evidence.
#[derive(Debug, Clone, Copy)]
pub struct Evidence<'a> {
    /// The run's effective contract.
    pub contract: &'a Contract,
    /// Its metadata (ID, times, links).
    pub meta: &'a RunMeta,
    /// Its state as restored from the store (progress, ID and label sets, codec).
    pub reconciler: &'a Reconciler,
    /// The page log, in page order.
    pub pages: &'a [PageEvidence],
    /// The Merkle root recorded when the run finished.
    pub stored_root: Option<Hash>,
    /// The leaves the store serves to `diff`, ascending by partition.
    pub stored_leaves: &'a [(u64, Hash)],
}

/// Where a mismatching value was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FoundIn {
    /// In the receipt under verification.
    Receipt,
    /// In the store's own records (the run record, the stored root or leaves), which
    /// disagree with the evidence they summarize: the store is damaged or was edited.
    Store,
}

/// A value that does not match what the store's evidence recomputes.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Mismatch {
    /// The receipt field, dotted for nested values (`labels.needs_migration.count`).
    pub field: String,
    /// Where the mismatching value was found.
    pub found_in: FoundIn,
    /// The value found, as compact JSON (shortened).
    pub found: String,
    /// The value the evidence gives, as compact JSON (shortened).
    pub recomputed: String,
    /// What the store disagrees with, for `FoundIn::Store`.
    pub detail: Option<String>,
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.found_in {
            FoundIn::Receipt => write!(
                f,
                "{}: the receipt says {}, the store recomputes {}",
                self.field, self.found, self.recomputed
            ),
            FoundIn::Store => write!(
                f,
                "{}: the store records {}, its evidence recomputes {} ({})",
                self.field,
                self.found,
                self.recomputed,
                self.detail.as_deref().unwrap_or("store inconsistent")
            ),
        }
    }
}

/// The receipt the evidence supports: built from the run's state, with the counts and the
/// chain digest taken from the page log rather than from the run record.
#[must_use]
pub fn recompute(e: &Evidence<'_>) -> Receipt {
    let mut r = Receipt::build(e.contract, e.meta, e.reconciler);
    // The digest from the stored scope, not from the record: a contract edited in place
    // would show up here.
    r.query_digest = digest::query_digest(&e.contract.scope);
    r.pages_observed = u32::try_from(e.pages.len()).unwrap_or(u32::MAX);
    r.records_observed = e.pages.iter().map(|p| u64::from(p.n_items)).sum();
    r.duplicate_ids = r.records_observed.saturating_sub(r.unique_ids_observed);
    r.cursor_chain_digest = digest::display(&digest::chain_of(
        &r.query_digest,
        r.snapshot_id.as_deref(),
        e.pages.iter().map(|p| &p.cursor_hash),
    ));
    if r.coverage_status == Status::Verified {
        if let Some(shards) = &mut r.shards {
            for s in shards.iter_mut() {
                *s = verified_shard(s, e.reconciler);
            }
        }
    }
    r
}

/// What a verified merged run's entry must say: its shard merged and verified, with the count
/// and root of the merged IDs in its range. The store and run are the record's.
fn verified_shard(stored: &ShardEntry, rec: &Reconciler) -> ShardEntry {
    let ids = crate::receipt::range_evidence(rec.ids(), stored.key_range);
    let (root, _) = crate::receipt::merkle_root_of(&ids, rec.codec());
    ShardEntry {
        finding: ShardFinding::Merged,
        coverage_status: Some(Status::Verified),
        unique_ids_observed: ids.len(),
        merkle_root: Some(digest::display(&root)),
        ..stored.clone()
    }
}

/// Compares a receipt with the evidence; an empty list means every field matches.
/// Mismatches come in receipt field order, so the first is the one to report.
#[must_use]
pub fn check(claimed: &Receipt, e: &Evidence<'_>) -> Vec<Mismatch> {
    let expected = recompute(e);
    let mut out = compare(claimed, &expected);
    // The store against itself: the record's counters and root, and the leaves diff uses.
    let p = e.reconciler.progress();
    let record_chain = digest::display(&p.chain);
    if record_chain != expected.cursor_chain_digest {
        out.push(store_mismatch(
            "cursor_chain_digest",
            &record_chain,
            &expected.cursor_chain_digest,
            "the run record's chain differs from the one its page log recomputes",
        ));
    }
    if p.records_observed != expected.records_observed {
        out.push(store_mismatch(
            "records_observed",
            &p.records_observed.to_string(),
            &expected.records_observed.to_string(),
            "the run record's count differs from the sum of its page log",
        ));
    }
    if p.duplicate_ids != expected.duplicate_ids {
        out.push(store_mismatch(
            "duplicate_ids",
            &p.duplicate_ids.to_string(),
            &expected.duplicate_ids.to_string(),
            "the run record's duplicates differ from records minus unique IDs",
        ));
    }
    if let Some(root) = e.stored_root {
        let stored = digest::display(&root);
        if stored != expected.merkle_root {
            out.push(store_mismatch(
                "merkle_root",
                &stored,
                &expected.merkle_root,
                "the root stored at finish differs from the root of the ID bitmaps",
            ));
        }
    }
    let leaves = digest::leaves(e.reconciler.ids());
    if let Some(&p) = crate::evidence::diff::differing_partitions(e.stored_leaves, &leaves).first()
    {
        let leaf_of = |list: &[(u64, Hash)]| {
            list.iter()
                .find(|(q, _)| *q == p)
                .map_or_else(|| "no leaf".to_owned(), |(_, h)| digest::display(h))
        };
        out.push(store_mismatch(
            "merkle_root",
            &leaf_of(e.stored_leaves),
            &leaf_of(&leaves),
            &format!("the stored Merkle leaf of partition {p} differs from its bitmap's"),
        ));
    }
    if let Some(stored) = &e.meta.merged {
        let cover = e.contract.scope.key_range;
        out.extend(shard_list_mismatches(&stored.shards, cover, &expected));
    }
    let order = field_order(&expected);
    out.sort_by_key(|m| {
        let top = m.field.split(['.', '[']).next().unwrap_or("");
        order.iter().position(|f| f == top).unwrap_or(usize::MAX)
    });
    out
}

/// The store against itself for a merged run: the recorded shard list is a plan's, and (for
/// a verified run) says of each shard what the ID bitmaps give. The first difference only.
fn shard_list_mismatches(
    stored: &[ShardEntry],
    cover: Option<crate::contract::KeyRange>,
    expected: &Receipt,
) -> Option<Mismatch> {
    if let Err(why) =
        crate::receipt::check_shape(stored).and(crate::receipt::check_cover_of(stored, cover))
    {
        return Some(store_mismatch(
            "shards",
            &format!("{} shards", stored.len()),
            "a plan's cover of the key space",
            &format!("the run record's shard list is not a plan's: {why}"),
        ));
    }
    let recomputed = expected.shards.as_deref().unwrap_or_default();
    let (Ok(s), Ok(x)) = (
        serde_json::to_value(stored),
        serde_json::to_value(recomputed),
    ) else {
        return None;
    };
    (s != x).then(|| {
        let m = first_difference("shards".to_owned(), &s, &x);
        Mismatch {
            found_in: FoundIn::Store,
            detail: Some(
                "store inconsistent: the run record's shard list differs from what the merged ID bitmaps give a verified run"
                    .to_owned(),
            ),
            ..m
        }
    })
}

fn store_mismatch(field: &str, stored: &str, recomputed: &str, why: &str) -> Mismatch {
    Mismatch {
        field: field.to_owned(),
        found_in: FoundIn::Store,
        found: stored.to_owned(),
        recomputed: recomputed.to_owned(),
        detail: Some(format!("store inconsistent: {why}")),
    }
}

fn to_value(r: &Receipt) -> Value {
    // A receipt is plain data: serializing it to a Value cannot fail.
    serde_json::to_value(r).unwrap_or(Value::Null)
}

fn field_order(r: &Receipt) -> Vec<String> {
    match to_value(r) {
        Value::Object(m) => m.keys().cloned().collect(),
        _ => Vec::new(),
    }
}

/// Compares two receipts field by field, in the order of `expected`; one mismatch per
/// top-level field, at the first differing path inside it.
#[must_use]
pub fn compare(claimed: &Receipt, expected: &Receipt) -> Vec<Mismatch> {
    let (Value::Object(c), Value::Object(x)) = (to_value(claimed), to_value(expected)) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (key, xv) in &x {
        let cv = c.get(key).unwrap_or(&Value::Null);
        if cv != xv {
            out.push(first_difference(key.clone(), cv, xv));
        }
    }
    // A key only the claimed receipt has (a shard list on a run that was not merged).
    for (key, cv) in &c {
        if !x.contains_key(key) {
            out.push(Mismatch {
                recomputed: ABSENT.to_owned(),
                ..mismatch(key.clone(), cv, &Value::Null)
            });
        }
    }
    out
}

/// Walks two JSON values to the first place they differ. Bounded by the receipt's nesting,
/// which is at most four levels deep (labels -> name -> ranges -> index; shards -> index ->
/// key_range -> lo).
fn first_difference(path: String, claimed: &Value, expected: &Value) -> Mismatch {
    match (claimed, expected) {
        (Value::Object(c), Value::Object(x)) => {
            for (k, xv) in x {
                match c.get(k) {
                    None => {
                        return Mismatch {
                            found: ABSENT.to_owned(),
                            ..mismatch(format!("{path}.{k}"), &Value::Null, xv)
                        }
                    }
                    Some(cv) if cv != xv => return first_difference(format!("{path}.{k}"), cv, xv),
                    Some(_) => {}
                }
            }
            for (k, cv) in c {
                if !x.contains_key(k) {
                    return Mismatch {
                        recomputed: ABSENT.to_owned(),
                        ..mismatch(format!("{path}.{k}"), cv, &Value::Null)
                    };
                }
            }
        }
        (Value::Array(c), Value::Array(x)) if c.len() == x.len() => {
            for (i, (cv, xv)) in c.iter().zip(x).enumerate() {
                if cv != xv {
                    return first_difference(format!("{path}[{i}]"), cv, xv);
                }
            }
        }
        _ => {}
    }
    mismatch(path, claimed, expected)
}

fn mismatch(field: String, claimed: &Value, expected: &Value) -> Mismatch {
    Mismatch {
        field,
        found_in: FoundIn::Receipt,
        found: shown(claimed),
        recomputed: shown(expected),
        detail: None,
    }
}

fn shown(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() <= SHOWN_CHARS_MAX {
        return s;
    }
    let cut: String = s.chars().take(SHOWN_CHARS_MAX).collect();
    format!("{cut}…")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::{Item, Page};
    use crate::receipt::RunId;

    fn evidence_parts() -> (Contract, RunMeta, Reconciler, Vec<PageEvidence>) {
        let contract = Contract::new("customers");
        let mut rec = Reconciler::new(&contract);
        let mut pages = Vec::new();
        for (ids, next) in [(vec![1, 2, 3], Some("c1")), (vec![4, 5], None)] {
            let page = Page {
                items: ids.into_iter().map(Item::int).collect(),
                next: next.map(str::to_owned),
                ..Page::default()
            };
            let _ = rec.observe(&page);
            pages.push(PageEvidence {
                cursor_hash: digest::cursor_hash(next),
                n_items: u32::try_from(page.items.len()).unwrap_or(u32::MAX),
            });
        }
        let meta = RunMeta {
            run_id: RunId(1),
            restarts: 0,
            started_at: "2026-01-01T00:00:00.000Z".to_owned(),
            finished_at: Some("2026-01-01T00:00:01.000Z".to_owned()),
            restarted_from: None,
            superseded_by: None,
            server_count: None,
            merged: None,
        };
        (contract, meta, rec, pages)
    }

    #[test]
    fn an_untouched_receipt_matches_and_a_changed_one_does_not() {
        let (contract, meta, rec, pages) = evidence_parts();
        let leaves = digest::leaves(rec.ids());
        let e = Evidence {
            contract: &contract,
            meta: &meta,
            reconciler: &rec,
            pages: &pages,
            stored_root: Some(digest::merkle_root(rec.ids())),
            stored_leaves: &leaves,
        };
        let good = Receipt::build(&contract, &meta, &rec);
        assert_eq!(check(&good, &e), Vec::new());

        let mut bad = good.clone();
        bad.unique_ids_observed += 1;
        bad.pages_observed += 1;
        let m = check(&bad, &e);
        assert_eq!(m.len(), 2);
        assert_eq!(m[0].field, "pages_observed");
        assert_eq!(m[1].field, "unique_ids_observed");
    }

    #[test]
    fn a_page_missing_from_the_log_breaks_the_chain() {
        let (contract, meta, rec, mut pages) = evidence_parts();
        pages.remove(0);
        let leaves = digest::leaves(rec.ids());
        let e = Evidence {
            contract: &contract,
            meta: &meta,
            reconciler: &rec,
            pages: &pages,
            stored_root: None,
            stored_leaves: &leaves,
        };
        let good = Receipt::build(&contract, &meta, &rec);
        let fields: Vec<String> = check(&good, &e).into_iter().map(|m| m.field).collect();
        assert!(
            fields.contains(&"cursor_chain_digest".to_owned()),
            "{fields:?}"
        );
        assert_eq!(fields[0], "pages_observed");
    }

    #[test]
    fn a_nested_difference_is_named_by_its_path() {
        let (contract, meta, rec, _) = evidence_parts();
        let good = Receipt::build(&contract, &meta, &rec);
        let mut bad = good.clone();
        bad.labels.insert(
            "x".to_owned(),
            crate::receipt::LabelSummary {
                count: 1,
                ranges: vec!["1..1".to_owned()],
                ranges_total: 1,
            },
        );
        let m = compare(&bad, &good);
        assert_eq!(m[0].field, "labels.x");
    }
}
