//! The command line: clap types, the global options, and the dispatch to one handler per
//! command (`cli/*.rs`).
//!
//! Handlers return the process exit code or a `CliError` (`cli/error.rs`), which `main`
//! prints once and maps to its exit code. Results go to stdout (text for people, JSON with
//! `--json`), everything else (progress, notes, logs, errors) to stderr. Nothing printed here
//! ever carries a raw cursor: runs hold only cursor hashes, and page tokens are our own.
//! Exit codes live here, never in the library.

// A `CliError` ends the command that returns it: it is built at most once per process, so
// its size costs nothing, and a flat struct keeps its fields plain to read and to test.
#![allow(clippy::result_large_err)]

use std::path::PathBuf;
use std::time::Duration;

use clap::{ArgAction, Parser, Subcommand};

use scanledger::{Receipt, Status, Store, StoreOptions};

mod docs;
mod error;
mod evidence;
mod lists;
#[cfg(feature = "mcp")]
mod mcp;
mod migration;
mod output;
mod report;
mod runs;
mod scan;
mod shard;
mod show;
mod sides;

pub(crate) use error::CliError;
pub(crate) use output::Out;

/// Help text after the options of `scanledger --help`.
const AFTER_HELP: &str = "\
Examples:
  scanledger scan --contract contract.json --source replay:pages.jsonl
  scanledger runs --status interrupted
  scanledger resume latest --max-pages 5000
  scanledger diff run-1 run-2 --all
  scanledger --json receipt latest > receipt.json && scanledger verify receipt.json
  scanledger export run-2 --label needs_migration --output ids.txt
  scanledger explain duplicate_id

Exit codes:
  0  verified, or the command succeeded
  1  internal error (an I/O failure of the store, a bug)
  2  usage or input error (arguments, contract, source, store file)
  3  unknown: coverage could not be established (the run stopped early)
  4  failed: the enumeration is defective, or a receipt does not match its store
  5  the store is busy (another process writes it); --wait SECONDS waits instead

Environment: SCANLEDGER_STORE (default store path), NO_COLOR, RUST_LOG.
Reference: docs/REFERENCE.md (contract keys, sources, statuses, violation kinds, receipt
fields, exit codes); `scanledger explain KIND` prints a violation kind's entry.";

/// scanledger: scan paginated sources durably and prove (or refuse to prove) completeness.
#[derive(Debug, Parser)]
#[command(
    name = "scanledger",
    version,
    about,
    long_about = "scanledger: scan paginated sources durably and prove (or refuse to prove) \
        completeness.\n\nEvery page of a scan is checked against a contract and committed to \
        one store file; the run ends with a receipt whose status is verified, unknown or failed.",
    after_help = AFTER_HELP,
    propagate_version = true
)]
pub(crate) struct Cli {
    /// The store file.
    #[arg(
        long,
        global = true,
        env = "SCANLEDGER_STORE",
        default_value = "./scanledger.redb",
        value_name = "PATH"
    )]
    pub store: PathBuf,
    /// Machine-readable output: pretty JSON on stdout, errors as a JSON object on stderr.
    #[arg(long, global = true)]
    pub json: bool,
    /// Like --json, with lists as JSON Lines: one compact JSON value per line.
    #[arg(long, global = true, conflicts_with = "json")]
    pub json_lines: bool,
    /// Wait up to SECONDS for a store another process holds, instead of exiting 5.
    #[arg(long, global = true, value_name = "SECONDS")]
    pub wait: Option<u64>,
    /// Colour: auto (on a terminal, unless NO_COLOR is set), always or never.
    #[arg(long, global = true, value_enum, default_value_t = ColorWhen::Auto, value_name = "WHEN")]
    pub color: ColorWhen,
    /// Print results and errors only: no progress bar, notes or logs.
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    pub quiet: bool,
    /// Log more to stderr: -v retries, backoff and policy decisions; -vv every checkpoint
    /// (RUST_LOG, e.g. RUST_LOG=scanledger=debug, overrides).
    #[arg(short, long, global = true, action = ArgAction::Count)]
    pub verbose: u8,
    /// The command.
    #[command(subcommand)]
    pub command: Command,
}

