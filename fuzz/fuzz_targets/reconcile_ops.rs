//! `Reconciler::observe` against a `BTreeSet<u64>` model (redb's fuzzer against a model).
//!
//! A contract with a random end signal, pinned snapshot, policies and expectations, then up
//! to 64 page events (or an occasional failed fetch). IDs come from 1,024 values over four
//! partitions so duplicates happen; cursors from nine values (one of them the empty string,
//! which is R16) so loops happen. After every step: `check_invariants()`, the unique IDs and
//! counts equal the model's, and the status obeys the laws of docs/REFERENCE.md §6:
//! - verified only after an accepted terminal page, with no duplicate and no violation,
//!   with the expected count and partition counts when the contract gave them;
//! - a duplicate or a repeated cursor fails the run (R3, R4), never silently dropped;
//! - a page is accepted (its items counted) or refused whole.

#![no_main]

use std::collections::{BTreeMap, BTreeSet, HashSet};

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use scanledger::{
    Contract, EndSignal, FetchFailure, Item, Page, RawId, Reconciler, Request, SnapshotPolicy,
    Status, Step,
};
use scanledger_fuzz::Bounded;
use serde_json::Value;

const SNAPSHOTS: [&str; 3] = ["s0", "s1", "s2"];
const LABELS: [&str; 4] = ["l0", "l1", "l2", "l3"];

#[derive(Arbitrary, Debug)]
struct Input {
    end_signal: u8,
    snapshot_id: Option<u8>,
    restart_on_snapshot_change: bool,
    expected_count: Option<u16>,
    expected_partitions: Option<[u16; 4]>,
    max_pages: Option<u8>,
    events: Bounded<Event, 64>,
}

#[derive(Arbitrary, Debug)]
struct Event {
    /// 250..=255 makes the event a failed fetch of this kind instead of a page (~2 %).
    fail: u8,
    items: Bounded<ItemEvent, 256>,
    /// 0..=7 a cursor `cN`, 8 the empty string (an invalid cursor).
    next: Option<u8>,
    complete: Option<bool>,
    snapshot: Option<u8>,
    /// 0 `null`, 1 `{}`, 2 `{"a": 1}` (differs from the contract's null query: R6).
    query: Option<u8>,
    truncated: bool,
    size_bytes: u16,
    /// The total the page echoes (end signal `total`, and R10 against it).
    total: Option<u8>,
}

#[derive(Arbitrary, Debug)]
struct ItemEvent {
    partition: u8,
    low: u8,
    /// Bit `i` of the low nibble attaches label `i`, when the high nibble is 0xf.
    labels: u8,
}

impl ItemEvent {
    fn id(&self) -> u64 {
        (u64::from(self.partition % 4) << 16) | u64::from(self.low)
    }

    fn item(&self) -> Item {
        let labels = if self.labels >> 4 == 0xf {
            (0..4)
                .filter(|i| self.labels & (1 << i) != 0)
                .map(|i| LABELS[i].to_owned())
                .collect()
        } else {
            Vec::new()
        };
        {
            let mut item = Item::new(RawId::Int(self.id()));
            item.labels = labels;
            item.content = None;
            item
        }
    }
}

fn contract(input: &Input) -> Contract {
    let mut c = Contract::new("fuzz");
    c.end_signal = match input.end_signal % 5 {
        0 => EndSignal::CursorAbsent,
        1 => EndSignal::CompleteFlag,
        2 => EndSignal::Both,
        3 => EndSignal::Total,
        _ => EndSignal::EmptyPage,
    };
    c.snapshot_id = input
        .snapshot_id
        .map(|s| SNAPSHOTS[usize::from(s) % 3].to_owned());
    if input.restart_on_snapshot_change {
        c.on_snapshot_change = SnapshotPolicy::Restart;
    }
    c.expected_count = input.expected_count.map(|n| u64::from(n % 1100));
    c.expected_partitions = input.expected_partitions.map(|counts| {
        counts
            .iter()
            .enumerate()
            .map(|(p, n)| (p as u64, u64::from(n % 300)))
            .collect()
    });
    // A contract file refuses 0 pages; the reconciler is given what a valid contract holds.
    c.limits.max_pages = input.max_pages.map(|n| u32::from(n.max(1)));
    c
}

