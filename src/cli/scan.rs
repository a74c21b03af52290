//! `scan` and `resume`: a run driven by the library's collector, recorded through the store's
//! `RunWriter`, watched by a progress bar, stoppable with Ctrl-C.
//!
//! Ctrl-C sets a flag that `RunLog::should_stop` reports before every request, so the run
//! stops at a page boundary as `limit_reached (interrupted)`, committed and resumable; the
//! partial receipt and the exact resume command follow, and the exit code is 3. A second
//! Ctrl-C quits at once (exit 130); the store then holds the run up to its last commit and
//! `runs` shows it `interrupted`. A source that cannot go on (a replay file without an
//! answer) leaves the run interrupted too, and the error says how to resume it, unless it
//! stopped before its first page: a source is prepared (a SQL config checked against the
//! catalogue) before the run begins, and a run a source refuses at its first request is
//! removed, so no run is left that `resume` would only fail on again (REFERENCE §9).

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use scanledger::{
    AnySource, Contract, Delta, Error, Raise, Reconciler, RunId, RunLog, RunWriter, ScanResult,
};

use super::error::{contract_error, CliError};
use super::{open_write, receipt_exit, show, Out, RunArg, WriteOpts};

/// Set by the first Ctrl-C.
static STOP: AtomicBool = AtomicBool::new(false);
/// Exit code of a second Ctrl-C (128 + SIGINT, as shells report it).
const EXIT_SIGINT: i32 = 130;

/// Installs the Ctrl-C handler (once per process).
fn watch_ctrl_c(quiet: bool) {
    let _ = ctrlc::set_handler(move || {
        if STOP.swap(true, Ordering::SeqCst) {
            std::process::exit(EXIT_SIGINT);
        }
        if !quiet {
            eprintln!("\nstopping at the next page boundary (Ctrl-C again to quit at once)");
        }
    });
}

/// `scan --contract FILE --source SPEC`.
pub(crate) fn scan(
    out: &Out,
    contract_path: &Path,
    spec: &str,
    write: &WriteOpts,
) -> Result<i32, CliError> {
    let contract = read_contract(contract_path)?;
    scan_contract(out, contract, spec, write)
}

/// A scan of `contract` (read from a file, or a shard's from a plan).
pub(crate) fn scan_contract(
    out: &Out,
    contract: Contract,
    spec: &str,
    write: &WriteOpts,
) -> Result<i32, CliError> {
    scan_contract_in(out, contract, spec, write, None)
}

/// [`scan_contract`]; with `joined`, the source first begins the contract's snapshot and, once
/// it has, writes that file (a shard of a held plan tells its coordinator).
pub(crate) fn scan_contract_in(
    out: &Out,
    contract: Contract,
    spec: &str,
    write: &WriteOpts,
    joined: Option<&std::path::Path>,
) -> Result<i32, CliError> {
    let mut source =
        AnySource::open_for(spec, &contract).map_err(|e| CliError::from(Error::Source(e)))?;
    let rt = runtime()?;
    // An MCP server is started (or reached), and a SQL config checked against the server's
    // catalogue, before the run begins: a source that cannot be had records nothing, and the
    // run records who answered.
    rt.block_on(source.prepare())
        .map_err(|e| nothing_recorded(CliError::from(Error::Source(e)), None))?;
    if let Some(path) = joined {
        super::shard::join(out, &rt, &mut source, &contract, path)?;
    }
    let mut store = open_write(out, write.store_options())?;
    store.record_source(&source.recorded_spec(&scanledger::recordable_spec(spec)));
    let (writer, start) = scanledger::ScanStart::begin(&mut store, &contract)?;
    let run = writer.run();
    tracing::info!("{run} begun");
    let log = Watched::new(writer, out, write, contract.expected_count);
    let done = rt.block_on(async {
        let done = start.run(&contract, log, &mut source).await;
        source.close().await;
        done
    });
    if matches!(done, Err(Error::Source(_))) && store.discard_unstarted(run) {
        if let Err(e) = done {
            return Err(nothing_recorded(CliError::from(e), Some(run)));
        }
    }
    finish(out, run, done)
}

