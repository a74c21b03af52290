//! `diff` and `missing`: ID ranges between two runs, or between a run and an ID interval.
//!
//! By default the first `RANGES_SHOWN_MAX` ranges of each list are printed with the total;
//! `--all` prints every range, and `--output FILE` writes every range to a file (text, or
//! JSON with `--json`) while the summary goes to stdout. Ranges are rendered in the IDs'
//! original form, a chunk at a time, so a `string` run never loads its whole dictionary.

use std::io::Write;
use std::path::{Path, PathBuf};

use scanledger::{
    partition_of, IdCodecKind, IdSet, Renderer, RunHeader, Snapshot, Status, RANGES_SHOWN_MAX,
};

use super::output::{count, range_words};
use super::{open_read, CliError, Out, RunArg};

/// Ranges rendered per dictionary lookup when every range is written.
const RENDER_CHUNK: usize = 4096;

/// How much of a list to give.
#[derive(Debug, clap::Args)]
pub(crate) struct ListOpts {
    /// Every range, not the first 32.
    #[arg(long)]
    pub all: bool,
    /// Write every range to FILE (one per line, or JSON with --json); the summary still goes
    /// to stdout.
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
}

/// One list of ranges of a command's answer: its name, the ranges, and their ID total.
struct List {
    name: &'static str,
    ranges: Vec<(u64, u64)>,
    ids_total: u128,
}

impl List {
    fn of(name: &'static str, ranges: Vec<(u64, u64)>) -> List {
        let ids_total = ranges.iter().map(|(a, b)| u128::from(b - a) + 1).sum();
        List {
            name,
            ranges,
            ids_total,
        }
    }
}

/// Renders ranges as `"FIRST..LAST"` strings, looking up string IDs a chunk at a time.
fn render(
    snap: &Snapshot<'_>,
    header: &RunHeader,
    ranges: &[(u64, u64)],
) -> Result<Vec<String>, CliError> {
    let mut out = Vec::with_capacity(ranges.len());
    for chunk in ranges.chunks(RENDER_CHUNK) {
        let ends = chunk.iter().flat_map(|(a, b)| [*a, *b]);
        let codec = Renderer::for_ids(snap, header, ends)?;
        out.extend(codec.ranges(chunk));
    }
    Ok(out)
}

/// Writes every range of `lists` to `path`: `+ RANGE` / `- RANGE` lines (or the bare range
/// when there is one list), or with `--json` one object of string arrays.
fn write_file(
    out: &Out,
    path: &Path,
    store: &Path,
    lists: &[(&List, Vec<String>)],
) -> Result<(), CliError> {
    refuse_store_as_output(store, path)?;
    let io = |e: std::io::Error| CliError::io("write", path, &e);
    let file = std::fs::File::create(path).map_err(io)?;
    let mut w = std::io::BufWriter::new(file);
    if out.json && !out.lines {
        let mut obj = serde_json::Map::new();
        for (list, rendered) in lists {
            obj.insert(format!("{}_ranges", list.name), serde_json::json!(rendered));
        }
        serde_json::to_writer_pretty(&mut w, &obj)
            .map_err(|e| CliError::internal(format!("cannot encode JSON: {e}")))?;
        writeln!(w).map_err(io)?;
    } else {
        for (list, rendered) in lists {
            for r in rendered {
                if out.lines {
                    let v = serde_json::json!({ "list": list.name, "range": r });
                    writeln!(w, "{v}").map_err(io)?;
                } else if lists.len() == 1 {
                    writeln!(w, "{r}").map_err(io)?;
                } else {
                    let sign = if list.name == "removed" { '-' } else { '+' };
                    writeln!(w, "{sign} {r}").map_err(io)?;
                }
            }
        }
    }
    w.flush().map_err(io)
}

