//! Comparisons across collections on the command line: the store pair behind `--other-store`,
//! the options of `--across`, `--content` and `--reread`, and `migration verify`, which asks
//! the library for the verdict (`scanledger::verify_migration`) and renders it.
//!
//! The other store is opened read-only through the ordinary reader path; nothing here writes
//! a store, and nothing here decides: every rule of the verdict is the library's.

use std::io::Write;
use std::path::{Path, PathBuf};

use scanledger::{
    EmitError, ListStream, MigrationError, MigrationRequest, RereadSources, RunAt, Snapshot, Store,
    Which,
};

use super::sides::{scan_sides, SideArg};
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

/// A verdict's or a content comparison's error, with its field and the next step.
pub(crate) fn migration_error(e: MigrationError) -> CliError {
    let (flag, hint) = (e.flag(), e.hint());
    let mut err = match e {
        MigrationError::Diff(e) => return e.into(),
        MigrationError::Exclude(scanledger::ExcludeError::File(f)) => CliError::file(f, "read"),
        MigrationError::Exclude(scanledger::ExcludeError::Read(e)) => return e.into(),
        MigrationError::Exclude(scanledger::ExcludeError::Line {
            path,
            line,
            problem,
        }) => {
            let mut err = CliError::usage(problem);
            err.file = Some(path);
            err.line = Some(line);
            err
        }
        MigrationError::RereadOpen { source, .. } => CliError::from(*source),
        other => CliError::usage(other.to_string()),
    };
    err.field = flag.map(str::to_owned);
    err.hint = hint.or(err.hint);
    err
}

/// The arguments of `migration verify`.
#[derive(Debug, clap::Args)]
pub(crate) struct VerifyArgs {
    /// The source collection: a run (run-N, N or latest) or a source to scan
    /// (mysql:CONFIG.json, postgres://USER@HOST/DB?table=T&key=K, sqlite:PATH?table=T&key=K,
    /// ...), whose run goes into --store.
    #[arg(long, value_name = "RUN|SOURCE")]
    pub from: String,
    /// The target collection: a run (in --other-store if given) or a source to scan, whose
    /// run goes into --other-store [default for a source: --store's name with .to before
    /// .redb].
    #[arg(long, value_name = "RUN|SOURCE")]
    pub to: String,
    /// The contract both scanned sides run under [default: named after each source, 5000
    /// items a page, on_expired_cursor restart].
    #[arg(long, value_name = "FILE")]
    pub contract: Option<PathBuf>,
    /// IDs deliberately not migrated (or present only in the target), one per line exactly
    /// as the runs write them; the differences must be exactly these.
    #[arg(long, value_name = "FILE")]
    pub exclude: Option<PathBuf>,
    /// Every ID and range, not the first ones.
    #[arg(long)]
    pub all: bool,
    /// Also write the migration's review packet to this HTML file: the verdict, and the
    /// target's run against the source's (the differences on the coverage map).
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
    /// The second run's store.
    #[arg(long, value_name = "FILE")]
    pub other_store: Option<PathBuf>,
    #[command(flatten)]
    pub content: VerifyContent,
    #[command(flatten)]
    pub write: super::WriteOpts,
}

/// `--content [COLS]` and `--reread` of `migration verify`.
#[derive(Debug, Default, clap::Args)]
pub(crate) struct VerifyContent {
    /// Also compare the runs' per-partition content digests. With COLS, the content columns
    /// of both sides, which must then be inline SQL specs (postgres://..., sqlite:PATH?...):
    /// `email=mail,amount` pairs the from-side's `email` with the to-side's `mail`.
    #[arg(long, value_name = "COLS", num_args = 0..=1, default_missing_value = "")]
    pub content: Option<String>,
    /// Re-read from both SQL sources only the key ranges of the partitions whose content
    /// digests differ, and list the changed IDs (int IDs; implies --content).
    #[arg(long)]
    pub reread: bool,
    /// The source to re-read the --from run from [default: the source recorded with the run].
    #[arg(long, value_name = "SPEC", requires = "reread")]
    pub from_source: Option<String>,
    /// The source to re-read the --to run from [default: the source recorded with the run].
    #[arg(long, value_name = "SPEC", requires = "reread")]
    pub to_source: Option<String>,
}

impl VerifyContent {
    /// Whether content is compared.
    fn compared(&self) -> bool {
        self.content.is_some() || self.reread
    }

