//! Property tests of the reconciliation core, the ID set and the digests, through the public API.
//!
//! Laws, as roaring's `proptests.rs` states them for set algebra:
//! - the reconciler agrees with a small model of docs/REFERENCE.md §6 (a `BTreeSet<u64>` of IDs, a set of
//!   cursors, the end-signal rule and the budgets) on status, findings, counts and scope;
//! - `verified` needs the end signal: a traversal cut before its terminal page never is;
//! - unique IDs are the set's cardinality and `records_observed == unique + duplicate_ids`;
//! - the Merkle root is a function of the ID set alone: page order, page boundaries and the
//!   roaring container kind do not change it, adding or removing an ID does;
//! - the cursor chain changes when any cursor changes, and recomputes from `digest`;
//! - a run with a violation never concludes anything;
//! - `IdSet` round-trips through its iterators and partitions and keeps its invariants.
//!
//! ID sets are generated in the three roaring shapes (array, bitmap: more than 4096 IDs in one
//! 65536-wide partition, runs). Case counts stay modest: the test machine has two cores.

#![allow(clippy::unwrap_used)] // Tests: a panic is the failure report.

use std::collections::{BTreeMap, BTreeSet};

use proptest::collection::vec;
use proptest::option;
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use roaring::RoaringBitmap;
use scanledger::{
    digest, Contract, EndSignal, IdCodecKind, IdSet, Item, Limits, Mode, Page, RawId, Reconciler,
    SnapshotPolicy, Status, Step, ViolationKind,
};
use scanledger::{partition_of, PARTITION_WIDTH};
use serde_json::{json, Value};

/// Proptest settings: `cases` cases, failures kept in the crate's `proptest-regressions/`.
fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(
            "proptest-regressions/it/props.txt",
        ))),
        ..ProptestConfig::default()
    }
}

// ---------------------------------------------------------------------------------------------
// Generators.

/// One page as the model sees it.
#[derive(Debug, Clone)]
struct PageSpec {
    ids: Vec<u64>,
    /// Index into a small cursor pool, so that loops happen.
    next: Option<u8>,
    complete: Option<bool>,
    truncated: bool,
    /// `snap-N`, or no echo.
    snapshot: Option<u8>,
    /// The page echoes a query other than the contract's.
    query_changed: bool,
    /// Labels on the first item, if any.
    label: Option<u8>,
    /// The total the page echoes, if any.
    total: Option<u64>,
}

#[derive(Debug, Clone)]
struct ContractSpec {
    end_signal: EndSignal,
    snapshot: Option<u8>,
    expected_count: Option<u64>,
    max_pages: Option<u32>,
    max_records: Option<u64>,
    sample: Option<u64>,
    restart_on_snapshot_change: bool,
}

fn cursor(n: u8) -> String {
    format!("SECRET-CURSOR-{n}")
}

fn snapshot(n: u8) -> String {
    format!("snap-{n}")
}

fn end_signal() -> impl Strategy<Value = EndSignal> {
    prop_oneof![
        Just(EndSignal::CursorAbsent),
        Just(EndSignal::CompleteFlag),
        Just(EndSignal::Both),
        Just(EndSignal::Total),
        Just(EndSignal::EmptyPage),
    ]
}

fn contract_spec() -> impl Strategy<Value = ContractSpec> {
    (
        end_signal(),
        option::weighted(0.5, 0u8..2),
        option::weighted(0.3, 0u64..24),
        option::weighted(0.2, 1u32..8),
        option::weighted(0.2, 1u64..30),
        option::weighted(0.1, 1u64..30),
        any::<bool>(),
    )
        .prop_map(
            |(end_signal, snapshot, expected_count, max_pages, max_records, sample, restart)| {
                ContractSpec {
                    end_signal,
                    snapshot,
                    expected_count,
                    max_pages,
                    max_records,
                    sample,
                    restart_on_snapshot_change: restart,
                }
            },
        )
}

