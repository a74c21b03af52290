//! The verdict: one sentence saying what a run proves, and one saying what it does not.
//!
//! Pure. Every figure comes from the receipt; the wording follows the status and the violation
//! that decided it, so an `unknown` or `failed` run always says "this is NOT an inventory".
//! The sentences are plain text: the renderer escapes them.

use super::text::{clip, more, plural, thousands, SHOWN_CHARS_MAX};
use super::ReportInput;
use crate::receipt::Receipt;
use crate::reconcile::{Status, Violation, ViolationKind};

/// What a run proves and what it does not, as plain text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Verdict {
    /// The run's status.
    pub status: Status,
    /// One sentence: the claim the run supports (or that it supports none).
    pub headline: String,
    /// One or two sentences: what the run does not prove, and what to do next.
    pub caveat: String,
}

/// The verdict of a run: the headline names the status, the decisive violation (the first
/// one forcing that status) and the counts read; the caveat names what stays unproven.
#[must_use]
pub(crate) fn verdict(input: &ReportInput) -> Verdict {
    let r = &input.receipt;
    let status = r.coverage_status;
    let headline = match status {
        Status::Verified => verified_headline(r),
        Status::Unknown | Status::Failed => {
            let reason = decisive(r, status).map_or_else(|| not_finished(input), |v| reason(v, r));
            format!(
                "{}: {reason}; {} and this is NOT an inventory.",
                title(status),
                read_so_far(r)
            )
        }
    };
    let mut caveat = String::new();
    if let Some(by) = &r.superseded_by {
        caveat.push_str(&format!("This run was superseded by {by} (a restart). "));
    }
    caveat.push_str(&match status {
        Status::Verified if r.conclusion_scope == crate::reconcile::ConclusionScope::AllRecordsInSnapshot => format!(
            "It proves nothing about records outside snapshot {} or outside the scope {} / {} and its query.",
            snapshot(r),
            clip(&r.source, SHOWN_CHARS_MAX),
            clip(r.tenant.as_deref().unwrap_or("-"), SHOWN_CHARS_MAX)
        ),
        Status::Verified => "No snapshot was pinned: records created or deleted while the scan ran may be missed, a weaker claim than a snapshot inventory.".to_owned(),
        Status::Unknown => {
            let mut s = "The IDs read are a lower bound: more records may exist, and nothing is proven about them.".to_owned();
            let transient = decisive(r, status).is_some_and(|v| v.kind.is_transient());
            if transient && r.superseded_by.is_none() {
                s.push_str(&format!(" `scanledger resume {}` can continue the scan.", r.run_id));
            }
            s
        }
        Status::Failed => "The enumeration itself is defective: no inventory can be built from this run; the source must be fixed and scanned again.".to_owned(),
    });
    if r.rejected {
        caveat.push_str(
            " The receipt is rejected: the source ran another query than the contract's.",
        );
    }
    Verdict {
        status,
        headline,
        caveat,
    }
}

/// The run's snapshot, clipped like every source string the report shows.
fn snapshot(r: &Receipt) -> String {
    clip(r.snapshot_id.as_deref().unwrap_or("-"), SHOWN_CHARS_MAX)
}

/// `Verified`, `Unknown`, `Failed`.
pub(crate) fn title(s: Status) -> &'static str {
    match s {
        Status::Verified => "Verified",
        Status::Unknown => "Unknown",
        Status::Failed => "Failed",
    }
}

fn verified_headline(r: &Receipt) -> String {
    let pages = plural(u64::from(r.pages_observed), "page");
    let expected = match r.records_expected {
        Some(e) if e == r.unique_ids_observed => ", as many as the source expected".to_owned(),
        _ => String::new(),
    };
    match (r.conclusion_scope.as_str(), r.unique_ids_observed) {
        ("all_records_in_snapshot", 0) => format!(
            "Verified: the collection is empty in snapshot {}: {pages} ending with the end signal, no record.",
            snapshot(r)
        ),
        ("all_records_in_snapshot", n) => format!(
            "Verified: all {} records in snapshot {} were read exactly once, over {pages}{expected}.",
            thousands(n),
            snapshot(r)
        ),
        (_, 0) => format!("Verified (live scan): the collection was empty: {pages} ending with the end signal, no record."),
        (_, n) => format!(
            "Verified (live scan): all {} records were read exactly once, over {pages}{expected}, without a pinned snapshot.",
            thousands(n)
        ),
    }
}

