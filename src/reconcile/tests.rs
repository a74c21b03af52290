//! Unit tests of the reconciliation core: one or more per rule R1-R16 (docs/REFERENCE.md §6), no IO.
//!
//! Every test goes through `check`: a contract, the events of a run (pages, failed requests,
//! a deadline, a high-water switch) and the status and violation kinds expected. `check`
//! returns the reconciler so a test can look closer at counts, scope and details.

#![allow(clippy::unwrap_used)] // Tests: a panic is the failure report.

use super::*;
use crate::contract::{
    ExpiredPolicy, IdCodecKind, Item, Limits, Page, RawId, CURSOR_LEN_MAX, ID_LEN_MAX,
    ITEMS_PER_PAGE_MAX, LABELS_PER_ITEM_MAX, LABELS_PER_RUN_MAX, LABEL_LEN_MAX,
    PAGE_SIZE_BYTES_MAX, VIOLATIONS_KEPT_MAX,
};

/// One thing that happens to a run.
#[derive(Debug, Clone)]
enum Ev {
    /// A page arrives.
    Page(Page),
    /// The next request failed after its retries.
    Failed(FetchFailure),
    /// The collector saw the deadline pass.
    Deadline,
    /// The cursor expired and the policy is `high_water`: switch to a fresh request.
    HighWater,
}

impl From<Page> for Ev {
    fn from(p: Page) -> Ev {
        Ev::Page(p)
    }
}

#[track_caller]
fn check(
    contract: &Contract,
    events: &[Ev],
    expected: Status,
    kinds: &[ViolationKind],
) -> Reconciler {
    let mut r = Reconciler::new(contract);
    for e in events {
        r.check_invariants();
        match e {
            Ev::Page(p) => {
                if r.is_finished() {
                    break;
                }
                let step = r.observe(p).step;
                assert_eq!(
                    step == Step::Done || step == Step::Restart,
                    r.is_finished(),
                    "the step and is_finished agree"
                );
                if let Step::Continue(req) = &step {
                    assert_eq!(r.next_request(), Some(req));
                }
            }
            Ev::Failed(f) => r.fetch_failed(*f, "the request failed".to_owned()),
            Ev::Deadline => r.stop_on_limit(Limit::Deadline),
            Ev::HighWater => {
                if r.continue_after_high_water().is_none() {
                    r.fetch_failed(FetchFailure::ExpiredCursor, "no high-water key".to_owned());
                }
            }
        }
    }
    r.check_invariants();
    assert_eq!(r.status(), expected);
    let got: Vec<ViolationKind> = r.progress().violations.iter().map(|v| v.kind).collect();
    assert_eq!(got, kinds);
    if expected != Status::Verified {
        assert_eq!(r.conclusion_scope().as_str(), "none");
    }
    for v in &r.progress().violations {
        assert!(
            !v.detail.contains("SECRET"),
            "a violation detail shows a raw cursor: {}",
            v.detail
        );
    }
    r
}

fn page(ids: &[u64], next: Option<&str>) -> Page {
    Page {
        items: ids.iter().map(|i| Item::int(*i)).collect(),
        next: next.map(str::to_owned),
        ..Page::default()
    }
}

fn p(ids: &[u64], next: Option<&str>) -> Ev {
    Ev::Page(page(ids, next))
}

fn with(mut pg: Page, f: impl FnOnce(&mut Page)) -> Ev {
    f(&mut pg);
    Ev::Page(pg)
}

fn contract(f: impl FnOnce(&mut Contract)) -> Contract {
    let mut c = Contract::new("s");
    f(&mut c);
    c
}

fn strings(ids: &[&str], next: Option<&str>) -> Page {
    Page {
        items: ids
            .iter()
            .map(|s| Item {
                id: RawId::Str((*s).to_owned()),
                labels: Vec::new(),
                content: None,
            })
            .collect(),
        next: next.map(str::to_owned),
        ..Page::default()
    }
}

fn labelled(id: u64, labels: &[&str]) -> Item {
    Item {
        id: RawId::Int(id),
        labels: labels.iter().map(|l| (*l).to_owned()).collect(),
        content: None,
    }
}

fn items_page(items: Vec<Item>, next: Option<&str>) -> Ev {
    Ev::Page(Page {
        items,
        next: next.map(str::to_owned),
        ..Page::default()
    })
}

use ViolationKind as K;

// R1 --------------------------------------------------------------------------------------------

#[test]
fn two_pages_verified() {
    let r = check(
        &Contract::new("s"),
        &[p(&[1, 2], Some("a")), p(&[3], None)],
        Status::Verified,
        &[],
    );
    assert!(r.progress().terminal_observed);
    assert_eq!(r.progress().next, None);
    assert_eq!(r.conclusion_scope().as_str(), "all_records_live");
}

