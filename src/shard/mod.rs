//! Shards: one scan cut into key ranges that ordinary job runners scan side by side, and
//! merged back into one run whose receipt is the single scan's (docs/REFERENCE.md, shards).
//!
//! `plan` is pure (the plan file, its digest, the split of the key space); `merge_into` reads
//! the shard stores through their `Snapshot`s in bounded batches and streams the merged run
//! into the merged store (`merge`, the same rules with the union in memory, returns the merged
//! state for `Store::write_merged`). Neither does network IO; the statistics a plan is cut by
//! come from the source (`AnySource::key_bounds`, `AnySource::key_cuts`). `sync` is the held
//! snapshot's part of a runner, through the source: the coordinator's hold and its wait for
//! the shards' `joined-K`, and a shard's join.

mod files;
mod merge;
mod plan;
mod retry;
mod runner;
mod split;
mod stream;
mod sync;
#[cfg(test)]
mod tests;
mod within;
#[cfg(test)]
mod within_tests;

pub use files::{plan_summary, shard_contract_path, write_plan_dir, PlanDirError};
pub use merge::{merge, Merged, ShardStore};
pub use plan::{
    check_plannable, split, split_at, Plan, PlanError, ShardsError, Split, Unplannable,
    PLAN_BYTES_MAX, PLAN_FORMAT,
};
pub use retry::{held_after_merge, retry_shards, HeldAfterMerge, RELEASE_FILE};
pub use runner::{attempt_of, index_from, index_from_env, Attempt, ShardEnvError, SHARD_ENV};
pub use split::{split_for, SplitError};
pub use stream::{merge_into, MergeError, MergedRun};
pub use sync::{
    hold, join, joined_file, joined_path, not_joined, ping_every, released_by, wait_for_joins,
    HoldError, JoinWait, Joined,
};
pub use within::{split_within, PLAN_FORMAT_WITHIN};
