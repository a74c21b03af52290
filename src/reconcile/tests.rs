use super::*;
use crate::contract::{Item, Page};

#[track_caller]
fn check(contract: &Contract, pages: &[Page], expected: Status, kinds: &[ViolationKind]) {
    let mut r = Reconciler::new(contract);
    for p in pages {
        r.check_invariants();
        if r.is_finished() {
            break;
        }
        r.observe(p);
    }
    r.check_invariants();
    assert_eq!(r.status(), expected);
    let got: Vec<ViolationKind> = r.progress().violations.iter().map(|v| v.kind).collect();
    assert_eq!(got, kinds);
}

fn page(ids: &[u64], next: Option<&str>) -> Page {
    Page {
        items: ids.iter().map(|i| Item::int(*i)).collect(),
        next: next.map(str::to_owned),
        ..Page::default()
    }
}

#[test]
fn two_pages_verified() {
    check(
        &Contract::new("s"),
        &[page(&[1, 2], Some("a")), page(&[3], None)],
        Status::Verified,
        &[],
    );
}

#[test]
fn empty_page_with_cursor_is_not_the_end() {
    check(
        &Contract::new("s"),
        &[
            page(&[1], Some("a")),
            page(&[], Some("b")),
            page(&[2], None),
        ],
        Status::Verified,
        &[],
    );
}

#[test]
fn duplicate_across_pages_fails_but_traversal_goes_on() {
    let mut r = Reconciler::new(&Contract::new("s"));
    assert!(matches!(
        r.observe(&page(&[1, 2], Some("a"))),
        Step::Continue(_)
    ));
    assert!(matches!(
        r.observe(&page(&[2, 3], Some("b"))),
        Step::Continue(_)
    ));
    assert_eq!(r.observe(&page(&[4], None)), Step::Done);
    assert_eq!(r.status(), Status::Failed);
    assert_eq!(r.progress().duplicate_ids, 1);
    assert_eq!(r.ids().len(), 4);
}
