//! The one-pass comparison's part of a verdict: what the two key streams of the one-command
//! form found (`collect::StreamedKeys`), judged against the stored evidence before any of it is
//! used.
//!
//! The streams name keys; they never decide more than the stored evidence allows. They are used
//! only when both sides streamed whole (`int` IDs, one traversal each, to a verified end) and
//! agree with what the runs stored: as many rows as each run's IDs, as many missing and extra
//! keys as the ID sets differ by, and, with content, a difference in exactly the partitions
//! whose content accumulators differ. A stream that disagrees makes the verdict `unknown`, with
//! the disagreement as its reason.

use serde::Serialize;

use crate::collect::StreamedKeys;
use crate::contract::IdCodecKind;
use crate::evidence::across::ContentDiff;
use crate::evidence::lists::Compared;

/// What the one-pass comparison of the one-command form did (docs/REFERENCE.md §8).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct StreamReport {
    /// Whether both sides' rows were compared key by key as they were scanned, in agreement
    /// with the stored evidence (then `changed_ids` comes from it).
    pub compared: bool,
    /// Why not, when not.
    pub why_not: Option<String>,
    /// Rows streamed from `--from`.
    pub from_rows: u64,
    /// Rows streamed from `--to`.
    pub to_rows: u64,
    /// Keys streamed only from `--from` (before exclusions).
    pub missing_count: u64,
    /// Keys streamed only from `--to` (before exclusions).
    pub extra_count: u64,
    /// Keys on both sides whose row digests differ (before exclusions).
    pub changed_count: u64,
    /// What named the changed rows instead: `reread` when the stream was not whole and the
    /// partitions whose digests differ were re-read.
    pub fallback: Option<String>,
}

/// A stream, judged.
pub(crate) struct Judged<'k> {
    pub report: StreamReport,
    /// The findings, when they may be used.
    pub usable: Option<&'k StreamedKeys>,
    /// Why they disagree with the stored evidence, when they do.
    pub disagrees: Option<String>,
}

/// Whether the runs' IDs can be streamed and compared in order: `int` IDs on both sides (two
/// databases order text by their own collations, and the other codecs' numbers are not keys).
pub(crate) fn streamable(cmp: &Compared<'_, '_>) -> bool {
    cmp.old.contract.id_codec == IdCodecKind::Int && cmp.new.contract.id_codec == IdCodecKind::Int
}

/// Judges `s` against the stored evidence: `ids_all`, the missing and extra IDs before
/// exclusions; `cd`, the content comparison when content was compared.
pub(crate) fn judge<'k>(
    s: &'k StreamedKeys,
    cmp: &Compared<'_, '_>,
    ids_all: (u64, u64),
    cd: Option<&ContentDiff>,
    fallback: bool,
) -> Judged<'k> {
    let mut report = StreamReport {
        compared: false,
        why_not: s.incomplete.clone(),
        from_rows: s.from_keys,
        to_rows: s.to_keys,
        missing_count: s.missing,
        extra_count: s.extra,
        changed_count: s.changed.len(),
        fallback: fallback.then(|| "reread".to_owned()),
    };
    if report.why_not.is_none() && !streamable(cmp) {
        report.why_not =
            Some("the IDs are not int: the two sides may order their keys differently".into());
    }
    if report.why_not.is_some() {
        return Judged {
            report,
            usable: None,
            disagrees: None,
        };
    }
    match disagreement(s, cmp, ids_all, cd) {
        Some(why) => {
            report.why_not = Some(format!("it disagrees with the stored evidence: {why}"));
            Judged {
                report,
                usable: None,
                disagrees: Some(why),
            }
        }
        None => {
            report.compared = true;
            Judged {
                report,
                usable: Some(s),
                disagrees: None,
            }
        }
    }
}

/// How a whole stream disagrees with the stored evidence, if it does.
fn disagreement(
    s: &StreamedKeys,
    cmp: &Compared<'_, '_>,
    ids_all: (u64, u64),
    cd: Option<&ContentDiff>,
) -> Option<String> {
    let (old, new) = (cmp.old.unique_ids_observed, cmp.new.unique_ids_observed);
    if (s.from_keys, s.to_keys) != (old, new) {
        return Some(format!(
            "{} and {} rows were streamed, the runs hold {old} and {new} IDs",
            s.from_keys, s.to_keys
        ));
    }
    if (s.missing, s.extra) != ids_all {
        return Some(format!(
            "{} missing and {} extra keys were streamed, the ID sets differ by {} and {}",
            s.missing, s.extra, ids_all.0, ids_all.1
        ));
    }
    let cd = cd.filter(|cd| cd.old_has_content && cd.new_has_content)?;
    if s.uncompared > 0 {
        return Some(format!(
            "{} rows had a content digest on one side only",
            s.uncompared
        ));
    }
    if s.differing != cd.leaves_differing {
        return Some(format!(
            "the streamed rows differ in {} partitions, the content digests in {}",
            s.differing.len(),
            cd.leaves_differing.len()
        ));
    }
    None
}