/// When to colour output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ColorWhen {
    /// On a terminal, unless NO_COLOR is set.
    Auto,
    /// Always, even into a pipe.
    Always,
    /// Never.
    Never,
}

/// A RUN argument: `run-N`, `N`, or `latest` (the newest run of the store).
pub(crate) type RunArg = scanledger::RunRef;

/// The commands.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Run a scan under a contract and print its receipt (exit 0, 3 or 4 by its status).
    #[command(
        after_help = "Examples:\n  scanledger scan --contract contract.json --source replay:pages.jsonl\n  \
        scanledger scan --contract contract.json --source sim:records=100000,label_every=250\n\n\
        Ctrl-C stops at the next page boundary: the run is committed, its partial receipt \
        printed with the command that resumes it, and the exit code is 3."
    )]
    Scan {
        /// The contract file (JSON; docs/REFERENCE.md lists its keys).
        #[arg(
            long,
            value_name = "FILE",
            required_unless_present = "plan",
            conflicts_with = "plan"
        )]
        contract: Option<PathBuf>,
        /// The source: replay:FILE, sim:KEY=VALUE,..., http:CONFIG.json, postgres:CONFIG.json,
        /// mysql:CONFIG.json or mcp:CONFIG.json (docs/REFERENCE.md §4); with --plan, the
        /// plan's source by default.
        #[arg(long, value_name = "SPEC", required_unless_present = "plan")]
        source: Option<String>,
        /// Scan one shard of this plan (made by `plan`) instead of a contract file.
        #[arg(long, value_name = "PLAN")]
        plan: Option<PathBuf>,
        /// The shard of --plan to scan, from 0.
        #[arg(
            long,
            value_name = "K",
            requires = "plan",
            conflicts_with = "shard_from_env"
        )]
        shard: Option<u32>,
        /// Read the shard of --plan from JOB_COMPLETION_INDEX (Kubernetes), SLURM_ARRAY_TASK_ID
        /// (Slurm) or SCANLEDGER_SHARD (GitHub Actions, anything else); an error when none is
        /// set or two disagree.
        #[arg(long, requires = "plan")]
        shard_from_env: bool,
        #[command(flatten)]
        write: WriteOpts,
    },
    /// Cut a scan into shards of the key space, for job runners to scan side by side.
    #[command(
        after_help = "Examples:\n  scanledger plan --contract contract.json --source postgres:pg.json --shards 8 --out plan\n  \
        scanledger plan --contract contract.json --source postgres:pg.json --shards 8 --out plan --hold-snapshot &\n  \
        scanledger plan --release plan\n\n\
        Writes DIR/shard-K.json (one contract per shard) and then DIR/plan.json. Each shard is \
        scanned with `scanledger --store shard-K.redb scan --plan DIR/plan.json --shard K`, and \
        the shard stores merged with `scanledger merge`. A held snapshot is released by a \
        verified merge, `plan --release DIR`, Ctrl-C or SIGTERM, or the timeout; never by a \
        merge that is not verified."
    )]
    Plan {
        /// The contract to cut (no key_range, no shard).
        #[arg(long, value_name = "FILE", required_unless_present_any = ["release", "within"])]
        contract: Option<PathBuf>,
        /// The source the shards scan.
        #[arg(long, value_name = "SPEC", required_unless_present_any = ["release", "within"])]
        source: Option<String>,
        /// How many shards.
        #[arg(long, value_name = "N", required_unless_present = "release", value_parser = clap::value_parser!(u32).range(1..=i64::from(scanledger::SHARDS_MAX)))]
        shards: Option<u32>,
        /// The directory of the plan and its shard contracts.
        #[arg(long, value_name = "DIR", default_value = ".")]
        out: PathBuf,
        /// The span of keys to divide (inclusive), instead of the source's statistics.
        #[arg(long, value_name = "LO..HI")]
        key_space: Option<String>,
        /// PostgreSQL: hold one exported snapshot open for every shard, until a verified merge
        /// (or --release) writes DIR/release, Ctrl-C or SIGTERM, or --hold-timeout-seconds;
        /// SIGHUP is ignored. MySQL/MariaDB: hold a global read lock until every shard has
        /// begun its snapshot (DIR/joined-K), at most --lock-timeout-seconds.
        #[arg(long)]
        hold_snapshot: bool,
        /// How long --hold-snapshot holds at most.
        #[arg(
            long,
            value_name = "N",
            default_value_t = 86_400,
            requires = "hold_snapshot"
        )]
        hold_timeout_seconds: u64,
        /// How long a MySQL/MariaDB coordinator holds the read lock at most, waiting for the
        /// shards to begin their snapshots (writers wait meanwhile).
        #[arg(
            long,
            value_name = "N",
            default_value_t = 60,
            requires = "hold_snapshot"
        )]
        lock_timeout_seconds: u64,
        /// Release the snapshot held for the plan in DIR without a merge (writes DIR/release,
        /// which its coordinator waits for).
        #[arg(long, value_name = "DIR", conflicts_with_all = ["contract", "source", "shards", "key_space", "hold_snapshot"])]
        release: Option<PathBuf>,
        /// Divide shard --shard K of the plan PLAN into --shards N shards (a sub-plan, format
        /// 3): the run `merge` writes of the sub-plan's shard stores is shard K's run for the
        /// merge of PLAN.
        #[arg(long, value_name = "PLAN", requires = "shard", conflicts_with_all = ["contract", "source", "key_space", "hold_snapshot", "release"])]
        within: Option<PathBuf>,
        /// With --within: the shard of PLAN to divide.
        #[arg(long, value_name = "K", requires = "within")]
        shard: Option<u32>,
    },
    /// Merge the shard stores of a plan into one run whose receipt is the single scan's.
    Merge {
        /// The plan the shards were scanned under.
        #[arg(long, value_name = "PLAN")]
        plan: PathBuf,
        /// The store the merged run is written to.
        #[arg(long, value_name = "STORE")]
        out: PathBuf,
        /// The shard stores.
        #[arg(value_name = "SHARD_STORE", required = true)]
        shards: Vec<PathBuf>,
    },
    /// Continue an interrupted, budget-stopped or failed-page run from its stored cursor.
    Resume {
        /// The run (run-N, N or latest).
        run: RunArg,
        /// The source to continue from; defaults to the one the run was started with.
        #[arg(long, value_name = "SPEC")]
        source: Option<String>,
        /// Raise the page budget.
        #[arg(long, value_name = "N")]
        max_pages: Option<u32>,
        /// Raise the record budget.
        #[arg(long, value_name = "N")]
        max_records: Option<u64>,
        /// Raise the byte budget.
        #[arg(long, value_name = "N")]
        max_bytes: Option<u64>,
        /// A new deadline for this session of the run.
        #[arg(long, value_name = "N")]
        deadline_seconds: Option<u64>,
        #[command(flatten)]
        write: WriteOpts,
    },
    /// List the runs of the store, newest first.
    Runs(runs::RunsArgs),
    /// Print a run's receipt (exit 0, 3 or 4 by its status).
    Receipt {
        /// The run (run-N, N or latest).
        run: RunArg,
    },
    /// Recompute a receipt from the store: when every field matches, exit with the receipt's
    /// status (0, 3, 4); 4 when one does not (the first is named), 2 for no receipt.
    Verify {
        /// The receipt file (JSON, as `--json scan` or `--json receipt` print it).
        receipt_file: PathBuf,
    },
    /// Compare the IDs of two runs of one (source, tenant): added, removed, where; with
    /// --across two collections (a migration's source and target), with --content their
    /// records' content digests.
    #[command(after_help = "Examples:\n  scanledger diff run-1 run-2 --all\n  \
        scanledger diff run-1 run-1 --other-store target.redb --across --content --reread")]
    Diff(lists::DiffArgs),
    /// List the IDs a reference has and a run lacks, as ranges with a total.
    #[command(
        after_help = "Examples:\n  scanledger missing run-2 --against run-1\n  \
        scanledger missing run-2 --range customer-1..customer-5000 --all"
    )]
    Missing(lists::MissingArgs),
    /// Verify a migration: one verdict over the scans of its source and target collections.
    #[command(subcommand)]
    Migration(MigrationCommand),
    /// Write a run's IDs (or a label's) in their original form, one per line in codec order,
    /// or as a portable 64-bit roaring bitmap. Exits with the run's status (0, 3, 4) so that
    /// a partial run's export is never taken for a complete inventory.
    Export(evidence::ExportArgs),
    /// Write a run's review packet: one self-contained HTML file (verdict, receipt, coverage
    /// map, violations by page, labels; with --against, what differs from a reference run).
    /// Exits with the run's status (0, 3, 4) after writing the file.
    Report(report::ReportArgs),
    /// Serve a recorded run's IDs in order, a page at a time, with bound page tokens (JSON).
    /// Exits with the run's status (0, 3, 4): a page of a partial run is no inventory's.
    Page(evidence::PageArgs),
    /// Delete a run and everything recorded for it (its IDs, labels, page log, cursor).
    Delete {
        /// The run (run-N, N or latest).
        run: RunArg,
    },
    /// Give the space that deleted runs and old versions held back to the file system.
    /// Needs the store to itself.
    Compact,
    /// Print the reference entry of a violation kind: the rule, the status, what to do.
    Explain {
        /// The kind, as receipts name it (e.g. duplicate_id); none lists every kind.
        kind: Option<String>,
    },
    /// Print a completion script for a shell (e.g. `scanledger completions bash >
    /// /etc/bash_completion.d/scanledger`).
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff): `scanledger man > docs/scanledger.1`.
    Man,
    /// Serve scanledger to agents over MCP (stdio, or streamable HTTP with --http): tools
    /// scan_collection, resume_scan, get_receipt, verify_receipt, diff_runs, missing_ids,
    /// page_run, list_runs; `mcp proxy` fronts another MCP server.
    #[cfg(feature = "mcp")]
    #[command(
        args_conflicts_with_subcommands = true,
        after_help = "Examples:\n  scanledger --store scans.redb mcp --sources sources.json\n  \
        scanledger mcp --sources sources.json --http 127.0.0.1:8750\n  \
        scanledger mcp proxy --config proxy.json\n\n\
        The sources file maps names to source specs ({\"issues\": \"http:github.json\"}): an agent \
        scans a source by name only, never by path, URL or command."
    )]
    Mcp {
        /// The sources an agent may scan: a JSON object of NAME: SPEC.
        #[arg(long, value_name = "FILE")]
        sources: Option<PathBuf>,
        #[command(flatten)]
        serve: mcp::Serve,
        /// `proxy`.
        #[command(subcommand)]
        command: Option<McpCommand>,
    },
}

