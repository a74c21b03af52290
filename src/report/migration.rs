//! The migration section of a review packet: the verdict over a migration's two runs, what is
//! missing, extra and changed, and why, above the target run's own report.
//!
//! Pure. Every string passes through `show`; every list is capped (`LISTED_MAX`), whatever
//! the verdict holds.

use std::fmt::Write as _;

use super::text::{escape, more, show, thousands};
use super::MigrationSection;
use crate::reconcile::Status;

/// Entries of a list the section shows.
const LISTED_MAX: usize = 20;
/// Reasons the section shows.
const REASONS_MAX: usize = 12;

/// Writes the section.
pub(super) fn section(h: &mut String, m: &MigrationSection) {
    let (from, to) = (show(&m.from), show(&m.to));
    let _ = write!(
        h,
        "<section class=\"verdict {}\" id=\"migration\"><h2>Migration {}</h2><p id=\"migration-summary\">",
        m.verdict.as_str(),
        match m.verdict {
            Status::Verified => "verified",
            Status::Unknown => "unknown",
            Status::Failed => "failed",
        }
    );
    if m.verdict == Status::Verified {
        let _ = write!(
            h,
            "Every ID of {from} is in {to}{}, and nothing else is.",
            if m.content_checked {
                ", with the same content"
            } else {
                ""
            }
        );
    } else {
        let changed = match (m.content_checked, m.changed_count) {
            (false, _) => "content not compared".to_owned(),
            (true, None) => "changed unknown".to_owned(),
            (true, Some(n)) => format!("{} changed", thousands(n)),
        };
        let _ = write!(
            h,
            "{from} → {to}: {} missing, {} extra, {changed}.",
            thousands(m.missing_count),
            thousands(m.extra_count)
        );
    }
    h.push_str("</p>");
    // (name, how many, the first entries, entries in all)
    let changed = m.changed_count.unwrap_or(0);
    let lists = [
        (
            "missing",
            m.missing_count,
            &m.missing_ranges,
            m.missing_ranges_total,
        ),
        (
            "extra",
            m.extra_count,
            &m.extra_ranges,
            m.extra_ranges_total,
        ),
        ("changed", changed, &m.changed_ids, changed),
    ];
    if lists.iter().any(|(_, n, l, _)| *n > 0 || !l.is_empty()) {
        h.push_str("<table><tbody>");
        for (name, count, list, total) in lists {
            if count == 0 && list.is_empty() {
                continue;
            }
            let shown: Vec<String> = list.iter().take(LISTED_MAX).map(|s| show(s)).collect();
            let _ = write!(
                h,
                "<tr><th>{name}</th><td class=\"num\">{}</td><td class=\"ranges mono\">{}{}</td></tr>",
                thousands(count),
                shown.join(", "),
                if (shown.len() as u64) < total { " …" } else { "" }
            );
        }
        h.push_str("</tbody></table>");
    }
    if !m.reasons.is_empty() {
        h.push_str("<ul id=\"migration-reasons\">");
        for r in m.reasons.iter().take(REASONS_MAX) {
            let _ = write!(h, "<li>{}</li>", escape(&super::text::clip(r, 400)));
        }
        if m.reasons.len() > REASONS_MAX {
            let _ = write!(
                h,
                "<li>and {} more</li>",
                more((m.reasons.len() - REASONS_MAX) as u64, "reason")
            );
        }
        h.push_str("</ul>");
    }
    let _ = write!(
        h,
        "<p class=\"caveat\">Below: the report of {to}, the target's run, against {from}, the source's; `scanledger migration verify` gives the same verdict from the same runs.</p></section>"
    );
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // Tests: a panic is the failure report.
mod tests {
    use super::*;

    fn failed() -> MigrationSection {
        MigrationSection {
            verdict: Status::Failed,
            from: "a.redb:run-1".into(),
            to: "b.redb:<run-1>".into(),
            missing_count: 500,
            extra_count: 1,
            changed_count: Some(2),
            missing_ranges: (0..100).map(|i| format!("{i}..{i}")).collect(),
            missing_ranges_total: 500,
            extra_ranges: vec!["100001..100001".into()],
            extra_ranges_total: 1,
            changed_ids: vec!["12".into(), "70000".into()],
            content_checked: true,
            reasons: vec!["<script>x</script>".into(); 30],
        }
    }

    #[test]
    fn a_failed_migration_lists_capped_and_escaped() {
        let mut h = String::new();
        section(&mut h, &failed());
        assert!(h.contains("a.redb:run-1 → b.redb:&lt;run-1&gt;: 500 missing, 1 extra, 2 changed."));
        assert!(h.contains(
            "<th>changed</th><td class=\"num\">2</td><td class=\"ranges mono\">12, 70000</td>"
        ));
        assert!(h.contains("19..19 …"), "{h}");
        assert!(!h.contains("20..20"));
        assert!(!h.contains("<script>"));
        assert!(h.contains("and 18 more reasons"));
    }

    #[test]
    fn a_verified_migration_says_so_and_lists_nothing() {
        let m = MigrationSection {
            verdict: Status::Verified,
            missing_count: 0,
            extra_count: 0,
            changed_count: Some(0),
            missing_ranges: vec![],
            missing_ranges_total: 0,
            extra_ranges: vec![],
            extra_ranges_total: 0,
            changed_ids: vec![],
            reasons: vec![],
            ..failed()
        };
        let mut h = String::new();
        section(&mut h, &m);
        assert!(h.contains(
            "Every ID of a.redb:run-1 is in b.redb:&lt;run-1&gt;, with the same content"
        ));
        assert!(!h.contains("<table>"));
        let unknown = MigrationSection {
            verdict: Status::Unknown,
            changed_count: None,
            ..failed()
        };
        let mut h = String::new();
        section(&mut h, &unknown);
        assert!(h.contains("changed unknown"));
    }
}
