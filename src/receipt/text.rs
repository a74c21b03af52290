//! The receipt for people, in one layout for every face: the status first, then one aligned
//! line per fact, with counts that agree with their nouns and single IDs shown alone.
//!
//! Pure. Text from a source (names, snapshot, labels, violation details) passes through
//! `terminal_safe`, so it can never move the cursor or forge a line. A face that colours
//! gives `text_with` a styler for the parts it marks (`Emphasis`); `to_text` is plain.

use std::fmt::Write;

use super::{terminal_safe, Receipt};
use crate::contract::IdCodecKind;
use crate::reconcile::Status;

/// Label ranges printed per line (the JSON has up to `RANGES_SHOWN_MAX`).
const TEXT_RANGES_MAX: usize = 8;

/// A part of the layout a face may style.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Emphasis {
    /// The run's ID at the head.
    Run,
    /// The status word at the head.
    Status(Status),
    /// A violation's kind, by the status it forces.
    Violation(Status),
    /// A table's header row.
    Header,
    /// A run's state (`running`, `interrupted`, ...), in a table of runs.
    State(&'static str),
}

/// `1 duplicate`, `2 duplicates`.
fn count(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// A `"FIRST..LAST"` range as people read it: a single ID alone.
#[must_use]
pub fn range_words(range: &str) -> String {
    let len = range.len();
    if len >= 3 && len.is_multiple_of(2) {
        let half = (len - 2) / 2;
        if range.is_char_boundary(half)
            && range.is_char_boundary(half + 2)
            && &range[half..half + 2] == ".."
            && range[..half] == range[half + 2..]
        {
            return range[..half].to_owned();
        }
    }
    range.to_owned()
}

fn more(shown: usize, total: u64) -> String {
    let shown = shown as u64;
    if shown < total {
        format!(" and {} more", total - shown)
    } else {
        String::new()
    }
}

impl Receipt {
    /// The receipt as text, without a trailing newline and without styles.
    #[must_use]
    pub fn to_text(&self) -> String {
        self.text_with(&|_, s| s.to_owned())
    }

    /// The receipt as text, each `Emphasis` part passed through `style`.
    #[must_use]
    pub fn text_with(&self, style: &dyn Fn(Emphasis, &str) -> String) -> String {
        let mut s = String::new();
        let status = self.coverage_status;
        let _ = write!(
            s,
            "{}  {}",
            style(Emphasis::Run, &terminal_safe(&self.run_id)),
            style(Emphasis::Status(status), &status.as_str().to_uppercase())
        );
        let mut line = |name: &str, value: String| {
            let _ = write!(s, "\n  {name:<12} {value}");
        };
        for (name, value) in self.head_lines() {
            line(name, value);
        }
        self.id_lines(&mut line);
        for (name, value) in self.tail_lines(style) {
            line(name, value);
        }
        s
    }

    /// Scope, snapshot, conclusion, mode, pages, records and count.
    fn head_lines(&self) -> Vec<(&'static str, String)> {
        let r = self;
        let expected = r
            .records_expected
            .map_or_else(|| "none expected".to_owned(), |n| format!("{n} expected"));
        let mut lines = vec![
            (
                "scope",
                format!(
                    "{} / {}  ({})",
                    terminal_safe(&r.source),
                    terminal_safe(r.tenant.as_deref().unwrap_or("-")),
                    r.query_digest
                ),
            ),
            (
                "snapshot",
                terminal_safe(
                    r.snapshot_id
                        .as_deref()
                        .unwrap_or("none (live scan: a weaker claim)"),
                )
                .into_owned(),
            ),
            ("conclusion", r.conclusion_scope.as_str().to_owned()),
            ("mode", r.mode.clone()),
            (
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
            ),
            (
                "records",
                format!(
                    "{} observed, {} unique, {}, {expected}",
                    r.records_observed,
                    r.unique_ids_observed,
                    count(r.duplicate_ids, "duplicate", "duplicates"),
                ),
            ),
        ];
        if let Some(n) = r.count_total {
            let how = if r.coverage_status == Status::Verified {
                "a verified traversal's"
            } else {
                "the source's own count, not checked by a traversal: the status says what it proves"
            };
            lines.push(("count", format!("{n} ({how})")));
        }
        lines
    }

    /// The leaves, roots, labels and missing ranges: words that match what a leaf is (a
    /// partition of IDs, or for `string` IDs a bucket of the strings' digests, whose ranges
    /// follow the dictionary, not the strings' order).
    fn id_lines(&self, line: &mut dyn FnMut(&str, String)) {
        let r = self;
        let strings = r.id_codec == IdCodecKind::String;
        if strings {
            line(
                "buckets",
                format!("{} non-empty (of the strings' digests)", r.partitions),
            );
        } else {
            line("partitions", format!("{} non-empty", r.partitions));
        }
        line("merkle root", r.merkle_root.clone());
        if let Some(c) = &r.content_root {
            line("content root", c.clone());
        }
        line("chain", r.cursor_chain_digest.clone());
        if !r.limits_hit.is_empty() {
            line("limits hit", r.limits_hit.join(", "));
        }
        for (name, l) in &r.labels {
            let listed = if strings {
                format!("`export --label {}` lists them", terminal_safe(name))
            } else {
                let shown: Vec<String> = l
                    .ranges
                    .iter()
                    .take(TEXT_RANGES_MAX)
                    .map(|x| range_words(&terminal_safe(x)))
                    .collect();
                format!("{}{}", shown.join(", "), more(shown.len(), l.ranges_total))
            };
            line(
                "label",
                format!(
                    "{}: {} ({listed})",
                    terminal_safe(name),
                    count(l.count, "ID", "IDs")
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
    }

    /// Restarts, links, shards, violations, rejection, format and time.
    fn tail_lines(&self, style: &dyn Fn(Emphasis, &str) -> String) -> Vec<(&'static str, String)> {
        let r = self;
        let mut lines = Vec::new();
        if r.restarts > 0 {
            lines.push((
                "restarts",
                format!(
                    "{} (from {})",
                    r.restarts,
                    r.restarted_from.as_deref().unwrap_or("-")
                ),
            ));
        }
        if let Some(by) = &r.superseded_by {
            lines.push(("superseded", format!("by {}", terminal_safe(by))));
        }
        // A merged run: its plan and shards (already terminal-safe).
        if let Some(m) = r.merged() {
            lines.extend(m.text_lines());
        }
        for v in &r.violations {
            let kind = style(Emphasis::Violation(v.kind.status()), v.kind.as_str());
            lines.push((
                "violation",
                format!("{kind} on page {}: {}", v.page, terminal_safe(&v.detail)),
            ));
        }
        if r.rejected {
            lines.push((
                "REJECTED",
                "the source ran a different query than the contract's".to_owned(),
            ));
        }
        let dropped = if r.violations_dropped > 0 {
            format!(
                " ({} counted, not kept)",
                count(r.violations_dropped, "more violation", "more violations")
            )
        } else {
            String::new()
        };
        lines.push(("format", format!("receipt v{}{dropped}", r.format_version)));
        lines.push((
            "time",
            format!(
                "{} .. {}",
                r.started_at,
                r.finished_at.as_deref().unwrap_or("(in progress)")
            ),
        ));
        lines
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_ids_read_as_one_id() {
        assert_eq!(range_words("250..250"), "250");
        assert_eq!(range_words("250..251"), "250..251");
        assert_eq!(range_words("a..b..a..b"), "a..b");
        assert_eq!(range_words("customer-7..customer-7"), "customer-7");
        assert_eq!(range_words("é..é"), "é");
        assert_eq!(range_words(".."), "..");
    }
}
