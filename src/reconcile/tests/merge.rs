//! A merge of shard runs through the reconciler's own API: the invariants hold after every
//! step, and the merged status is never better than any shard's.

use super::*;

/// A shard's run over `pages`, with the page log `observe` returned.
fn shard(contract: &Contract, pages: &[Page]) -> (Reconciler, Vec<PageLog>) {
    let mut r = Reconciler::new(contract);
    let mut log = Vec::new();
    for pg in pages {
        if r.is_finished() {
            break;
        }
        log.extend(r.observe(pg).delta.page);
    }
    r.check_invariants();
    (r, log)
}

/// Merges `shards` in order the way `shard::merge` does, renumbering the pages.
fn merge_all(contract: &Contract, shards: &[(Reconciler, Vec<PageLog>)]) -> Reconciler {
    let mut m = Reconciler::merge_start(contract);
    let mut pages: Vec<PageLog> = Vec::new();
    for (k, (r, log)) in shards.iter().enumerate() {
        let first = pages.len();
        for pg in log {
            let mut pg = pg.clone();
            pg.page_idx = u32::try_from(pages.len() + 1).unwrap();
            pages.push(pg);
        }
        m.absorb_shard(r, &format!("shard {k}"), &pages[first..]);
        m.check_invariants();
    }
    m.merge_end(contract.snapshot_id.clone(), true, &pages);
    m.check_invariants();
    m
}

fn labelled_page(items: &[(u64, &[&str])], next: Option<&str>) -> Page {
    Page {
        items: items.iter().map(|(id, l)| labelled(*id, l)).collect(),
        next: next.map(str::to_owned),
        ..Page::default()
    }
}

#[test]
fn verified_shards_merge_into_their_union() {
    let c = Contract::new("s");
    let a = shard(
        &c,
        &[
            labelled_page(&[(1, &["x"]), (2, &[])], Some("a")),
            page(&[3], None),
        ],
    );
    let b = shard(
        &c,
        &[labelled_page(&[(70_000, &["y"]), (70_001, &["x"])], None)],
    );
    let m = merge_all(&c, &[a, b]);
    assert_eq!(m.status(), Status::Verified);
    assert_eq!(m.ids().len(), 5);
    let p = m.progress();
    assert_eq!(
        (p.pages_observed, p.records_observed, p.duplicate_ids),
        (3, 5, 0)
    );
    assert_eq!(p.label_names, vec!["x".to_owned(), "y".to_owned()]);
    assert_eq!(m.labels()[0].len(), 2, "label x of both shards, united");
    assert!(p.violations.is_empty());
}

#[test]
fn overlapping_shards_count_duplicates_and_fail() {
    let c = Contract::new("s");
    let m = merge_all(
        &c,
        &[
            shard(&c, &[page(&[1, 2], None)]),
            shard(&c, &[page(&[2, 3], None)]),
        ],
    );
    let p = m.progress();
    assert_eq!(
        (p.records_observed, p.duplicate_ids, m.ids().len()),
        (4, 1, 3)
    );
    assert_eq!(m.status(), Status::Failed);
    assert_eq!(
        p.violations.last().unwrap().kind,
        ViolationKind::DuplicateId
    );
}

#[test]
fn a_failed_shard_makes_the_merge_failed() {
    let c = Contract::new("s");
    let ok = shard(&c, &[page(&[1], None)]);
    let looped = shard(
        &c,
        &[
            page(&[10], Some("a")),
            page(&[11], Some("b")),
            page(&[12], Some("a")),
        ],
    );
    assert_eq!(looped.0.status(), Status::Failed);
    let m = merge_all(&c, &[ok, looped]);
    assert_eq!(m.status(), Status::Failed);
    let v = &m.progress().violations[0];
    assert_eq!(v.kind, ViolationKind::RepeatedCursor);
    assert_eq!(
        v.page, 4,
        "the shard's page 3, after the first shard's one page"
    );
    assert!(v.detail.starts_with("shard 1: "), "{}", v.detail);
}

#[test]
fn an_unknown_shard_makes_the_merge_unknown() {
    let c = Contract::new("s");
    // No terminal page: the run is unfinished, without a finding.
    let open = shard(&c, &[page(&[5], Some("a"))]);
    assert_eq!(open.0.status(), Status::Unknown);
    assert!(open.0.progress().violations.is_empty());
    let m = merge_all(&c, &[shard(&c, &[page(&[1], None)]), open]);
    assert_eq!(m.status(), Status::Unknown);
    assert!(!m.progress().terminal_observed);
    // Stopped on a limit: its finding is carried.
    let mut limited = shard(&c, &[page(&[5], Some("a"))]);
    limited.0.stop_on_limit(Limit::MaxPages);
    let m = merge_all(&c, &[limited, shard(&c, &[page(&[1], None)])]);
    assert_eq!(m.status(), Status::Unknown);
    assert_eq!(m.progress().limits_hit, vec![Limit::MaxPages]);
}

#[test]
fn findings_stay_bounded_and_a_dropped_failure_still_fails() {
    let c = Contract::new("s");
    let mut m = Reconciler::merge_start(&c);
    for i in 0..VIOLATIONS_KEPT_MAX {
        m.merge_finding(
            ViolationKind::ShardMissing,
            0,
            format!("shard {i} is missing"),
        );
    }
    assert_eq!(m.status(), Status::Unknown);
    let (looped, log) = shard(&c, &[page(&[10], Some("a")), page(&[11], Some("a"))]);
    m.absorb_shard(&looped, "shard 9", &log);
    m.merge_end(None, true, &log);
    let p = m.progress();
    assert_eq!(p.violations.len(), VIOLATIONS_KEPT_MAX);
    assert_eq!(p.violations_dropped, 1);
    assert_eq!(p.violations_dropped_worst, Some(Status::Failed));
    assert_eq!(m.status(), Status::Failed);
}

#[test]
fn a_merge_missing_a_shard_is_unknown_and_checks_no_count() {
    // The shard's own contract expects no count; the plan's expects 9.
    let c = contract(|c| c.expected_count = Some(9));
    let (r, log) = shard(&Contract::new("s"), &[page(&[1, 2], None)]);
    let mut m = Reconciler::merge_start(&c);
    m.absorb_shard(&r, "shard 0", &log);
    m.merge_end(None, false, &log);
    assert_eq!(m.status(), Status::Unknown);
    assert!(
        m.progress().violations.is_empty(),
        "no count held against a part"
    );
    // Complete, the count is held against the union.
    let mut m = Reconciler::merge_start(&c);
    m.absorb_shard(&r, "shard 0", &log);
    m.merge_end(None, true, &log);
    assert_eq!(m.status(), Status::Failed);
    assert_eq!(
        m.progress().violations[0].kind,
        ViolationKind::CountMismatch
    );
}
