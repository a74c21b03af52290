//! Unit tests of the pure renderer: escaping, verdicts, map states and aggregation, the size
//! bound, and that the document references nothing outside itself.

use std::collections::BTreeMap;

use super::map::{self, CellState, CELLS_MAX};
use super::*;
use crate::receipt::{LabelSummary, RECEIPT_FORMAT_VERSION};
use crate::reconcile::{Violation, ViolationKind};

fn receipt(status: Status, unique: u64, pages: u32) -> Receipt {
    Receipt {
        run_id: "run-2".into(),
        source: "customer-registry".into(),
        tenant: Some("acme".into()),
        query_digest: format!("sha256:{}", "ab".repeat(32)),
        snapshot_id: Some("customers-2026-11-29".into()),
        mode: "all".into(),
        id_codec: crate::contract::IdCodecKind::Int,
        end_signal: crate::contract::EndSignal::CursorAbsent,
        pages_observed: pages,
        records_expected: None,
        records_observed: unique,
        unique_ids_observed: unique,
        duplicate_ids: 0,
        cursor_chain_digest: format!("sha256:{}", "cd".repeat(32)),
        terminal_cursor_observed: status == Status::Verified,
        limits_hit: Vec::new(),
        coverage_status: status,
        conclusion_scope: if status == Status::Verified {
            crate::reconcile::ConclusionScope::AllRecordsInSnapshot
        } else {
            crate::reconcile::ConclusionScope::None
        },
        violations: Vec::new(),
        violations_dropped: 0,
        merkle_root: format!("sha256:{}", "ef".repeat(32)),
        partitions: 0,
        content_root: None,
        labels: BTreeMap::new(),
        missing_id_ranges: None,
        restarts: 0,
        restarted_from: None,
        superseded_by: None,
        plan_digest: None,
        shards: None,
        count_total: None,
        rejected: false,
        started_at: "2026-11-29T09:00:00.000Z".into(),
        finished_at: Some("2026-11-29T09:01:00.000Z".into()),
        format_version: RECEIPT_FORMAT_VERSION,
    }
}

fn input(r: Receipt, partitions: Vec<(u64, u64)>) -> ReportInput {
    ReportInput {
        receipt: r,
        state: "finished".into(),
        stopped_by: None,
        id_codec: IdCodecKind::Int,
        id_prefix: None,
        partitions,
        expected_partitions: None,
        reference: None,
        migration: None,
        generator: "test".into(),
    }
}

fn violation(kind: ViolationKind, page: u32, detail: &str) -> Violation {
    Violation {
        kind,
        page,
        detail: detail.into(),
    }
}

#[test]
fn escape_covers_the_five_characters_and_controls() {
    assert_eq!(escape("a&b<c>d\"e'f"), "a&amp;b&lt;c&gt;d&quot;e&#39;f");
    assert_eq!(
        escape("tab\tnl\nnul\u{0}esc\u{1b}"),
        "tab\tnl\nnul\u{fffd}esc\u{fffd}"
    );
    assert_eq!(escape("ünïcødé ✓"), "ünïcødé ✓");
    assert_eq!(escape(""), "");
    // `show` clips before escaping, so an escaped entity is never cut in half.
    let long = "<".repeat(1000);
    let shown = text::show(&long);
    assert!(shown.ends_with("&lt;…"), "{}", &shown[shown.len() - 12..]);
    assert_eq!(shown.matches("&lt;").count(), text::SHOWN_CHARS_MAX);
}

#[test]
fn numbers_read_with_separators() {
    assert_eq!(thousands(0u64), "0");
    assert_eq!(thousands(1_000u64), "1,000");
    assert_eq!(thousands(u64::MAX), "18,446,744,073,709,551,615");
    assert_eq!(text::plural(1, "page"), "1 page");
    assert_eq!(text::plural(2_000, "page"), "2,000 pages");
}

