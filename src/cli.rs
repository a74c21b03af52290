//! The command line (SPEC §8): clap types and one handler per command.
//!
//! Handlers return the process exit code or a `crate::Error`; `main.rs` maps errors to exit
//! 2 (input) or 1 (internal). Output goes to stdout (receipts, JSON), progress to stderr.
//! Nothing printed here ever carries a raw cursor.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::{Parser, Subcommand};

use crate::collect::{self, PageLog, Raise, RunSink};
use crate::contract::Contract;
use crate::error::{Error, StoreError};
use crate::receipt::{Receipt, RunId};
use crate::reconcile::Reconciler;
use crate::source::AnySource;
use crate::store::{Store, StoreOptions};

mod evidence;
pub use evidence::ExportFormat;

/// scanledger: scan paginated sources durably and prove (or refuse to prove) completeness.
#[derive(Debug, Parser)]
#[command(name = "scanledger", version, about, long_about = None)]
pub struct Cli {
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
pub enum Command {
    /// Run a scan under a contract and print its receipt.
    Scan {
        /// The contract file (JSON, SPEC §8).
        #[arg(long)]
        contract: PathBuf,
        /// The source: replay:FILE or sim:KEY=VALUE,...
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
        #[arg(long, default_value_t = crate::token::TOKEN_TTL_SECONDS_DEFAULT)]
        ttl_seconds: u64,
    },
}

/// Options of the commands that write.
#[derive(Debug, clap::Args)]
pub struct WriteOpts {
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
        StoreOptions {
            keep_cursors: !self.no_keep_cursors,
            checkpoint_every_pages: self.checkpoint_every.max(1),
            exclusive: self.exclusive,
        }
    }
}

/// Runs a parsed command line; returns the exit code.
///
/// # Errors
/// Input, source and store errors.
pub fn run(cli: Cli) -> Result<i32, Error> {
    match cli.command {
        Command::Scan {
            contract,
            source,
            write,
        } => {
            let contract = read_contract(&contract)?;
            let source_spec = recordable(&source);
            let mut source = AnySource::open(&source)?;
            let mut store = Store::open(&cli.store, write.store_options())?;
            store.record_source(&source_spec);
            let mut sink = ProgressSink::new(&mut store, write.progress, write.ack_pages);
            let done = runtime()?.block_on(collect::scan(&contract, &mut source, &mut sink))?;
            print_receipt(&done.receipt(), cli.json)?;
            Ok(done.exit_code())
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
            let mut store = Store::open(&cli.store, write.store_options())?;
            let raise = Raise {
                max_pages,
                max_records,
                max_bytes,
                deadline_seconds,
            };
            let loaded = store.prepare_resume(run, &raise)?;
            let spec = match source.or_else(|| loaded.source_spec.clone()) {
                Some(spec) => spec,
                None => {
                    return Err(Error::Usage(format!(
                        "{run} has no recorded source: pass --source"
                    )))
                }
            };
            let mut source = AnySource::open(&spec)?;
            store.record_source(&recordable(&spec));
            let mut sink = ProgressSink::new(&mut store, write.progress, write.ack_pages);
            let done = runtime()?.block_on(collect::resume(
                loaded.contract,
                loaded.meta,
                loaded.reconciler,
                &mut source,
                &mut sink,
                deadline_seconds,
            ))?;
            print_receipt(&done.receipt(), cli.json)?;
            Ok(done.exit_code())
        }
        Command::Runs => {
            let store = Store::open_read(&cli.store)?;
            let runs = store.runs()?;
            if cli.json {
                emit(&serde_json::json!({ "runs": runs }).to_string())?;
            } else {
                let mut out = String::from("RUN          STATE        STATUS    PAGES    UNIQUE IDS  SOURCE/TENANT          STARTED\n");
                for r in &runs {
                    out.push_str(&format!(
                        "{:<12} {:<12} {:<9} {:>5} {:>13}  {:<22} {}\n",
                        r.run_id,
                        r.state,
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
            let receipt = store.receipt(run)?;
            print_receipt(&receipt, cli.json)?;
            Ok(receipt.exit_code())
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
        Command::Page {
            run,
            token,
            size,
            ttl_seconds,
        } => evidence::page(&cli.store, run, token.as_deref(), size, ttl_seconds),
    }
}

/// The `--source` argument as a run records it: a replay file's path made absolute, so a
/// resume from another directory finds the same file.
fn recordable(spec: &str) -> String {
    match spec.strip_prefix("replay:") {
        Some(path) => std::fs::canonicalize(path)
            .map_or_else(|_| spec.to_owned(), |p| format!("replay:{}", p.display())),
        None => spec.to_owned(),
    }
}

fn runtime() -> Result<tokio::runtime::Runtime, Error> {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
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
pub fn read_contract(path: &Path) -> Result<Contract, Error> {
    let text = crate::io_bound::read_text(path, crate::contract::CONTRACT_BYTES_MAX as u64)?;
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

/// A sink that forwards to the store and prints a progress line every few seconds.
struct ProgressSink<'a> {
    store: &'a mut Store,
    enabled: bool,
    ack: bool,
    last: std::time::Instant,
}

impl<'a> ProgressSink<'a> {
    fn new(store: &'a mut Store, enabled: bool, ack: bool) -> ProgressSink<'a> {
        ProgressSink {
            store,
            enabled,
            ack,
            last: std::time::Instant::now(),
        }
    }
}

impl RunSink for ProgressSink<'_> {
    fn begin(
        &mut self,
        contract: &Contract,
        restarted_from: Option<RunId>,
        started_at_ms: u64,
        rec: &mut Reconciler,
    ) -> Result<RunId, Error> {
        let run = self
            .store
            .begin(contract, restarted_from, started_at_ms, rec)?;
        if self.enabled {
            eprintln!("{run}: started ({})", contract.scope.source);
        }
        Ok(run)
    }
    fn checkpoint(
        &mut self,
        run: RunId,
        rec: &mut Reconciler,
        page: Option<&PageLog>,
    ) -> Result<(), Error> {
        self.store.checkpoint(run, rec, page)?;
        if self.ack && self.store.pending_pages() == 0 {
            if let Some(p) = page {
                eprintln!("ack {run} page {}", p.page_idx);
            }
        }
        if self.enabled && self.last.elapsed().as_secs() >= 2 {
            self.last = std::time::Instant::now();
            let p = rec.progress();
            eprintln!(
                "{run}: {} pages, {} records, {} unique IDs",
                p.pages_observed,
                p.records_observed,
                rec.ids().len()
            );
        }
        Ok(())
    }
    fn finish(&mut self, run: RunId, rec: &mut Reconciler, at: u64) -> Result<(), Error> {
        self.store.finish(run, rec, at)
    }
    fn supersede(&mut self, old: RunId, new: RunId) -> Result<(), Error> {
        if self.enabled {
            eprintln!("{old}: superseded by {new} (restart)");
        }
        self.store.supersede(old, new)
    }
    fn server_count(&mut self, run: RunId, n: u64) -> Result<(), Error> {
        self.store.server_count(run, n)
    }
}

/// Maps an error to its exit code: 2 for input, 1 for internal failures.
#[must_use]
pub fn exit_code_of(e: &Error) -> i32 {
    if e.is_input_error() {
        2
    } else {
        1
    }
}

/// Whether an error is a store lock conflict (for callers that wait and retry).
#[must_use]
pub fn is_locked(e: &Error) -> bool {
    matches!(e, Error::Store(StoreError::Locked { .. }))
}
