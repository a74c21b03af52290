//! `diff` and `missing`: the library's `DiffReport` and `MissingReport`, rendered.
//!
//! By default the first `RANGES_SHOWN_MAX` ranges of each list are printed with the totals;
//! `--all` prints every range and `--output FILE` writes every range to a file (text, or JSON
//! with `--json`) while the summary goes to stdout. Every range is written as the library's
//! walk finds it, partition by partition, so neither grows the memory with the list.

use std::io::Write;
use std::path::{Path, PathBuf};

use scanledger::{write_json, EmitError, ListForm, ListStream, MissingReport, Store, Which};

use super::migration::{emitted, migration_error, runs_at, ContentOpts, CrossOpts, Stores};
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

/// Writes every range of `lists` to `path` as the library lays a list file out
/// (`scanledger::write_lists`), refusing to overwrite a store.
fn write_file(
    out: &Out,
    path: &Path,
    stores: &[&Path],
    lists: &[&ListStream<'_>],
) -> Result<(), CliError> {
    for store in stores {
        refuse_store_as_output(store, path)?;
    }
    let io = |e: &std::io::Error| CliError::io("write", path, e);
    let file = std::fs::File::create(path).map_err(|e| io(&e))?;
    let mut w = std::io::BufWriter::new(file);
    let form = match (out.json, out.lines) {
        (_, true) => ListForm::JsonLines,
        (true, false) => ListForm::Json,
        _ => ListForm::Text,
    };
    match scanledger::write_lists(&mut w, lists, form).and_then(|()| Ok(w.flush()?)) {
        Ok(()) => Ok(()),
        Err(EmitError::Io(e)) => Err(io(&e)),
        Err(other) => emitted(Err(other)),
    }
}

/// The arguments of `diff`.
#[derive(Debug, clap::Args)]
pub(crate) struct DiffArgs {
    /// The old run (run-N, N or latest).
    pub old: RunArg,
    /// The new run (run-N, N or latest; in --other-store if given).
    pub new: RunArg,
    #[command(flatten)]
    pub list: ListOpts,
    #[command(flatten)]
    pub cross: CrossOpts,
    #[command(flatten)]
    pub content: ContentOpts,
}

/// The arguments of `missing`.
#[derive(Debug, clap::Args)]
pub(crate) struct MissingArgs {
    /// The run (run-N, N or latest).
    pub run: RunArg,
    /// The reference: another run of the same (source, tenant).
    #[arg(long, value_name = "RUN", conflicts_with = "range")]
    pub against: Option<RunArg>,
    /// The reference: every ID from LO to HI inclusive, in their original form.
    #[arg(long, value_name = "LO..HI")]
    pub range: Option<String>,
    #[command(flatten)]
    pub list: ListOpts,
    #[command(flatten)]
    pub cross: CrossOpts,
}

/// `diff OLD NEW [--all] [--output FILE] [--across] [--other-store FILE] [--content [--reread]]`.
pub(crate) fn diff(out: &Out, args: &DiffArgs) -> Result<i32, CliError> {
    let (opts, cross, content) = (&args.list, &args.cross, &args.content);
    let stores = Stores::open(out, cross.other_store.as_deref())?;
    let snap = stores.main.read()?;
    let other_snap = stores.other.as_ref().map(Store::read).transpose()?;
    let new_snap = other_snap.as_ref().unwrap_or(&snap);
    let (a, b) = runs_at(out, &stores, (&snap, new_snap), args.old, args.new)?;
    let cmp = scanledger::compare_runs(a, b, stores.other.is_some(), cross.across)?;
    let mut report = scanledger::diff_report(&cmp)?;
    if content.content || content.reread {
        let c = scanledger::diff_content(&cmp, content.reread().as_ref(), opts.all);
        report.content = Some(c.map_err(migration_error)?);
    }
    let streams = [
        ListStream::new("added_ranges", |f| cmp.each_range(Which::Added, None, f)),
        ListStream::new("removed_ranges", |f| {
            cmp.each_range(Which::Removed, None, f)
        }),
    ];
    if let Some(path) = &opts.output {
        let lists = [&streams[0], &streams[1]];
        write_file(out, path, &[&out.store, stores.other_path(out)], &lists)?;
        report.output = Some(path.display().to_string());
    }
    if opts.all {
        report.partitions_differing = cmp.partitions().to_vec();
    }
    let shown: &[ListStream<'_>] = if opts.all { &streams } else { &[] };
    let mut w = anstream::stdout().lock();
    let written = if out.json {
        write_json(&mut w, &report, shown, out.lines).and_then(|()| Ok(writeln!(w)?))
    } else {
        report.write_text(&mut w, shown)
    };
    drop(w);
    emitted(written)?;
    Ok(0)
}

/// `missing RUN --against OTHER | --range LO..HI [--all] [--output FILE]`.
pub(crate) fn missing(out: &Out, args: &MissingArgs) -> Result<i32, CliError> {
    let (run, opts, cross) = (args.run, &args.list, &args.cross);
    let stores = Stores::open(out, cross.other_store.as_deref())?;
    let snap = stores.main.read()?;
    let other_snap = stores.other.as_ref().map(Store::read).transpose()?;
    let ref_snap = other_snap.as_ref().unwrap_or(&snap);
    match (args.against, args.range.as_deref()) {
        (Some(other), None) => {
            let (a, b) = runs_at(out, &stores, (&snap, ref_snap), run, other)?;
            let cmp = scanledger::compare_runs(a, b, stores.other.is_some(), cross.across)?;
            let report = scanledger::missing_report(&cmp)?;
            let s = ListStream::new("missing_ranges", |f| cmp.each_range(Which::Added, None, f));
            missing_out(out, report, &s, opts, &[&out.store, stores.other_path(out)])
        }
        (None, Some(text)) => {
            let at = scanledger::RunAt { snap: &snap, run: run.resolve(&snap)?, store: &out.store };
            let gaps = scanledger::gaps_of(at, text).map_err(|e| {
                let hint = e.hint();
                let err = match e {
                    scanledger::RangeError::Read(e) => return e.into(),
                    other => CliError::usage(other.to_string()).with_field("--range"),
                };
                CliError { hint, ..err }
            })?;
            let report = gaps.report(text)?;
            let s = ListStream::new("missing_ranges", |f| gaps.each_range(f));
            missing_out(out, report, &s, opts, &[&out.store])
        }
        _ => Err(CliError::usage("missing needs a reference: a run or an ID range")
            .with_hint("give --against OTHER_RUN, or --range LO..HI for an interval of IDs (e.g. `scanledger missing run-1 --range 1..1000`)")),
    }
}

fn missing_out(
    out: &Out,
    mut report: MissingReport,
    stream: &ListStream<'_>,
    opts: &ListOpts,
    stores: &[&Path],
) -> Result<i32, CliError> {
    if let Some(path) = &opts.output {
        write_file(out, path, stores, &[stream])?;
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
        report.write_text(&mut w, shown)
    };
    drop(w);
    emitted(written)?;
    Ok(0)
}
