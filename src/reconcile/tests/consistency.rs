//! R4-R7: duplicate IDs, snapshot changes, echoed queries, contradictory end signals.

use super::*;

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
