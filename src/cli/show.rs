//! A receipt for people: the status first and in colour, then one aligned line per fact,
//! with counts that agree with their nouns and single IDs shown alone.
//!
//! Text from a source (names, snapshot, labels, violation details) passes through
//! `terminal_safe`, so it can never move the cursor or forge a line.

use std::fmt::Write;

use scanledger::{terminal_safe, Receipt};

use super::output::{bold, count, range_words, status_style, styled};

/// Label ranges printed per line (the JSON has up to `RANGES_SHOWN_MAX`).
const TEXT_RANGES_MAX: usize = 8;

/// The receipt as text, without a trailing newline.
pub(crate) fn receipt_text(r: &Receipt) -> String {
    let mut s = String::new();
    let status = r.coverage_status;
    let _ = write!(
        s,
        "{}  {}",
        bold(&terminal_safe(&r.run_id)),
        styled(status_style(status), &status.as_str().to_uppercase())
    );
    let mut line = |name: &str, value: String| {
        let _ = write!(s, "\n  {name:<12} {value}");
    };
    line(
        "scope",
        format!(
            "{} / {}  ({})",
            terminal_safe(&r.source),
            terminal_safe(r.tenant.as_deref().unwrap_or("-")),
            r.query_digest
        ),
    );
    line(
        "snapshot",
        terminal_safe(
            r.snapshot_id
                .as_deref()
                .unwrap_or("none (live scan: a weaker claim)"),
        )
        .into_owned(),
    );
    line("conclusion", r.conclusion_scope.as_str().to_owned());
    line("mode", r.mode.clone());
    line(
        "pages",
        format!(
            "{} (terminal page observed: {})",
            r.pages_observed,
            if r.terminal_cursor_observed {
                "yes"
            } else {
                "no"
            }
        ),
    );
    let expected = r
        .records_expected
        .map_or_else(|| "none expected".to_owned(), |n| format!("{n} expected"));
    line(
        "records",
        format!(
            "{} observed, {} unique, {}, {expected}",
            r.records_observed,
            r.unique_ids_observed,
            count(r.duplicate_ids, "duplicate", "duplicates"),
        ),
    );
    if let Some(n) = r.count_total {
        line("count", format!("{n} (the source's own count)"));
    }
    line("partitions", format!("{} non-empty", r.partitions));
    line("merkle root", r.merkle_root.clone());
    if let Some(c) = &r.content_root {
        line("content root", c.clone());
    }
    line("chain", r.cursor_chain_digest.clone());
    if !r.limits_hit.is_empty() {
        line("limits hit", r.limits_hit.join(", "));
    }
    for (name, l) in &r.labels {
        let shown: Vec<String> = l
            .ranges
            .iter()
            .take(TEXT_RANGES_MAX)
            .map(|x| range_words(&terminal_safe(x)))
            .collect();
        line(
            "label",
            format!(
                "{}: {} ({}{})",
                terminal_safe(name),
                count(l.count, "ID", "IDs"),
                shown.join(", "),
                more(shown.len(), l.ranges_total)
            ),
        );
    }
    if let Some(m) = &r.missing_id_ranges {
        let shown: Vec<String> = m
            .ranges
            .iter()
            .map(|x| range_words(&terminal_safe(x)))
            .collect();
        line(
            "missing",
            format!("{}{}", shown.join(", "), more(shown.len(), m.ranges_total)),
        );
    }
    if r.restarts > 0 {
        line(
            "restarts",
            format!(
                "{} (from {})",
                r.restarts,
                r.restarted_from.as_deref().unwrap_or("-")
            ),
        );
    }
    if let Some(by) = &r.superseded_by {
        line("superseded", format!("by {}", terminal_safe(by)));
    }
    // A merged run: its plan and shards (already terminal-safe).
    if let Some(m) = r.merged() {
        for (name, value) in m.text_lines() {
            line(name, value);
        }
    }
    for v in &r.violations {
        let style = status_style(v.kind.status());
        line(
            "violation",
            format!(
                "{} on page {}: {}",
                styled(style, v.kind.as_str()),
                v.page,
                terminal_safe(&v.detail)
            ),
        );
    }
    if r.rejected {
        line(
            "REJECTED",
            "the source ran a different query than the contract's".to_owned(),
        );
    }
    let dropped = if r.violations_dropped > 0 {
        format!(
            " ({} counted, not kept)",
            count(r.violations_dropped, "more violation", "more violations")
        )
    } else {
        String::new()
    };
    line("format", format!("receipt v{}{dropped}", r.format_version));
    line(
        "time",
        format!(
            "{} .. {}",
            r.started_at,
            r.finished_at.as_deref().unwrap_or("(in progress)")
        ),
    );
    s
}

fn more(shown: usize, total: u64) -> String {
    let shown = shown as u64;
    if shown < total {
        format!(" and {} more", total - shown)
    } else {
        String::new()
    }
}