#[test]
fn every_source_string_is_escaped() {
    let mut r = receipt(Status::Failed, 3, 2);
    r.source = "<script>alert(1)</script>".into();
    r.tenant = Some("\"><img src=x onerror=alert(2)>".into());
    r.snapshot_id = Some("<iframe src=javascript:alert(3)>".into());
    r.labels.insert(
        "<blink>needs</blink>".into(),
        LabelSummary {
            count: 1,
            ranges: vec!["<svg onload=alert(4)>..<svg onload=alert(4)>".into()],
            ranges_total: 1,
        },
    );
    r.violations = vec![violation(
        ViolationKind::InvalidPage,
        2,
        "id \"<object data=x>\" is not an integer",
    )];
    let mut i = input(r, vec![(0, 3)]);
    i.id_codec = IdCodecKind::Prefixed;
    i.id_prefix = Some("<marquee>".into());
    i.state = "<textarea>".into();
    let html = render(&i);
    for bad in [
        "<script",
        "<img",
        "<iframe",
        "<blink",
        "<svg onload",
        "<object",
        "<marquee",
        "<textarea",
    ] {
        assert!(!html.contains(bad), "{bad} reached the document unescaped");
    }
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    assert!(html.contains("&lt;blink&gt;needs&lt;/blink&gt;"));
    assert!(
        html.contains("&lt;svg onload=alert(4)&gt;"),
        "a singleton range shows once"
    );
}

#[test]
fn the_document_loads_nothing_from_outside() {
    let mut r = receipt(Status::Verified, 100, 1);
    r.source = "https://api.example.com/v1/customers".into();
    let html = render(&input(r, vec![(0, 100)]));
    assert!(html.contains(
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:;"
    ));
    // The only URL-like text is the source's own name, escaped as text.
    assert_eq!(
        html.matches("https://").count(),
        3,
        "header, caveat and receipt: text only"
    );
    for never in [
        "http://", "src=", "href=", "@import", "<script", "<link", "<img", "<iframe",
    ] {
        assert!(!html.contains(never), "{never} in the document");
    }
    for (at, _) in html.match_indices("url(") {
        assert!(
            html[at..].starts_with("url(#pat-"),
            "a url() that is not a fragment"
        );
    }
}

#[test]
fn verdicts_say_what_is_proven_and_what_is_not() {
    let v = verdict(&input(receipt(Status::Verified, 1_000_000, 1_000), vec![]));
    assert_eq!(
        v.headline,
        "Verified: all 1,000,000 records in snapshot customers-2026-11-29 were read exactly once, over 1,000 pages."
    );
    assert!(v
        .caveat
        .contains("nothing about records outside snapshot customers-2026-11-29"));

    let mut r = receipt(Status::Verified, 0, 1);
    r.snapshot_id = None;
    r.conclusion_scope = crate::reconcile::ConclusionScope::AllRecordsLive;
    let v = verdict(&input(r, vec![]));
    assert!(
        v.headline
            .starts_with("Verified (live scan): the collection was empty"),
        "{}",
        v.headline
    );
    assert!(v.caveat.contains("No snapshot was pinned"));

    let mut r = receipt(Status::Unknown, 300_000, 300);
    r.records_expected = Some(1_010_000);
    r.limits_hit = vec!["max_pages".into()];
    r.violations = vec![violation(
        ViolationKind::LimitReached,
        300,
        "max_pages 300 reached",
    )];
    let v = verdict(&input(r, vec![]));
    assert_eq!(
        v.headline,
        "Unknown: the scan stopped at its page budget (max_pages); 300,000 of an expected 1,010,000 unique records were read over 300 pages, and this is NOT an inventory."
    );
    assert!(
        v.caveat.contains("`scanledger resume run-2` can continue"),
        "{}",
        v.caveat
    );

    let mut r = receipt(Status::Failed, 4, 3);
    r.violations = vec![
        violation(ViolationKind::TruncatedPage, 1, ""),
        violation(ViolationKind::RepeatedCursor, 3, ""),
    ];
    let v = verdict(&input(r, vec![]));
    assert_eq!(
        v.headline,
        "Failed: the source returned a cursor it had returned before (a loop) on page 3 (and 1 more violation); 4 unique records were read over 3 pages, and this is NOT an inventory."
    );

    let mut r = receipt(Status::Unknown, 10, 2);
    r.terminal_cursor_observed = false;
    let mut i = input(r, vec![]);
    i.state = "running".into();
    assert!(verdict(&i).headline.contains("has not reached its end"));
}

