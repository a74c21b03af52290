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

/// The page an event carries (a test helper: panics on any other event).
impl Ev {
    fn page(&self) -> Page {
        match self {
            Ev::Page(p) => p.clone(),
            other => panic!("not a page: {other:?}"),
        }
    }
}

/// A page echoing snapshot `s`.
fn snap(pg: Page, s: &str) -> Ev {
    with(pg, |p| p.snapshot = Some(s.to_owned()))
}

use ViolationKind as K;

mod bookkeeping;
mod bounds;
mod consistency;
mod end;
mod evidence;
mod merge;
mod stops;
