//! Labels, caps on what is kept, and the reconciler's bookkeeping.

use super::*;

// Labels, caps and bookkeeping ------------------------------------------------------------------

#[test]
fn labels_are_subsets_of_the_ids_even_on_duplicates() {
    let r = check(
        &Contract::new("s"),
        &[
            items_page(vec![labelled(1, &["a"]), Item::int(2)], Some("x")),
            items_page(vec![labelled(2, &["a", "b"])], None),
        ],
        Status::Failed,
        &[K::DuplicateId],
    );
    assert_eq!(r.progress().label_names, ["a", "b"]);
    assert_eq!(r.labels()[0].iter().collect::<Vec<_>>(), [1, 2]);
    assert_eq!(r.labels()[1].iter().collect::<Vec<_>>(), [2]);
}

/// Findings past `VIOLATIONS_KEPT_MAX` are counted, not kept, and the run can no longer claim
/// anything. Note: the dropped findings here are all truncation warnings (unknown), yet the
/// status becomes `failed` because `status()` cannot tell what was dropped.
#[test]
fn violations_past_the_cap_are_counted() {
    let n = VIOLATIONS_KEPT_MAX + 10;
    let mut events: Vec<Ev> = (0..n)
        .map(|i| {
            with(page(&[i as u64], Some(&format!("c{i}"))), |p| {
                p.truncated = true
            })
        })
        .collect();
    events.push(p(&[], None));
    let mut r = Reconciler::new(&Contract::new("s"));
    for e in &events {
        let _ = r.observe(&e.page());
    }
    r.check_invariants();
    assert_eq!(r.progress().violations.len(), VIOLATIONS_KEPT_MAX);
    assert_eq!(r.progress().violations_dropped, 10);
    assert_eq!(r.conclusion_scope().as_str(), "none");
    // Only truncation warnings were dropped: they force `unknown`, not `failed`.
    assert_eq!(r.progress().violations_dropped_worst, Some(Status::Unknown));
    assert_eq!(r.status(), Status::Unknown);
}

#[test]
fn chain_recomputes_from_the_pages_cursors() {
    let c = contract(|c| c.snapshot_id = Some("s1".into()));
    let r = check(
        &c,
        &[p(&[1], Some("a")), p(&[2], Some("b")), p(&[3], None)],
        Status::Verified,
        &[],
    );
    let mut h = digest::chain_start(r.query_digest(), Some("s1"));
    for cursor in [Some("a"), Some("b"), None] {
        h = digest::chain_next(&h, &digest::cursor_hash(cursor));
    }
    assert_eq!(r.progress().chain, h);
}

#[test]
fn chain_starts_from_the_snapshot_the_first_page_pins() {
    let r = check(
        &Contract::new("s"),
        &[snap(page(&[1], None), "s7")],
        Status::Verified,
        &[],
    );
    let h = digest::chain_next(
        &digest::chain_start(r.query_digest(), Some("s7")),
        &digest::cursor_hash(None),
    );
    assert_eq!(r.progress().chain, h);
}

#[test]
fn the_delta_names_what_one_page_changed() {
    let mut r = Reconciler::new(&Contract::new("s"));
    let first = r.observe(&page(&[1, 2, 70_000, 3], Some("a")));
    assert_eq!(first.delta.partitions, [0, 1]);
    assert!(first.delta.label_partitions.is_empty());
    let log = first.delta.page.as_ref().unwrap();
    assert_eq!((log.page_idx, log.n_items), (1, 4));
    assert_eq!(log.cursor_hash, digest::cursor_hash(Some("a")));
    // A page of IDs already seen changes no partition, but is still a page of the log.
    let again = r.observe(&with(page(&[1], Some("b")), |_| ()).page());
    assert!(again.delta.partitions.is_empty());
    assert_eq!(again.delta.page.map(|p| p.page_idx), Some(2));
    // A page refused whole (R7) is not in the page log and changes nothing.
    let refused = r.observe(&with(page(&[9], Some("c")), |p| p.complete = Some(true)).page());
    assert_eq!(refused.delta, Delta::default());
}