#[test]
fn the_headline_counts_every_violation_the_figures_count() {
    // A failed run with a failing violation, an unknown one and two counted but not kept:
    // the headline once said "(and 0 more)" (it counted only violations of its own status)
    // beside a card of 4.
    let mut r = receipt(Status::Failed, 48_000, 48);
    r.violations = vec![
        violation(ViolationKind::TruncatedPage, 7, ""),
        violation(ViolationKind::DuplicateId, 29, "1 duplicate ID: 1900551"),
    ];
    r.violations_dropped = 2;
    let i = input(r, vec![(0, 48_000)]);
    assert_eq!(
        verdict(&i).headline,
        "Failed: the source returned an ID twice on page 29 (and 3 more violations); 48,000 unique records were read over 48 pages, and this is NOT an inventory."
    );
    let html = render(&i);
    assert!(
        html.contains("<b>4</b><span>violations</span>"),
        "the card counts the same 4"
    );
    // One violation: no "more", and every card's noun agrees with its figure.
    let mut r = receipt(Status::Failed, 1, 1);
    r.violations = vec![violation(
        ViolationKind::DuplicateId,
        1,
        "1 duplicate ID: 7",
    )];
    r.duplicate_ids = 1;
    r.partitions = 1;
    let i = input(r, vec![(0, 1)]);
    assert_eq!(
        verdict(&i).headline,
        "Failed: the source returned an ID twice on page 1; 1 unique record was read over 1 page, and this is NOT an inventory."
    );
    let html = render(&i);
    for card in [
        "<b>1</b><span>unique ID</span>",
        "<b>1</b><span>page observed</span>",
        "<b>1</b><span>partition</span>",
        "<b>1</b><span>duplicate ID</span>",
        "<b>1</b><span>violation</span>",
        "<b>0</b><span>labels</span>",
    ] {
        assert!(html.contains(card), "{card}");
    }
}

#[test]
fn map_states_follow_expectation_and_reference() {
    let mut i = input(
        receipt(Status::Failed, 0, 1),
        vec![(0, 10), (1, 5), (2, 7), (5, 1)],
    );
    i.expected_partitions = Some(vec![(0, 10), (1, 6), (2, 7), (3, 4)]);
    i.reference = Some(Reference {
        run_id: "run-1".into(),
        coverage_status: Status::Verified,
        snapshot_id: None,
        unique_ids: 30,
        partitions: vec![(0, 10), (2, 8), (4, 12)],
        added: RangeSummary::default(),
        removed: RangeSummary::default(),
        partitions_differing: vec![2, 4],
    });
    let m = map::build(&i);
    let states: Vec<CellState> = m.cells.iter().map(|c| c.state).collect();
    use CellState as S;
    // 0 as expected; 1 short of the source's 6; 2 differs from run-1; 3 expected 4, none seen;
    // 4 only in run-1; 5 not listed by the source, which then counts it as 0.
    assert_eq!(
        states,
        [
            S::Present,
            S::Short,
            S::Differing,
            S::Short,
            S::Missing,
            S::Short
        ]
    );
    assert_eq!((m.first, m.last, m.per_cell), (0, 5, 1));
    assert_eq!(m.partitions_observed, 4);
    assert_eq!(m.cells[4].reference, Some(12));
    assert_eq!(m.state_counts.iter().sum::<u64>(), 6);
}

#[test]
fn maps_past_the_cell_bound_aggregate_and_say_so() {
    let parts: Vec<(u64, u64)> = (0..10_000).map(|p| (p, 65_536)).collect();
    let mut i = input(
        receipt(Status::Verified, 10_000 * 65_536, 10_000),
        parts.clone(),
    );
    i.reference = Some(Reference {
        run_id: "run-1".into(),
        coverage_status: Status::Verified,
        snapshot_id: None,
        unique_ids: 0,
        partitions: parts.iter().copied().chain([(10_000, 1)]).collect(),
        added: RangeSummary::default(),
        removed: RangeSummary::default(),
        partitions_differing: vec![10_000],
    });
    let m = map::build(&i);
    assert_eq!(
        m.per_cell, 3,
        "10,001 partitions into at most {CELLS_MAX} cells"
    );
    assert_eq!(m.cells.len(), 3_334);
    let last = m.cells.last().expect("cells");
    assert_eq!(
        (last.first, last.last, last.state),
        (9_999, 10_000, CellState::Missing)
    );
    assert_eq!(last.states[CellState::Present as usize], 1);
    assert_eq!(m.state_counts.iter().sum::<u64>(), m.span());
    let summary = map::summary(&m, false);
    assert!(summary.contains("Aggregated:</strong> the 10,001 partitions of the span are drawn as 3,334 cells of 3 partitions each"), "{summary}");
    let html = render(&i);
    assert_eq!(
        html.matches("<rect class=").count(),
        3_334 + 4,
        "cells plus the legend's swatches (no per-partition counts: no `short`)"
    );

    // A sparse span (two partitions 2^47 apart) stays within the bound too.
    let i = input(receipt(Status::Verified, 2, 1), vec![(0, 1), (1 << 47, 1)]);
    let m = map::build(&i);
    assert!(m.cells.len() as u64 <= CELLS_MAX);
    assert_eq!(
        m.cells
            .iter()
            .filter(|c| c.state == CellState::Present)
            .count(),
        2
    );
}