/// The first violation that forces the run's status.
fn decisive(r: &Receipt, status: Status) -> Option<&Violation> {
    r.violations.iter().find(|v| v.kind.status() == status)
}

fn not_finished(input: &ReportInput) -> String {
    let state = input.state.as_str();
    if state == "running" {
        "the scan has not reached its end (the run is still open: running or interrupted)"
            .to_owned()
    } else if state == "interrupted" {
        let why = input.stopped_by.as_ref().map_or_else(
            || "because its process was killed (or stopped before it could record why)".to_owned(),
            |s| format!("{} at {}", s.sentence(), s.at),
        );
        format!("the run is interrupted: it stopped at its last commit before its end, {why}, and scanledger resume continues it")
    } else {
        "the run ended without a terminal page".to_owned()
    }
}

/// "N of an expected E unique records were read over P pages,".
fn read_so_far(r: &Receipt) -> String {
    let of = r
        .records_expected
        .map_or_else(String::new, |e| format!(" of an expected {}", thousands(e)));
    format!(
        "{}{of} unique record{} {} read over {},",
        thousands(r.unique_ids_observed),
        if r.unique_ids_observed == 1 && of.is_empty() {
            ""
        } else {
            "s"
        },
        if r.unique_ids_observed == 1 && of.is_empty() {
            "was"
        } else {
            "were"
        },
        plural(u64::from(r.pages_observed), "page")
    )
}

/// Why the run is `status`, from the violation that decided it.
fn reason(v: &Violation, r: &Receipt) -> String {
    use ViolationKind as K;
    let p = v.page;
    let s = match v.kind {
        K::LimitReached => match r.limits_hit.first().map(String::as_str) {
            Some("max_pages") => "the scan stopped at its page budget (max_pages)".to_owned(),
            Some("max_records") => "the scan stopped at its record budget (max_records)".to_owned(),
            Some("max_bytes") => "the scan stopped at its byte budget (max_bytes)".to_owned(),
            Some("deadline") => "the scan stopped at its deadline".to_owned(),
            Some("sample") => format!(
                "the scan stopped after the sample it was asked for ({}, the first records in source order)",
                r.mode
            ),
            _ => format!("the scan stopped at a limit on page {p}"),
        },
        K::PageFailed => format!("page {p} failed after its retries"),
        K::AccessDenied => format!("access was denied on page {p}"),
        K::ExpiredCursor => format!("the cursor expired on page {p}"),
        K::TruncatedPage => format!("the source marked page {p} as truncated"),
        K::MissingCompletionEvidence => {
            format!("the last page ({p}) carried no completion evidence")
        }
        K::RepeatedCursor => {
            format!("the source returned a cursor it had returned before (a loop) on page {p}")
        }
        K::DuplicateId => format!("the source returned an ID twice on page {p}"),
        K::SnapshotChanged => format!("the snapshot changed on page {p}"),
        K::QueryChanged => format!("the source ran another query on page {p}"),
        K::ContradictoryCompletion => {
            format!("the completion signals of page {p} contradict each other")
        }
        K::CountMismatch => {
            "the unique IDs read differ from the source's expected count (count_mismatch)"
                .to_owned()
        }
        K::PartitionMismatch => {
            "the per-partition counts differ from the source's (partition_mismatch)".to_owned()
        }
        K::InvalidPage => format!("page {p} broke the ID codec or a size bound"),
        K::ShardMissing => "a shard of the plan has no finished run (shard_missing)".to_owned(),
        K::ShardConflict => "a shard of the plan was run more than once (shard_conflict)".to_owned(),
        K::ShardMismatch => {
            "a shard store holds a run of another plan, contract or range (shard_mismatch)"
                .to_owned()
        }
    };
    // Every other violation, of any status and those counted but not kept, so the headline
    // agrees with the report's violation count.
    let others = (r.violations.len() as u64)
        .saturating_add(r.violations_dropped)
        .saturating_sub(1);
    if others == 0 {
        s
    } else {
        format!("{s} (and {})", more(others, "violation"))
    }
}
