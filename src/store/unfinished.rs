//! Finding the run a repeated command should continue: the newest run of a scope, read from
//! the same source, that stopped short of its end and can go on (`migration verify` with a
//! source on a side continues its killed or interrupted scan rather than begin again).
//!
//! Never: a run of another scope or another source, a finished run that reached its end, a
//! superseded run (its restart is newer), or a run another process writes now.

use super::{check_resumable, Raise, RunState, Store};
use crate::contract::Scope;
use crate::receipt::RunId;
use crate::reconcile::Status;
use crate::store::ReadError;

/// Whether a recorded source is `spec`, with or without the provenance a run appends after
/// a `#` (an MCP server's name).
fn same_source(recorded: &str, spec: &str) -> bool {
    recorded == spec
        || recorded
            .strip_prefix(spec)
            .is_some_and(|rest| rest.starts_with('#'))
}

impl Store {
    /// The newest run of `scope` read from `spec` (the source as runs record it, without
    /// provenance), when it stopped short of its end and `resume` could continue it without
    /// raising a budget: killed (`interrupted`), or stopped on Ctrl-C or a transient failure
    /// (`finished` with status `unknown`). `None` when the newest run of the scope from that
    /// source is anything else, or there is none.
    ///
    /// # Errors
    /// `ReadError` when the store cannot be read.
    pub fn unfinished_run(&self, scope: &Scope, spec: &str) -> Result<Option<RunId>, ReadError> {
        let snap = self.read()?;
        for summary in snap.runs()? {
            let h = snap.header(summary.run_id)?;
            if h.contract.scope != *scope
                || !h
                    .source_spec
                    .as_deref()
                    .is_some_and(|s| same_source(s, spec))
            {
                continue;
            }
            let stopped_short = h.state == RunState::Interrupted
                || (h.state == RunState::Finished && h.coverage_status == Status::Unknown);
            if !stopped_short {
                return Ok(None);
            }
            let loaded = snap.load(h.run_id)?;
            return Ok(check_resumable(&loaded, &Raise::default())
                .is_ok()
                .then_some(h.run_id));
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::same_source;

    #[test]
    fn a_recorded_source_matches_with_or_without_its_provenance() {
        assert!(same_source("mysql:/a/my.json", "mysql:/a/my.json"));
        assert!(same_source("mcp:/a/m.json#server=x 1.0", "mcp:/a/m.json"));
        assert!(!same_source("mysql:/a/my.json2", "mysql:/a/my.json"));
        assert!(!same_source("mysql:/b/my.json", "mysql:/a/my.json"));
    }
}
