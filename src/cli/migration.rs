//! Comparisons across collections on the command line: the store pair behind `--other-store`,
//! the options of `--across`, `--content` and `--reread`, and `migration verify`, which asks
//! the library for the verdict (`scanledger::verify_migration`) and renders it.
//!
//! The other store is opened read-only through the ordinary reader path; nothing here writes
//! a store, and nothing here decides: every rule of the verdict is the library's.

use std::io::Write;
use std::path::{Path, PathBuf};

use scanledger::{
    Compared, EmitError, MigrationError, MigrationReport, MigrationRequest, RereadSources, RunAt,
    Side, Snapshot, Status, Store, Which,
};

use super::output::{count, emit_line, write_json, Streamed};
use super::{open_read, CliError, Out, RunArg};

/// Where the other run lives and whether another collection may be compared.
#[derive(Debug, Default, clap::Args)]
pub(crate) struct CrossOpts {
    /// Compare runs of different collections (another source or tenant: a migration's source
    /// and target); the ID codecs must agree. String IDs are compared by their original bytes.
    #[arg(long)]
    pub across: bool,
    /// Read the second run (NEW, --against or --to) from this store file, read-only.
    #[arg(long, value_name = "FILE")]
    pub other_store: Option<PathBuf>,
}

/// What `--content` and `--reread` need.
#[derive(Debug, Default, clap::Args)]
pub(crate) struct ContentOpts {
    /// Also compare the runs' per-partition content digests (both sources must have named
    /// `content` columns or pointers).
    #[arg(long)]
    pub content: bool,
    /// Re-read from both SQL sources only the key ranges of the partitions whose content
    /// digests differ, and list the changed IDs (int IDs; implies --content).
    #[arg(long)]
    pub reread: bool,
    /// The source to re-read the old (or --from) run from [default: the source recorded with
    /// the run].
    #[arg(long, value_name = "SPEC", requires = "reread")]
    pub from_source: Option<String>,
    /// The source to re-read the new (or --to) run from [default: the source recorded with
    /// the run].
    #[arg(long, value_name = "SPEC", requires = "reread")]
    pub to_source: Option<String>,
}

impl ContentOpts {
    /// The re-read's sources, when `--reread` is given.
    pub(crate) fn reread(&self) -> Option<RereadSources> {
        self.reread
            .then(|| RereadSources::new(self.from_source.clone(), self.to_source.clone()))
    }
}

/// The main store and, with `--other-store`, the second one (`None` when it is the same file).
pub(crate) struct Stores {
    pub main: Store,
    pub other: Option<Store>,
}

impl Stores {
    /// Opens `--store` and the other store, both read-only.
    pub(crate) fn open(out: &Out, other: Option<&Path>) -> Result<Stores, CliError> {
        let main = open_read(out)?;
        let other = match other {
            Some(p) if !same_file(&out.store, p) => Some(
                match out.wait {
                    Some(w) => Store::open_read_waiting(p, w),
                    None => Store::open_read(p),
                }
                .map_err(|e| {
                    CliError::from(e).with_field("--other-store").with_hint(
                        "--other-store names the store file the second run was scanned into",
                    )
                })?,
            ),
            _ => None,
        };
        Ok(Stores { main, other })
    }

    /// The path of the store the second run is read from.
    pub(crate) fn other_path<'a>(&'a self, out: &'a Out) -> &'a Path {
        self.other.as_ref().map_or(out.store.as_path(), Store::path)
    }
}

fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
        _ => a == b,
    }
}

/// The two runs of a command, each in its store: `old` in `--store`, `new` in `--other-store`.
pub(crate) fn runs_at<'a, 's>(
    out: &'a Out,
    stores: &'a Stores,
    snaps: (&'a Snapshot<'s>, &'a Snapshot<'s>),
    old: RunArg,
    new: RunArg,
) -> Result<(RunAt<'a, 's>, RunAt<'a, 's>), CliError> {
    let old = RunAt {
        snap: snaps.0,
        run: old.resolve(snaps.0)?,
        store: &out.store,
    };
    let new = RunAt {
        snap: snaps.1,
        run: new.resolve(snaps.1)?,
        store: stores.other_path(out),
    };
    Ok((old, new))
}

/// Compares two runs; runs of another scope without `--across` are refused with a hint
/// naming it.
pub(crate) fn compare<'a, 's>(
    old: RunAt<'a, 's>,
    new: RunAt<'a, 's>,
    two_files: bool,
    across: bool,
) -> Result<Compared<'a, 's>, CliError> {
    scanledger::compare_runs(old, new, two_files, across).map_err(|e| {
        let other_scope = matches!(
            e,
            scanledger::DiffError::NotComparable(scanledger::NotComparable::OtherScope { .. })
        );
        let err = CliError::from(e);
        if other_scope {
            err.with_hint(
                "to compare two collections (a migration's source and target), add --across",
            )
        } else {
            err
        }
    })
}