#[test]
fn a_million_partitions_stay_under_five_megabytes() {
    let n = 1_000_000u64;
    let parts: Vec<(u64, u64)> = (0..n).map(|p| (p * 3, 65_536)).collect();
    let mut r = receipt(Status::Failed, n * 65_536, u32::MAX);
    r.partitions = n;
    // The worst a receipt can hold: 256 violations and 64 labels of 32 ranges, long strings.
    let long = "\"<>&'".repeat(200);
    r.violations = (0..256)
        .map(|k| violation(ViolationKind::DuplicateId, k * 1_000, &long))
        .collect();
    for l in 0..64 {
        r.labels.insert(
            format!("{l}{long}"),
            LabelSummary {
                count: 1,
                ranges: vec![format!("{long}..{long}x"); 32],
                ranges_total: 1_000_000,
            },
        );
    }
    r.source = long.clone();
    r.snapshot_id = Some(long.clone());
    let mut i = input(r, parts.clone());
    i.expected_partitions = Some(parts.iter().map(|&(p, c)| (p + 1, c)).collect());
    let wide = RangeSummary {
        count: n,
        ranges: vec![format!("{long}..{long}"); 32],
        ranges_total: n,
    };
    i.reference = Some(Reference {
        run_id: "run-1".into(),
        coverage_status: Status::Unknown,
        snapshot_id: Some(long.clone()),
        unique_ids: n,
        partitions: parts.iter().map(|&(p, c)| (p + 2, c)).collect(),
        added: wide.clone(),
        removed: wide,
        partitions_differing: (0..3 * n).collect(),
    });
    let html = render(&i);
    assert!(
        html.len() < REPORT_BYTES_MAX,
        "{} bytes for a million partitions",
        html.len()
    );
    eprintln!(
        "a million partitions, worst-case strings: {} bytes",
        html.len()
    );
    let m = map::build(&i);
    assert!(m.cells.len() as u64 <= CELLS_MAX);
    assert_eq!(m.partitions_observed, n);
    assert!(html.contains("<strong id=\"map-partitions\">1,000,000</strong>"));
}

#[test]
fn an_empty_run_has_an_empty_map() {
    let html = render(&input(receipt(Status::Verified, 0, 1), vec![]));
    assert!(html.contains("<strong id=\"map-partitions\">0</strong> partitions"));
    assert!(!html.contains("<svg class=\"map\""));
    assert!(html.contains("No violation over 1 page"));
}

fn shard(
    index: u32,
    finding: crate::receipt::ShardFinding,
    status: Option<Status>,
) -> crate::receipt::ShardEntry {
    let taken = status.is_some();
    crate::receipt::ShardEntry {
        index,
        key_range: crate::receipt::ShardRange {
            lo: u64::from(index) * 1000,
            hi: u64::from(index + 1) * 1000,
        },
        finding,
        store: taken.then(|| format!("shard-{index}.redb")),
        run_id: taken.then(|| "run-1".to_owned()),
        coverage_status: status,
        unique_ids_observed: if taken { 1000 } else { 0 },
        merkle_root: taken.then(|| format!("sha256:{}", "12".repeat(32))),
    }
}