#[test]
fn empty_page_with_cursor_is_not_the_end() {
    check(
        &Contract::new("s"),
        &[p(&[1], Some("a")), p(&[], Some("b")), p(&[2], None)],
        Status::Verified,
        &[],
    );
}

#[test]
fn unfinished_run_is_unknown() {
    let r = check(
        &Contract::new("s"),
        &[p(&[1, 2], Some("a"))],
        Status::Unknown,
        &[],
    );
    assert_eq!(r.next_request(), Some(&Request::Cursor("a".to_owned())));
    assert_eq!(
        Reconciler::new(&Contract::new("s")).status(),
        Status::Unknown,
        "nothing observed is not an empty collection"
    );
}

#[test]
fn complete_flag_end_signal() {
    let c = contract(|c| c.end_signal = EndSignal::CompleteFlag);
    let last = with(page(&[3], None), |p| p.complete = Some(true));
    let mid = with(page(&[2], Some("b")), |p| p.complete = Some(false));
    check(&c, &[p(&[1], Some("a")), mid, last], Status::Verified, &[]);
}

#[test]
fn both_end_signal() {
    let c = contract(|c| c.end_signal = EndSignal::Both);
    let last = with(page(&[2], None), |p| p.complete = Some(true));
    check(&c, &[p(&[1], Some("a")), last], Status::Verified, &[]);
}

#[test]
fn complete_true_without_cursor_agrees_with_cursor_absent() {
    let last = with(page(&[2], None), |p| p.complete = Some(true));
    check(&Contract::new("s"), &[last], Status::Verified, &[]);
}

#[test]
fn pinned_snapshot_gives_the_snapshot_scope() {
    let c = contract(|c| c.snapshot_id = Some("s1".into()));
    let r = check(&c, &[p(&[1], None)], Status::Verified, &[]);
    assert_eq!(r.conclusion_scope().as_str(), "all_records_in_snapshot");
    let echoed = with(page(&[1], None), |p| p.snapshot = Some("s9".into()));
    let r = check(&Contract::new("s"), &[echoed], Status::Verified, &[]);
    assert_eq!(r.progress().pinned_snapshot.as_deref(), Some("s9"));
    assert_eq!(r.conclusion_scope().as_str(), "all_records_in_snapshot");
}

fn totalled(ids: &[u64], next: &str, total: u64) -> Ev {
    with(page(ids, Some(next)), |p| p.total = Some(total))
}

#[test]
fn total_end_signal_ends_where_the_position_reaches_the_total() {
    let c = contract(|c| c.end_signal = EndSignal::Total);
    // Page-number APIs always offer the next position; the total decides the end.
    let r = check(
        &c,
        &[totalled(&[1, 2], "p2", 3), totalled(&[3], "p3", 3)],
        Status::Verified,
        &[],
    );
    assert_eq!(r.conclusion_scope().as_str(), "all_records_live");
    // A short page before the total is not the end.
    let r = check(&c, &[totalled(&[1], "p2", 3)], Status::Unknown, &[]);
    assert!(!r.is_finished());
}

#[test]
fn total_end_signal_with_a_drifted_offset_is_a_count_mismatch() {
    // An insert shifted the offsets: record 2 is served again on page 2, and the position
    // reaches the total with one record never seen.
    let c = contract(|c| c.end_signal = EndSignal::Total);
    check(
        &c,
        &[totalled(&[1, 2], "p2", 4), totalled(&[2, 3], "p3", 4)],
        Status::Failed,
        &[ViolationKind::DuplicateId, ViolationKind::CountMismatch],
    );
    // A record skipped under a stable total: the position never reaches the total, so the
    // traversal goes on (until the source's end or a budget) and is never verified.
    let r = check(
        &c,
        &[
            totalled(&[1, 2], "p2", 4),
            totalled(&[4], "p3", 4),
            totalled(&[], "p4", 4),
        ],
        Status::Unknown,
        &[],
    );
    assert!(!r.is_finished());
}

#[test]
fn total_end_signal_without_a_total_or_a_cursor_is_not_the_end() {
    let c = contract(|c| c.end_signal = EndSignal::Total);
    check(
        &c,
        &[p(&[1], Some("p2")), p(&[2], None)],
        Status::Unknown,
        &[ViolationKind::MissingCompletionEvidence],
    );
}

#[test]
fn echoed_total_is_checked_under_any_end_signal() {
    let last = with(page(&[1, 2], None), |p| p.total = Some(5));
    check(
        &Contract::new("s"),
        &[last],
        Status::Failed,
        &[ViolationKind::CountMismatch],
    );
}

#[test]
fn empty_page_end_signal() {
    let c = contract(|c| c.end_signal = EndSignal::EmptyPage);
    check(
        &c,
        &[p(&[1, 2], Some("p2")), p(&[], Some("p3"))],
        Status::Verified,
        &[],
    );
    // A non-empty page without a cursor is no end under this rule.
    check(
        &c,
        &[p(&[1, 2], None)],
        Status::Unknown,
        &[ViolationKind::MissingCompletionEvidence],
    );
}