/// A verdict's or a content comparison's error, with its field and the next step.
pub(crate) fn migration_error(e: MigrationError) -> CliError {
    let flag = |side| match side {
        Side::Old => "--from-source",
        _ => "--to-source",
    };
    match e {
        MigrationError::Diff(e) => e.into(),
        MigrationError::Exclude(scanledger::ExcludeError::File(f)) => {
            CliError::file(f, "read").with_field("--exclude")
        }
        MigrationError::Exclude(scanledger::ExcludeError::Line {
            path,
            line,
            problem,
        }) => {
            let mut err = CliError::usage(problem).with_field("--exclude").with_hint(
                "one ID per line, exactly as the runs write it (blank lines and # lines skipped)",
            );
            err.file = Some(path);
            err.line = Some(line);
            err
        }
        MigrationError::Exclude(scanledger::ExcludeError::Read(e)) => e.into(),
        MigrationError::RereadSource { side, .. } => CliError::usage(e.to_string())
            .with_field(flag(side))
            .with_hint(format!(
                "give {} postgres:CONFIG.json or mysql:CONFIG.json",
                flag(side)
            )),
        MigrationError::RereadOpen { side, source } => CliError::from(*source).with_field(flag(side)),
        MigrationError::RereadCodec { .. } => CliError::usage(e.to_string())
            .with_field("--reread")
            .with_hint("diff --content without --reread still names the differing buckets"),
        MigrationError::NoContent { .. } => CliError::usage(e.to_string())
            .with_field("--content")
            .with_hint("name the same `content` columns in both source configs and scan again (docs/guide-migration.md)"),
        other => CliError::usage(other.to_string())
            .with_field("--content")
            .with_hint("name the same columns in the same order in both source configs and scan again"),
    }
}

/// The arguments of `migration verify`.
#[derive(Debug, clap::Args)]
pub(crate) struct VerifyArgs {
    /// The scan of the source collection (run-N, N or latest).
    #[arg(long, value_name = "RUN")]
    pub from: RunArg,
    /// The scan of the target collection (run-N, N or latest; in --other-store if given).
    #[arg(long, value_name = "RUN")]
    pub to: RunArg,
    /// IDs deliberately not migrated (or present only in the target), one per line exactly
    /// as the runs write them; the differences must be exactly these.
    #[arg(long, value_name = "FILE")]
    pub exclude: Option<PathBuf>,
    /// Every ID and range, not the first ones.
    #[arg(long)]
    pub all: bool,
    /// The second run's store.
    #[arg(long, value_name = "FILE")]
    pub other_store: Option<PathBuf>,
    #[command(flatten)]
    pub content: ContentOpts,
}

/// `migration verify --from RUN --to RUN [--content [--reread]] [--exclude FILE]`.
pub(crate) fn verify(out: &Out, args: &VerifyArgs) -> Result<i32, CliError> {
    let stores = Stores::open(out, args.other_store.as_deref())?;
    let snap = stores.main.read()?;
    let other_snap = stores.other.as_ref().map(Store::read).transpose()?;
    let to_snap = other_snap.as_ref().unwrap_or(&snap);
    let (from, to) = runs_at(out, &stores, (&snap, to_snap), args.from, args.to)?;
    let mut request = MigrationRequest::new();
    request.exclude.clone_from(&args.exclude);
    request.content = args.content.content;
    request.reread = args.content.reread();
    request.all = args.all;
    request.store_named = out.store_named;
    let (report, lists) = scanledger::verify_migration(from, to, stores.other.is_some(), &request)
        .map_err(migration_error)?;
    let l = &lists;
    let streams = if args.all {
        vec![
            Streamed::new("missing_ranges", move |f| l.each_range(Which::Removed, f)),
            Streamed::new("extra_ranges", move |f| l.each_range(Which::Added, f)),
        ]
    } else {
        Vec::new()
    };
    let mut w = anstream::stdout().lock();
    let written = if out.json {
        write_json(&mut w, &report, &streams, out.lines).and_then(|()| Ok(writeln!(w)?))
    } else {
        verdict_text(&mut w, &report, &streams)
    };
    drop(w);
    emitted(written)?;
    Ok(super::status_exit(report.verdict))
}

/// A write to stdout that found the store failing or stdout closed.
pub(crate) fn emitted(r: Result<(), EmitError>) -> Result<(), CliError> {
    match r {
        Ok(()) => Ok(()),
        Err(EmitError::Read(e)) => Err(e.into()),
        Err(EmitError::Io(e)) => super::output::stdout_written(Err(e)),
        Err(other) => Err(CliError::internal(other.to_string())),
    }
}