fn page(e: &Event) -> Page {
    {
        let mut page = Page::default();
        page.items = e.items.0.iter().map(ItemEvent::item).collect();
        page.next = e.next.map(|n| match n % 9 {
            8 => String::new(),
            k => format!("c{k}"),
        });
        page.complete = e.complete;
        page.snapshot = e.snapshot.map(|s| SNAPSHOTS[usize::from(s) % 3].to_owned());
        page.query = e.query.map(|q| match q % 3 {
            0 => Value::Null,
            1 => serde_json::json!({}),
            _ => serde_json::json!({ "a": 1 }),
        });
        page.truncated = e.truncated;
        page.size_bytes = u64::from(e.size_bytes);
        page.total = e.total.map(u64::from);
        page
    }
}

/// Whether `p` ends the traversal; `records` counts the items observed with it.
fn is_terminal(signal: EndSignal, p: &Page, records: u64) -> bool {
    match signal {
        EndSignal::CursorAbsent => p.next.is_none(),
        EndSignal::CompleteFlag => p.complete == Some(true),
        EndSignal::Both => p.next.is_none() && p.complete == Some(true),
        EndSignal::Total => p.total.is_some_and(|t| records >= t),
        EndSignal::EmptyPage => p.items.is_empty(),
    }
}

fuzz_target!(|input: Input| {
    let contract = contract(&input);
    let mut r = Reconciler::new(&contract);
    r.check_invariants();

    let mut model: BTreeSet<u64> = BTreeSet::new();
    let mut model_labels: BTreeMap<&str, BTreeSet<u64>> = BTreeMap::new();
    let mut records = 0u64;
    let mut duplicates = 0u64;
    let mut cursors_seen: HashSet<String> = HashSet::new();
    let mut repeated_cursor = false;
    let mut terminal_seen = false;
    let mut echoed_total: Option<u64> = None;
    let mut truncated_seen = false;

    for e in &input.events.0 {
        assert!(!r.is_finished());
        if e.fail >= 250 {
            let failure = match e.fail % 4 {
                0 => FetchFailure::Timeout,
                1 => FetchFailure::ServerError,
                2 => FetchFailure::Forbidden,
                _ => FetchFailure::ExpiredCursor,
            };
            r.fetch_failed(failure, "fuzz".to_owned());
            r.check_invariants();
            assert!(r.is_finished());
            assert_ne!(
                r.status(),
                Status::Verified,
                "a failed fetch verified the run"
            );
            break;
        }

        let p = page(e);
        let pages_before = r.progress().pages_observed;
        let seen = r.observe(&p);
        let step = seen.step.clone();
        r.check_invariants();

        let accepted = r.progress().pages_observed == pages_before + 1;
        // The delta names the page exactly when it was accepted, and only partitions the
        // page's IDs fall in.
        assert_eq!(
            seen.delta.page.is_some(),
            accepted,
            "delta and page log disagree"
        );
        for part in &seen.delta.partitions {
            assert!(
                p.items
                    .iter()
                    .any(|i| matches!(i.id, scanledger::RawId::Int(id) if id >> 16 == *part)),
                "the delta names a partition the page did not touch"
            );
        }
        if !accepted {
            assert_eq!(r.progress().pages_observed, pages_before);
            assert!(r.is_finished(), "a refused page must stop the run");
        } else {
            for (it, item) in e.items.0.iter().zip(&p.items) {
                if !model.insert(it.id()) {
                    duplicates += 1;
                }
                for l in &item.labels {
                    let name = LABELS
                        .iter()
                        .find(|n| **n == l.as_str())
                        .expect("labels come from LABELS");
                    model_labels.entry(name).or_default().insert(it.id());
                }
            }
            records += p.items.len() as u64;
            truncated_seen |= p.truncated;
            if let Some(c) = &p.next {
                if !cursors_seen.insert(c.clone()) {
                    repeated_cursor = true;
                }
            }
            if let Some(t) = p.total {
                echoed_total = Some(t);
            }
            if is_terminal(contract.end_signal, &p, records) && !repeated_cursor {
                terminal_seen = true;
            }
        }

        let progress = r.progress();
        assert_eq!(r.ids().len(), model.len() as u64, "unique IDs differ");
        assert!(r.ids().iter().eq(model.iter().copied()), "ID sets differ");
        assert_eq!(progress.records_observed, records, "records differ");
        assert_eq!(progress.duplicate_ids, duplicates, "duplicates differ");
        assert_eq!(
            progress.records_observed,
            r.ids().len() + progress.duplicate_ids
        );
        for (name, set) in progress.label_names.iter().zip(r.labels()) {
            let want = model_labels.get(name.as_str()).map_or(0, BTreeSet::len);
            assert_eq!(set.len(), want as u64, "label {name} differs");
        }
        if let Some(max) = contract.limits.max_pages {
            assert!(progress.pages_observed <= max, "max_pages overrun");
        }

        let status = r.status();
        if duplicates > 0 || repeated_cursor {
            assert_eq!(status, Status::Failed, "R3/R4 must fail the run");
        }
        if status == Status::Verified {
            assert!(terminal_seen, "verified without a terminal page");
            assert!(progress.violations.is_empty());
            assert_eq!(duplicates, 0);
            if let Some(n) = contract.expected_count {
                assert_eq!(r.ids().len(), n, "verified with a count mismatch");
            }
            if let Some(n) = echoed_total {
                assert_eq!(r.ids().len(), n, "verified against the echoed total");
            }
            if let Some(parts) = &contract.expected_partitions {
                for (p, n) in parts {
                    let seen = r.ids().partition(*p).map_or(0, |b| b.len());
                    assert_eq!(seen, *n, "verified with partition {p} mismatched");
                }
                assert!(r
                    .ids()
                    .partitions()
                    .all(|(p, _)| parts.iter().any(|(q, _)| *q == p)));
            }
        }

        // R1, the positive law: a clean traversal that reaches its end signal is verified.
        let expectations_hold = contract.expected_count.is_none_or(|n| r.ids().len() == n)
            && echoed_total.is_none_or(|n| r.ids().len() == n)
            && contract.expected_partitions.as_ref().is_none_or(|parts| {
                parts
                    .iter()
                    .all(|(p, n)| r.ids().partition(*p).map_or(0, |b| b.len()) == *n)
                    && r.ids()
                        .partitions()
                        .all(|(p, _)| parts.iter().any(|(q, _)| *q == p))
            });
        if accepted
            && is_terminal(contract.end_signal, &p, records)
            && duplicates == 0
            && !repeated_cursor
            && !truncated_seen
            && expectations_hold
        {
            assert_eq!(
                status,
                Status::Verified,
                "a clean traversal was not verified"
            );
        }

        match step {
            Step::Continue(req) => {
                assert!(!r.is_finished());
                assert_eq!(Some(&req), r.next_request());
                assert_eq!(
                    req,
                    Request::Cursor(p.next.clone().expect("continue needs a cursor"))
                );
            }
            Step::Restart => {
                assert!(r.is_finished());
                assert_eq!(contract.on_snapshot_change, SnapshotPolicy::Restart);
                break;
            }
            Step::Done => {
                assert!(r.is_finished());
                break;
            }
        }
    }
    if !r.is_finished() {
        assert_ne!(
            r.status(),
            Status::Verified,
            "an unfinished run is verified"
        );
    }
});