/// `--output` never names the store itself (directly, by another path, or through a link):
/// that would destroy the evidence.
pub(crate) fn refuse_store_as_output(store: &Path, output: &Path) -> Result<(), CliError> {
    use std::os::unix::fs::MetadataExt;
    let (Ok(a), Ok(b)) = (std::fs::metadata(store), std::fs::metadata(output)) else {
        return Ok(());
    };
    if a.dev() == b.dev() && a.ino() == b.ino() {
        return Err(CliError::usage(format!(
            "--output {}: that is the store file itself; name another file",
            output.display()
        ))
        .with_field("--output"));
    }
    Ok(())
}

/// The ranges to print: all of them with `--all`, else the first `RANGES_SHOWN_MAX`.
fn shown<'a>(list: &'a List, opts: &ListOpts) -> &'a [(u64, u64)] {
    if opts.all {
        &list.ranges
    } else {
        &list.ranges[..list.ranges.len().min(RANGES_SHOWN_MAX)]
    }
}

fn more(shown: usize, total: usize) -> String {
    if shown < total {
        format!(" and {} more (--all lists them)", total - shown)
    } else {
        String::new()
    }
}

/// The ranges as a line of text, single IDs alone.
fn line_of(rendered: &[String]) -> String {
    rendered
        .iter()
        .map(|r| range_words(&scanledger::terminal_safe(r)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `diff OLD NEW [--all] [--output FILE]`.
pub(crate) fn diff(out: &Out, old: RunArg, new: RunArg, opts: &ListOpts) -> Result<i32, CliError> {
    let store = open_read(out)?;
    let snap = store.read()?;
    let (old, new) = (old.resolve(&snap)?, new.resolve(&snap)?);
    let rd = scanledger::diff_runs(&snap, old, new)?;
    let added = List::of("added", rd.diff.added.ranges().collect());
    let removed = List::of("removed", rd.diff.removed.ranges().collect());
    let parts = &rd.diff.partitions_differing;
    let parts_shown = &parts[..if opts.all {
        parts.len()
    } else {
        parts.len().min(RANGES_SHOWN_MAX)
    }];
    let added_shown = render(&snap, &rd.new, shown(&added, opts))?;
    let removed_shown = render(&snap, &rd.new, shown(&removed, opts))?;
    if let Some(path) = &opts.output {
        let a = render(&snap, &rd.new, &added.ranges)?;
        let r = render(&snap, &rd.new, &removed.ranges)?;
        write_file(out, path, &out.store, &[(&added, a), (&removed, r)])?;
    }
    if out.json {
        let v = serde_json::json!({
            "old_run": rd.old.run_id.to_string(),
            "new_run": rd.new.run_id.to_string(),
            "source": rd.new.contract.scope.source,
            "tenant": rd.new.contract.scope.tenant,
            "old_coverage_status": rd.old.coverage_status,
            "new_coverage_status": rd.new.coverage_status,
            "equal": rd.diff.is_empty(),
            "added_count": rd.diff.added_count(),
            "removed_count": rd.diff.removed_count(),
            "added_ranges": added_shown,
            "added_ranges_total": added.ranges.len(),
            "removed_ranges": removed_shown,
            "removed_ranges_total": removed.ranges.len(),
            "partitions_differing": parts_shown,
            "partitions_differing_total": parts.len(),
            "partitions_loaded": rd.partitions_loaded,
            "output": opts.output.as_ref().map(|p| p.display().to_string()),
        });
        out.json_value(&v)?;
        return Ok(0);
    }
    let scope = format!(
        "{} / {}",
        scanledger::terminal_safe(&rd.new.contract.scope.source),
        scanledger::terminal_safe(rd.new.contract.scope.tenant.as_deref().unwrap_or("-"))
    );
    let mut text = if rd.diff.is_empty() {
        format!(
            "{} and {} ({scope}) hold the same {}",
            rd.old.run_id,
            rd.new.run_id,
            count(rd.new.unique_ids_observed, "ID", "IDs")
        )
    } else {
        let mut s = format!(
            "{} -> {} ({scope}): {} added, {} removed, in {}",
            rd.old.run_id,
            rd.new.run_id,
            rd.diff.added_count(),
            rd.diff.removed_count(),
            count(parts.len() as u64, "partition", "partitions"),
        );
        for (list, rendered) in [(&added, &added_shown), (&removed, &removed_shown)] {
            if !list.ranges.is_empty() {
                s.push_str(&format!(
                    "\n  {:<10} {}{}",
                    list.name,
                    line_of(rendered),
                    more(rendered.len(), list.ranges.len())
                ));
            }
        }
        let noun = if parts.len() == 1 {
            "partition"
        } else {
            "partitions"
        };
        let indexes: Vec<String> = parts_shown.iter().map(|p| format!("#{p}")).collect();
        s.push_str(&format!(
            "\n  {:<10} {}{}",
            noun,
            indexes.join(", "),
            more(parts_shown.len(), parts.len())
        ));
        s
    };
    for h in [&rd.old, &rd.new] {
        if h.coverage_status != Status::Verified {
            text.push_str(&format!(
                "\n  note: {} did not verify (status {}): it is not a complete inventory",
                h.run_id,
                h.coverage_status.as_str()
            ));
        }
    }
    if let Some(p) = &opts.output {
        text.push_str(&format!("\n  every range written to {}", p.display()));
    }
    out.emit(&text)?;
    Ok(0)
}

/// Parses `LO..HI` in the IDs' original form with the run's codec.
fn parse_range(
    text: &str,
    snap: &Snapshot<'_>,
    header: &RunHeader,
) -> Result<(u64, u64), CliError> {
    let example = match (header.contract.id_codec, header.id_prefix.as_deref()) {
        (IdCodecKind::Prefixed, Some(p)) => format!("--range {p}1..{p}1000"),
        (IdCodecKind::String, _) => {
            "--range FIRST..LAST with IDs the run's collection holds".to_owned()
        }
        _ => "--range 1..1000".to_owned(),
    };
    let bad = |msg: String| {
        CliError::usage(msg)
            .with_field("--range")
            .with_hint(format!("for example {example}"))
    };
    let (lo, hi) = text
        .split_once("..")
        .ok_or_else(|| bad(format!("--range {text:?}: expected LO..HI")))?;
    let id = |s: &str| -> Result<u64, CliError> {
        let parsed = match header.contract.id_codec {
            IdCodecKind::Int => s.parse().ok(),
            IdCodecKind::Prefixed => {
                let digits = match &header.id_prefix {
                    Some(p) => s.strip_prefix(p.as_str()),
                    None => Some(s),
                };
                digits.and_then(|d| d.parse().ok())
            }
            IdCodecKind::String => {
                snap.interned_id(&scanledger::ScopeKey::of(&header.contract), s)?
            }
        };
        parsed.ok_or_else(|| {
            let what = match header.contract.id_codec {
                IdCodecKind::Int => "is not an integer from 0 to 2^64-1".to_owned(),
                IdCodecKind::Prefixed => format!(
                    "is not an ID of this run's prefix {:?}",
                    header.id_prefix.as_deref().unwrap_or("")
                ),
                IdCodecKind::String => "is not an ID known in this (source, tenant)".to_owned(),
            };
            bad(format!("--range: {s:?} {what}"))
        })
    };
    let (lo, hi) = (id(lo)?, id(hi)?);
    if lo > hi {
        return Err(bad(format!(
            "--range {text:?}: the first ID is above the last"
        )));
    }
    Ok((lo, hi))
}

/// The ranges of `lo..=hi` that `set` lacks, every one.
fn gaps(set: &IdSet, lo: u64, hi: u64) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    // `next` is the first ID not yet accounted for; None once past u64::MAX.
    let mut next = Some(lo);
    for (a, b) in set.ranges() {
        let Some(n) = next else { break };
        if b < n {
            continue;
        }
        if a > hi {
            break;
        }
        if a > n {
            out.push((n, a - 1));
        }
        next = b.checked_add(1);
    }
    if let Some(n) = next {
        if n <= hi {
            out.push((n, hi));
        }
    }
    out
}

/// `missing RUN --against OTHER | --range LO..HI [--all] [--output FILE]`.
pub(crate) fn missing(
    out: &Out,
    run: RunArg,
    against: Option<RunArg>,
    range: Option<&str>,
    opts: &ListOpts,
) -> Result<i32, CliError> {
    let store = open_read(out)?;
    let snap = store.read()?;
    let run = run.resolve(&snap)?;
    let (header, reference, list) = match (against, range) {
        (Some(other), None) => {
            let other = other.resolve(&snap)?;
            let rd = scanledger::diff_runs(&snap, run, other)?;
            let list = List::of("missing", rd.diff.added.ranges().collect());
            (rd.old, other.to_string(), list)
        }
        (None, Some(text)) => {
            let header = snap.header(run)?;
            let (lo, hi) = parse_range(text, &snap, &header)?;
            let set = snap.partitions_between(run, partition_of(lo), partition_of(hi))?;
            (header, text.to_owned(), List::of("missing", gaps(&set, lo, hi)))
        }
        _ => {
            return Err(CliError::usage("missing needs a reference: a run or an ID range")
                .with_hint(format!(
                    "give --against OTHER_RUN, or --range LO..HI for an interval of IDs (e.g. `scanledger missing {run} --range 1..1000`)"
                )))
        }
    };
    let rendered = render(&snap, &header, shown(&list, opts))?;
    if let Some(path) = &opts.output {
        let every = render(&snap, &header, &list.ranges)?;
        write_file(out, path, &out.store, &[(&list, every)])?;
    }
    if out.json {
        let v = serde_json::json!({
            "run_id": header.run_id.to_string(),
            "reference": reference,
            "coverage_status": header.coverage_status,
            "missing_count": list.ids_total,
            "missing_ranges": rendered,
            "missing_ranges_total": list.ranges.len(),
            "output": opts.output.as_ref().map(|p| p.display().to_string()),
        });
        out.json_value(&v)?;
        return Ok(0);
    }
    let reference = if range.is_some() {
        format!("the range {}", scanledger::terminal_safe(&reference))
    } else {
        reference
    };
    let mut text = if list.ranges.is_empty() {
        format!("{} lacks nothing that {reference} has", header.run_id)
    } else {
        format!(
            "{} lacks {} that {reference} has, in {}:\n  {}{}",
            header.run_id,
            count(list.ids_total, "ID", "IDs"),
            count(list.ranges.len() as u64, "range", "ranges"),
            line_of(&rendered),
            more(rendered.len(), list.ranges.len())
        )
    };
    if header.coverage_status != Status::Verified {
        text.push_str(&format!(
            "\n  note: {} did not verify (status {}): what it lacks may be what it did not reach",
            header.run_id,
            header.coverage_status.as_str()
        ));
    }
    if let Some(p) = &opts.output {
        text.push_str(&format!("\n  every range written to {}", p.display()));
    }
    out.emit(&text)?;
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use scanledger::RangeList;

    #[test]
    fn gaps_are_every_range_the_set_lacks() {
        let s: IdSet = [3, 4, 8].into_iter().collect();
        assert_eq!(gaps(&s, 1, 10), vec![(1, 2), (5, 7), (9, 10)]);
        assert_eq!(gaps(&s, 3, 4), vec![]);
        assert_eq!(gaps(&s, 4, 8), vec![(5, 7)]);
        let full: IdSet = [u64::MAX].into_iter().collect();
        assert_eq!(
            gaps(&full, u64::MAX - 2, u64::MAX),
            vec![(u64::MAX - 2, u64::MAX - 1)]
        );
        // Matches the library's capped list on what both show.
        let big: IdSet = (0..1000u64).filter(|i| i % 3 == 0).collect();
        let capped = RangeList::gaps(&big, 0, 999);
        assert_eq!(gaps(&big, 0, 999)[..capped.shown.len()], capped.shown[..]);
        assert_eq!(gaps(&big, 0, 999).len() as u64, capped.ranges_total);
    }
}