// R2 --------------------------------------------------------------------------------------------

#[test]
fn genuinely_empty_collection_is_verified() {
    let r = check(&Contract::new("s"), &[p(&[], None)], Status::Verified, &[]);
    assert_eq!(r.ids().len(), 0);
    assert_eq!(r.progress().pages_observed, 1);
    assert_eq!(r.progress().records_observed, 0);
}

#[test]
fn empty_collection_under_complete_flag() {
    let c = contract(|c| c.end_signal = EndSignal::CompleteFlag);
    let only = with(page(&[], None), |p| p.complete = Some(true));
    check(&c, &[only], Status::Verified, &[]);
}

// R3 --------------------------------------------------------------------------------------------

#[test]
fn cursor_repeated_at_page_three() {
    let r = check(
        &Contract::new("s"),
        &[p(&[1], Some("a")), p(&[2], Some("b")), p(&[3], Some("a"))],
        Status::Failed,
        &[K::RepeatedCursor],
    );
    assert_eq!(r.progress().violations[0].page, 3);
    assert_eq!(
        r.progress().next,
        None,
        "a failed run has nothing to resume"
    );
}

#[test]
fn page_pointing_to_itself_is_a_loop() {
    check(
        &Contract::new("s"),
        &[p(&[1], Some("a")), p(&[2], Some("a"))],
        Status::Failed,
        &[K::RepeatedCursor],
    );
}

#[test]
fn loop_after_empty_pages() {
    check(
        &Contract::new("s"),
        &[p(&[1], Some("a")), p(&[], Some("b")), p(&[], Some("a"))],
        Status::Failed,
        &[K::RepeatedCursor],
    );
}

#[test]
fn repeated_cursor_detail_has_a_fingerprint_not_the_cursor() {
    let r = check(
        &Contract::new("s"),
        &[p(&[1], Some("SECRET-x")), p(&[2], Some("SECRET-x"))],
        Status::Failed,
        &[K::RepeatedCursor],
    );
    assert!(r.progress().violations[0].detail.contains("cursor #"));
}

// R4 --------------------------------------------------------------------------------------------

#[test]
fn duplicate_across_pages_fails_but_traversal_goes_on() {
    let mut r = Reconciler::new(&Contract::new("s"));
    assert!(matches!(
        r.observe(&page(&[1, 2], Some("a"))).step,
        Step::Continue(_)
    ));
    assert!(matches!(
        r.observe(&page(&[2, 3], Some("b"))).step,
        Step::Continue(_)
    ));
    assert_eq!(r.observe(&page(&[4], None)).step, Step::Done);
    assert_eq!(r.status(), Status::Failed);
    assert_eq!(r.progress().duplicate_ids, 1);
    assert_eq!(r.ids().len(), 4);
}

#[test]
fn duplicate_on_non_adjacent_page() {
    let r = check(
        &Contract::new("s"),
        &[p(&[1, 2], Some("a")), p(&[3], Some("b")), p(&[1], None)],
        Status::Failed,
        &[K::DuplicateId],
    );
    assert_eq!(r.progress().violations[0].page, 3);
    assert!(r.progress().terminal_observed);
}

#[test]
fn duplicate_within_one_page() {
    let r = check(
        &Contract::new("s"),
        &[p(&[5, 5, 5], None)],
        Status::Failed,
        &[K::DuplicateId],
    );
    assert_eq!(r.progress().duplicate_ids, 2);
    assert_eq!(r.progress().records_observed, 3);
    assert_eq!(r.ids().len(), 1);
}

#[test]
fn duplicate_detail_names_ids_capped() {
    let r = check(
        &Contract::new("s"),
        &[
            p(&[1, 2, 3, 4, 5, 6, 7], Some("a")),
            p(&[1, 2, 3, 4, 5, 6, 7], None),
        ],
        Status::Failed,
        &[K::DuplicateId],
    );
    let detail = &r.progress().violations[0].detail;
    assert!(
        detail.starts_with("7 duplicate IDs: 1, 2, 3, 4, 5"),
        "{detail}"
    );
    assert!(detail.ends_with("and 2 more"), "{detail}");
}

#[test]
fn count_matches_but_ids_duplicated() {
    let c = contract(|c| c.expected_count = Some(4));
    let r = check(
        &c,
        &[p(&[1, 2], Some("a")), p(&[2, 3], None)],
        Status::Failed,
        &[K::DuplicateId, K::CountMismatch],
    );
    assert_eq!(r.progress().records_observed, 4);
    assert_eq!(r.ids().len(), 3);
}

// R5 --------------------------------------------------------------------------------------------