#[test]
fn content_accumulates_per_leaf_once_per_id_in_any_order() {
    let with_content = |ids: &[u64], tag: u8| {
        let mut pg = page(ids, None);
        for it in &mut pg.items {
            it.content = Some([tag; 32]);
        }
        pg
    };
    let mut a = Reconciler::new(&Contract::new("s"));
    let first = a.observe(&with_content(&[1, 70_000, 2], 7));
    assert_eq!(first.delta.content_leaves, vec![0, 1]);
    let mut b = Reconciler::new(&Contract::new("s"));
    let _ = b.observe(&with_content(&[2, 1, 70_000], 7));
    assert_eq!(a.content(), b.content(), "order does not matter");
    let mut c = Reconciler::new(&Contract::new("s"));
    let _ = c.observe(&with_content(&[1, 70_000, 2], 8));
    assert_ne!(a.content(), c.content(), "content does");
    // A duplicate's content is not counted twice (the duplicate itself is R4).
    let mut d = Reconciler::new(&contract(|c| c.end_signal = EndSignal::CompleteFlag));
    let mut pg = with_content(&[1, 70_000, 2, 1], 7);
    pg.next = Some("x".into());
    let _ = d.observe(&pg);
    assert_eq!(d.content(), a.content());
    assert!(Reconciler::new(&Contract::new("s")).content().is_empty());
}

/// A first page refused whole (here R16: an ID the codec does not take) pinned the run to the
/// snapshot it echoed, while the chain still started from no snapshot: `verify` then found
/// the store inconsistent with itself. A refused page changes nothing but its finding.
#[test]
fn a_refused_first_page_pins_nothing() {
    let c = contract(|c| c.id_codec = IdCodecKind::Prefixed);
    let r = check(
        &c,
        &[snap(page(&[1], Some("a")), "s1")],
        Status::Failed,
        &[K::InvalidPage],
    );
    assert_eq!(r.progress().pinned_snapshot, None);
    assert_eq!(
        r.progress().chain,
        digest::chain_start(r.query_digest(), None)
    );
}

#[test]
fn the_delta_lists_new_strings_and_labels() {
    let c = contract(|c| c.id_codec = IdCodecKind::String);
    let mut r = Reconciler::new(&c);
    let mut pg = strings(&["b", "a"], Some("x"));
    pg.items[0].labels.push("needs_v3".into());
    let seen = r.observe(&pg);
    assert_eq!(
        seen.delta.interned,
        vec![(0, "b".to_owned()), (1, "a".to_owned())]
    );
    assert_eq!(seen.delta.label_partitions, vec![(0, 0)]);
    let seen = r.observe(&strings(&["a", "c"], None));
    assert_eq!(seen.delta.interned, vec![(2, "c".to_owned())]);
}

#[test]
fn violation_kinds_force_the_statuses_of_the_spec_table() {
    let failed = [
        K::RepeatedCursor,
        K::DuplicateId,
        K::SnapshotChanged,
        K::QueryChanged,
        K::ContradictoryCompletion,
        K::CountMismatch,
        K::PartitionMismatch,
        K::InvalidPage,
    ];
    let unknown = [
        K::MissingCompletionEvidence,
        K::TruncatedPage,
        K::LimitReached,
        K::PageFailed,
        K::AccessDenied,
        K::ExpiredCursor,
    ];
    for k in failed {
        assert_eq!(k.status(), Status::Failed, "{}", k.as_str());
    }
    for k in unknown {
        assert_eq!(k.status(), Status::Unknown, "{}", k.as_str());
    }
}

#[test]
fn limits_are_taken_from_the_contract() {
    // A sanity check of the fixture helpers: an unlimited contract runs past many pages.
    let c = contract(|c| c.limits = Limits::default());
    let events: Vec<Ev> = (0..50)
        .map(|i| p(&[i], Some(&format!("c{i}"))))
        .chain([p(&[], None)])
        .collect();
    check(&c, &events, Status::Verified, &[]);
}

/// `check_invariants` ran only in tests and fuzzing, so a restored run whose counts disagree
/// with its ID set (a store bug) went on silently. In debug builds and tests, `restore` now
/// checks every invariant and `observe` the part one page can break.
#[test]
fn a_restored_run_that_breaks_an_invariant_is_caught_in_debug_builds() {
    let contract = Contract::new("s");
    let mut r = Reconciler::new(&contract);
    let _ = r.observe(&Page::new(vec![Item::int(1), Item::int(2)]).with_next("x"));
    let mut progress = r.progress().clone();
    let ids = r.ids().clone();
    let codec = crate::codec::IdCodec::new(contract.id_codec, None);
    // As kept: restores.
    let ok = Reconciler::restore(
        &contract,
        progress.clone(),
        ids.clone(),
        Vec::new(),
        [],
        codec.clone(),
    );
    assert_eq!(ok.ids().len(), 2);
    // Three records counted over two unique IDs and no duplicate: a broken store.
    progress.records_observed = 3;
    let broken = std::panic::catch_unwind(move || {
        Reconciler::restore(&contract, progress, ids, Vec::new(), [], codec)
    });
    assert_eq!(broken.is_err(), cfg!(debug_assertions));
}