/// The subcommands of `mcp`.
#[cfg(feature = "mcp")]
#[derive(Debug, Subcommand)]
pub(crate) enum McpCommand {
    /// Front one upstream MCP server: its tools re-exported (every tools/list page followed),
    /// ordinary ones forwarded unchanged, the paginated ones the config declares replaced by
    /// all-or-fail versions that follow every page and answer an inventory or an
    /// incomplete_read.
    Proxy {
        /// The proxy config: {"upstream": {"command": [...]} | {"url": "..."}, "store": PATH,
        /// "paginated": {TOOL: {mapping keys, "contract": {...}}}}.
        #[arg(long, value_name = "FILE")]
        config: PathBuf,
        #[command(flatten)]
        serve: mcp::Serve,
    },
}

/// Options of the commands that write.
#[derive(Debug, Subcommand)]
pub(crate) enum MigrationCommand {
    /// One verdict binding both runs' receipts: `verified` (exit 0) only when both are
    /// verified inventories, their ID sets are equal but for exactly the declared exclusions
    /// and, with --content, every record's content agrees; else `unknown` (3) or `failed` (4),
    /// with the missing, extra and changed IDs and what to run next.
    /// A side given as a source (mysql:CONFIG.json, postgres://USER@HOST/DB?table=T&key=K,
    /// sqlite:PATH?table=T&key=K, ...) is scanned first, both sides at once, each as a durable run in its own store; the same command
    /// after a kill continues them.
    #[command(
        after_help = "Examples:\n  scanledger migration verify --from mysql:my.json --to postgres:pg.json --content\n  \
        scanledger migration verify --from 'sqlite:shop.db?table=orders&key=id' \
        --to 'postgres://app@db/shop?table=orders&key=id' --content amount,email=mail\n  \
        scanledger --store mysql.redb migration verify --from run-1 --to run-1 \
        --other-store pg.redb --content\n  \
        scanledger migration verify --from run-1 --to run-2 --content --reread --exclude excluded.txt"
    )]
    Verify(migration::VerifyArgs),
}

