//! What a merge that is not verified asks for: the shards to scan again, each with why, so
//! every face (the CLI's text and `--json`, a runner's script) names the same ones.
//! Pure: no IO.

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
