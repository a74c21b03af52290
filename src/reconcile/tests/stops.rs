//! R12-R15: limits, failed pages, denied access and expired cursors.

use super::*;

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