#[derive(Debug, Clone, clap::Args)]
pub(crate) struct WriteOpts {
    /// Make every N-th page checkpoint durable (group commit); the default 1 fsyncs every
    /// page (16 for the sides `migration verify` scans under their default contract, which
    /// restart after a crash). A crash re-fetches at most the N - 1 pages since the last commit.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub checkpoint_every: Option<u32>,
    /// Do not keep the raw cursor that resume needs.
    #[arg(long)]
    pub no_keep_cursors: bool,
    /// Hold the store for this process alone while writing: every checkpoint is one commit of
    /// the store (one fsync), but other processes cannot read the store until the scan ends.
    /// Without it, a checkpoint is one fsync of the page journal beside the store.
    #[arg(long)]
    pub exclusive: bool,
    /// Print a progress line to stderr every few seconds, even off a terminal.
    #[arg(long, conflicts_with = "no_progress")]
    pub progress: bool,
    /// No progress bar, even on a terminal.
    #[arg(long)]
    pub no_progress: bool,
    /// Print `ack run-N page P` to stderr after every committed checkpoint (crash tests).
    #[arg(long, hide = true)]
    pub ack_pages: bool,
    /// Fold the page journal after at most N records instead of 64 (crash tests).
    #[arg(long, hide = true, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=64))]
    pub fold_every: Option<u32>,
}

