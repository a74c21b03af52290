//! The run lifecycle commands: `runs` (filtered, aligned, coloured), `receipt`, `delete` and
//! `compact`.
//!
//! `runs` tells a live scan (`running`) from one whose writer is gone (`interrupted`), and
//! says how to continue the latter.

use clap::builder::TypedValueParser;
use scanledger::{Emphasis, RunFilter, RunState, RunsQuery, StoreOptions};

use super::output::{bold, state_style, status_style, styled};
use super::{open_read, open_write, receipt_exit, show, CliError, Out, RunArg};

/// The arguments of `runs`.
#[derive(Debug, clap::Args)]
pub(crate) struct RunsArgs {
    /// Only runs with this status or in this state.
    #[arg(long, value_name = "STATUS", value_parser = clap::builder::PossibleValuesParser::new(RunFilter::NAMES).try_map(|s| s.parse::<RunFilter>()))]
    pub status: Option<RunFilter>,
    /// Only runs of this source (the contract's `source`).
    #[arg(long, value_name = "NAME")]
    pub source: Option<String>,
    /// At most N runs.
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,
}

/// `runs [--status S] [--source NAME] [--limit N]`.
pub(crate) fn runs(out: &Out, args: &RunsArgs) -> Result<i32, CliError> {
    let mut query = RunsQuery::default();
    (query.filter, query.source, query.limit) = (args.status, args.source.clone(), args.limit);
    let store = open_read(out)?;
    let report = scanledger::runs_report(&store.read()?, &query)?;
    if out.json {
        out.json_list(
            &report.runs,
            // Plain data with string-keyed maps only: it always serializes.
            &serde_json::to_value(&report).unwrap_or_default(),
        )?;
        return Ok(0);
    }
    let runs = &report.runs;
    if runs.is_empty() {
        let what = if report.store_total == 0 {
            "the store has no run yet".to_owned()
        } else {
            format!(
                "no run of the {} matches",
                super::output::count(report.store_total as u64, "run", "runs")
            )
        };
        out.emit(&what)?;
        return Ok(0);
    }
    out.emit(&report.text_with(&|part, text| match part {
        Emphasis::Status(s) => styled(status_style(s), text),
        Emphasis::State(s) => styled(state_style(s), text),
        _ => bold(text),
    }))?;
    if let Some(r) = runs.iter().find(|r| r.state == RunState::Interrupted) {
        let run: scanledger::RunId = r.run_id.parse().map_err(CliError::internal)?;
        out.note(&interrupted(out, run, r.stopped_by.as_ref()));
    }
    Ok(0)
}

/// The note of an interrupted run: why it stands still (its writer gone, or the error that
/// stopped it) and the command that continues it.
fn interrupted(out: &Out, run: scanledger::RunId, stop: Option<&scanledger::StopCause>) -> String {
    let why = stop.map_or_else(
        || "its writer is gone".to_owned(),
        scanledger::StopCause::sentence,
    );
    format!(
        "{run} is interrupted ({why}); continue it with `{}`",
        out.resume_command(run)
    )
}

/// `receipt RUN`.
pub(crate) fn receipt(out: &Out, run: RunArg) -> Result<i32, CliError> {
    let store = open_read(out)?;
    let snap = store.read()?;
    let run = run.resolve(&snap)?;
    let report = scanledger::receipt_report(&snap, run)?;
    // With `--json` the receipt alone, in its format (`verify` reads it back); how the run
    // stands (`stopped_by`) is in `runs --json`.
    if out.json {
        out.json_value(&report.receipt)?;
    } else {
        out.emit(&show::receipt_text(&report.receipt))?;
        if let Some(server) = &report.mcp_server {
            out.emit(&format!(
                "mcp server: {}",
                scanledger::terminal_safe(server)
            ))?;
        }
        if report.state == RunState::Interrupted {
            out.note(&interrupted(out, run, report.stopped_by.as_ref()));
        }
    }
    Ok(receipt_exit(&report.receipt))
}

/// `delete RUN`.
pub(crate) fn delete(out: &Out, run: RunArg) -> Result<i32, CliError> {
    let mut store = open_write(out, StoreOptions::new())?;
    let run = run.resolve(&store.read()?)?;
    store.delete_run(run)?;
    if out.json {
        out.json_value(&serde_json::json!({ "deleted": run.to_string() }))?;
    } else {
        out.emit(&format!(
            "{run} deleted; `scanledger compact` gives its space back to the file system"
        ))?;
    }
    Ok(0)
}

/// `compact`.
pub(crate) fn compact(out: &Out) -> Result<i32, CliError> {
    let path = out.store.clone();
    let before = std::fs::metadata(&path).map(|m| m.len()).ok();
    let mut store = open_write(out, StoreOptions::new())?;
    store.compact()?;
    drop(store);
    let after = std::fs::metadata(&path).map(|m| m.len()).ok();
    if out.json {
        out.json_value(&serde_json::json!({
            "store": path.display().to_string(),
            "bytes_before": before,
            "bytes_after": after,
        }))?;
    } else {
        match (before, after) {
            (Some(b), Some(a)) => out.emit(&format!(
                "store {} compacted: {b} bytes before, {a} after",
                scanledger::terminal_safe(&path.display().to_string())
            ))?,
            _ => out.emit(&format!(
                "store {} compacted",
                scanledger::terminal_safe(&path.display().to_string())
            ))?,
        }
    }
    Ok(0)
}