fn page_spec(id_max: u64) -> impl Strategy<Value = PageSpec> {
    (
        vec(0..id_max, 0..6),
        option::weighted(0.8, 0u8..32),
        prop_oneof![6 => Just(None), 2 => Just(Some(true)), 1 => Just(Some(false))],
        prop::bool::weighted(0.05),
        option::weighted(0.3, prop_oneof![9 => Just(0u8), 1 => Just(1u8)]),
        prop::bool::weighted(0.03),
        option::weighted(0.2, 0u8..3),
        option::weighted(0.2, 0u64..24),
    )
        .prop_map(
            |(ids, next, complete, truncated, snapshot, query_changed, label, total)| PageSpec {
                ids,
                next,
                complete,
                truncated,
                snapshot,
                query_changed,
                label,
                total,
            },
        )
}

fn contract_of(spec: &ContractSpec) -> Contract {
    let mut c = Contract::new("props");
    c.scope.query = json!({"status": "active"});
    c.end_signal = spec.end_signal;
    c.snapshot_id = spec.snapshot.map(snapshot);
    c.expected_count = spec.expected_count;
    c.limits = {
        let mut limits = Limits::default();
        limits.max_pages = spec.max_pages;
        limits.max_records = spec.max_records;
        limits
    };
    if let Some(n) = spec.sample {
        c.mode = Mode::Sample(n);
    }
    if spec.restart_on_snapshot_change {
        c.on_snapshot_change = SnapshotPolicy::Restart;
    }
    c
}

fn page_of(spec: &PageSpec) -> Page {
    let mut items: Vec<Item> = spec.ids.iter().map(|i| Item::int(*i)).collect();
    if let (Some(l), Some(first)) = (spec.label, items.first_mut()) {
        first.labels.push(format!("label-{l}"));
    }
    {
        let mut page = Page::default();
        page.items = items;
        page.next = spec.next.map(cursor);
        page.complete = spec.complete;
        page.snapshot = spec.snapshot.map(snapshot);
        page.query = spec
            .query_changed
            .then(|| json!({"status": "any"}))
            .or_else(|| {
                // Most pages do not echo the query; some echo it unchanged.
                (spec.ids.len() % 2 == 1).then(|| json!({"status": "active"}))
            });
        page.truncated = spec.truncated;
        page.size_bytes = 100;
        page.total = spec.total;
        page
    }
}

/// ID sets in the three roaring container shapes.
fn sparse_ids() -> impl Strategy<Value = Vec<u64>> {
    vec(0u64..(1 << 40), 0..300)
}

/// More than 4096 IDs in one partition: a bitmap container.
fn dense_ids() -> impl Strategy<Value = Vec<u64>> {
    (0u64..4, 4097usize..9000, any::<u64>()).prop_map(|(p, n, seed)| {
        let mut x = seed | 1;
        (0..n)
            .map(|_| {
                // xorshift: a cheap deterministic spread over the partition.
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                p * PARTITION_WIDTH + x % PARTITION_WIDTH
            })
            .collect()
    })
}

/// A few long consecutive ranges: run containers once optimized.
fn run_ids() -> impl Strategy<Value = Vec<u64>> {
    vec((0u64..(1 << 20), 1u64..5000), 1..5).prop_map(|runs| {
        runs.into_iter()
            .flat_map(|(start, len)| start..start + len)
            .collect()
    })
}

fn shaped_ids() -> impl Strategy<Value = Vec<u64>> {
    prop_oneof![
        sparse_ids(),
        dense_ids(),
        run_ids(),
        (sparse_ids(), dense_ids(), run_ids()).prop_map(|(mut a, b, c)| {
            a.extend(b);
            a.extend(c);
            a
        }),
    ]
}

// ---------------------------------------------------------------------------------------------
// The model of docs/REFERENCE.md §6 for int IDs (no bounds broken, no codec errors).

#[derive(Debug, Default)]
struct Model {
    ids: BTreeSet<u64>,
    labels: BTreeMap<String, BTreeSet<u64>>,
    cursors: BTreeSet<String>,
    records: u64,
    duplicates: u64,
    pages: u32,
    pinned: Option<String>,
    violations: Vec<ViolationKind>,
    terminal: bool,
    finished: bool,
    /// The page that met the end signal, if any.
    last_terminal_page: Option<PageSpec>,
    /// The last total a page echoed.
    echoed_total: Option<u64>,
}

