//! The run lifecycle commands: `runs` (filtered, aligned, coloured), `receipt`, `delete` and
//! `compact`.
//!
//! `runs` tells a live scan (`running`) from one whose writer is gone (`interrupted`), and
//! says how to continue the latter.

use scanledger::{RunState, RunSummary, Status, StoreOptions};
use serde::Serialize;

use super::output::{state_style, status_style, Table};
use super::{open_read, open_write, receipt_exit, show, CliError, Out, RunArg};

/// What `runs --status` selects: a coverage status or a lifecycle state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum StatusFilter {
    /// Coverage verified.
    Verified,
    /// Coverage unknown.
    Unknown,
    /// Enumeration failed.
    Failed,
    /// Being written by a live process.
    Running,
    /// Recorded as running, with no live writer: resume it.
    Interrupted,
    /// Stopped.
    Finished,
    /// Replaced by a restart.
    Superseded,
}

impl StatusFilter {
    fn keeps(self, r: &RunSummary) -> bool {
        match self {
            StatusFilter::Verified => r.coverage_status == Status::Verified,
            StatusFilter::Unknown => r.coverage_status == Status::Unknown,
            StatusFilter::Failed => r.coverage_status == Status::Failed,
            StatusFilter::Running => r.state == RunState::Running,
            StatusFilter::Interrupted => r.state == RunState::Interrupted,
            StatusFilter::Finished => r.state == RunState::Finished,
            StatusFilter::Superseded => r.state == RunState::Superseded,
        }
    }
}

/// One run as `runs --json` prints it (docs/REFERENCE.md §8).
#[derive(Serialize)]
struct RunRow<'a> {
    run_id: String,
    source: &'a str,
    tenant: Option<&'a str>,
    state: &'static str,
    coverage_status: Status,
    pages_observed: u32,
    unique_ids_observed: u64,
    started_at: &'a str,
    finished_at: Option<&'a str>,
}

/// `runs [--status S] [--source NAME] [--limit N]`.
pub(crate) fn runs(
    out: &Out,
    status: Option<StatusFilter>,
    source: Option<&str>,
    limit: Option<usize>,
) -> Result<i32, CliError> {
    let store = open_read(out)?;
    let all = store.read()?.runs()?;
    let runs: Vec<&RunSummary> = all
        .iter()
        .filter(|r| status.is_none_or(|s| s.keeps(r)))
        .filter(|r| source.is_none_or(|s| r.source == s))
        .take(limit.unwrap_or(usize::MAX))
        .collect();
    if out.json {
        let rows: Vec<RunRow<'_>> = runs
            .iter()
            .map(|r| RunRow {
                run_id: r.run_id.to_string(),
                source: &r.source,
                tenant: r.tenant.as_deref(),
                state: r.state.as_str(),
                coverage_status: r.coverage_status,
                pages_observed: r.pages_observed,
                unique_ids_observed: r.unique_ids_observed,
                started_at: &r.started_at,
                finished_at: r.finished_at.as_deref(),
            })
            .collect();
        out.json_list(&rows, &serde_json::json!({ "runs": rows }))?;
        return Ok(0);
    }
    if runs.is_empty() {
        let what = if all.is_empty() {
            "the store has no run yet".to_owned()
        } else {
            format!(
                "no run of the {} matches",
                super::output::count(all.len() as u64, "run", "runs")
            )
        };
        out.emit(&what)?;
        return Ok(0);
    }
    let plain = anstyle::Style::new();
    let mut table = Table::new(&[
        ("RUN", false),
        ("STATE", false),
        ("STATUS", false),
        ("PAGES", true),
        ("UNIQUE IDS", true),
        ("SOURCE", false),
        ("TENANT", false),
        ("STARTED", false),
    ]);
    for r in &runs {
        table.row(vec![
            (r.run_id.to_string(), plain),
            (r.state.as_str().to_owned(), state_style(r.state)),
            (
                r.coverage_status.as_str().to_owned(),
                status_style(r.coverage_status),
            ),
            (r.pages_observed.to_string(), plain),
            (r.unique_ids_observed.to_string(), plain),
            (scanledger::terminal_safe(&r.source).into_owned(), plain),
            (
                scanledger::terminal_safe(r.tenant.as_deref().unwrap_or("-")).into_owned(),
                plain,
            ),
            (r.started_at.clone(), plain),
        ]);
    }
    out.emit(&table.render())?;
    if let Some(r) = runs.iter().find(|r| r.state == RunState::Interrupted) {
        out.note(&format!(
            "{} is interrupted (its writer is gone); continue it with `{}`",
            r.run_id,
            out.resume_command(r.run_id)
        ));
    }
    Ok(0)
}

/// `receipt RUN`.
pub(crate) fn receipt(out: &Out, run: RunArg) -> Result<i32, CliError> {
    let store = open_read(out)?;
    let snap = store.read()?;
    let run = run.resolve(&snap)?;
    let receipt = snap.receipt(run)?;
    let state = snap.header(run)?.state;
    if out.json {
        out.json_value(&receipt)?;
    } else {
        out.emit(&show::receipt_text(&receipt))?;
        if state == RunState::Interrupted {
            out.note(&format!(
                "{run} is interrupted (its writer is gone); continue it with `{}`",
                out.resume_command(run)
            ));
        }
    }
    Ok(receipt_exit(&receipt))
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
