//! The answers written out, in one layout each for every face: as JSON (pretty, or compact on
//! one line) and as text for people, with the lists a caller wants whole (`--all`, a file)
//! written item by item as the library's walks find them (`ListStream`), never gathered.
//!
//! Text from a source or a store (names, snapshots, string IDs, reasons) passes through
//! `terminal_safe`. Words match what they count: a `string` run's leaves are buckets of the
//! strings' digests, never "partitions" of its IDs, and its lists are single IDs.

use std::io::Write;

use serde::Serialize;

use super::lists::{DiffReport, MissingReport};
use super::migration::{ContentReport, MigrationReport, Side};
use super::runs::VerifyReport;
use super::side::RunSide;
use super::stream::EmitError;
use crate::receipt::{range_words, terminal_safe, Emphasis, Receipt, RunId};
use crate::reconcile::Status;

/// A walk that hands on every item of a list, as it is found.
pub type Walk<'f> =
    Box<dyn Fn(&mut dyn FnMut(&str) -> std::io::Result<()>) -> Result<(), EmitError> + 'f>;

/// A list of a report written whole, item by item: the JSON key it stands for and its walk.
pub struct ListStream<'f> {
    /// The report's key (`added_ranges`, `missing_ranges`, ...).
    pub key: &'static str,
    /// The walk over every item.
    pub walk: Walk<'f>,
}

impl<'f> ListStream<'f> {
    /// The list `key`, walked by `walk`.
    pub fn new(
        key: &'static str,
        walk: impl Fn(&mut dyn FnMut(&str) -> std::io::Result<()>) -> Result<(), EmitError> + 'f,
    ) -> ListStream<'f> {
        ListStream {
            key,
            walk: Box::new(walk),
        }
    }
}

/// Writes `report` as JSON (pretty, or compact on one line) with the keys of `streamed`
/// written item by item as their walks find them, so no list is ever whole in memory.
///
/// # Errors
/// `EmitError`: the store while walking, or the writer.
pub fn write_json(
    w: &mut dyn Write,
    report: &impl Serialize,
    streamed: &[ListStream<'_>],
    compact: bool,
) -> Result<(), EmitError> {
    let encode = |e: serde_json::Error| EmitError::Io(std::io::Error::other(e));
    let serde_json::Value::Object(map) = serde_json::to_value(report).map_err(encode)? else {
        return Err(EmitError::Io(std::io::Error::other(
            "a report is an object",
        )));
    };
    let (open, sep, colon, close, indent) = if compact {
        ("{", ",", ":", "}", "")
    } else {
        ("{\n", ",\n", ": ", "\n}", "  ")
    };
    w.write_all(open.as_bytes())?;
    for (i, (key, value)) in map.iter().enumerate() {
        if i > 0 {
            w.write_all(sep.as_bytes())?;
        }
        let k = serde_json::to_string(key).map_err(encode)?;
        write!(w, "{indent}{k}{colon}")?;
        let Some(s) = streamed.iter().find(|s| s.key == key) else {
            let text = if compact {
                serde_json::to_string(value)
            } else {
                serde_json::to_string_pretty(value).map(|t| t.replace('\n', "\n  "))
            }
            .map_err(encode)?;
            w.write_all(text.as_bytes())?;
            continue;
        };
        w.write_all(b"[")?;
        let mut n = 0u64;
        (s.walk)(&mut |item| {
            let item = serde_json::to_string(item).map_err(std::io::Error::other)?;
            let lead = match (n, compact) {
                (0, true) => "",
                (_, true) => ",",
                (0, false) => "\n    ",
                (_, false) => ",\n    ",
            };
            n += 1;
            write!(w, "{lead}{item}")
        })?;
        if n > 0 && !compact {
            w.write_all(b"\n  ")?;
        }
        w.write_all(b"]")?;
    }
    w.write_all(close.as_bytes())?;
    Ok(())
}

/// How a file of every range is laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ListForm {
    /// `+ RANGE` and `- RANGE` lines (added, removed), or the bare range for one list.
    Text,
    /// `{"list": NAME, "range": RANGE}` lines.
    JsonLines,
    /// One object of string arrays under the lists' keys.
    Json,
}