impl Model {
    fn observe(&mut self, c: &ContractSpec, p: &PageSpec) {
        use ViolationKind as K;
        if let Some(s) = p.snapshot.map(snapshot) {
            match &self.pinned {
                // Only the first page pins an unpinned run; a later first echo leaves it live.
                None if self.pages == 0 => self.pinned = Some(s),
                None => {}
                Some(pinned) if *pinned == s => {}
                Some(_) => return self.stop(K::SnapshotChanged),
            }
        }
        if p.query_changed {
            return self.stop(K::QueryChanged);
        }
        if matches!(
            (p.complete, p.next.is_some()),
            (Some(true), true) | (Some(false), false)
        ) {
            return self.stop(K::ContradictoryCompletion);
        }
        let mut dup_here = false;
        for id in &p.ids {
            if !self.ids.insert(*id) {
                self.duplicates += 1;
                dup_here = true;
            }
        }
        if let (Some(l), Some(first)) = (p.label, p.ids.first()) {
            self.labels
                .entry(format!("label-{l}"))
                .or_default()
                .insert(*first);
        }
        self.records += p.ids.len() as u64;
        self.pages += 1;
        if dup_here {
            self.violations.push(K::DuplicateId);
        }
        if let Some(n) = p.next {
            if !self.cursors.insert(cursor(n)) {
                return self.stop(K::RepeatedCursor);
            }
        }
        if p.truncated {
            self.violations.push(K::TruncatedPage);
        }
        if p.total.is_some() {
            self.echoed_total = p.total;
        }
        let terminal = match c.end_signal {
            EndSignal::CursorAbsent => p.next.is_none(),
            EndSignal::CompleteFlag => p.complete == Some(true),
            EndSignal::Both => p.next.is_none() && p.complete == Some(true),
            EndSignal::Total => p.total.is_some_and(|t| self.records >= t),
            EndSignal::EmptyPage => p.ids.is_empty(),
        };
        if terminal {
            self.terminal = true;
            self.finished = true;
            self.last_terminal_page = Some(p.clone());
            if self
                .echoed_total
                .is_some_and(|n| n != self.ids.len() as u64)
            {
                self.violations.push(K::CountMismatch);
            }
            if c.expected_count.is_some_and(|n| n != self.ids.len() as u64) {
                self.violations.push(K::CountMismatch);
            }
            return;
        }
        if p.next.is_none() {
            return self.stop(K::MissingCompletionEvidence);
        }
        let over_sample = c.sample.is_some_and(|n| self.records >= n);
        let over_pages = c.max_pages.is_some_and(|n| self.pages >= n);
        let over_records = c.max_records.is_some_and(|n| self.records >= n);
        if over_sample || over_pages || over_records {
            self.stop(K::LimitReached);
        }
    }

    fn stop(&mut self, kind: ViolationKind) {
        self.violations.push(kind);
        self.finished = true;
    }

    fn status(&self) -> Status {
        if self.violations.iter().any(|k| k.status() == Status::Failed) {
            Status::Failed
        } else if !self.violations.is_empty() || !self.terminal || !self.finished {
            Status::Unknown
        } else {
            Status::Verified
        }
    }

    fn scope(&self) -> &'static str {
        match (self.status(), &self.pinned) {
            (Status::Verified, Some(_)) => "all_records_in_snapshot",
            (Status::Verified, None) => "all_records_live",
            _ => "none",
        }
    }
}

/// The status docs/REFERENCE.md §6 gives each kind, written out independently of the crate.
fn documented_status(kind: ViolationKind) -> Status {
    use ViolationKind as K;
    match kind {
        K::RepeatedCursor
        | K::DuplicateId
        | K::SnapshotChanged
        | K::QueryChanged
        | K::ContradictoryCompletion
        | K::CountMismatch
        | K::PartitionMismatch
        | K::InvalidPage
        | K::ShardConflict
        | K::ShardMismatch => Status::Failed,
        K::MissingCompletionEvidence
        | K::TruncatedPage
        | K::LimitReached
        | K::PageFailed
        | K::AccessDenied
        | K::ExpiredCursor
        | K::ShardMissing => Status::Unknown,
        _ => panic!("{kind:?} is not in the documented table: add it"),
    }
}