fn snap(pg: Page, s: &str) -> Ev {
    with(pg, |p| p.snapshot = Some(s.to_owned()))
}

#[test]
fn snapshot_change_blocks() {
    let c = contract(|c| c.snapshot_id = Some("s1".into()));
    let r = check(
        &c,
        &[
            snap(page(&[1], Some("a")), "s1"),
            snap(page(&[2], None), "s2"),
        ],
        Status::Failed,
        &[K::SnapshotChanged],
    );
    assert_eq!(
        r.progress().pages_observed,
        1,
        "the foreign page is not ingested"
    );
    assert_eq!(r.ids().len(), 1);
    assert_eq!(r.progress().violations[0].page, 2);
}

#[test]
fn snapshot_change_with_restart_policy_asks_for_a_restart() {
    let c = contract(|c| c.on_snapshot_change = SnapshotPolicy::Restart);
    let mut r = Reconciler::new(&c);
    assert!(matches!(
        r.observe(&snap(page(&[1], Some("a")), "s1").page()).step,
        Step::Continue(_)
    ));
    assert_eq!(
        r.observe(&snap(page(&[2], None), "s2").page()).step,
        Step::Restart
    );
    r.check_invariants();
    assert!(r.is_finished());
    assert_eq!(r.next_request(), None);
    assert_eq!(
        r.status(),
        Status::Failed,
        "the superseded run claims nothing"
    );
    assert_eq!(r.ids().len(), 1);
}

#[test]
fn pages_without_a_snapshot_echo_keep_the_pin() {
    let c = contract(|c| c.snapshot_id = Some("s1".into()));
    let r = check(
        &c,
        &[p(&[1], Some("a")), snap(page(&[2], None), "s1")],
        Status::Verified,
        &[],
    );
    assert_eq!(r.conclusion_scope().as_str(), "all_records_in_snapshot");
}

#[test]
fn first_echo_pins_then_a_change_fails() {
    check(
        &Contract::new("s"),
        &[
            snap(page(&[1], Some("a")), "s1"),
            snap(page(&[2], None), "s2"),
        ],
        Status::Failed,
        &[K::SnapshotChanged],
    );
}

impl Ev {
    fn page(&self) -> Page {
        match self {
            Ev::Page(p) => p.clone(),
            other => panic!("not a page: {other:?}"),
        }
    }
}

// R6 --------------------------------------------------------------------------------------------

fn query(pg: Page, q: Value) -> Ev {
    with(pg, |p| p.query = Some(q))
}

#[test]
fn query_change_fails_and_is_not_ingested() {
    let c = contract(|c| c.scope.query = serde_json::json!({"v": {"ne": 3}}));
    let r = check(
        &c,
        &[
            query(page(&[1], Some("a")), serde_json::json!({"v": {"ne": 3}})),
            query(page(&[2], None), serde_json::json!({})),
        ],
        Status::Failed,
        &[K::QueryChanged],
    );
    assert_eq!(r.ids().len(), 1);
    assert!(r.progress().violations[0].detail.contains(r.query_digest()));
}

#[test]
fn absent_contract_query_matches_empty_or_null_echo() {
    for echo in [serde_json::json!({}), Value::Null] {
        check(
            &Contract::new("s"),
            &[query(page(&[1], None), echo)],
            Status::Verified,
            &[],
        );
    }
    check(
        &Contract::new("s"),
        &[query(page(&[1], None), serde_json::json!({"x": 1}))],
        Status::Failed,
        &[K::QueryChanged],
    );
}

// R7 --------------------------------------------------------------------------------------------

#[test]
fn complete_true_with_cursor_is_contradictory() {
    for end in [
        EndSignal::CursorAbsent,
        EndSignal::CompleteFlag,
        EndSignal::Both,
    ] {
        let c = contract(|c| c.end_signal = end);
        let r = check(
            &c,
            &[with(page(&[1], Some("a")), |p| p.complete = Some(true))],
            Status::Failed,
            &[K::ContradictoryCompletion],
        );
        assert!(!r.progress().terminal_observed);
        assert_eq!(r.ids().len(), 0);
    }
}

#[test]
fn complete_false_without_cursor_is_contradictory() {
    for end in [
        EndSignal::CursorAbsent,
        EndSignal::CompleteFlag,
        EndSignal::Both,
    ] {
        let c = contract(|c| c.end_signal = end);
        check(
            &c,
            &[
                p(&[1], Some("a")),
                with(page(&[2], None), |p| p.complete = Some(false)),
            ],
            Status::Failed,
            &[K::ContradictoryCompletion],
        );
    }
}

// R8 --------------------------------------------------------------------------------------------