#[test]
fn a_merged_runs_report_lists_its_shards_the_unsettled_first_and_bounded() {
    use crate::receipt::ShardFinding as F;
    // An ordinary run has no shards section.
    let plain = render(&input(receipt(Status::Verified, 100, 1), vec![]));
    assert!(!plain.contains("id=\"shards\""));

    // Four shards, the third missing: it is listed first and the sentence says so.
    let mut r = receipt(Status::Unknown, 3000, 3);
    r.plan_digest = Some(format!("sha256:{}", "9a".repeat(32)));
    r.shards = Some(vec![
        shard(0, F::Merged, Some(Status::Verified)),
        shard(1, F::Merged, Some(Status::Verified)),
        shard(2, F::Missing, None),
        shard(3, F::Merged, Some(Status::Verified)),
    ]);
    let html = render(&input(r, vec![]));
    let at = html.find("id=\"shards\"").expect("a shards section");
    let section = &html[at..];
    assert!(
        section.contains("Merged from 4 shards of plan <code>sha256:9a9a"),
        "{section}"
    );
    assert!(section.contains("1 not merged and verified, listed first"));
    let first_row = section.find("<tbody><tr>").expect("rows");
    assert!(
        section[first_row..].starts_with("<tbody><tr><td class=\"num\">2</td><td class=\"num\">[2,000, 3,000)</td><td><code>missing</code>"),
        "{}",
        &section[first_row..first_row + 200]
    );
    for k in 0..4u64 {
        assert!(section.contains(&format!(
            "[{}, {})",
            thousands(k * 1000),
            thousands((k + 1) * 1000)
        )));
    }

    // The plan's maximum, every shard merged and verified: 64 rows and a count of the rest.
    let mut r = receipt(Status::Verified, 4_096_000, 4096);
    r.plan_digest = Some(format!("sha256:{}", "9a".repeat(32)));
    r.shards = Some(
        (0..4096)
            .map(|k| shard(k, F::Merged, Some(Status::Verified)))
            .collect(),
    );
    let html = render(&input(r, vec![]));
    let at = html.find("id=\"shards\"").expect("a shards section");
    assert!(html[at..].contains("every one merged and verified"));
    assert_eq!(html[at..].matches("<code>merged</code>").count(), 64);
    assert!(html[at..].contains("4,032 more shards, merged and verified, are not shown"));
    assert!(html.len() < REPORT_BYTES_MAX);
}

#[test]
fn string_ids_are_not_shown_as_partitions_or_ranges_of_the_strings() {
    let mut r = receipt(Status::Verified, 100, 2);
    r.id_codec = IdCodecKind::String;
    r.partitions = 100;
    r.labels.insert(
        "old".into(),
        LabelSummary {
            count: 10,
            ranges: vec!["https://e.com/a..https://e.com/c".into()],
            ranges_total: 1,
        },
    );
    let mut i = input(r.clone(), vec![(0, 100)]);
    i.id_codec = IdCodecKind::String;
    i.reference = Some(Reference {
        run_id: "run-1".into(),
        coverage_status: Status::Verified,
        snapshot_id: None,
        unique_ids: 103,
        partitions: vec![(0, 103)],
        added: RangeSummary {
            count: 0,
            ranges: Vec::new(),
            ranges_total: 0,
        },
        removed: RangeSummary {
            count: 9,
            ranges: (1..=8).map(|n| format!("u{n}..u{n}")).collect(),
            ranges_total: 9,
        },
        partitions_differing: vec![0],
    });
    let html = render(&i);
    assert!(
        html.contains("<b>100</b><span>buckets of the strings' digests</span>"),
        "{html}"
    );
    assert!(html.contains("<dt>buckets (strings' digests)</dt><dd>100</dd>"));
    assert!(html.contains("65,536 consecutive dictionary numbers of the strings"));
    assert!(html.contains("not a range of the strings"));
    // A label's dictionary range would read as alphabetical: export lists its IDs instead.
    assert!(!html.contains("https://e.com/a"), "{html}");
    assert!(html.contains("<code>scanledger export run-2 --label old</code> lists them"));
    // The comparison lists string IDs one by one, and counts the rest as IDs.
    assert!(
        html.contains("<code>u8</code> <span class=\"note\">and 1 more ID</span>"),
        "{html}"
    );
    // The same run with integer IDs keeps its partitions and ranges.
    r.id_codec = IdCodecKind::Int;
    let html = render(&input(r, vec![(0, 100)]));
    assert!(html.contains("<b>100</b><span>partitions</span>"));
    assert!(html.contains("https://e.com/a"));
}

#[test]
fn an_interrupted_run_says_so_and_that_pages_after_it_were_checked_by_no_rule() {
    let mut i = input(receipt(Status::Unknown, 2, 1), vec![(0, 2)]);
    i.receipt.finished_at = None;
    i.state = "interrupted".into();
    let html = render(&i);
    assert!(
        html.contains("the run is interrupted: it stopped at its last commit before its end"),
        "{html}"
    );
    assert!(html.contains("every page read so far passed every rule. The run has not reached its end (it is interrupted)"));
    assert!(!html.contains("every page passed every rule"));
    i.state = "finished".into();
    assert!(render(&i).contains("No violation over 1 page: every page passed every rule."));
}