/// `source / tenant, snapshot S` of a run side, escaped for a terminal.
pub(crate) fn side_words(s: &scanledger::RunSide) -> String {
    format!(
        "{} / {}, snapshot {}",
        scanledger::terminal_safe(&s.source),
        scanledger::terminal_safe(s.tenant.as_deref().unwrap_or("-")),
        s.snapshot_id
            .as_deref()
            .map_or_else(|| "none".into(), scanledger::terminal_safe)
    )
}

/// The verdict for people: the headline, how many rows are missing, extra and changed, the
/// reasons, the lists (streamed with `--all`) and the next commands.
fn verdict_text(
    w: &mut dyn Write,
    r: &MigrationReport,
    streams: &[Streamed<'_>],
) -> Result<(), EmitError> {
    let (old, new) = &r.names;
    write!(
        w,
        "migration {}: {old} ({}) -> {new} ({})",
        r.verdict.as_str(),
        side_words(&r.from),
        side_words(&r.to)
    )?;
    if r.verdict == Status::Verified {
        let but = if r.excluded_count > 0 {
            format!(
                " but the {} declared excluded",
                count(r.excluded_count, "ID", "IDs")
            )
        } else {
            String::new()
        };
        let same = if r.content_checked {
            ", with the same content"
        } else {
            ""
        };
        write!(
            w,
            "\n  every one of {} of {old} is in {new}{but}{same}",
            count(r.from.unique_ids_observed, "ID", "IDs")
        )?;
    } else {
        write!(w, "\n  {:<8} {}", "rows", rows_words(r))?;
    }
    for reason in &r.reasons {
        write!(w, "\n  {}", scanledger::terminal_safe(reason))?;
    }
    for (name, shown, total, key) in [
        (
            "missing",
            &r.missing_ranges,
            r.missing_ranges_total,
            "missing_ranges",
        ),
        (
            "extra",
            &r.extra_ranges,
            r.extra_ranges_total,
            "extra_ranges",
        ),
    ] {
        if total == 0 {
            continue;
        }
        let head = format!("\n  {name:<8} ");
        match streams.iter().find(|s| s.key == key) {
            Some(s) => emit_line(w, &head, s)?,
            None => write!(w, "{head}{}", list_words(shown, total))?,
        }
    }
    changed_text(w, r)?;
    for n in &r.next {
        write!(w, "\n  next: {}", scanledger::terminal_safe(n))?;
    }
    writeln!(w)?;
    Ok(())
}

/// How many rows are missing, extra and changed, and what content could not be compared.
fn rows_words(r: &MigrationReport) -> String {
    let changed = match (r.content_checked, r.changed_count) {
        (false, _) => "changed not checked (no --content)".to_owned(),
        (true, Some(n)) => format!("{n} changed"),
        (true, None) if !r.changed_partitions.is_empty() => format!(
            "changed in {} (--reread names the rows)",
            count(r.changed_partitions.len() as u64, "partition", "partitions")
        ),
        (true, None) => "changed unknown".to_owned(),
    };
    let mut s = format!(
        "{} missing, {} extra, {changed}",
        r.missing_count, r.extra_count
    );
    if let Some(c) = &r.content {
        if c.partitions_uncompared > 0 && c.reread.is_none() {
            s.push_str(&format!(
                "; the content of {} was not compared: their IDs differ",
                count(c.partitions_uncompared, "partition", "partitions")
            ));
        }
    }
    s
}

/// The changed IDs (or partitions) and the declarations that are no difference.
fn changed_text(w: &mut dyn Write, r: &MigrationReport) -> std::io::Result<()> {
    if !r.changed_ids.is_empty() {
        let words: Vec<String> = r.changed_ids.iter().map(id_words).collect();
        let total = r.changed_count.unwrap_or(words.len() as u64);
        write!(
            w,
            "\n  changed  {}{}",
            words.join(", "),
            super::lists::more(words.len() as u64, total)
        )?;
    } else if !r.changed_partitions.is_empty() {
        let idx: Vec<String> = r
            .changed_partitions
            .iter()
            .map(|p| format!("#{p}"))
            .collect();
        write!(w, "\n  changed  in partitions {}", idx.join(", "))?;
    }
    if !r.exclusions_unmatched.is_empty() {
        let words: Vec<String> = r
            .exclusions_unmatched
            .iter()
            .map(|s| scanledger::terminal_safe(s).into_owned())
            .collect();
        write!(
            w,
            "\n  declared but not different: {}{}",
            words.join(", "),
            super::lists::more(words.len() as u64, r.exclusions_unmatched_count)
        )?;
    }
    Ok(())
}

/// An ID of a report for people: a string escaped, a number as it is.
pub(crate) fn id_words(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => scanledger::terminal_safe(s).into_owned(),
        other => other.to_string(),
    }
}

/// A capped list of ranges as a line, with how many more there are.
pub(crate) fn list_words(shown: &[String], total: u64) -> String {
    format!(
        "{}{}",
        super::lists::line_of(shown),
        super::lists::more(shown.len() as u64, total)
    )
}
