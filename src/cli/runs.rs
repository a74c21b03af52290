//! The run lifecycle commands: `runs` (filtered, aligned, coloured), `receipt`, `delete` and
//! `compact`.
//!
//! `runs` tells a live scan (`running`) from one whose writer is gone (`interrupted`), and
//! says how to continue the latter.

use scanledger::{RunState, RunsQuery, Status, StoreOptions};

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
    /// The library's query for this filter.
    fn query(f: Option<StatusFilter>, source: Option<&str>, limit: Option<usize>) -> RunsQuery {
        let mut q = RunsQuery::default();
        match f {
            Some(StatusFilter::Verified) => q.status = Some(Status::Verified),
            Some(StatusFilter::Unknown) => q.status = Some(Status::Unknown),
            Some(StatusFilter::Failed) => q.status = Some(Status::Failed),
            Some(StatusFilter::Running) => q.state = Some(RunState::Running),
            Some(StatusFilter::Interrupted) => q.state = Some(RunState::Interrupted),
            Some(StatusFilter::Finished) => q.state = Some(RunState::Finished),
            Some(StatusFilter::Superseded) => q.state = Some(RunState::Superseded),
            None => {}
        }
        q.source = source.map(str::to_owned);
        q.limit = limit;
        q
    }
}

/// `runs [--status S] [--source NAME] [--limit N]`.
pub(crate) fn runs(
    out: &Out,
    status: Option<StatusFilter>,
    source: Option<&str>,
    limit: Option<usize>,
) -> Result<i32, CliError> {
    let store = open_read(out)?;
    let snap = store.read()?;
    let report = scanledger::runs_report(&snap, &StatusFilter::query(status, source, limit))?;
    if out.json {
        out.json_list(
            &report.runs,
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
    let plain = anstyle::Style::new();
    // The MCP server each run spoke to, as it introduced itself; a column only when any did.
    let servers: Vec<Option<String>> = runs
        .iter()
        .map(|r| {
            let run: scanledger::RunId = r.run_id.parse().ok()?;
            let spec = snap.header(run).ok()?.source_spec?;
            server_of(&spec).map(str::to_owned)
        })
        .collect();
    let with_servers = servers.iter().any(Option::is_some);
    let mut columns = vec![
        ("RUN", false),
        ("STATE", false),
        ("STATUS", false),
        ("PAGES", true),
        ("UNIQUE IDS", true),
        ("SOURCE", false),
        ("TENANT", false),
        ("STARTED", false),
    ];
    if with_servers {
        columns.push(("MCP SERVER", false));
    }
    let mut table = Table::new(&columns);
    for (r, server) in runs.iter().zip(&servers) {
        let mut row = vec![
            (r.run_id.clone(), plain),
            (r.state.clone(), state_style(&r.state)),
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
        ];
        if with_servers {
            let shown = server.as_deref().unwrap_or("-");
            row.push((scanledger::terminal_safe(shown).into_owned(), plain));
        }
        table.row(row);
    }
    out.emit(&table.render())?;
    if let Some(r) = runs
        .iter()
        .find(|r| r.state == RunState::Interrupted.as_str())
    {
        let run: scanledger::RunId = r.run_id.parse().map_err(CliError::internal)?;
        out.note(&format!(
            "{run} is interrupted (its writer is gone); continue it with `{}`",
            out.resume_command(run)
        ));
    }
    Ok(0)
}

/// The MCP server a recorded source spec spoke to (`NAME VERSION`), for an MCP run.
fn server_of(spec: &str) -> Option<&str> {
    spec.rsplit_once(scanledger::PROVENANCE_MARK)
        .map(|(_, server)| server)
}

/// `receipt RUN`.
pub(crate) fn receipt(out: &Out, run: RunArg) -> Result<i32, CliError> {
    let store = open_read(out)?;
    let snap = store.read()?;
    let run = run.resolve(&snap)?;
    let receipt = snap.receipt(run)?;
    let header = snap.header(run)?;
    let state = header.state;
    if out.json {
        out.json_value(&receipt)?;
    } else {
        out.emit(&show::receipt_text(&receipt))?;
        if let Some(server) = header.source_spec.as_deref().and_then(server_of) {
            out.emit(&format!(
                "mcp server: {}",
                scanledger::terminal_safe(server)
            ))?;
        }
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