/// An error that stopped a scan before its first page: nothing is kept (`deleted`: the run
/// begun for it, now removed), so the hint is to correct the input and scan again.
fn nothing_recorded(mut err: CliError, deleted: Option<RunId>) -> CliError {
    let kept = deleted.map_or_else(
        || "nothing was recorded".to_owned(),
        |run| format!("nothing was kept ({run}, begun for it, was removed)"),
    );
    let fix = format!("the source was refused before its first page, so {kept}: correct what the error names and run the same scan again");
    err.hint = Some(match err.hint.take() {
        Some(h) => format!("{h}; {fix}"),
        None => fix,
    });
    err
}

/// `resume RUN [--source SPEC] [--max-... N]`; with `joined`, as [`scan_contract_in`] (a
/// shard of a held plan resumed).
pub(crate) fn resume(
    out: &Out,
    run: RunArg,
    source: Option<String>,
    raise: &Raise,
    write: &WriteOpts,
    joined: Option<&Path>,
) -> Result<i32, CliError> {
    if raise
        .deadline_seconds
        .is_some_and(|s| s > scanledger::DEADLINE_SECONDS_MAX)
    {
        return Err(CliError::usage(format!(
            "--deadline-seconds: at most {} seconds",
            scanledger::DEADLINE_SECONDS_MAX
        ))
        .with_field("--deadline-seconds"));
    }
    let mut store = open_write(out, write.store_options())?;
    let (run, header) = {
        let snap = store.read()?;
        let run = run.resolve(&snap)?;
        (run, snap.header(run)?)
    };
    let Some(spec) = source.or(header.source_spec.clone()) else {
        return Err(
            CliError::usage(format!("{run} has no recorded source")).with_hint(format!(
                "pass it: {} --source SPEC",
                out.resume_command(run)
            )),
        );
    };
    let expected = header.contract.expected_count;
    // The source checks its configuration against the run's own contract (its end signal).
    let unchanged = |e: scanledger::SourceError| {
        let mut err = CliError::from(Error::Source(e));
        err.hint = Some(format!(
            "{run} is unchanged: correct the source, then continue it with `{}`",
            out.resume_command(run)
        ));
        err
    };
    let mut source = AnySource::open_for(&spec, &header.contract).map_err(unchanged)?;
    let rt = runtime()?;
    rt.block_on(source.prepare()).map_err(unchanged)?;
    if let Some(path) = joined {
        super::shard::join(out, &rt, &mut source, &header.contract, path)?;
    }
    store.record_source(&source.recorded_spec(&scanledger::recordable_spec(&spec)));
    let (writer, loaded) = store.resume(run, raise)?;
    tracing::info!("{run} resumed");
    let log = Watched::new(writer, out, write, expected);
    let done = rt.block_on(async {
        let done = scanledger::resume_with(loaded, log, raise.deadline_seconds, &mut source).await;
        source.close().await;
        done
    });
    finish(out, run, done)
}

/// Stops every run this process drives at its next page boundary, as a first Ctrl-C does (a
/// side of `migration verify` that failed stops the other, which stays resumable).
pub(crate) fn stop_all() {
    STOP.store(true, Ordering::SeqCst);
}

/// Whether a run of this process was asked to stop (Ctrl-C, or a failed side).
pub(crate) fn stopping() -> bool {
    STOP.load(Ordering::SeqCst)
}

/// One side of `migration verify` given a source: in the store `out.store`, the newest run of
/// `contract`'s scope from `spec` that stopped short of its end is resumed
/// (`Store::unfinished_run`), else a new run begins; it is scanned to its end without a
/// progress bar, its pages' keys streamed into `keys` when given (the one-pass comparison).
/// Returns its receipt and the run it resumed, if any.
pub(crate) fn scan_side(
    out: &Out,
    contract: &Contract,
    spec: &str,
    write: &WriteOpts,
    mut keys: Option<scanledger::KeySender>,
) -> Result<(scanledger::Receipt, Option<RunId>), CliError> {
    let mut source =
        AnySource::open_for(spec, contract).map_err(|e| CliError::from(Error::Source(e)))?;
    let rt = runtime()?;
    rt.block_on(source.prepare())
        .map_err(|e| CliError::from(Error::Source(e)))?;
    let mut store = open_write(out, write.store_options())?;
    let recorded = scanledger::recordable_spec(spec);
    store.record_source(&source.recorded_spec(&recorded));
    let (writer, start, resumed) = scanledger::continue_or_begin(&mut store, contract, &recorded)?;
    let log = Watched::new(writer, out, write, contract.expected_count);
    let done = rt.block_on(async {
        let done = match keys.as_mut() {
            Some(k) => {
                let mut tap = scanledger::KeyTap::new(&mut source, k);
                start.run(contract, log, &mut tap).await
            }
            None => start.run(contract, log, &mut source).await,
        };
        source.close().await;
        done
    });
    if let Some(k) = keys {
        k.finish(matches!(&done, Ok(d) if d.reconciler.status() == scanledger::Status::Verified));
    }
    Ok((done.map_err(CliError::from)?.receipt(), resumed))
}