impl WriteOpts {
    fn store_options(&self) -> StoreOptions {
        let o = StoreOptions::new()
            .keep_cursors(!self.no_keep_cursors)
            .checkpoint_every(self.checkpoint_every.unwrap_or(1))
            .exclusive(self.exclusive);
        match self.fold_every {
            Some(n) => o.fold_every(n),
            None => o,
        }
    }
}

/// Parses the command line, runs it, prints any error; returns the exit code.
pub(crate) fn main() -> i32 {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let cli = match Cli::try_parse_from(&args) {
        Ok(cli) => cli,
        Err(e) => return error::clap_exit(&e, &args),
    };
    output::set_color(cli.color);
    output::init_logs(cli.quiet, cli.verbose);
    let out = Out::new(&cli);
    match run(cli, &out) {
        Ok(code) => code,
        Err(e) => e.print(&out),
    }
}

/// Runs a parsed command line; returns the exit code.
fn run(cli: Cli, out: &Out) -> Result<i32, CliError> {
    match cli.command {
        Command::Scan {
            contract,
            source,
            plan,
            shard,
            shard_from_env,
            write,
        } => match (plan, contract, source) {
            (Some(plan), _, source) => {
                let index = match (shard, shard_from_env) {
                    (Some(k), _) => k,
                    (None, true) => shard::shard_from_env()?,
                    (None, false) => {
                        return Err(
                            CliError::usage("--plan needs --shard K or --shard-from-env")
                                .with_field("--shard"),
                        )
                    }
                };
                shard::scan_shard(out, &plan, index, source.as_deref(), &write)
            }
            (None, Some(contract), Some(source)) => scan::scan(out, &contract, &source, &write),
            _ => Err(CliError::usage(
                "scan needs --contract FILE --source SPEC, or --plan PLAN",
            )),
        },
        Command::Plan {
            release: Some(dir), ..
        } => shard::release(out, &dir),
        Command::Plan {
            within: Some(outer),
            shard: Some(k),
            shards,
            out: dir,
            ..
        } => shard::plan_within(out, &outer, k, shards, dir),
        Command::Plan {
            contract,
            source,
            shards,
            out: dir,
            key_space,
            hold_snapshot,
            hold_timeout_seconds,
            lock_timeout_seconds,
            release: None,
            ..
        } => {
            let (Some(contract), Some(source), Some(shards)) = (contract, source, shards) else {
                return Err(CliError::usage(
                    "plan needs --contract FILE --source SPEC --shards N, or --release DIR",
                ));
            };
            shard::plan(
                out,
                &shard::PlanArgs {
                    contract,
                    source,
                    shards,
                    out: dir,
                    key_space,
                    hold_snapshot,
                    hold_timeout_seconds,
                    lock_timeout_seconds,
                },
            )
        }
        Command::Merge {
            plan,
            out: target,
            shards,
        } => shard::merge(out, &plan, &target, &shards),
        Command::Resume {
            run,
            source,
            max_pages,
            max_records,
            max_bytes,
            deadline_seconds,
            write,
        } => {
            let mut raise = scanledger::Raise::default();
            raise.max_pages = max_pages;
            raise.max_records = max_records;
            raise.max_bytes = max_bytes;
            raise.deadline_seconds = deadline_seconds;
            scan::resume(out, run, source, &raise, &write, None)
        }
        Command::Runs(a) => runs::runs(out, &a),
        Command::Receipt { run } => runs::receipt(out, run),
        Command::Delete { run } => runs::delete(out, run),
        Command::Compact => runs::compact(out),
        Command::Verify { receipt_file } => evidence::verify(out, &receipt_file),
        Command::Diff(a) => lists::diff(out, &a),
        Command::Missing(a) => lists::missing(out, &a),
        Command::Migration(MigrationCommand::Verify(args)) => migration::verify(out, &args),
        Command::Export(a) => evidence::export(out, &a),
        Command::Report(a) => report::report(out, &a),
        Command::Page(a) => evidence::page(out, &a),
        Command::Explain { kind } => docs::explain(out, kind.as_deref()),
        Command::Completions { shell } => docs::completions(shell),
        Command::Man => docs::man(),
        #[cfg(feature = "mcp")]
        Command::Mcp {
            sources,
            serve,
            command,
        } => match command {
            None => mcp::serve(out, sources.as_ref(), &serve),
            Some(McpCommand::Proxy { config, serve }) => mcp::proxy(out, &config, &serve),
        },
    }
}

