//! The command line (SPEC §8): clap types and one handler per command.
//!
//! Handlers return the process exit code or a `crate::Error`; `main.rs` maps errors to exit
//! 2 (input) or 1 (internal). Output goes to stdout (receipts, JSON), progress to stderr.
//! Nothing printed here ever carries a raw cursor.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::{Parser, Subcommand};

use scanledger::{
    AnySource, Contract, Delta, Error, OpenError, Raise, Receipt, Reconciler, RunId, RunLog,
    RunWriter, Store, StoreOptions,
};

mod evidence;
mod report;

/// scanledger: scan paginated sources durably and prove (or refuse to prove) completeness.
#[derive(Debug, Parser)]
#[command(name = "scanledger", version, about, long_about = None)]
pub(crate) struct Cli {
    /// The store file.
    #[arg(long, global = true, default_value = "./scanledger.redb")]
    pub store: PathBuf,
    /// Machine-readable JSON output.
    #[arg(long, global = true)]
    pub json: bool,
    /// The command.
    #[command(subcommand)]
    pub command: Command,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Run a scan under a contract and print its receipt.
    Scan {
        /// The contract file (JSON, SPEC §8).
        #[arg(long)]
        contract: PathBuf,
        /// The source: replay:FILE, sim:KEY=VALUE,..., postgres:CONFIG.json or mysql:CONFIG.json
        #[arg(long)]
        source: String,
        #[command(flatten)]
        write: WriteOpts,
    },
    /// Continue an interrupted or budget-stopped run from its stored cursor.
    Resume {
        /// The run (run-N or N).
        run: RunId,
        /// The source to continue from; defaults to the one the run was started with.
        #[arg(long)]
        source: Option<String>,
        /// Raise the page budget.
        #[arg(long)]
        max_pages: Option<u32>,
        /// Raise the record budget.
        #[arg(long)]
        max_records: Option<u64>,
        /// Raise the byte budget.
        #[arg(long)]
        max_bytes: Option<u64>,
        /// A new deadline for this session.
        #[arg(long)]
        deadline_seconds: Option<u64>,
        #[command(flatten)]
        write: WriteOpts,
    },
    /// List the runs of the store, newest first.
    Runs,
    /// Print a run's receipt.
    Receipt {
        /// The run (run-N or N).
        run: RunId,
    },
    /// Recompute a receipt from the store: exit 0 when every field matches, 4 when one does
    /// not (the first mismatch is named), 2 when the file is not a receipt.
    Verify {
        /// The receipt file (JSON, as `--json scan` or `--json receipt` print it).
        receipt_file: PathBuf,
    },
    /// Compare the IDs of two runs of one (source, tenant): added, removed, where.
    Diff {
        /// The old run (run-N or N).
        old: RunId,
        /// The new run (run-N or N).
        new: RunId,
    },
    /// List the IDs a reference has and a run lacks, as ranges with a total.
    Missing {
        /// The run (run-N or N).
        run: RunId,
        /// The reference: another run of the same (source, tenant).
        #[arg(long, required_unless_present = "range", conflicts_with = "range")]
        against: Option<RunId>,
        /// The reference: every ID from LO to HI inclusive, in their original form.
        #[arg(long, value_name = "LO..HI")]
        range: Option<String>,
    },
    /// Write a run's IDs in their original form, one per line in codec order, or as a
    /// portable 64-bit roaring bitmap. Exits with the run's status (0, 3, 4) so that a
    /// partial run's export is never taken for a complete inventory.
    Export {
        /// The run (run-N or N).
        run: RunId,
        /// `text` (one ID per line) or `roaring` (the portable RoaringTreemap format).
        #[arg(long, value_enum, default_value_t = evidence::ExportFormat::Text)]
        format: evidence::ExportFormat,
        /// Write to this file instead of stdout.
        #[arg(long)]
        output: Option<PathBuf>,
    },
    /// Write a run's review packet: one self-contained HTML file (verdict, receipt, coverage
    /// map, violations by page, labels; with --against, what differs from a reference run).
    /// Exits with the run's status (0, 3, 4) after writing the file.
    Report {
        /// The run (run-N or N).
        run: RunId,
        /// A reference run of the same (source, tenant) to compare with.
        #[arg(long)]
        against: Option<RunId>,
        /// The HTML file to write [default: report-run-N.html in the current directory].
        #[arg(short = 'o', long)]
        output: Option<PathBuf>,
    },
    /// Serve a recorded run's IDs in order, a page at a time, with bound page tokens (JSON).
    Page {
        /// The run (run-N or N).
        run: RunId,
        /// The `next_token` of the previous page; none for the first page.
        #[arg(long)]
        token: Option<String>,
        /// IDs per page.
        #[arg(long, default_value_t = 100)]
        size: u32,
        /// Lifetime of the token handed out, in seconds.
        #[arg(long, default_value_t = scanledger::token::TOKEN_TTL_SECONDS_DEFAULT)]
        ttl_seconds: u64,
    },
}