/// Prints the receipt of a scan (or the error that stopped it, with how to resume).
fn finish(out: &Out, run: RunId, done: Result<ScanResult, Error>) -> Result<i32, CliError> {
    let done = match done {
        Ok(done) => done,
        Err(e) => {
            let stopped_by_source = matches!(e, Error::Source(_));
            let mut err = CliError::from(e);
            if stopped_by_source {
                err.hint = Some(format!(
                    "{run} is interrupted at its last commit; once the source can answer, continue it with `{}`",
                    out.resume_command(run)
                ));
            }
            return Err(err);
        }
    };
    let receipt = done.receipt();
    if out.json {
        out.json_value(&receipt)?;
    } else {
        out.emit(&show::receipt_text(&receipt))?;
    }
    let shown = receipt.run_id.parse::<RunId>().unwrap_or(run);
    if receipt.limits_hit.iter().any(|l| l == "interrupted") {
        out.note(&format!(
            "{shown} stopped on Ctrl-C after {} committed; continue it with `{}`",
            super::output::count(receipt.pages_observed, "page", "pages"),
            out.resume_command(shown)
        ));
    } else if receipt.coverage_status == scanledger::Status::Unknown
        && !receipt.limits_hit.is_empty()
    {
        out.note(&format!(
            "{shown} stopped at a limit ({}); raise it and continue with `{} --max-pages N` (or --max-records, --max-bytes, --deadline-seconds)",
            receipt.limits_hit.join(", "),
            out.resume_command(shown)
        ));
    }
    Ok(receipt_exit(&receipt))
}

/// Reads and validates a contract file; an error names the file, and the line, column and
/// key when it has them.
pub(crate) fn read_contract(path: &Path) -> Result<Contract, CliError> {
    // Bounded while read: a FIFO works, /dev/zero is refused.
    let text = scanledger::read_bounded(path, scanledger::CONTRACT_BYTES_MAX as u64)
        .map_err(|e| CliError::file(e, "read contract").with_kind("contract"))?;
    Contract::from_json(&text).map_err(|e| contract_error(path, &e, Some(&text)))
}

pub(crate) fn runtime() -> Result<tokio::runtime::Runtime, CliError> {
    // IO too: network sources (http, postgres, mysql) need the reactor.
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::internal(format!("cannot start the async runtime: {e}")))
}

/// How a scan shows its progress.
enum Show {
    /// Nothing (off a terminal, `--json`, `-q`, `--no-progress`).
    Nothing,
    /// A bar (or spinner) on the terminal.
    Bar(Bar),
    /// A line every few seconds (`--progress`, for logs).
    Lines(Instant),
}

/// The run's writer, watched: a progress bar, a Ctrl-C check before every request, tracing
/// events, and for the crash tests `ack run-N page P` after every committed checkpoint.
struct Watched<'s> {
    writer: RunWriter<'s>,
    show: Show,
    ack: bool,
}

impl<'s> Watched<'s> {
    fn new(
        writer: RunWriter<'s>,
        out: &Out,
        write: &WriteOpts,
        expected: Option<u64>,
    ) -> Watched<'s> {
        watch_ctrl_c(out.quiet);
        let show = if write.progress && !out.quiet {
            eprintln!("{}: started", writer.run());
            Show::Lines(Instant::now())
        } else if out.quiet || out.json || write.no_progress || !super::output::stderr_is_terminal()
        {
            Show::Nothing
        } else {
            Show::Bar(Bar(progress_bar(writer.run(), expected)))
        };
        Watched {
            writer,
            show,
            ack: write.ack_pages,
        }
    }
}

