//! `diff` and `missing`: the library's `DiffReport` and `MissingReport`, rendered.
//!
//! By default the first `RANGES_SHOWN_MAX` ranges of each list are printed with the totals;
//! `--all` prints every range and `--output FILE` writes every range to a file (text, or JSON
//! with `--json`) while the summary goes to stdout. Every range is written as the library's
//! walk finds it, partition by partition, so neither grows the memory with the list.

use std::io::Write;
use std::path::{Path, PathBuf};

use scanledger::{
    Compared, ContentReport, DiffReport, EmitError, IdCodecKind, MissingReport, RunHeader, Status,
    Store, Which,
};

use super::migration::{
    compare, emitted, id_words, list_words, migration_error, runs_at, side_words, ContentOpts,
    CrossOpts, Stores,
};
use super::output::{count, emit_line, range_words, write_json, Streamed};
use super::{CliError, Out, RunArg};

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

/// `--output` never names a store (directly, by another path, or through a link): that would
/// destroy the evidence.
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

pub(crate) fn more(shown: u64, total: u64) -> String {
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

/// Writes every range of `lists` to `path`: `+ RANGE` / `- RANGE` lines (or the bare range
/// when there is one list), `{"list", "range"}` lines with `--json-lines`, or with `--json`
/// one object of string arrays; each range as its walk finds it.
fn write_file(
    out: &Out,
    path: &Path,
    stores: &[&Path],
    lists: &[(&'static str, &Streamed<'_>)],
) -> Result<(), CliError> {
    for store in stores {
        refuse_store_as_output(store, path)?;
    }
    let io = |e: &std::io::Error| CliError::io("write", path, e);
    let file = std::fs::File::create(path).map_err(|e| io(&e))?;
    let mut w = std::io::BufWriter::new(file);
    let mut written = if out.json && !out.lines {
        let keys: serde_json::Map<String, serde_json::Value> = lists
            .iter()
            .map(|(_, s)| (s.key.to_owned(), serde_json::Value::Null))
            .collect();
        let streams: Vec<Streamed<'_>> = lists
            .iter()
            .map(|(_, s)| Streamed::new(s.key, |f| (s.walk)(f)))
            .collect();
        write_json(&mut w, &keys, &streams, false).and_then(|()| Ok(writeln!(w)?))
    } else {
        Ok(())
    };
    for (name, s) in lists {
        if written.is_err() || (out.json && !out.lines) {
            break;
        }
        let sign = if *name == "removed" { '-' } else { '+' };
        written = (s.walk)(&mut |r| {
            if out.lines {
                writeln!(w, "{}", serde_json::json!({ "list": name, "range": r }))
            } else if lists.len() == 1 {
                writeln!(w, "{r}")
            } else {
                writeln!(w, "{sign} {r}")
            }
        });
    }
    match written.and_then(|()| Ok(w.flush()?)) {
        Ok(()) => Ok(()),
        Err(EmitError::Io(e)) => Err(io(&e)),
        Err(other) => emitted(Err(other)),
    }
}

/// A run as the text names it: with its scope and snapshot when two collections or files are
/// compared, and its store's name across two files.
fn run_words(
    cmp: &Compared<'_, '_>,
    side: Option<&scanledger::RunSide>,
    name: String,
    h: &RunHeader,
) -> String {
    match side {
        Some(s) if cmp.crossing => format!("{name} ({})", side_words(s)),
        _ => format!(
            "{name} ({} / {})",
            scanledger::terminal_safe(&h.contract.scope.source),
            scanledger::terminal_safe(h.contract.scope.tenant.as_deref().unwrap_or("-"))
        ),
    }
}

/// What the leaves of a run are called: partitions of IDs, or for `string` IDs buckets of the
/// strings' digests.
fn leaves_word(h: &RunHeader, n: u64) -> String {
    if h.contract.id_codec == IdCodecKind::String {
        count(n, "digest bucket", "digest buckets")
    } else {
        count(n, "partition", "partitions")
    }
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
    let other_snap = stores.other.as_ref().map(Store::read).transpose()?;
    let new_snap = other_snap.as_ref().unwrap_or(&snap);
    let (a, b) = runs_at(out, &stores, (&snap, new_snap), old, new)?;
    let cmp = compare(a, b, stores.other.is_some(), cross.across)?;
    let mut report = scanledger::diff_report(&cmp)?;
    if content.content || content.reread {
        let c = scanledger::diff_content(&cmp, content.reread().as_ref(), opts.all);
        report.content = Some(c.map_err(migration_error)?);
    }
    let streams = [
        Streamed::new("added_ranges", |f| cmp.each_range(Which::Added, None, f)),
        Streamed::new("removed_ranges", |f| {
            cmp.each_range(Which::Removed, None, f)
        }),
    ];
    if let Some(path) = &opts.output {
        let lists = [("added", &streams[0]), ("removed", &streams[1])];
        write_file(out, path, &[&out.store, stores.other_path(out)], &lists)?;
        report.output = Some(path.display().to_string());
    }
    if opts.all {
        report.partitions_differing = cmp.partitions().to_vec();
    }
    let shown: &[Streamed<'_>] = if opts.all { &streams } else { &[] };
    let mut w = anstream::stdout().lock();
    let written = if out.json {
        write_json(&mut w, &report, shown, out.lines).and_then(|()| Ok(writeln!(w)?))
    } else {
        diff_text(&mut w, &report, &cmp, shown)
    };
    drop(w);
    emitted(written)?;
    Ok(0)
}

fn diff_text(
    w: &mut dyn Write,
    r: &DiffReport,
    cmp: &Compared<'_, '_>,
    streams: &[Streamed<'_>],
) -> Result<(), EmitError> {
    let (old_name, new_name) = names(cmp);
    let old_words = if cmp.crossing {
        run_words(cmp, r.old.as_ref(), old_name, &cmp.old)
    } else {
        old_name
    };
    let new_words = run_words(cmp, r.new.as_ref(), new_name, &cmp.new);
    if r.equal {
        write!(
            w,
            "{old_words} and {new_words} hold the same {}",
            count(cmp.new.unique_ids_observed, "ID", "IDs")
        )?;
    } else {
        let strings = cmp.new.contract.id_codec == IdCodecKind::String;
        let parts = if strings {
            String::new()
        } else {
            format!(
                ", in {}",
                count(r.partitions_differing_total, "partition", "partitions")
            )
        };
        write!(
            w,
            "{old_words} -> {new_words}: {} added, {} removed{parts}",
            r.added_count, r.removed_count
        )?;
        for (name, shown, total, key) in [
            (
                "added",
                &r.added_ranges,
                r.added_ranges_total,
                "added_ranges",
            ),
            (
                "removed",
                &r.removed_ranges,
                r.removed_ranges_total,
                "removed_ranges",
            ),
        ] {
            if total == 0 {
                continue;
            }
            let head = format!("\n  {name:<10} ");
            match streams.iter().find(|s| s.key == key) {
                Some(s) => emit_line(w, &head, s)?,
                None => write!(w, "{head}{}", list_words(shown, total))?,
            }
        }
        if !strings {
            let noun = if r.partitions_differing_total == 1 {
                "partition"
            } else {
                "partitions"
            };
            let idx: Vec<String> = r
                .partitions_differing
                .iter()
                .map(|p| format!("#{p}"))
                .collect();
            write!(
                w,
                "\n  {noun:<10} {}{}",
                idx.join(", "),
                more(idx.len() as u64, r.partitions_differing_total)
            )?;
        }
    }
    if let Some(c) = &r.content {
        content_text(w, c, cmp)?;
    }
    for h in [&cmp.old, &cmp.new] {
        if h.coverage_status != Status::Verified {
            write!(
                w,
                "\n  note: {} did not verify (status {}): it is not a complete inventory",
                h.run_id,
                h.coverage_status.as_str()
            )?;
        }
    }
    if let Some(p) = &r.output {
        write!(
            w,
            "\n  every range written to {}",
            scanledger::terminal_safe(p)
        )?;
    }
    writeln!(w)?;
    Ok(())
}

/// The runs' names: with their store's name when two files are compared.
fn names(cmp: &Compared<'_, '_>) -> (String, String) {
    let (a, b) = cmp.at();
    let (x, y) = scanledger::run_names(
        cmp.old.run_id,
        a.store,
        cmp.new.run_id,
        cmp.two_files.then_some(b.store),
    );
    (x.to_string(), y.to_string())
}

fn content_text(
    w: &mut dyn Write,
    c: &ContentReport,
    cmp: &Compared<'_, '_>,
) -> std::io::Result<()> {
    let leaves = |n| leaves_word(&cmp.new, n);
    if c.equal {
        write!(
            w,
            "\n  {:<10} the same in every one of {}",
            "content",
            leaves(c.leaves_compared)
        )?;
    } else {
        let idx: Vec<String> = c
            .partitions_differing
            .iter()
            .map(|p| format!("#{p}"))
            .collect();
        write!(
            w,
            "\n  {:<10} differs in {}: {}{}",
            "content",
            leaves(c.partitions_differing_total),
            idx.join(", "),
            more(idx.len() as u64, c.partitions_differing_total)
        )?;
    }
    let Some(rr) = c.reread.as_ref().filter(|_| !c.equal) else {
        return Ok(());
    };
    let words: Vec<String> = rr.changed_ids.iter().map(id_words).collect();
    write!(
        w,
        "\n  {:<10} {} re-read from both sources: {}{}{}",
        "changed",
        leaves(c.partitions_differing_total),
        count(rr.changed_count, "record", "records"),
        if words.is_empty() {
            String::new()
        } else {
            format!(": {}", words.join(", "))
        },
        more(words.len() as u64, rr.changed_count)
    )?;
    let (old_name, new_name) = names(cmp);
    let name = |side| {
        if side == scanledger::Side::Old {
            &old_name
        } else {
            &new_name
        }
    };
    for u in &rr.unreproduced {
        write!(w, "\n  note: partition #{} of {} re-read differently from its scan (the source changed since): its changes are not listed", u.partition, name(u.run))?;
    }
    for f in &rr.failed {
        write!(
            w,
            "\n  note: the re-read of {}'s source did not verify: {}",
            name(f.run),
            scanledger::terminal_safe(&f.why)
        )?;
    }
    Ok(())
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
    let other_snap = stores.other.as_ref().map(Store::read).transpose()?;
    let ref_snap = other_snap.as_ref().unwrap_or(&snap);
    match (against, range) {
        (Some(other), None) => {
            let (a, b) = runs_at(out, &stores, (&snap, ref_snap), run, other)?;
            let cmp = compare(a, b, stores.other.is_some(), cross.across)?;
            let report = scanledger::missing_report(&cmp)?;
            let s = Streamed::new("missing_ranges", |f| cmp.each_range(Which::Added, None, f));
            let (name, reference) = names(&cmp);
            let words = (
                run_words(&cmp, report.run.as_ref(), name, &cmp.old),
                run_words(&cmp, report.against.as_ref(), reference, &cmp.new),
            );
            let words = if cmp.crossing { words } else { (cmp.old.run_id.to_string(), cmp.new.run_id.to_string()) };
            missing_out(out, report, &s, opts, &[&out.store, stores.other_path(out)], &words)
        }
        (None, Some(text)) => {
            let at = scanledger::RunAt { snap: &snap, run: run.resolve(&snap)?, store: &out.store };
            let gaps = scanledger::gaps_of(at, text).map_err(|e| range_error(e, at))?;
            let report = gaps.report(text)?;
            let s = Streamed::new("missing_ranges", |f| gaps.each_range(f));
            let words = (report.run_id.clone(), format!("the range {}", scanledger::terminal_safe(text)));
            missing_out(out, report, &s, opts, &[&out.store], &words)
        }
        _ => Err(CliError::usage("missing needs a reference: a run or an ID range")
            .with_hint("give --against OTHER_RUN, or --range LO..HI for an interval of IDs (e.g. `scanledger missing run-1 --range 1..1000`)")),
    }
}

/// A `--range` that cannot be read, with an example in the run's own form.
fn range_error(e: scanledger::RangeError, at: scanledger::RunAt<'_, '_>) -> CliError {
    if let scanledger::RangeError::Read(e) = e {
        return e.into();
    }
    let example = match at.snap.header(at.run) {
        Ok(h) => match (h.contract.id_codec, h.id_prefix) {
            (IdCodecKind::Prefixed, Some(p)) => format!("for example --range {p}1..{p}1000"),
            (IdCodecKind::String, _) => {
                format!("for string IDs, compare with a run: `scanledger missing {} --against OTHER_RUN`", at.run)
            }
            _ => "for example --range 1..1000".to_owned(),
        },
        Err(_) => "for example --range 1..1000".to_owned(),
    };
    CliError::usage(e.to_string())
        .with_field("--range")
        .with_hint(example)
}

fn missing_out(
    out: &Out,
    mut report: MissingReport,
    stream: &Streamed<'_>,
    opts: &ListOpts,
    stores: &[&Path],
    words: &(String, String),
) -> Result<i32, CliError> {
    if let Some(path) = &opts.output {
        write_file(out, path, stores, &[("missing", stream)])?;
        report.output = Some(path.display().to_string());
    }
    let shown = if opts.all {
        std::slice::from_ref(stream)
    } else {
        &[]
    };
    let mut w = anstream::stdout().lock();
    let written = if out.json {
        write_json(&mut w, &report, shown, out.lines).and_then(|()| Ok(writeln!(w)?))
    } else {
        missing_text(&mut w, &report, shown, words)
    };
    drop(w);
    emitted(written)?;
    Ok(0)
}

fn missing_text(
    w: &mut dyn Write,
    r: &MissingReport,
    streams: &[Streamed<'_>],
    (run, reference): &(String, String),
) -> Result<(), EmitError> {
    if r.missing_ranges_total == 0 {
        write!(w, "{run} lacks nothing that {reference} has")?;
    } else {
        let head = format!(
            "{run} lacks {} that {reference} has, in {}:\n  ",
            count(r.missing_count, "ID", "IDs"),
            count(r.missing_ranges_total, "range", "ranges")
        );
        match streams.first() {
            Some(s) => emit_line(w, &head, s)?,
            None => write!(
                w,
                "{head}{}",
                list_words(&r.missing_ranges, r.missing_ranges_total)
            )?,
        }
    }
    if r.coverage_status != Status::Verified {
        write!(
            w,
            "\n  note: {} did not verify (status {}): what it lacks may be what it did not reach",
            r.run_id,
            r.coverage_status.as_str()
        )?;
    }
    if let Some(p) = &r.output {
        write!(
            w,
            "\n  every range written to {}",
            scanledger::terminal_safe(p)
        )?;
    }
    writeln!(w)?;
    Ok(())
}