#[test]
fn complete_flag_required_but_absent() {
    let c = contract(|c| c.end_signal = EndSignal::CompleteFlag);
    let r = check(
        &c,
        &[p(&[1], Some("a")), p(&[2], None)],
        Status::Unknown,
        &[K::MissingCompletionEvidence],
    );
    assert_eq!(r.progress().violations[0].page, 2);
    assert!(!r.progress().terminal_observed);
    assert_eq!(
        r.ids().len(),
        2,
        "the page is observed, only the end is not proven"
    );
}

#[test]
fn both_required_but_flag_absent() {
    let c = contract(|c| c.end_signal = EndSignal::Both);
    check(
        &c,
        &[p(&[1], None)],
        Status::Unknown,
        &[K::MissingCompletionEvidence],
    );
}

#[test]
fn empty_page_without_required_flag_is_not_an_empty_collection() {
    let c = contract(|c| c.end_signal = EndSignal::CompleteFlag);
    check(
        &c,
        &[p(&[], None)],
        Status::Unknown,
        &[K::MissingCompletionEvidence],
    );
}

/// R8 is final: a run stopped by missing completion evidence keeps no request, so a resume
/// cannot fetch its last page again and count it twice (a bug found by this test's earlier,
/// pinned version).
#[test]
fn missing_evidence_keeps_no_request_and_cannot_be_reopened() {
    let c = contract(|c| c.end_signal = EndSignal::Both);
    let mut r = check(
        &c,
        &[p(&[1], Some("a")), p(&[2], None)],
        Status::Unknown,
        &[K::MissingCompletionEvidence],
    );
    assert_eq!(r.progress().next, None);
    assert!(!r.reopen());
}

// R9 --------------------------------------------------------------------------------------------

#[test]
fn truncated_page_goes_on_but_stays_unknown() {
    let r = check(
        &Contract::new("s"),
        &[
            with(page(&[1], Some("a")), |p| p.truncated = true),
            p(&[2], None),
        ],
        Status::Unknown,
        &[K::TruncatedPage],
    );
    assert!(r.progress().terminal_observed);
    assert_eq!(r.progress().pages_observed, 2);
    assert_eq!(r.progress().violations[0].page, 1);
}

#[test]
fn truncated_terminal_page() {
    check(
        &Contract::new("s"),
        &[with(page(&[1], None), |p| p.truncated = true)],
        Status::Unknown,
        &[K::TruncatedPage],
    );
}

#[test]
fn findings_accumulate_and_the_worst_wins() {
    let c = contract(|c| c.expected_count = Some(9));
    check(
        &c,
        &[
            with(page(&[1], Some("a")), |p| p.truncated = true),
            p(&[1], None),
        ],
        Status::Failed,
        &[K::TruncatedPage, K::DuplicateId, K::CountMismatch],
    );
}

// R10 -------------------------------------------------------------------------------------------

#[test]
fn expected_count_mismatch() {
    for expected in [0, 2, 4] {
        let c = contract(|c| c.expected_count = Some(expected));
        let r = check(
            &c,
            &[p(&[1, 2], Some("a")), p(&[3], None)],
            Status::Failed,
            &[K::CountMismatch],
        );
        assert_eq!(
            r.progress().violations[0].detail,
            format!("expected {expected} unique IDs, observed 3")
        );
    }
}

#[test]
fn expected_count_matches() {
    let c = contract(|c| c.expected_count = Some(3));
    check(
        &c,
        &[p(&[1, 2], Some("a")), p(&[3], None)],
        Status::Verified,
        &[],
    );
}

#[test]
fn expected_count_is_checked_only_at_the_end() {
    let c = contract(|c| {
        c.expected_count = Some(100);
        c.limits.max_pages = Some(1);
    });
    check(
        &c,
        &[p(&[1], Some("a"))],
        Status::Unknown,
        &[K::LimitReached],
    );
}

// R11 -------------------------------------------------------------------------------------------

#[test]
fn partition_counts_differ() {
    let c = contract(|c| c.expected_partitions = Some(vec![(0, 2), (1, 2)]));
    let r = check(
        &c,
        &[p(&[1, 2], Some("a")), p(&[65_536], None)],
        Status::Failed,
        &[K::PartitionMismatch],
    );
    assert_eq!(
        r.progress().violations[0].detail,
        "1 partition differs: partition 1 (expected 2, observed 1)"
    );
}

#[test]
fn unlisted_partition_differs() {
    let c = contract(|c| c.expected_partitions = Some(vec![(0, 1)]));
    let r = check(
        &c,
        &[p(&[1, 3 * 65_536 + 7], None)],
        Status::Failed,
        &[K::PartitionMismatch],
    );
    assert!(r.progress().violations[0]
        .detail
        .contains("3 (expected 0, observed 1)"));
}