fn set_of(ids: &[u64]) -> IdSet {
    ids.iter().copied().collect()
}

/// Feeds pages until the run finishes, checking invariants after every step.
fn feed(r: &mut Reconciler, pages: &[Page]) {
    r.check_invariants();
    for p in pages {
        if r.is_finished() {
            break;
        }
        let step = r.observe(p).step;
        r.check_invariants();
        match step {
            Step::Continue(_) => assert!(!r.is_finished()),
            Step::Done | Step::Restart => assert!(r.is_finished()),
        }
    }
}

/// A well-formed traversal: distinct cursors, the end signal on the last page only. Under
/// `total` every page echoes the total and carries a cursor (the position of a page-number
/// API); under `empty_page` an empty page with a cursor follows the last one.
fn clean_traversal(pages: &[Vec<u64>], end: EndSignal) -> Vec<Page> {
    let mut pages = pages.to_vec();
    if end == EndSignal::EmptyPage && pages.last().is_some_and(|p| !p.is_empty()) {
        pages.push(Vec::new());
    }
    let n = pages.len();
    let total: u64 = pages.iter().map(|p| p.len() as u64).sum();
    pages
        .iter()
        .enumerate()
        .map(|(i, ids)| {
            let last = i + 1 == n;
            let positional = matches!(end, EndSignal::Total | EndSignal::EmptyPage);
            {
                let mut page_ = Page::default();
                page_.items = ids.iter().map(|id| Item::int(*id)).collect();
                page_.next = (!last || positional).then(|| format!("SECRET-CURSOR-page-{i}"));
                page_.complete = match end {
                    EndSignal::CompleteFlag | EndSignal::Both => Some(last),
                    _ => None,
                };
                page_.total = (end == EndSignal::Total).then_some(total);
                page_
            }
        })
        .collect()
}

/// Splits `ids` into pages at the given cut points (taken modulo the length).
fn split(ids: &[u64], cuts: &[usize]) -> Vec<Vec<u64>> {
    let mut points: Vec<usize> = cuts
        .iter()
        .map(|c| if ids.is_empty() { 0 } else { c % ids.len() })
        .collect();
    points.push(0);
    points.push(ids.len());
    points.sort_unstable();
    points.dedup();
    let pages: Vec<Vec<u64>> = points
        .windows(2)
        .map(|w| ids[w[0]..w[1]].to_vec())
        .collect();
    if pages.is_empty() {
        // An empty collection is one empty terminal page.
        return vec![Vec::new()];
    }
    pages
}

fn shuffled(mut ids: Vec<u64>, seed: u64) -> Vec<u64> {
    let mut x = seed | 1;
    for i in (1..ids.len()).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        ids.swap(i, (x % (i as u64 + 1)) as usize);
    }
    ids
}