/// Writes every item of `lists` to `w` in `form`, each as its walk finds it.
///
/// # Errors
/// `EmitError`.
pub fn write_lists(
    w: &mut dyn Write,
    lists: &[&ListStream<'_>],
    form: ListForm,
) -> Result<(), EmitError> {
    if form == ListForm::Json {
        let keys: serde_json::Map<String, serde_json::Value> = lists
            .iter()
            .map(|s| (s.key.to_owned(), serde_json::Value::Null))
            .collect();
        let streams: Vec<ListStream<'_>> = lists
            .iter()
            .map(|s| ListStream::new(s.key, |f| (s.walk)(f)))
            .collect();
        write_json(w, &keys, &streams, false)?;
        return Ok(writeln!(w)?);
    }
    for s in lists {
        let name = s.key.trim_end_matches("_ranges");
        let sign = if name == "removed" { '-' } else { '+' };
        (s.walk)(&mut |r| match form {
            ListForm::JsonLines => {
                writeln!(w, "{}", serde_json::json!({ "list": name, "range": r }))
            }
            _ if lists.len() == 1 => writeln!(w, "{r}"),
            _ => writeln!(w, "{sign} {r}"),
        })?;
    }
    Ok(())
}

/// `1 partition`, `2 partitions`.
pub(crate) fn count(n: impl Into<u128>, one: &str, many: &str) -> String {
    let n = n.into();
    format!("{n} {}", if n == 1 { one } else { many })
}

/// ` and N more (--all lists them)` when a list shows fewer than it has.
fn more(shown: u64, total: u64) -> String {
    if shown < total {
        format!(" and {} more (--all lists them)", total - shown)
    } else {
        String::new()
    }
}

/// A capped list of ranges as a line of text (single IDs alone), with how many more there are.
fn list_words(shown: &[String], total: u64) -> String {
    let line: Vec<String> = shown
        .iter()
        .map(|r| range_words(&terminal_safe(r)))
        .collect();
    format!("{}{}", line.join(", "), more(shown.len() as u64, total))
}

/// Writes a list after `head`: every item of its stream when the caller gave one, else the
/// capped list with how many more there are.
fn list_line(
    w: &mut dyn Write,
    head: &str,
    key: &str,
    shown: &[String],
    total: u64,
    streams: &[ListStream<'_>],
) -> Result<(), EmitError> {
    w.write_all(head.as_bytes())?;
    let Some(s) = streams.iter().find(|s| s.key == key) else {
        return Ok(w.write_all(list_words(shown, total).as_bytes())?);
    };
    let mut first = true;
    (s.walk)(&mut |item| {
        let sep = if first { "" } else { ", " };
        first = false;
        write!(w, "{sep}{}", range_words(&terminal_safe(item)))
    })
}

/// `source / tenant, snapshot S` of a run side, escaped for a terminal.
pub(crate) fn side_words(s: &RunSide) -> String {
    format!(
        "{} / {}, snapshot {}",
        terminal_safe(&s.source),
        terminal_safe(s.tenant.as_deref().unwrap_or("-")),
        s.snapshot_id
            .as_deref()
            .map_or_else(|| "none".into(), terminal_safe)
    )
}

/// An ID of a report for people: a string escaped, a number as it is.
fn id_words(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => terminal_safe(s).into_owned(),
        other => other.to_string(),
    }
}

/// Changed IDs as words, each with its differing content columns when known:
/// `7 (email=mail, amount)` (a `--to` name after `=` where it differs).
fn changed_words(ids: &[serde_json::Value], columns: &[super::ChangedColumns]) -> Vec<String> {
    ids.iter()
        .map(|id| {
            let word = id_words(id);
            // At most 100 entries, in the order of `ids`.
            let Some(c) = columns.iter().find(|c| &c.id == id) else {
                return word;
            };
            let from = &c.columns;
            let to = c.to_columns.as_deref().unwrap_or(from);
            let names: Vec<String> = from
                .iter()
                .zip(to)
                .map(|(a, b)| {
                    if a == b {
                        terminal_safe(a).into_owned()
                    } else {
                        format!("{}={}", terminal_safe(a), terminal_safe(b))
                    }
                })
                .collect();
            format!("{word} ({})", names.join(", "))
        })
        .collect()
}

/// How a comparison's text names its runs and counts its leaves.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Words {
    /// The old run (or `missing`'s run), with its scope and snapshot across collections.
    pub old: String,
    /// The new run (or the reference).
    pub new: String,
    /// The runs' bare names (with their store across two files), for notes.
    pub names: (String, String),
    /// `string` IDs: leaves are digest buckets, lists are single IDs.
    pub strings: bool,
    /// The new run's unique IDs.
    pub unique_ids: u64,
    /// Statuses of the runs, for the notes on runs that did not verify.
    pub statuses: Option<(Status, Status)>,
}

