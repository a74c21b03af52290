//! The `report` command: gathers a run's evidence, renders the self-contained HTML
//! review packet, writes it, and says where.
//!
//! Owns the output path and the exit code only: `report::gather` reads the store and
//! `report::render` is pure. Exits with the run's status (0, 3, 4) after writing, like
//! `export`, so a script never takes the report of a partial run for a complete inventory.

use std::path::{Path, PathBuf};

use super::{open_read, status_exit, CliError, Out, RunArg};
use scanledger::RunId;

/// The file written when `-o` is absent: `report-run-N.html` in the current directory.
fn default_output(run: RunId) -> PathBuf {
    PathBuf::from(format!("report-{run}.html"))
}

/// The arguments of `report`.
#[derive(Debug, clap::Args)]
pub(crate) struct ReportArgs {
    /// The run (run-N, N or latest).
    pub run: RunArg,
    /// A reference run of the same (source, tenant) to compare with.
    #[arg(long, value_name = "RUN")]
    pub against: Option<RunArg>,
    /// The HTML file to write [default: report-run-N.html in the current directory].
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: Option<PathBuf>,
}

/// `report RUN [--against OTHER] [-o FILE]`.
pub(crate) fn report(out: &Out, args: &ReportArgs) -> Result<i32, CliError> {
    let output = args.output.as_deref();
    let store = open_read(out)?;
    let snap = store.read()?;
    let run = args.run.resolve(&snap)?;
    let against = args.against.map(|a| a.resolve(&snap)).transpose()?;
    let input = scanledger::gather_report(&snap, run, against)?;
    drop(snap);
    let html = scanledger::render_report(&input);
    let path = output.map_or_else(|| default_output(run), Path::to_path_buf);
    super::lists::refuse_store_as_output(&out.store, &path)?;
    std::fs::write(&path, html.as_bytes()).map_err(|e| CliError::io("write", &path, &e))?;
    let shown = std::fs::canonicalize(&path).unwrap_or_else(|_| path.clone());
    let status = input.receipt.coverage_status;
    if out.json {
        let v = serde_json::json!({
            "run_id": run.to_string(),
            "against": against.map(|a| a.to_string()),
            "coverage_status": status,
            "report": shown.display().to_string(),
            "bytes": html.len(),
        });
        out.json_value(&v)?;
    } else {
        let vs = against.map_or_else(String::new, |a| format!(" against {a}"));
        out.emit(&format!(
            "{run} ({}){vs}: report written to {}\n  open file://{}",
            status.as_str(),
            scanledger::terminal_safe(&path.display().to_string()),
            scanledger::terminal_safe(&shown.display().to_string())
        ))?;
    }
    Ok(status_exit(status))
}