    /// The sides with the columns of `--content COLS`, each written into its inline spec's
    /// `content` (so its run records them with its spec); the sides as given without COLS.
    fn apply(&self, from: SideArg, to: SideArg) -> Result<(SideArg, SideArg), CliError> {
        let Some(cols) = self.content.as_deref().filter(|c| !c.is_empty()) else {
            return Ok((from, to));
        };
        let (from_cols, to_cols) = scanledger::content_pairs(cols)
            .map_err(|p| CliError::usage(format!("--content: {p}")).with_field("--content"))?;
        let side = |s: SideArg, cols: &[String], flag: &str| {
            match &s {
            SideArg::Source(spec) => scanledger::with_content(spec, cols)
                .map(SideArg::Source)
                .ok_or_else(|| {
                    CliError::usage(format!(
                        "--content {cols:?}: {flag} {} is a config file, which names its own content columns",
                        scanledger::terminal_safe(spec)
                    ))
                    .with_field("--content")
                    .with_hint("put the columns in the config's \"content\", or give the side inline (postgres://USER@HOST/DB?table=T&key=K)")
                }),
            SideArg::Run(_) => Err(CliError::usage(format!(
                "--content {cols:?}: {flag} is a stored run, whose content columns were its source's"
            ))
            .with_field("--content")),
        }
        };
        Ok((
            side(from, &from_cols, "--from")?,
            side(to, &to_cols, "--to")?,
        ))
    }

    /// The re-read's sources, when `--reread` is given.
    fn reread_sources(&self) -> Option<RereadSources> {
        self.reread
            .then(|| RereadSources::new(self.from_source.clone(), self.to_source.clone()))
    }
}

/// `migration verify --from RUN|SOURCE --to RUN|SOURCE [--content [COLS] [--reread]] [--exclude FILE]`.
pub(crate) fn verify(out: &Out, args: &VerifyArgs) -> Result<i32, CliError> {
    let from = SideArg::parse(&args.from, "--from")?;
    let to = SideArg::parse(&args.to, "--to")?;
    let (from, to) = args.content.apply(from, to)?;
    let (from, to, other_store, stream) = match (from, to) {
        (SideArg::Run(from), SideArg::Run(to)) => (from, to, args.other_store.clone(), None),
        (from, to) => {
            if let (SideArg::Source(a), SideArg::Source(b)) = (&from, &to) {
                if args.content.compared() {
                    scanledger::check_source_columns(a, b).map_err(migration_error)?;
                }
            }
            let s = scan_sides(
                out,
                from,
                to,
                args.other_store.as_deref(),
                args.contract.as_deref(),
                &args.write,
            )?;
            (s.from, s.to, s.other_store, s.stream)
        }
    };
    verdict(out, args, (from, to), other_store.as_deref(), stream)
}

/// The verdict over two stored runs, rendered; the exit code is its status.
fn verdict(
    out: &Out,
    args: &VerifyArgs,
    (from, to): (RunArg, RunArg),
    other_store: Option<&Path>,
    stream: Option<scanledger::StreamedKeys>,
) -> Result<i32, CliError> {
    let stores = Stores::open(out, other_store)?;
    let snap = stores.main.read()?;
    let other_snap = stores.other.as_ref().map(Store::read).transpose()?;
    let to_snap = other_snap.as_ref().unwrap_or(&snap);
    let (from, to) = runs_at(out, &stores, (&snap, to_snap), from, to)?;
    let runs = (from.run, to.run);
    let mut request = MigrationRequest::new();
    request.exclude.clone_from(&args.exclude);
    request.content = args.content.compared();
    request.reread = args.content.reread_sources();
    request.all = args.all;
    request.store_named = out.store_named;
    request.stream = stream;
    let (report, lists) = scanledger::verify_migration(from, to, stores.other.is_some(), &request)
        .map_err(migration_error)?;
    let l = &lists;
    let streams = if args.all {
        vec![
            ListStream::new("missing_ranges", move |f| l.each_range(Which::Removed, f)),
            ListStream::new("extra_ranges", move |f| l.each_range(Which::Added, f)),
        ]
    } else {
        Vec::new()
    };
    let mut w = anstream::stdout().lock();
    let written = if out.json {
        scanledger::write_json(&mut w, &report, &streams, out.lines).and_then(|()| Ok(writeln!(w)?))
    } else {
        report.write_text(&mut w, &streams)
    };
    drop(w);
    emitted(written)?;
    if let Some(path) = &args.report {
        let input = scanledger::gather_migration_report(&snap, runs.0, to_snap, runs.1, &report)?;
        super::lists::refuse_store_as_output(&out.store, path)?;
        if let Some(other) = other_store {
            super::lists::refuse_store_as_output(other, path)?;
        }
        let html = scanledger::render_report(&input);
        std::fs::write(path, html.as_bytes()).map_err(|e| CliError::io("write", path, &e))?;
        out.note(&format!(
            "the migration's review packet is written to {}",
            path.display()
        ));
    }
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