#[test]
fn partition_mismatch_lists_are_capped() {
    let c = contract(|c| c.expected_partitions = Some((0..20).map(|p| (p, 1)).collect()));
    let r = check(&c, &[p(&[], None)], Status::Failed, &[K::PartitionMismatch]);
    assert!(r.progress().violations[0].detail.ends_with("and 4 more"));
}

#[test]
fn partition_counts_match() {
    let c = contract(|c| c.expected_partitions = Some(vec![(0, 2), (1, 1)]));
    check(
        &c,
        &[p(&[1, 2], Some("a")), p(&[65_536], None)],
        Status::Verified,
        &[],
    );
}

// R12 -------------------------------------------------------------------------------------------

#[track_caller]
fn check_limit(c: &Contract, events: &[Ev], limit: Limit) -> Reconciler {
    let r = check(c, events, Status::Unknown, &[K::LimitReached]);
    assert_eq!(r.progress().limits_hit, vec![limit]);
    assert!(!r.progress().terminal_observed);
    assert!(
        r.progress().next.is_some(),
        "a budget stop keeps its request for resume"
    );
    r
}

#[test]
fn page_limit_reached() {
    let c = contract(|c| c.limits.max_pages = Some(2));
    let r = check_limit(
        &c,
        &[p(&[1], Some("a")), p(&[2], Some("b")), p(&[3], None)],
        Limit::MaxPages,
    );
    assert_eq!(r.progress().pages_observed, 2);
}

#[test]
fn record_limit_reached() {
    let c = contract(|c| c.limits.max_records = Some(3));
    check_limit(
        &c,
        &[p(&[1, 2], Some("a")), p(&[3, 4], Some("b")), p(&[5], None)],
        Limit::MaxRecords,
    );
}

#[test]
fn byte_limit_reached() {
    let c = contract(|c| c.limits.max_bytes = Some(150));
    let big = |ids: &[u64], next| with(page(ids, next), |p| p.size_bytes = 100);
    check_limit(
        &c,
        &[big(&[1], Some("a")), big(&[2], Some("b")), big(&[3], None)],
        Limit::MaxBytes,
    );
}

#[test]
fn deadline_reached() {
    check_limit(
        &Contract::new("s"),
        &[p(&[1], Some("a")), Ev::Deadline],
        Limit::Deadline,
    );
}

#[test]
fn sample_stops_and_says_so() {
    let c = contract(|c| c.mode = Mode::Sample(2));
    let r = check_limit(
        &c,
        &[p(&[1], Some("a")), p(&[2], Some("b")), p(&[3], None)],
        Limit::Sample,
    );
    assert!(r.progress().violations[0]
        .detail
        .contains("first in source order"));
}

#[test]
fn budget_met_by_the_terminal_page_is_not_a_limit() {
    let c = contract(|c| {
        c.limits.max_pages = Some(2);
        c.limits.max_records = Some(2);
        c.mode = Mode::Sample(2);
    });
    check(
        &c,
        &[p(&[1], Some("a")), p(&[2], None)],
        Status::Verified,
        &[],
    );
}

#[test]
fn reopen_after_a_limit_drops_it_and_raise_lets_the_run_finish() {
    let c = contract(|c| c.limits.max_pages = Some(1));
    let mut r = check_limit(&c, &[p(&[1], Some("a"))], Limit::MaxPages);
    assert!(r.reopen());
    r.apply_contract(&contract(|c| c.limits.max_pages = Some(5)));
    assert_eq!(r.next_request(), Some(&Request::Cursor("a".to_owned())));
    assert_eq!(r.observe(&page(&[2], None)).step, Step::Done);
    r.check_invariants();
    assert_eq!(r.status(), Status::Verified);
    assert!(r.progress().limits_hit.is_empty());
}

#[test]
fn reopen_keeps_truncation_but_refuses_after_a_failure() {
    let c = contract(|c| c.limits.max_pages = Some(1));
    let mut r = check(
        &c,
        &[with(page(&[1], Some("a")), |p| p.truncated = true)],
        Status::Unknown,
        &[K::TruncatedPage, K::LimitReached],
    );
    assert!(r.reopen());
    let kinds: Vec<_> = r.progress().violations.iter().map(|v| v.kind).collect();
    assert_eq!(kinds, [K::TruncatedPage]);

    let c = contract(|c| c.limits.max_pages = Some(2));
    let mut r = check(
        &c,
        &[p(&[1], Some("a")), p(&[1], Some("b"))],
        Status::Failed,
        &[K::DuplicateId, K::LimitReached],
    );
    assert!(!r.reopen(), "a failed run stays failed");
}

// R13, R14, R15 ---------------------------------------------------------------------------------

#[test]
fn page_failure_is_unknown_never_a_partial_inventory() {
    for failure in [FetchFailure::Timeout, FetchFailure::ServerError] {
        let r = check(
            &Contract::new("s"),
            &[p(&[1, 2], Some("a")), Ev::Failed(failure)],
            Status::Unknown,
            &[K::PageFailed],
        );
        assert_eq!(r.progress().violations[0].page, 2);
        assert_eq!(r.conclusion_scope().as_str(), "none");
        assert!(r.progress().next.is_some(), "kept for resume");
    }
}

