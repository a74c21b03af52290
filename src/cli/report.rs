//! The `report` command (issue 15): gathers a run's evidence, renders the self-contained HTML
//! review packet, writes it, and says where.
//!
//! Owns the output path and the exit code only: `report::gather` reads the store and
//! `report::render` is pure. Exits with the run's status (0, 3, 4) after writing, like
//! `export`, so a script never takes the report of a partial run for a complete inventory.

use std::path::{Path, PathBuf};

use super::emit;
use scanledger::{Error, RunId, Store};

/// The file written when `-o` is absent: `report-run-N.html` in the current directory.
fn default_output(run: RunId) -> PathBuf {
    PathBuf::from(format!("report-{run}.html"))
}

/// `report RUN [--against OTHER] [-o FILE]`.
pub(crate) fn report(
    store_path: &Path,
    run: RunId,
    against: Option<RunId>,
    output: Option<&Path>,
    json: bool,
) -> Result<i32, Error> {
    let store = Store::open_read(store_path)?;
    let input = scanledger::gather_report(&store.read()?, run, against)?;
    let html = scanledger::render_report(&input);
    let path = output.map_or_else(|| default_output(run), Path::to_path_buf);
    std::fs::write(&path, html.as_bytes()).map_err(|e| Error::Io {
        path: path.clone(),
        source: e,
    })?;
    let shown = std::fs::canonicalize(&path).unwrap_or_else(|_| path.clone());
    let status = input.receipt.coverage_status;
    if json {
        let v = serde_json::json!({
            "run_id": run.to_string(),
            "against": against.map(|a| a.to_string()),
            "coverage_status": status,
            "report": shown.display().to_string(),
            "bytes": html.len(),
        });
        emit(&v.to_string())?;
    } else {
        let vs = against.map_or_else(String::new, |a| format!(" against {a}"));
        emit(&format!(
            "{run} ({}){vs}: report written to {}\n  open file://{}",
            status.as_str(),
            path.display(),
            shown.display()
        ))?;
    }
    Ok(super::status_exit(status))
}