/// Options of the commands that write.
#[derive(Debug, clap::Args)]
pub(crate) struct WriteOpts {
    /// Make every N-th page checkpoint durable (group commit); the default 1 fsyncs every page.
    #[arg(long, default_value_t = 1)]
    pub checkpoint_every: u32,
    /// Do not keep the raw cursor that resume needs.
    #[arg(long)]
    pub no_keep_cursors: bool,
    /// Hold the store for this process alone while writing: one fsync per commit instead of
    /// two, but other processes cannot read the store until the scan ends.
    #[arg(long)]
    pub exclusive: bool,
    /// Print a progress line to stderr every few seconds.
    #[arg(long)]
    pub progress: bool,
    /// Print `ack run-N page P` to stderr after every committed checkpoint (crash tests).
    #[arg(long, hide = true)]
    pub ack_pages: bool,
}

impl WriteOpts {
    fn store_options(&self) -> StoreOptions {
        StoreOptions::new()
            .keep_cursors(!self.no_keep_cursors)
            .checkpoint_every(self.checkpoint_every)
            .exclusive(self.exclusive)
    }
}

/// Runs a parsed command line; returns the exit code.
///
/// # Errors
/// Input, source and store errors.
pub(crate) fn run(cli: Cli) -> Result<i32, Error> {
    match cli.command {
        Command::Scan {
            contract,
            source,
            write,
        } => {
            let contract = read_contract(&contract)?;
            let source_spec = recordable(&source);
            let mut source = AnySource::open_for(&source, &contract)?;
            let mut store = Store::open(&cli.store, write.store_options())?;
            store.record_source(&source_spec);
            let started = scanledger::now_ms();
            let mut rec = Reconciler::new(&contract);
            let (writer, interner) = store.begin(&contract, started)?;
            if let Some(interner) = interner {
                rec.set_interner(interner);
            }
            let log = ProgressLog::new(writer, write.progress, write.ack_pages);
            let done = runtime()?.block_on(scanledger::scan_with(
                &contract,
                rec,
                log,
                started,
                &mut source,
            ))?;
            let receipt = done.receipt();
            print_receipt(&receipt, cli.json)?;
            Ok(receipt_exit(&receipt))
        }
        Command::Resume {
            run,
            source,
            max_pages,
            max_records,
            max_bytes,
            deadline_seconds,
            write,
        } => {
            if deadline_seconds.is_some_and(|s| s > scanledger::DEADLINE_SECONDS_MAX) {
                return Err(Error::Usage(format!(
                    "--deadline-seconds: at most {} seconds",
                    scanledger::DEADLINE_SECONDS_MAX
                )));
            }
            let mut store = Store::open(&cli.store, write.store_options())?;
            let raise = Raise {
                max_pages,
                max_records,
                max_bytes,
                deadline_seconds,
            };
            let header = store.read()?.header(run)?;
            let spec = match source.or(header.source_spec.clone()) {
                Some(spec) => spec,
                None => {
                    return Err(Error::Usage(format!(
                        "{run} has no recorded source: pass --source"
                    )))
                }
            };
            let mut source = AnySource::open_for(&spec, &header.contract)?;
            store.record_source(&recordable(&spec));
            let (writer, loaded) = store.resume(run, &raise)?;
            let log = ProgressLog::new(writer, write.progress, write.ack_pages);
            let done = runtime()?.block_on(scanledger::resume_with(
                loaded,
                log,
                deadline_seconds,
                &mut source,
            ))?;
            let receipt = done.receipt();
            print_receipt(&receipt, cli.json)?;
            Ok(receipt_exit(&receipt))
        }
        Command::Runs => {
            let store = Store::open_read(&cli.store)?;
            let runs = store.read()?.runs()?;
            if cli.json {
                let rows: Vec<serde_json::Value> = runs
                    .iter()
                    .map(|r| {
                        serde_json::json!({
                            "run_id": r.run_id.to_string(),
                            "source": r.source,
                            "tenant": r.tenant,
                            "state": r.state.as_str(),
                            "coverage_status": r.coverage_status,
                            "pages_observed": r.pages_observed,
                            "unique_ids_observed": r.unique_ids_observed,
                            "started_at": r.started_at,
                            "finished_at": r.finished_at,
                        })
                    })
                    .collect();
                emit(&serde_json::json!({ "runs": rows }).to_string())?;
            } else {
                let mut out = String::from("RUN          STATE        STATUS    PAGES    UNIQUE IDS  SOURCE/TENANT          STARTED\n");
                for r in &runs {
                    out.push_str(&format!(
                        "{:<12} {:<12} {:<9} {:>5} {:>13}  {:<22} {}\n",
                        r.run_id.to_string(),
                        r.state.as_str(),
                        r.coverage_status.as_str(),
                        r.pages_observed,
                        r.unique_ids_observed,
                        format!("{}/{}", r.source, r.tenant.as_deref().unwrap_or("-")),
                        r.started_at
                    ));
                }
                emit(out.trim_end())?;
            }
            Ok(0)
        }
        Command::Receipt { run } => {
            let store = Store::open_read(&cli.store)?;
            let receipt = store.read()?.receipt(run)?;
            print_receipt(&receipt, cli.json)?;
            Ok(receipt_exit(&receipt))
        }
        Command::Verify { receipt_file } => evidence::verify(&cli.store, &receipt_file, cli.json),
        Command::Diff { old, new } => evidence::diff(&cli.store, old, new, cli.json),
        Command::Missing {
            run,
            against,
            range,
        } => evidence::missing(&cli.store, run, against, range.as_deref(), cli.json),
        Command::Export {
            run,
            format,
            output,
        } => evidence::export(&cli.store, run, format, output.as_deref()),
        Command::Report {
            run,
            against,
            output,
        } => report::report(&cli.store, run, against, output.as_deref(), cli.json),
        Command::Page {
            run,
            token,
            size,
            ttl_seconds,
        } => evidence::page(&cli.store, run, token.as_deref(), size, ttl_seconds),
    }
}