// ---------------------------------------------------------------------------------------------
// Laws of the reconciler.

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn reconciler_agrees_with_the_model(
        c in contract_spec(),
        pages in vec(page_spec(40), 0..12),
    ) {
        let contract = contract_of(&c);
        let mut r = Reconciler::new(&contract);
        let mut model = Model {
            pinned: contract.snapshot_id.clone(),
            ..Model::default()
        };
        r.check_invariants();
        for spec in &pages {
            if r.is_finished() {
                break;
            }
            prop_assert!(!model.finished);
            let step = r.observe(&page_of(spec)).step;
            r.check_invariants();
            model.observe(&c, spec);
            prop_assert_eq!(r.is_finished(), model.finished);
            if step == Step::Restart {
                prop_assert!(c.restart_on_snapshot_change);
                prop_assert_eq!(model.violations.last(), Some(&ViolationKind::SnapshotChanged));
            }
        }
        let kinds: Vec<ViolationKind> = r.progress().violations.iter().map(|v| v.kind).collect();
        prop_assert_eq!(&kinds, &model.violations);
        prop_assert_eq!(r.status(), model.status());
        prop_assert_eq!(r.conclusion_scope().as_str(), model.scope());
        prop_assert_eq!(r.ids().len(), model.ids.len() as u64);
        prop_assert_eq!(r.ids().iter().collect::<Vec<_>>(), model.ids.iter().copied().collect::<Vec<_>>());
        let p = r.progress();
        prop_assert_eq!(p.records_observed, model.records);
        prop_assert_eq!(p.duplicate_ids, model.duplicates);
        prop_assert_eq!(p.records_observed, r.ids().len() + p.duplicate_ids);
        prop_assert_eq!(p.pages_observed, model.pages);
        prop_assert_eq!(p.terminal_observed, model.terminal);
        let labels: BTreeMap<String, BTreeSet<u64>> = p
            .label_names
            .iter()
            .zip(r.labels())
            .map(|(n, s)| (n.clone(), s.iter().collect()))
            .collect();
        prop_assert_eq!(labels, model.labels);

        // Each violation forces the status of docs/REFERENCE.md §6.
        for k in &kinds {
            prop_assert_eq!(k.status(), documented_status(*k));
        }
        // Verified only after the end signal, with nothing found and no budget spent.
        if r.status() == Status::Verified {
            prop_assert!(p.terminal_observed);
            prop_assert!(kinds.is_empty());
            prop_assert!(p.limits_hit.is_empty());
            let last = model.last_terminal_page.as_ref().unwrap();
            match c.end_signal {
                EndSignal::CursorAbsent => prop_assert!(last.next.is_none()),
                EndSignal::CompleteFlag => prop_assert_eq!(last.complete, Some(true)),
                EndSignal::Both => {
                    prop_assert!(last.next.is_none());
                    prop_assert_eq!(last.complete, Some(true));
                }
                EndSignal::Total => prop_assert!(last.total.is_some_and(|t| p.records_observed >= t)),
                EndSignal::EmptyPage => prop_assert!(last.ids.is_empty()),
            }
        }
        // A violation never leaves room for a conclusion.
        if !kinds.is_empty() {
            prop_assert_eq!(r.conclusion_scope().as_str(), "none");
            prop_assert_ne!(r.status(), Status::Verified);
        }
    }

    #[test]
    fn a_traversal_cut_before_its_end_is_never_verified(
        ids in vec(0u64..10_000, 0..200),
        cuts in vec(any::<usize>(), 0..8),
        end in end_signal(),
        keep in any::<usize>(),
    ) {
        let unique: Vec<u64> = ids.iter().copied().collect::<BTreeSet<_>>().into_iter().collect();
        let pages = clean_traversal(&split(&unique, &cuts), end);
        let keep = keep % pages.len();
        let mut cut = Reconciler::new(&Contract::new("props").with_end_signal(end));
        feed(&mut cut, &pages[..keep]);
        prop_assert_ne!(cut.status(), Status::Verified);
        prop_assert_eq!(cut.conclusion_scope().as_str(), "none");
        prop_assert!(!cut.progress().terminal_observed);

        let mut whole = Reconciler::new(&Contract::new("props").with_end_signal(end));
        feed(&mut whole, &pages);
        prop_assert_eq!(whole.status(), Status::Verified);
        prop_assert_eq!(whole.conclusion_scope().as_str(), "all_records_live");
        prop_assert_eq!(whole.ids().len(), unique.len() as u64);
    }

    #[test]
    fn unique_count_is_the_set_cardinality(
        pages in vec(vec(0u64..500, 0..40), 1..10),
    ) {
        let mut model = BTreeSet::new();
        let mut total = 0u64;
        for p in &pages {
            model.extend(p.iter().copied());
            total += p.len() as u64;
        }
        let mut r = Reconciler::new(&Contract::new("props"));
        feed(&mut r, &clean_traversal(&pages, EndSignal::CursorAbsent));
        let p = r.progress();
        prop_assert_eq!(r.ids().len(), model.len() as u64);
        prop_assert_eq!(p.records_observed, total);
        prop_assert_eq!(p.duplicate_ids, total - model.len() as u64);
        prop_assert_eq!(p.records_observed, r.ids().len() + p.duplicate_ids);
        prop_assert_eq!(r.ids().iter().collect::<Vec<_>>(), model.iter().copied().collect::<Vec<_>>());
        let expected = if p.duplicate_ids == 0 { Status::Verified } else { Status::Failed };
        prop_assert_eq!(r.status(), expected);
    }

    #[test]
    fn string_ids_count_like_a_set_of_strings(
        pages in vec(vec("[a-e]{1,3}", 0..12), 1..6),
    ) {
        let mut c = Contract::new("props");
        c.id_codec = IdCodecKind::String;
        let mut model = BTreeSet::new();
        let n = pages.len();
        let pages: Vec<Page> = pages
            .iter()
            .enumerate()
            .map(|(i, ids)| {
                model.extend(ids.iter().cloned());
                { let mut page = Page::default(); page.items = ids
                        .iter()
                        .map(|s| Item::new(RawId::Str(s.clone())))
                        .collect(); page.next = (i + 1 < n).then(|| format!("SECRET-CURSOR-{i}")); page }
            })
            .collect();
        let mut r = Reconciler::new(&c);
        feed(&mut r, &pages);
        prop_assert_eq!(r.ids().len(), model.len() as u64);
        let p = r.progress();
        prop_assert_eq!(p.records_observed, r.ids().len() + p.duplicate_ids);
        let rendered: BTreeSet<String> = r.ids().iter().map(|id| r.codec().render(id)).collect();
        prop_assert_eq!(rendered, model);
    }
}

