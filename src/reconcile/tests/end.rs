//! R1-R3: how a traversal ends: end signals, empty collections, cursor loops.

use super::*;

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
