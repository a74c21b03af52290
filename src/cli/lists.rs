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

use super::migration::{self, ContentOpts, CrossOpts, Stores};
use super::output::{count, range_words};
use super::{CliError, Out, RunArg};

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
pub(crate) fn render(
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

pub(crate) fn more(shown: usize, total: usize) -> String {
    if shown < total {
        format!(" and {} more (--all lists them)", total - shown)
    } else {
        String::new()
    }
}

/// The ranges as a line of text, single IDs alone.
pub(crate) fn line_of(rendered: &[String]) -> String {
    rendered
        .iter()
        .map(|r| range_words(&scanledger::terminal_safe(r)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `diff OLD NEW [--all] [--output FILE] [--across] [--other-store FILE] [--content [--reread]]`.
pub(crate) fn diff(
    out: &Out,
    old: RunArg,
    new: RunArg,
    opts: &ListOpts,
    cross: &CrossOpts,
    content: &ContentOpts,
) -> Result<i32, CliError> {
    let stores = Stores::open(out, cross.other_store.as_deref())?;
    let snap = stores.main.read()?;
    let other_snap = match &stores.other {
        Some(s) => Some(s.read()?),
        None => None,
    };
    let new_snap = other_snap.as_ref().unwrap_or(&snap);
    let (old, new) = (old.resolve(&snap)?, new.resolve(new_snap)?);
    let rd = migration::id_diff(
        &snap,
        old,
        new_snap,
        new,
        cross.across,
        stores.other.is_some(),
    )?;
    let crossing = cross.across || stores.other.is_some();
    let added = List::of("added", rd.diff.added.ranges().collect());
    let removed = List::of("removed", rd.diff.removed.ranges().collect());
    let parts = &rd.diff.partitions_differing;
    let parts_shown = &parts[..if opts.all {
        parts.len()
    } else {
        parts.len().min(RANGES_SHOWN_MAX)
    }];
    let added_shown = render(new_snap, &rd.new, shown(&added, opts))?;
    let removed_shown = render(&snap, &rd.old, shown(&removed, opts))?;
    if let Some(path) = &opts.output {
        refuse_store_as_output(stores.other_path(out), path)?;
        let a = render(new_snap, &rd.new, &added.ranges)?;
        let r = render(&snap, &rd.old, &removed.ranges)?;
        write_file(out, path, &out.store, &[(&added, a), (&removed, r)])?;
    }
    let want_content = content.content || content.reread;
    let mut content_json = serde_json::Value::Null;
    let mut content_text = String::new();
    if want_content {
        let cd = migration::content_of(&snap, old, new_snap, new)?;
        for (h, has) in [(&rd.old, cd.old_has_content), (&rd.new, cd.new_has_content)] {
            if !has {
                return Err(CliError::usage(format!(
                    "{} has no content digests: its source config names no content columns",
                    h.run_id
                ))
                .with_field("--content")
                .with_hint("name the same `content` columns in both source configs and scan again (docs/guide-migration.md)"));
            }
        }
        let leaves = &cd.leaves_differing;
        let leaves_shown = &leaves[..if opts.all {
            leaves.len()
        } else {
            leaves.len().min(RANGES_SHOWN_MAX)
        }];
        let mut reread_json = serde_json::Value::Null;
        if leaves.is_empty() {
            content_text = format!(
                "\n  {:<10} the same in every one of {}",
                "content",
                count(cd.leaves_compared, "partition", "partitions")
            );
        } else {
            let idx: Vec<String> = leaves_shown.iter().map(|p| format!("#{p}")).collect();
            content_text = format!(
                "\n  {:<10} differs in {}: {}{}",
                "content",
                count(leaves.len() as u64, "partition", "partitions"),
                idx.join(", "),
                more(leaves_shown.len(), leaves.len())
            );
        }
        if content.reread {
            let r = migration::reread(&rd, &snap, new_snap, leaves, content)?;
            let rn = Renderer::for_ids(
                new_snap,
                &rd.new,
                r.changed.iter().take(if opts.all {
                    usize::MAX
                } else {
                    migration::IDS_SHOWN_MAX
                }),
            )?;
            if !leaves.is_empty() {
                let words: Vec<String> = r
                    .changed
                    .iter()
                    .take(if opts.all {
                        usize::MAX
                    } else {
                        migration::IDS_SHOWN_MAX
                    })
                    .map(|id| scanledger::terminal_safe(&rn.render(id)).into_owned())
                    .collect();
                let total = usize::try_from(r.changed.len()).unwrap_or(usize::MAX);
                content_text.push_str(&format!(
                    "\n  {:<10} {} re-read from both sources: {}{}{}",
                    "changed",
                    count(leaves.len() as u64, "partition", "partitions"),
                    count(r.changed.len(), "record", "records"),
                    if words.is_empty() {
                        String::new()
                    } else {
                        format!(": {}", words.join(", "))
                    },
                    more(words.len(), total)
                ));
                for (side, p) in &r.unreproduced {
                    let run = if *side == "old" {
                        rd.old.run_id
                    } else {
                        rd.new.run_id
                    };
                    content_text.push_str(&format!(
                        "\n  note: partition #{p} of {run} re-read differently from its scan (the source changed since): its changes are not listed"
                    ));
                }
                for (side, why) in &r.failed {
                    let run = if *side == "old" {
                        rd.old.run_id
                    } else {
                        rd.new.run_id
                    };
                    content_text.push_str(&format!(
                        "\n  note: the re-read of {run}'s source did not verify: {}",
                        scanledger::terminal_safe(why)
                    ));
                }
            }
            reread_json = r.json(&rn, opts.all);
        }
        content_json = serde_json::json!({
            "equal": leaves.is_empty(),
            "leaves_compared": cd.leaves_compared,
            "partitions_differing": leaves_shown,
            "partitions_differing_total": leaves.len(),
            "reread": reread_json,
        });
    }
    if out.json {
        let mut v = serde_json::json!({
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
        if let Some(obj) = v.as_object_mut() {
            if crossing {
                obj.insert(
                    "old".into(),
                    migration::side_json(&snap, &rd.old, &out.store)?,
                );
                obj.insert(
                    "new".into(),
                    migration::side_json(new_snap, &rd.new, stores.other_path(out))?,
                );
            }
            if want_content {
                obj.insert("content".into(), content_json);
            }
        }
        out.json_value(&v)?;
        return Ok(0);
    }
    let scope = migration::scope_words(&rd.new);
    let (old_words, new_words) = if crossing {
        (
            format!(
                "{} ({}, snapshot {})",
                rd.old.run_id,
                migration::scope_words(&rd.old),
                migration::snapshot_words(&rd.old)
            ),
            format!(
                "{} ({scope}, snapshot {})",
                rd.new.run_id,
                migration::snapshot_words(&rd.new)
            ),
        )
    } else {
        (
            rd.old.run_id.to_string(),
            format!("{} ({scope})", rd.new.run_id),
        )
    };
    let mut text = if rd.diff.is_empty() {
        format!(
            "{old_words} and {new_words} hold the same {}",
            count(rd.new.unique_ids_observed, "ID", "IDs")
        )
    } else {
        let mut s = format!(
            "{old_words} -> {new_words}: {} added, {} removed, in {}",
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
    text.push_str(&content_text);
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
    cross: &CrossOpts,
) -> Result<i32, CliError> {
    let stores = Stores::open(out, cross.other_store.as_deref())?;
    let snap = stores.main.read()?;
    let other_snap = match &stores.other {
        Some(s) => Some(s.read()?),
        None => None,
    };
    let ref_snap = other_snap.as_ref().unwrap_or(&snap);
    let run = run.resolve(&snap)?;
    // Ranges of a reference's IDs this run lacks are rendered in the reference's own terms.
    let mut render_in_reference: Option<RunHeader> = None;
    let mut crossing: Option<(RunHeader, RunHeader)> = None;
    let (header, reference, list) = match (against, range) {
        (Some(other), None) => {
            let other = other.resolve(ref_snap)?;
            let rd = migration::id_diff(
                &snap,
                run,
                ref_snap,
                other,
                cross.across,
                stores.other.is_some(),
            )?;
            let list = List::of("missing", rd.diff.added.ranges().collect());
            render_in_reference = Some(rd.new.clone());
            if cross.across || stores.other.is_some() {
                crossing = Some((rd.old.clone(), rd.new.clone()));
            }
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
    // The missing IDs are the reference's (for `string` IDs across scopes, only its
    // dictionary has them); within one scope both dictionaries are one.
    let (list_snap, list_header) = match &render_in_reference {
        Some(h) => (ref_snap, h),
        None => (&snap, &header),
    };
    let rendered = render(list_snap, list_header, shown(&list, opts))?;
    if let Some(path) = &opts.output {
        refuse_store_as_output(stores.other_path(out), path)?;
        let every = render(list_snap, list_header, &list.ranges)?;
        write_file(out, path, &out.store, &[(&list, every)])?;
    }
    if out.json {
        let mut v = serde_json::json!({
            "run_id": header.run_id.to_string(),
            "reference": reference,
            "coverage_status": header.coverage_status,
            "missing_count": list.ids_total,
            "missing_ranges": rendered,
            "missing_ranges_total": list.ranges.len(),
            "output": opts.output.as_ref().map(|p| p.display().to_string()),
        });
        if let (Some((a, b)), Some(obj)) = (&crossing, v.as_object_mut()) {
            obj.insert("run".into(), migration::side_json(&snap, a, &out.store)?);
            obj.insert(
                "against".into(),
                migration::side_json(ref_snap, b, stores.other_path(out))?,
            );
        }
        out.json_value(&v)?;
        return Ok(0);
    }
    let reference = if range.is_some() {
        format!("the range {}", scanledger::terminal_safe(&reference))
    } else if let Some((_, b)) = &crossing {
        format!(
            "{reference} ({}, snapshot {})",
            migration::scope_words(b),
            migration::snapshot_words(b)
        )
    } else {
        reference
    };
    let run_words = match &crossing {
        Some((a, _)) => format!(
            "{} ({}, snapshot {})",
            a.run_id,
            migration::scope_words(a),
            migration::snapshot_words(a)
        ),
        None => header.run_id.to_string(),
    };
    let mut text = if list.ranges.is_empty() {
        format!("{} lacks nothing that {reference} has", run_words)
    } else {
        format!(
            "{} lacks {} that {reference} has, in {}:\n  {}{}",
            run_words,
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
