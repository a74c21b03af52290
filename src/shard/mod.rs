//! Shards: one scan cut into key ranges that ordinary job runners scan side by side, and
//! merged back into one run whose receipt is the single scan's (docs/REFERENCE.md, shards).
//!
//! `plan` is pure (the plan file, its digest, the split of the key space); `merge_into` reads
//! the shard stores through their `Snapshot`s in bounded batches and streams the merged run
//! into the merged store (`merge`, the same rules with the union in memory, returns the merged
//! state for `Store::write_merged`). Neither does network IO; the statistics a plan is cut
//! by and the snapshot a coordinator holds come from the source (`AnySource::key_bounds`,
//! `AnySource::hold_snapshot`).

mod merge;
mod plan;
mod retry;
mod stream;
#[cfg(test)]
mod tests;

pub use merge::{merge, Merged, ShardStore};
pub use plan::{split, Plan, PlanError, Split, PLAN_BYTES_MAX, PLAN_FORMAT};
pub use retry::retry_shards;
pub use stream::{merge_into, MergeError, MergedRun};