#[test]
fn first_page_failure_is_not_an_empty_collection() {
    let r = check(
        &Contract::new("s"),
        &[Ev::Failed(FetchFailure::Timeout)],
        Status::Unknown,
        &[K::PageFailed],
    );
    assert_eq!(r.progress().violations[0].page, 1);
}

#[test]
fn access_denied() {
    check(
        &Contract::new("s"),
        &[p(&[1], Some("a")), Ev::Failed(FetchFailure::Forbidden)],
        Status::Unknown,
        &[K::AccessDenied],
    );
}

#[test]
fn expired_cursor_with_block_policy() {
    check(
        &Contract::new("s"),
        &[p(&[1], Some("a")), Ev::Failed(FetchFailure::ExpiredCursor)],
        Status::Unknown,
        &[K::ExpiredCursor],
    );
}

#[test]
fn failure_after_the_end_changes_nothing() {
    check(
        &Contract::new("s"),
        &[
            p(&[1], None),
            Ev::Failed(FetchFailure::Timeout),
            Ev::Deadline,
        ],
        Status::Verified,
        &[],
    );
}

#[test]
fn high_water_continues_after_the_last_key_as_a_live_claim() {
    let c = contract(|c| {
        c.snapshot_id = Some("s1".into());
        c.on_expired_cursor = ExpiredPolicy::HighWater;
    });
    let mut r = Reconciler::new(&c);
    let _ = r.observe(&page(&[3, 1, 7], Some("a")));
    assert_eq!(
        r.continue_after_high_water(),
        Some(Request::After("7".to_owned())),
        "the key is the last ID of the last page, in source order"
    );
    assert_eq!(r.next_request(), Some(&Request::After("7".to_owned())));
    assert_eq!(r.observe(&page(&[8], None)).step, Step::Done);
    r.check_invariants();
    assert_eq!(r.status(), Status::Verified);
    assert_eq!(r.conclusion_scope().as_str(), "all_records_live");
}

#[test]
fn high_water_keeps_the_snapshot_scope_when_the_snapshot_still_echoes() {
    let c = contract(|c| c.snapshot_id = Some("s1".into()));
    let r = check(
        &c,
        &[
            p(&[1], Some("a")),
            Ev::HighWater,
            snap(page(&[2], None), "s1"),
        ],
        Status::Verified,
        &[],
    );
    assert_eq!(r.conclusion_scope().as_str(), "all_records_in_snapshot");
}

#[test]
fn high_water_renders_the_key_in_the_original_form() {
    let c = contract(|c| c.id_codec = IdCodecKind::Prefixed);
    let mut r = Reconciler::new(&c);
    let _ = r.observe(&strings(&["customer-4", "customer-9"], Some("a")));
    assert_eq!(
        r.continue_after_high_water(),
        Some(Request::After("customer-9".to_owned()))
    );
}

#[test]
fn high_water_without_a_key_is_an_expired_cursor() {
    check(
        &Contract::new("s"),
        &[p(&[], Some("a")), Ev::HighWater],
        Status::Unknown,
        &[K::ExpiredCursor],
    );
}

// R16 -------------------------------------------------------------------------------------------

#[track_caller]
fn check_invalid(c: &Contract, bad: Ev, needle: &str) {
    let r = check(
        c,
        &[p(&[], Some("first")), bad],
        Status::Failed,
        &[K::InvalidPage],
    );
    let v = &r.progress().violations[0];
    assert_eq!(v.page, 2);
    assert!(v.detail.contains(needle), "{:?} lacks {needle:?}", v.detail);
    assert_eq!(
        r.progress().pages_observed,
        1,
        "the bad page changes nothing"
    );
    assert_eq!(r.ids().len(), 0);
    assert!(r.labels().is_empty());
}

#[test]
fn int_codec_refuses_strings_negatives_and_floats() {
    let c = Contract::new("s");
    let id = |raw: RawId| {
        items_page(
            vec![
                Item::int(1),
                Item {
                    id: raw,
                    labels: Vec::new(),
                    content: None,
                },
            ],
            None,
        )
    };
    check_invalid(&c, id(RawId::Str("7".into())), "item 1");
    check_invalid(&c, id(RawId::Other("-5".into())), "-5");
    check_invalid(&c, id(RawId::Other("1.5".into())), "1.5");
}