/// The `--source` argument as a run records it: a replay or config file's path made
/// absolute, so a resume from another directory finds the same file.
fn recordable(spec: &str) -> String {
    // File-backed sources are recorded by absolute path, so `resume` works from anywhere.
    for kind in ["replay:", "postgres:", "mysql:", "http:"] {
        if let Some(path) = spec.strip_prefix(kind) {
            return std::fs::canonicalize(path)
                .map_or_else(|_| spec.to_owned(), |p| format!("{kind}{}", p.display()));
        }
    }
    spec.to_owned()
}

fn runtime() -> Result<tokio::runtime::Runtime, Error> {
    // IO too: network sources (postgres, mysql) need the reactor.
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::Io {
            path: PathBuf::from("<tokio runtime>"),
            source: e,
        })
}

/// Reads and validates a contract file.
///
/// # Errors
/// `Error::File` when unreadable or larger than `CONTRACT_BYTES_MAX` (bounded while read, so a
/// FIFO works and `/dev/zero` is refused), `Error::Contract` naming the key.
pub(crate) fn read_contract(path: &Path) -> Result<Contract, Error> {
    let text = scanledger::read_bounded(path, scanledger::CONTRACT_BYTES_MAX as u64)?;
    Contract::from_json(&text).map_err(|e| Error::Contract {
        path: path.to_owned(),
        source: e,
    })
}

