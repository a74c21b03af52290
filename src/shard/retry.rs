//! What a merge that is not verified asks for: the shards to scan again, each with why, so
//! every face (the CLI's text and `--json`, a runner's script) names the same ones; and what
//! a merge means for the snapshot its plan holds ([`held_after_merge`]). Pure: no IO.

use std::path::Path;

use super::Plan;
use crate::receipt::{ShardEntry, ShardFinding};
use crate::reconcile::Status;

/// The shards a merge that is not verified asks to scan again, with why: every shard not
/// merged whole with a verified run of its own.
#[must_use]
pub fn retry_shards(shards: &[ShardEntry]) -> Vec<(u32, String)> {
    shards
        .iter()
        .filter_map(|e| {
            let why = match (e.finding, e.coverage_status) {
                (ShardFinding::Merged, Some(Status::Verified)) => return None,
                (ShardFinding::Missing, _) => "has no run in the shard stores".to_owned(),
                (ShardFinding::Unfinished, _) => "has not reached its end".to_owned(),
                (ShardFinding::Conflict, _) => {
                    "has several attempts (merge one store of it)".to_owned()
                }
                (_, Some(Status::Unknown)) => "ended unknown (scanning it again continues its attempt where it can; otherwise scan it into a new store and merge that one instead)".to_owned(),
                (_, status) => format!(
                    "ended {} (its store holds that finished attempt: scan it into a new store and merge that one instead)",
                    status.map_or("-", Status::as_str)
                ),
            };
            Some((e.index, why))
        })
        .collect()
}

/// The file, beside a plan, whose appearance asks the plan's coordinator to release its held
/// snapshot (a verified merge writes it, and `plan --release`).
pub const RELEASE_FILE: &str = "release";

/// What a merge means for the snapshot its plan holds (`None` from [`held_after_merge`] for a
/// plan that holds none): released by a verified merge only, and otherwise the shards to scan
/// again in it. Its JSON is the merge's `snapshot` object.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct HeldAfterMerge {
    /// The held snapshot.
    pub snapshot_id: Option<String>,
    /// The merge is verified, so the coordinator releases the snapshot.
    pub released: bool,
    /// The shards to scan again in the held snapshot ([`retry_shards`]); none for a
    /// synchronized MySQL/MariaDB snapshot, which holds nothing a shard could rejoin.
    pub retry_shards: Vec<u32>,
    /// Why each shard of `retry_shards` is asked for.
    #[serde(skip)]
    pub why: Vec<(u32, String)>,
    /// The snapshot was synchronized by a read lock while the shards began (no retry joins it).
    #[serde(skip)]
    pub synchronized: bool,
}

/// What a merge of `plan` whose merged run is `verified` or not, with the merged `shards`,
/// means for the snapshot the plan holds; `None` when it holds none.
#[must_use]
pub fn held_after_merge(
    plan: &Plan,
    verified: bool,
    shards: &[ShardEntry],
) -> Option<HeldAfterMerge> {
    if !plan.snapshot_held {
        return None;
    }
    let synchronized = plan.synchronized();
    let why = if synchronized {
        Vec::new()
    } else {
        retry_shards(shards)
    };
    Some(HeldAfterMerge {
        snapshot_id: plan.snapshot_id.clone(),
        released: verified,
        retry_shards: why.iter().map(|(k, _)| *k).collect(),
        why,
        synchronized,
    })
}

impl HeldAfterMerge {
    /// The sentence a merge says of the held snapshot: released, or held and what to do next
    /// (the plan read from `plan_path`, in `dir`).
    #[must_use]
    pub fn text(&self, plan_path: &Path, dir: &Path) -> String {
        if self.released {
            return format!(
                "the merge is verified: the coordinator releases the held snapshot ({} written)",
                dir.join(RELEASE_FILE).display()
            );
        }
        let snapshot = self.snapshot_id.as_deref().unwrap_or("-");
        if self.synchronized {
            // Each shard held its own part of a synchronized snapshot, in its own connection:
            // a shard scanned again cannot rejoin it once the coordinator's read lock is gone.
            return format!(
                "the merge is not verified; snapshot {snapshot} was synchronized by a read lock while the shards began, so a shard scanned again cannot join it: make a new plan (plan --hold-snapshot) and scan every shard of it"
            );
        }
        let mut text = format!(
            "the merge is not verified, so snapshot {snapshot} stays held by the plan's coordinator (while it runs)"
        );
        if self.why.is_empty() {
            text.push_str(
                "; every shard is verified: the merge's own findings above say what differs",
            );
        } else {
            let named: Vec<String> = self
                .why
                .iter()
                .map(|(k, why)| format!("shard {k} {why}"))
                .collect();
            text.push_str(&format!(
                ": {}. Scan each again with `scanledger --store STORE scan --plan {} --shard K` (it continues an unfinished attempt) and merge again",
                named.join("; "),
                plan_path.display()
            ));
        }
        text.push_str(&format!(
            "; `scanledger plan --release {}` releases the snapshot without a merge",
            dir.display()
        ));
        text
    }
}