// ---------------------------------------------------------------------------------------------
// Laws of the digests.

proptest! {
    #![proptest_config(config(64))]

    #[test]
    fn merkle_root_depends_on_the_id_set_alone(
        ids in shaped_ids(),
        cuts_a in vec(any::<usize>(), 0..10),
        cuts_b in vec(any::<usize>(), 0..10),
        seed_a in any::<u64>(),
        seed_b in any::<u64>(),
    ) {
        let unique: Vec<u64> = ids.iter().copied().collect::<BTreeSet<_>>().into_iter().collect();
        let reference = digest::merkle_root(&set_of(&unique));

        // Two traversals of the same set: different item order, different page boundaries.
        for (cuts, seed) in [(&cuts_a, seed_a), (&cuts_b, seed_b)] {
            let order = shuffled(unique.clone(), seed);
            let mut r = Reconciler::new(&Contract::new("props"));
            feed(&mut r, &clean_traversal(&split(&order, cuts), EndSignal::CursorAbsent));
            prop_assert_eq!(r.status(), Status::Verified);
            prop_assert_eq!(digest::merkle_root(r.ids()), reference);
        }

        // The same set with every partition in another roaring container kind.
        let mut optimized = IdSet::new();
        let mut unoptimized = IdSet::new();
        for (p, b) in set_of(&unique).partitions() {
            let mut o = b.clone();
            o.optimize();
            optimized.set_partition(p, o);
            let mut u = b.clone();
            u.remove_run_compression();
            unoptimized.set_partition(p, u);
        }
        optimized.check_invariants();
        unoptimized.check_invariants();
        prop_assert_eq!(digest::merkle_root(&optimized), reference);
        prop_assert_eq!(digest::merkle_root(&unoptimized), reference);

        // Adding or removing any one ID changes the root.
        let pick = seed_a as usize % unique.len().max(1);
        let mut fewer = unique.clone();
        if !fewer.is_empty() {
            fewer.remove(pick);
            prop_assert_ne!(digest::merkle_root(&set_of(&fewer)), reference);
        }
        let extra = (0..).map(|k| seed_b.wrapping_add(k) >> 20).find(|x| unique.binary_search(x).is_err()).unwrap();
        let mut more = unique.clone();
        more.push(extra);
        prop_assert_ne!(digest::merkle_root(&set_of(&more)), reference);
    }

    #[test]
    fn any_cursor_change_changes_the_chain(
        n_pages in 2usize..12,
        victim in any::<usize>(),
        replacement in "[A-Za-z0-9_-]{1,40}",
        snapshot_id in option::of("[a-z0-9:]{1,20}"),
    ) {
        let pages: Vec<Vec<u64>> = (0..n_pages as u64).map(|i| vec![i]).collect();
        let original = clean_traversal(&pages, EndSignal::CursorAbsent);
        let mut contract = Contract::new("props");
        contract.snapshot_id = snapshot_id.clone();
        let chain_of = |pages: &[Page]| {
            let mut r = Reconciler::new(&contract);
            feed(&mut r, pages);
            r.progress().chain
        };
        let base = chain_of(&original);

        // The chain recomputes from the digest functions alone (docs/REFERENCE.md §7).
        let mut expected = digest::chain_start(
            &digest::query_digest(&contract.scope),
            snapshot_id.as_deref(),
        );
        for p in &original {
            expected = digest::chain_next(&expected, &digest::cursor_hash(p.next.as_deref()));
        }
        prop_assert_eq!(base, expected);

        // Change one cursor (all but the last page have one).
        let i = victim % (n_pages - 1);
        let mut changed = original.clone();
        let new_cursor = format!("SECRET-CURSOR-other-{replacement}");
        prop_assume!(original.iter().all(|p| p.next.as_deref() != Some(&new_cursor)));
        changed[i].next = Some(new_cursor);
        prop_assert_ne!(chain_of(&changed), base);

        // Swap two pages' cursors: same cursors, another order.
        if n_pages > 2 {
            let j = (i + 1) % (n_pages - 1);
            let mut swapped = original.clone();
            let (a, b) = (swapped[i].next.clone(), swapped[j].next.clone());
            swapped[i].next = b;
            swapped[j].next = a;
            prop_assert_ne!(chain_of(&swapped), base);
        }

        // Drop a page in the middle.
        let mut dropped = original.clone();
        dropped.remove(i);
        prop_assert_ne!(chain_of(&dropped), base);
    }
}