fn print_receipt(r: &Receipt, json: bool) -> Result<(), Error> {
    if json {
        let text = serde_json::to_string_pretty(r).map_err(|e| Error::Usage(e.to_string()))?;
        emit(&text)
    } else {
        emit(r.to_text().trim_end())
    }
}

/// Writes a line to stdout; a closed pipe is not an error worth a panic.
fn emit(text: &str) -> Result<(), Error> {
    let mut out = std::io::stdout().lock();
    match writeln!(out, "{text}") {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(Error::Io {
            path: PathBuf::from("<stdout>"),
            source: e,
        }),
        _ => Ok(()),
    }
}

/// The run's writer, printing a progress line every few seconds and, for the crash tests,
/// `ack run-N page P` after every committed checkpoint.
struct ProgressLog<'s> {
    writer: RunWriter<'s>,
    enabled: bool,
    ack: bool,
    last: std::time::Instant,
}

impl<'s> ProgressLog<'s> {
    fn new(writer: RunWriter<'s>, enabled: bool, ack: bool) -> ProgressLog<'s> {
        if enabled {
            eprintln!("{}: started", writer.run());
        }
        ProgressLog {
            writer,
            enabled,
            ack,
            last: std::time::Instant::now(),
        }
    }
}

impl RunLog for ProgressLog<'_> {
    fn run(&self) -> RunId {
        self.writer.run()
    }
    fn checkpoint(&mut self, rec: &Reconciler, delta: Delta) -> Result<(), Error> {
        let page = delta.page.as_ref().map(|p| p.page_idx);
        self.writer.checkpoint(rec, delta)?;
        if self.ack && self.writer.pending_pages() == 0 {
            if let Some(p) = page {
                eprintln!("ack {} page {p}", self.writer.run());
            }
        }
        if self.enabled && self.last.elapsed().as_secs() >= 2 {
            self.last = std::time::Instant::now();
            let p = rec.progress();
            eprintln!(
                "{}: {} pages, {} records, {} unique IDs",
                self.writer.run(),
                p.pages_observed,
                p.records_observed,
                rec.ids().len()
            );
        }
        Ok(())
    }
    fn set_server_count(&mut self, n: u64) {
        self.writer.set_server_count(n);
    }
    fn finish(self, rec: &Reconciler, at: u64) -> Result<(), Error> {
        Ok(self.writer.finish(rec, at)?)
    }
    fn restart(self, rec: &Reconciler, contract: &Contract, at: u64) -> Result<Self, Error> {
        let old = self.writer.run();
        let writer = self.writer.restart(rec, contract, at)?;
        if self.enabled {
            eprintln!("{old}: superseded by {} (restart)", writer.run());
        }
        Ok(ProgressLog {
            writer,
            enabled: self.enabled,
            ack: self.ack,
            last: self.last,
        })
    }
}

/// The exit code of a status: 0 verified, 3 unknown, 4 failed.
pub(crate) fn status_exit(s: scanledger::Status) -> i32 {
    match s {
        scanledger::Status::Verified => 0,
        scanledger::Status::Unknown => 3,
        scanledger::Status::Failed => 4,
    }
}

/// The exit code of the run a receipt describes: its status's, except that a `count`-mode
/// run that got its total (the question it asked) and found nothing wrong is answered (0),
/// whatever its ID coverage.
pub(crate) fn receipt_exit(r: &Receipt) -> i32 {
    if r.count_total.is_some() && r.coverage_status != scanledger::Status::Failed {
        return 0;
    }
    status_exit(r.coverage_status)
}

/// Maps an error to its exit code: 5 for a busy store, 2 for input, 1 for internal failures.
#[must_use]
pub(crate) fn exit_code_of(e: &Error) -> i32 {
    if matches!(e, Error::Open(OpenError::Busy { .. })) {
        5
    } else if e.is_input_error() {
        2
    } else {
        1
    }
}