/// The exit code of a status: 0 verified, 3 unknown, 4 failed.
pub(crate) fn status_exit(s: Status) -> i32 {
    match s {
        Status::Verified => 0,
        Status::Failed => 4,
        // A status this build does not know yet is no verdict: unknown.
        Status::Unknown | _ => 3,
    }
}

/// The exit code of the run a receipt describes: its status's, in every mode (a `count`-mode
/// run answered by the source's own count is `unknown`: its total was never traversed).
pub(crate) fn receipt_exit(r: &Receipt) -> i32 {
    status_exit(r.coverage_status)
}

/// How long `--wait` lets an open wait for a busy store.
fn wait_of(seconds: Option<u64>) -> Option<Duration> {
    seconds.map(Duration::from_secs)
}

/// Opens the store for reading, waiting when `--wait` says so.
pub(crate) fn open_read(out: &Out) -> Result<Store, CliError> {
    Ok(match out.wait {
        Some(w) => Store::open_read_waiting(&out.store, w)?,
        None => Store::open_read(&out.store)?,
    })
}

/// Opens the store for writing, waiting when `--wait` says so.
pub(crate) fn open_write(out: &Out, options: StoreOptions) -> Result<Store, CliError> {
    Ok(match out.wait {
        Some(w) => Store::open_waiting(&out.store, options, w)?,
        None => Store::open(&out.store, options)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }
}