// ---------------------------------------------------------------------------------------------
// Laws of the ID set.

proptest! {
    #![proptest_config(config(64))]

    #[test]
    fn idset_round_trips_and_keeps_its_invariants(
        a in shaped_ids(),
        b in shaped_ids(),
    ) {
        let model_a: BTreeSet<u64> = a.iter().copied().collect();
        let model_b: BTreeSet<u64> = b.iter().copied().collect();

        // Incremental inserts, checked after each step.
        let mut set = IdSet::new();
        for (k, id) in a.iter().enumerate() {
            let fresh = !set.contains(*id);
            prop_assert_eq!(set.insert(*id), fresh);
            prop_assert!(set.contains(*id));
            if k % 64 == 0 {
                set.check_invariants();
            }
        }
        set.check_invariants();
        prop_assert_eq!(set.len(), model_a.len() as u64);
        prop_assert_eq!(set.is_empty(), model_a.is_empty());
        prop_assert_eq!(set.iter().collect::<Vec<_>>(), model_a.iter().copied().collect::<Vec<_>>());
        prop_assert_eq!(&set, &set_of(&a));

        // A second page in any order over a non-empty set: the repeats (of the set and of the
        // page itself) in the page's order, as one insert at a time reports them.
        {
            let mut reference = set.clone();
            let mut many = set.clone();
            let second: Vec<u64> = shuffled(a.iter().rev().step_by(3).copied().chain(a.iter().copied().step_by(7).map(|x| x ^ 1)).collect(), a.len() as u64);
            let model_dups: Vec<u64> = second.iter().copied().filter(|id| !reference.insert(*id)).collect();
            let (mut dups, mut touched) = (Vec::new(), Vec::new());
            many.insert_many(&second, &mut dups, &mut touched);
            many.check_invariants();
            prop_assert_eq!(&many, &reference);
            prop_assert_eq!(dups, model_dups);
        }

        // insert_many reports exactly the repeats, in order, and agrees with insert.
        let mut many = IdSet::new();
        let (mut dups, mut touched) = (Vec::new(), Vec::new());
        many.insert_many(&a, &mut dups, &mut touched);
        many.check_invariants();
        prop_assert_eq!(&many, &set);
        let mut seen = BTreeSet::new();
        let model_dups: Vec<u64> = a.iter().copied().filter(|id| !seen.insert(*id)).collect();
        prop_assert_eq!(dups, model_dups);
        let touched: BTreeSet<u64> = touched.into_iter().collect();
        let parts: BTreeSet<u64> = model_a.iter().map(|id| partition_of(*id)).collect();
        prop_assert_eq!(touched, parts.clone());

        // Ranges expand back to the set, maximal and ascending.
        let mut expanded = Vec::new();
        let mut prev_last: Option<u64> = None;
        for (first, last) in set.ranges() {
            prop_assert!(first <= last);
            if let Some(p) = prev_last {
                prop_assert!(first > p + 1, "ranges are maximal");
            }
            prev_last = Some(last);
            expanded.extend(first..=last);
        }
        prop_assert_eq!(expanded, model_a.iter().copied().collect::<Vec<_>>());

        // Partitions rebuild the set; counts per partition match the model.
        let mut rebuilt = IdSet::new();
        let mut per_partition: BTreeMap<u64, u64> = BTreeMap::new();
        for id in &model_a {
            *per_partition.entry(partition_of(*id)).or_default() += 1;
        }
        prop_assert_eq!(set.partition_count(), per_partition.len());
        for (p, bitmap) in set.partitions() {
            prop_assert_eq!(Some(&bitmap.len()), per_partition.get(&p));
            prop_assert_eq!(set.partition(p), Some(bitmap));
            rebuilt.set_partition(p, bitmap.clone());
        }
        rebuilt.check_invariants();
        prop_assert_eq!(&rebuilt, &set);

        // Replacing a partition with an empty bitmap removes it.
        if let Some((p, _)) = set.partitions().next() {
            let mut cleared = set.clone();
            cleared.set_partition(p, RoaringBitmap::new());
            cleared.check_invariants();
            prop_assert_eq!(cleared.partition(p), None);
            prop_assert_eq!(
                cleared.len(),
                model_a.iter().filter(|id| partition_of(**id) != p).count() as u64
            );
        }

        // Difference agrees with the model both ways.
        let set_b = set_of(&b);
        let d = set.difference(&set_b);
        d.check_invariants();
        prop_assert_eq!(d.iter().collect::<Vec<_>>(), model_a.difference(&model_b).copied().collect::<Vec<_>>());
        let d = set_b.difference(&set);
        d.check_invariants();
        prop_assert_eq!(d.iter().collect::<Vec<_>>(), model_b.difference(&model_a).copied().collect::<Vec<_>>());
    }
}