/// What the leaves of a run are called: partitions of IDs, or buckets of string digests.
fn leaves(strings: bool, n: u64) -> String {
    if strings {
        count(n, "digest bucket", "digest buckets")
    } else {
        count(n, "partition", "partitions")
    }
}

impl DiffReport {
    /// Writes the diff for people; the lists of `streams` (`added_ranges`, `removed_ranges`)
    /// whole.
    ///
    /// # Errors
    /// `EmitError`.
    pub fn write_text(
        &self,
        w: &mut dyn Write,
        streams: &[ListStream<'_>],
    ) -> Result<(), EmitError> {
        let t = &self.words;
        let (old, new) = (&t.old, &t.new);
        if self.equal {
            write!(
                w,
                "{old} and {new} hold the same {}",
                count(t.unique_ids, "ID", "IDs")
            )?;
        } else {
            let parts = if t.strings {
                String::new()
            } else {
                format!(
                    ", in {}",
                    count(self.partitions_differing_total, "partition", "partitions")
                )
            };
            let (a, r) = (self.added_count, self.removed_count);
            write!(w, "{old} -> {new}: {a} added, {r} removed{parts}")?;
            for (name, shown, total, key) in [
                (
                    "added",
                    &self.added_ranges,
                    self.added_ranges_total,
                    "added_ranges",
                ),
                (
                    "removed",
                    &self.removed_ranges,
                    self.removed_ranges_total,
                    "removed_ranges",
                ),
            ] {
                if total > 0 {
                    list_line(w, &format!("\n  {name:<10} "), key, shown, total, streams)?;
                }
            }
            if !t.strings {
                let noun = if self.partitions_differing_total == 1 {
                    "partition"
                } else {
                    "partitions"
                };
                let idx: Vec<String> = self
                    .partitions_differing
                    .iter()
                    .map(|p| format!("#{p}"))
                    .collect();
                let more = more(idx.len() as u64, self.partitions_differing_total);
                write!(w, "\n  {noun:<10} {}{more}", idx.join(", "))?;
            }
        }
        if let Some(c) = &self.content {
            c.write_text(w, t)?;
        }
        let (a, b) = t.statuses.unwrap_or((Status::Verified, Status::Verified));
        for (name, status) in [(&t.names.0, a), (&t.names.1, b)] {
            if status != Status::Verified {
                let s = status.as_str();
                write!(
                    w,
                    "\n  note: {name} did not verify (status {s}): it is not a complete inventory"
                )?;
            }
        }
        if let Some(p) = &self.output {
            write!(w, "\n  every range written to {}", terminal_safe(p))?;
        }
        Ok(writeln!(w)?)
    }
}

impl ContentReport {
    fn write_text(&self, w: &mut dyn Write, t: &Words) -> std::io::Result<()> {
        let total = self.partitions_differing_total;
        if self.equal {
            let n = leaves(t.strings, self.leaves_compared);
            write!(w, "\n  {:<10} the same in every one of {n}", "content")?;
        } else {
            let idx: Vec<String> = self
                .partitions_differing
                .iter()
                .map(|p| format!("#{p}"))
                .collect();
            let more = more(idx.len() as u64, total);
            write!(
                w,
                "\n  {:<10} differs in {}: {}{more}",
                "content",
                leaves(t.strings, total),
                idx.join(", ")
            )?;
        }
        let Some(rr) = self.reread.as_ref().filter(|_| !self.equal) else {
            return Ok(());
        };
        let words = changed_words(&rr.changed_ids, &rr.changed_columns);
        let listed = if words.is_empty() {
            String::new()
        } else {
            format!(": {}", words.join(", "))
        };
        write!(
            w,
            "\n  {:<10} {} re-read from both sources: {}{listed}{}",
            "changed",
            leaves(t.strings, total),
            count(rr.changed_count, "record", "records"),
            more(words.len() as u64, rr.changed_count)
        )?;
        let name = |side| {
            if side == Side::Old {
                &t.names.0
            } else {
                &t.names.1
            }
        };
        for u in &rr.unreproduced {
            let (p, run) = (u.partition, name(u.run));
            write!(w, "\n  note: partition #{p} of {run} re-read differently from its scan (the source changed since): its changes are not listed")?;
        }
        for f in &rr.failed {
            let why = terminal_safe(&f.why);
            write!(
                w,
                "\n  note: the re-read of {}'s source did not verify: {why}",
                name(f.run)
            )?;
        }
        Ok(())
    }
}

impl MissingReport {
    /// Writes what the run lacks for people; with a `missing_ranges` stream, every range.
    ///
    /// # Errors
    /// `EmitError`.
    pub fn write_text(
        &self,
        w: &mut dyn Write,
        streams: &[ListStream<'_>],
    ) -> Result<(), EmitError> {
        let (run, reference) = (&self.words.old, &self.words.new);
        if self.missing_ranges_total == 0 {
            write!(w, "{run} lacks nothing that {reference} has")?;
        } else {
            // String IDs are listed one by one: no "ranges" of them.
            let head = if self.words.strings {
                format!(
                    "{run} lacks {} that {reference} has:\n  ",
                    count(self.missing_count, "ID", "IDs")
                )
            } else {
                format!(
                    "{run} lacks {} that {reference} has, in {}:\n  ",
                    count(self.missing_count, "ID", "IDs"),
                    count(self.missing_ranges_total, "range", "ranges")
                )
            };
            let (shown, total) = (&self.missing_ranges, self.missing_ranges_total);
            list_line(w, &head, "missing_ranges", shown, total, streams)?;
        }
        if self.coverage_status != Status::Verified {
            write!(
                w,
                "\n  note: {} did not verify (status {}): what it lacks may be what it did not reach",
                self.run_id,
                self.coverage_status.as_str()
            )?;
        }
        if let Some(p) = &self.output {
            write!(w, "\n  every range written to {}", terminal_safe(p))?;
        }
        Ok(writeln!(w)?)
    }
}

impl MigrationReport {
    /// Writes the verdict for people: the headline, how many rows are missing, extra and
    /// changed, the reasons, the lists (`missing_ranges`, `extra_ranges` whole from
    /// `streams`) and the commands to run next.
    ///
    /// # Errors
    /// `EmitError`.
    pub fn write_text(
        &self,
        w: &mut dyn Write,
        streams: &[ListStream<'_>],
    ) -> Result<(), EmitError> {
        let (old, new) = &self.names;
        let (a, b) = (side_words(&self.from), side_words(&self.to));
        write!(
            w,
            "migration {}: {old} ({a}) -> {new} ({b})",
            self.verdict.as_str()
        )?;
        if self.verdict == Status::Verified {
            let but = if self.excluded_count > 0 {
                format!(
                    " but the {} declared excluded",
                    count(self.excluded_count, "ID", "IDs")
                )
            } else {
                String::new()
            };
            let same = if self.content_checked {
                ", with the same content"
            } else {
                ""
            };
            let n = count(self.from.unique_ids_observed, "ID", "IDs");
            write!(w, "\n  every one of {n} of {old} is in {new}{but}{same}")?;
        } else {
            write!(w, "\n  {:<8} {}", "rows", self.rows_words())?;
        }
        for reason in &self.reasons {
            write!(w, "\n  {}", terminal_safe(reason))?;
        }
        for (name, shown, total, key) in [
            (
                "missing",
                &self.missing_ranges,
                self.missing_ranges_total,
                "missing_ranges",
            ),
            (
                "extra",
                &self.extra_ranges,
                self.extra_ranges_total,
                "extra_ranges",
            ),
        ] {
            if total > 0 {
                list_line(w, &format!("\n  {name:<8} "), key, shown, total, streams)?;
            }
        }
        self.changed_text(w)?;
        if let Some(s) = self.stream.as_ref().filter(|s| !s.compared) {
            let why = s.why_not.as_deref().unwrap_or("");
            let instead = if s.fallback.is_some() {
                "; the partitions whose digests differ were re-read instead"
            } else {
                ""
            };
            write!(
                w,
                "\n  {:<8} rows not compared as scanned: {}{instead}",
                "stream",
                terminal_safe(why)
            )?;
        }
        for n in &self.next {
            write!(w, "\n  next: {}", terminal_safe(n))?;
        }
        Ok(writeln!(w)?)
    }

    /// How many rows are missing, extra and changed, and what content could not be compared.
    fn rows_words(&self) -> String {
        let changed = match (self.content_checked, self.changed_count) {
            (false, _) => "changed not checked (no --content)".to_owned(),
            (true, Some(n)) => format!("{n} changed"),
            (true, None) if !self.changed_partitions.is_empty() => format!(
                "changed in {} (--reread names the rows)",
                count(
                    self.changed_partitions.len() as u64,
                    "partition",
                    "partitions"
                )
            ),
            (true, None) => "changed unknown".to_owned(),
        };
        let mut s = format!(
            "{} missing, {} extra, {changed}",
            self.missing_count, self.extra_count
        );
        // A whole stream compared those partitions' rows one by one.
        let streamed = self.stream.as_ref().is_some_and(|s| s.compared);
        if let Some(c) = self
            .content
            .as_ref()
            .filter(|c| c.reread.is_none() && !streamed)
        {
            if c.partitions_uncompared > 0 {
                let n = count(c.partitions_uncompared, "partition", "partitions");
                s.push_str(&format!(
                    "; the content of {n} was not compared: their IDs differ"
                ));
            }
        }
        s
    }

    /// The changed IDs (or partitions) and the declarations that are no difference.
    fn changed_text(&self, w: &mut dyn Write) -> std::io::Result<()> {
        if !self.changed_ids.is_empty() {
            let words = changed_words(&self.changed_ids, &self.changed_columns);
            let total = self.changed_count.unwrap_or(words.len() as u64);
            write!(
                w,
                "\n  changed  {}{}",
                words.join(", "),
                more(words.len() as u64, total)
            )?;
        } else if !self.changed_partitions.is_empty() {
            let idx: Vec<String> = self
                .changed_partitions
                .iter()
                .map(|p| format!("#{p}"))
                .collect();
            write!(w, "\n  changed  in partitions {}", idx.join(", "))?;
        }
        if !self.exclusions_unmatched.is_empty() {
            let words: Vec<String> = self
                .exclusions_unmatched
                .iter()
                .map(|s| terminal_safe(s).into_owned())
                .collect();
            let more = more(words.len() as u64, self.exclusions_unmatched_count);
            write!(
                w,
                "\n  declared but not different: {}{more}",
                words.join(", ")
            )?;
        }
        Ok(())
    }
}

impl VerifyReport {
    /// The verify answer for people: a match says what the receipt proves (its status), a
    /// mismatch names the first field that differs, then the others. The receipt is untrusted
    /// input: everything of it shown is escaped.
    #[must_use]
    pub fn text(&self, receipt: &Receipt) -> String {
        let store = terminal_safe(&self.store);
        let buckets = receipt.id_codec == crate::contract::IdCodecKind::String;
        let figures = format!(
            "{}, {} in {}, merkle root {}, chain {}",
            count(receipt.pages_observed, "page", "pages"),
            count(receipt.unique_ids_observed, "unique ID", "unique IDs"),
            leaves(buckets, receipt.partitions),
            terminal_safe(&receipt.merkle_root),
            terminal_safe(&receipt.cursor_chain_digest)
        );
        let run = terminal_safe(&receipt.run_id);
        if self.verified {
            return format!(
                "{run}: receipt verified against store {store}: every field recomputes ({figures})"
            );
        }
        if self.matches {
            let s = self.coverage_status.as_str();
            return format!("{run}: the receipt matches store {store} (every field recomputes: {figures}), and its status is {s}: it claims no complete inventory");
        }
        let run = if receipt.run_id.parse::<RunId>().is_ok() && receipt.run_id.len() <= 24 {
            receipt.run_id.clone()
        } else {
            format!("{:?}", receipt.run_id.chars().take(40).collect::<String>())
        };
        let mut text = format!("{run}: receipt REJECTED by store {store}");
        for (i, m) in self.mismatches.iter().enumerate() {
            let lead = if i == 0 { ": " } else { "\n  also " };
            text.push_str(&format!("{lead}{}", terminal_safe(&m.to_string())));
        }
        text
    }
}

impl super::runs::RunsReport {
    /// The runs as an aligned table (numbers right-aligned), each `Emphasis` part passed
    /// through `style`; the styles wrap the text, never the padding.
    #[must_use]
    pub fn text_with(&self, style: &dyn Fn(Emphasis, &str) -> String) -> String {
        let with_servers = self.runs.iter().any(|r| r.mcp_server.is_some());
        let mut head: Vec<(&str, bool)> = vec![
            ("RUN", false),
            ("STATE", false),
            ("STATUS", false),
            ("PAGES", true),
            ("UNIQUE IDS", true),
            ("SOURCE", false),
            ("TENANT", false),
            ("STARTED", false),
        ];
        // The MCP server each run spoke to: a column only when any did.
        if with_servers {
            head.push(("MCP SERVER", false));
        }
        let head = head;
        let rows: Vec<Vec<(String, Option<Emphasis>)>> = self
            .runs
            .iter()
            .map(|r| {
                let state = r.state.as_str();
                let mut row = vec![
                    (r.run_id.clone(), None),
                    (state.to_owned(), Some(Emphasis::State(state))),
                    (
                        r.coverage_status.as_str().to_owned(),
                        Some(Emphasis::Status(r.coverage_status)),
                    ),
                    (r.pages_observed.to_string(), None),
                    (r.unique_ids_observed.to_string(), None),
                    (terminal_safe(&r.source).into_owned(), None),
                    (
                        terminal_safe(r.tenant.as_deref().unwrap_or("-")).into_owned(),
                        None,
                    ),
                    (r.started_at.clone(), None),
                ];
                if with_servers {
                    let shown = r.mcp_server.as_deref().unwrap_or("-");
                    row.push((terminal_safe(shown).into_owned(), None));
                }
                row
            })
            .collect();
        let width = |i: usize| {
            rows.iter()
                .map(|r| r[i].0.chars().count())
                .chain([head[i].0.len()])
                .max()
                .unwrap_or(0)
        };
        let widths: Vec<usize> = (0..head.len()).map(width).collect();
        let cell = |i: usize, text: &str, emphasis: Option<Emphasis>| {
            let n = widths[i].saturating_sub(text.chars().count());
            let shown = emphasis.map_or_else(|| text.to_owned(), |e| style(e, text));
            match (head[i].1, i + 1 == head.len()) {
                (true, _) => format!("{}{shown}", " ".repeat(n)),
                (false, true) => shown,
                (false, false) => format!("{shown}{}", " ".repeat(n)),
            }
        };
        let head_cells: Vec<String> = head
            .iter()
            .enumerate()
            .map(|(i, (h, _))| cell(i, h, None))
            .collect();
        let mut out = style(Emphasis::Header, head_cells.join("  ").trim_end());
        for r in &rows {
            let line: Vec<String> = r
                .iter()
                .enumerate()
                .map(|(i, (t, e))| cell(i, t, *e))
                .collect();
            out.push('\n');
            out.push_str(line.join("  ").trim_end());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_of_runs_aligns_its_columns() {
        let row = |run: &str, pages: u32, source: &str| super::super::runs::RunRow {
            run_id: run.to_owned(),
            source: source.to_owned(),
            tenant: None,
            state: crate::store::RunState::Finished,
            coverage_status: Status::Verified,
            pages_observed: pages,
            unique_ids_observed: 1,
            started_at: "t".to_owned(),
            finished_at: None,
            mcp_server: None,
            stopped_by: None,
        };
        let report = super::super::runs::RunsReport {
            runs: vec![row("run-10", 3, "a"), row("run-9", 12345, "bb")],
            store_total: 2,
        };
        let text = report.text_with(&|_, s| s.to_owned());
        assert_eq!(
            text,
            "RUN     STATE     STATUS    PAGES  UNIQUE IDS  SOURCE  TENANT  STARTED\n\
             run-10  finished  verified      3           1  a       -       t\n\
             run-9   finished  verified  12345           1  bb      -       t"
        );
    }
}
