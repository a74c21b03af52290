//! A plan's directory, as every runner reads it: `shard-K.json` for each shard's contract,
//! then `plan.json`, written last by rename so that a runner waiting for it never reads half
//! of it; a release file left by an earlier plan in the same directory is removed first.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::{Plan, RELEASE_FILE};

/// A file of a plan's directory that could not be written.
#[derive(Debug, thiserror::Error)]
#[error("cannot {action} {}: {source}", path.display())]
#[non_exhaustive]
pub struct PlanDirError {
    /// What was being done: `create`, `remove`, `write` or `rename`.
    pub action: &'static str,
    /// The file or directory.
    pub path: PathBuf,
    /// The system's error.
    #[source]
    pub source: std::io::Error,
}

fn at<'a>(
    action: &'static str,
    path: &'a Path,
) -> impl FnOnce(std::io::Error) -> PlanDirError + 'a {
    move |source| PlanDirError {
        action,
        path: path.to_owned(),
        source,
    }
}

/// Writes `plan` into `dir` (created if absent). Returns the paths of `plan.json` and of the
/// release file a coordinator watches.
///
/// # Errors
/// The first file that could not be written, with the system's error.
pub fn write_plan_dir(plan: &Plan, dir: &Path) -> Result<(PathBuf, PathBuf), PlanDirError> {
    std::fs::create_dir_all(dir).map_err(at("create", dir))?;
    let release = dir.join(RELEASE_FILE);
    if release.exists() {
        std::fs::remove_file(&release).map_err(at("remove", &release))?;
    }
    for k in 0..plan.shards.len() {
        let Some(c) = u32::try_from(k).ok().and_then(|k| plan.shard_contract(k)) else {
            break;
        };
        // A `Value` always serializes (its keys are strings).
        let text = serde_json::to_string_pretty(&c.to_value()).unwrap_or_default();
        let file = shard_contract_path(dir, k);
        std::fs::write(&file, text).map_err(at("write", &file))?;
    }
    let path = dir.join("plan.json");
    let tmp = dir.join(".plan.json.tmp");
    std::fs::write(&tmp, plan.to_json()).map_err(at("write", &tmp))?;
    std::fs::rename(&tmp, &path).map_err(at("rename", &path))?;
    Ok((path, release))
}

/// Where shard `k`'s contract is written in `dir`.
#[must_use]
pub fn shard_contract_path(dir: &Path, k: usize) -> PathBuf {
    dir.join(format!("shard-{k}.json"))
}

/// What `plan --json` prints of a plan written at `path` in `dir`: its digests, snapshot,
/// split and shards with their contracts' files.
#[must_use]
pub fn plan_summary(plan: &Plan, path: &Path, dir: &Path) -> Value {
    json!({
        "plan": path.display().to_string(),
        "plan_digest": plan.digest(),
        "contract_digest": plan.contract_digest(),
        "snapshot_id": plan.snapshot_id,
        "snapshot_held": plan.snapshot_held,
        "split": {"by": plan.split.by, "lo": plan.split.lo, "last": plan.split.last},
        "shards": plan.shards.iter().enumerate().map(|(k, r)| json!({
            "index": k,
            "key_range": r.to_value(),
            "contract": shard_contract_path(dir, k).display().to_string(),
        })).collect::<Vec<_>>(),
    })
}