/// A bar over the expected IDs when the contract gives `expected_count`, else a spinner; both
/// with pages, IDs and rate.
fn progress_bar(run: RunId, expected: Option<u64>) -> ProgressBar {
    // Short enough for an 80-column terminal: a wrapped bar redraws badly.
    let template = if expected.is_some() {
        "{spinner} {prefix} [{bar:16}] {percent:>3}% {human_pos}/{human_len} IDs, {msg}, ETA {eta}"
    } else {
        "{spinner} {prefix} {human_pos} IDs, {msg}, {elapsed}"
    };
    let style = ProgressStyle::with_template(template)
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ");
    let bar = match expected {
        Some(n) => ProgressBar::with_draw_target(Some(n), ProgressDrawTarget::stderr()),
        None => ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr()),
    };
    bar.set_prefix(run.to_string());
    bar.set_message("0 pages");
    bar.set_style(style);
    bar.enable_steady_tick(Duration::from_millis(120));
    bar
}

impl Watched<'_> {
    fn update(&mut self, rec: &Reconciler) {
        let p = rec.progress();
        match &mut self.show {
            Show::Nothing => {}
            Show::Bar(Bar(bar)) => {
                bar.set_position(rec.ids().len());
                // `per_sec` is IDs per second over indicatif's recent window.
                let rate = bar.per_sec();
                let rate = if rate.is_finite() && rate >= 0.0 {
                    format!("{rate:.0} IDs/s")
                } else {
                    String::from("- IDs/s")
                };
                bar.set_message(format!(
                    "{}, {rate}",
                    super::output::count(p.pages_observed, "page", "pages")
                ));
            }
            Show::Lines(last) => {
                if last.elapsed() >= Duration::from_secs(2) {
                    *last = Instant::now();
                    eprintln!(
                        "{}: {}, {} records, {} unique IDs",
                        self.writer.run(),
                        super::output::count(p.pages_observed, "page", "pages"),
                        p.records_observed,
                        rec.ids().len()
                    );
                }
            }
        }
    }
}

/// The progress bar, cleared from the screen when it goes, however the scan ends (an error
/// ends it without `finish`).
struct Bar(ProgressBar);

impl Drop for Bar {
    fn drop(&mut self) {
        self.0.finish_and_clear();
    }
}

impl RunLog for Watched<'_> {
    fn run(&self) -> RunId {
        self.writer.run()
    }

    fn checkpoint(&mut self, rec: &Reconciler, delta: Delta) -> Result<(), Error> {
        let page = delta.page.as_ref().map(|p| p.page_idx);
        self.writer.checkpoint(rec, delta)?;
        let committed = self.writer.pending_pages() == 0;
        if let Some(p) = page {
            tracing::debug!(
                "{} page {p} observed{}",
                self.writer.run(),
                if committed { ", committed" } else { "" }
            );
            if self.ack && committed {
                eprintln!("ack {} page {p}", self.writer.run());
            }
        }
        self.update(rec);
        Ok(())
    }

    fn set_server_count(&mut self, n: u64) {
        tracing::info!("{}: the source counts {n} records", self.writer.run());
        self.writer.set_server_count(n);
    }

    fn finish(self, rec: &Reconciler, at: u64) -> Result<(), Error> {
        drop(self.show);
        tracing::info!("{} finished: {}", self.writer.run(), rec.status().as_str());
        Ok(self.writer.finish(rec, at)?)
    }

    fn restart(self, rec: &Reconciler, contract: &Contract, at: u64) -> Result<Self, Error> {
        let old = self.writer.run();
        let writer = self.writer.restart(rec, contract, at)?;
        tracing::info!("{old} superseded by {} (restart)", writer.run());
        if let Show::Bar(Bar(b)) = &self.show {
            b.set_prefix(writer.run().to_string());
            b.set_position(0);
        }
        Ok(Watched {
            writer,
            show: self.show,
            ack: self.ack,
        })
    }

    fn stopped(
        self,
        rec: &Reconciler,
        cause: &scanledger::StopCause,
        at: u64,
    ) -> Result<(), Error> {
        drop(self.show);
        Ok(self.writer.stopped(rec, cause, at)?)
    }

    fn should_stop(&self) -> bool {
        STOP.load(Ordering::SeqCst)
    }
}