#[test]
fn prefixed_codec_refuses_leading_zeros_and_other_prefixes() {
    let c = contract(|c| c.id_codec = IdCodecKind::Prefixed);
    check_invalid(
        &c,
        Ev::Page(strings(&["customer-007"], None)),
        "leading zeros",
    );
    check_invalid(
        &c,
        Ev::Page(strings(&["customer-1", "client-2"], None)),
        "item 1",
    );
    check_invalid(&c, Ev::Page(strings(&["customer-"], None)), "item 0");
    check_invalid(&c, p(&[5], None), "item 0");
    let c = contract(|c| {
        c.id_codec = IdCodecKind::Prefixed;
        c.id_prefix = Some("customer-".into());
    });
    check_invalid(&c, Ev::Page(strings(&["order-5"], None)), "prefix");
}

#[test]
fn string_codec_bounds_the_id_length() {
    let c = contract(|c| c.id_codec = IdCodecKind::String);
    let long = "x".repeat(ID_LEN_MAX + 1);
    check_invalid(&c, Ev::Page(strings(&[&long], None)), "exceeds the bound");
    check_invalid(&c, Ev::Page(strings(&[""], None)), "empty");
    let at_bound = "x".repeat(ID_LEN_MAX);
    check(
        &c,
        &[Ev::Page(strings(&[&at_bound], None))],
        Status::Verified,
        &[],
    );
}

#[test]
fn cursor_length_is_bounded() {
    let c = Contract::new("s");
    let long = format!("SECRET-{}", "x".repeat(CURSOR_LEN_MAX - 6));
    check_invalid(&c, p(&[1], Some(&long)), "exceeds the bound");
    check_invalid(&c, p(&[1], Some("")), "empty");
    let at_bound = "x".repeat(CURSOR_LEN_MAX);
    check(
        &c,
        &[p(&[1], Some(&at_bound)), p(&[2], None)],
        Status::Verified,
        &[],
    );
}

#[test]
fn labels_per_item_are_bounded() {
    let c = Contract::new("s");
    let names: Vec<String> = (0..=LABELS_PER_ITEM_MAX).map(|i| format!("l{i}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    check_invalid(
        &c,
        items_page(vec![Item::int(1), labelled(2, &refs)], None),
        "item 1: 17 labels",
    );
    let r = check(
        &c,
        &[items_page(
            vec![labelled(1, &refs[..LABELS_PER_ITEM_MAX])],
            None,
        )],
        Status::Verified,
        &[],
    );
    assert_eq!(r.labels().len(), LABELS_PER_ITEM_MAX);
}

#[test]
fn label_names_are_bounded() {
    let c = Contract::new("s");
    check_invalid(&c, items_page(vec![labelled(1, &[""])], None), "label name");
    let long = "l".repeat(LABEL_LEN_MAX + 1);
    check_invalid(
        &c,
        items_page(vec![labelled(1, &[&long])], None),
        "label name",
    );
}

#[test]
fn distinct_labels_per_run_are_bounded_across_pages() {
    let names: Vec<String> = (0..=LABELS_PER_RUN_MAX).map(|i| format!("l{i}")).collect();
    let first: Vec<Item> = (0..LABELS_PER_RUN_MAX)
        .map(|i| labelled(i as u64, &[&names[i]]))
        .collect();
    let r = check(
        &Contract::new("s"),
        &[
            items_page(first, Some("a")),
            items_page(vec![labelled(100, &[&names[LABELS_PER_RUN_MAX]])], None),
        ],
        Status::Failed,
        &[K::InvalidPage],
    );
    assert_eq!(r.labels().len(), LABELS_PER_RUN_MAX);
}

/// The bound on distinct labels per run holds within one page too: a page that would bring the
/// run from 40 to 65 labels is `invalid_page` and leaves the run unchanged (a bug found by this
/// test's earlier, pinned version).
#[test]
fn distinct_labels_per_run_within_one_page() {
    let first: Vec<Item> = (0..40).map(|i| labelled(i, &[&format!("a{i}")])).collect();
    let second: Vec<Item> = (0..25)
        .map(|i| labelled(100 + i, &[&format!("b{i}")]))
        .collect();
    let r = check(
        &Contract::new("s"),
        &[items_page(first, Some("a")), items_page(second, None)],
        Status::Failed,
        &[K::InvalidPage],
    );
    assert_eq!(r.labels().len(), 40);
}

#[test]
fn items_per_page_are_bounded() {
    let c = Contract::new("s");
    let n = u64::from(ITEMS_PER_PAGE_MAX);
    let ids: Vec<u64> = (0..=n).collect();
    check_invalid(&c, p(&ids, None), "items exceed the bound");
    check(&c, &[p(&ids[..ids.len() - 1], None)], Status::Verified, &[]);
}

#[test]
fn page_bytes_are_bounded() {
    let c = Contract::new("s");
    check_invalid(
        &c,
        with(page(&[1], None), |p| p.size_bytes = PAGE_SIZE_BYTES_MAX + 1),
        "bytes exceed the bound",
    );
}

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
