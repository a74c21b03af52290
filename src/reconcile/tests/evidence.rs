//! R8-R11: completion evidence, truncated pages, counts and partition counts.

use super::*;

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