/// The generators reach every roaring container kind: arrays (sparse), bitmaps (more than 4096
/// IDs in one partition) and runs (long consecutive ranges, once optimized).
#[test]
fn id_generators_hit_every_roaring_container_kind() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;

    let mut runner = TestRunner::deterministic();
    let (mut arrays, mut bitmaps, mut runs) = (0u32, 0u32, 0u32);
    for _ in 0..64 {
        let ids = shaped_ids().new_tree(&mut runner).unwrap().current();
        for (_, b) in set_of(&ids).partitions() {
            let mut b = b.clone();
            b.optimize();
            let s = b.statistics();
            arrays += s.n_array_containers;
            bitmaps += s.n_bitset_containers;
            runs += s.n_run_containers;
        }
    }
    assert!(arrays > 0, "no array container generated");
    assert!(bitmaps > 0, "no bitmap container generated");
    assert!(runs > 0, "no run container generated");
}

/// A page echoing the contract's query is accepted whatever the key order; a different
/// query is `query_changed` (R6), checked here over the JSON the page carries.
#[test]
fn echoed_query_is_compared_as_a_json_value() {
    let mut c = Contract::new("props");
    c.scope.query = json!({"a": 1, "b": {"c": [1, 2], "d": null}});
    for (echo, ok) in [
        (json!({"b": {"d": null, "c": [1, 2]}, "a": 1}), true),
        (json!({"a": 1, "b": {"c": [2, 1], "d": null}}), false),
        (json!({"a": 1}), false),
        (Value::Null, false),
    ] {
        let mut r = Reconciler::new(&c);
        let _ = r.observe(&{
            let mut page = Page::default();
            page.items = vec![Item::int(1)];
            page.query = Some(echo.clone());
            page
        });
        let expected = if ok { Status::Verified } else { Status::Failed };
        assert_eq!(r.status(), expected, "echo {echo}");
    }
}
