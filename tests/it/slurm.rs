//! docs/runners/slurm.sh submitted as is to a real Slurm cluster (one node, started by
//! scripts/slurm-one-node.sh, as `.ci/run` does) against the real PostgreSQL (127.0.0.1:5432,
//! database `test`): the coordinator holds the snapshot as a job of its own while a writer
//! changes the table, a shard task is killed and requeued, another killed and left failed, a
//! third never runs (missing), the merge after the array is not verified and keeps the
//! snapshot, the failed and missing shards are retried
//! and the second merge has the root of one scan of the same snapshot. The DSN reaches the
//! jobs from a 0600 file only, never Slurm's state directory.
//!
//! Without a Slurm cluster the test says "SKIPPED" loudly, and fails when CI is set.
#![allow(clippy::unwrap_used, clippy::expect_used)] // Tests: a failed expectation is the report.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::postgres::{Env, Pg, DSN};
use crate::util;

/// Runs a command; (success, stdout, stderr).
fn cmd(program: &str, args: &[&str]) -> (bool, String, String) {
    match Command::new(program).args(args).output() {
        Ok(out) => (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        ),
        Err(e) => (false, String::new(), format!("{program}: {e}")),
    }
}

/// Whether a Slurm controller answers and its node takes jobs: SKIPPED on a laptop, a failure
/// in CI.
fn slurm() -> bool {
    // Without a configuration the Slurm commands retry for a minute before they fail.
    let conf = std::env::var_os("SLURM_CONF")
        .map_or_else(|| PathBuf::from("/etc/slurm/slurm.conf"), PathBuf::from);
    let (ok, out, err) = if conf.exists() {
        cmd("scontrol", &["ping"])
    } else {
        (false, String::new(), format!("no {}", conf.display()))
    };
    let nodes = if ok {
        cmd("sinfo", &["-h", "-o", "%T"]).1
    } else {
        String::new()
    };
    let up = ok
        && out.contains("is UP")
        && nodes
            .lines()
            .any(|s| s.starts_with("idle") || s.starts_with("mixed") || s.starts_with("alloc"));
    if up {
        return true;
    }
    let why = format!(
        "scontrol ping: {}{} sinfo: {}",
        out.trim(),
        err.trim(),
        nodes.trim()
    );
    assert!(
        std::env::var_os("CI").is_none(),
        "no Slurm cluster (scripts/slurm-one-node.sh starts one), and CI is set: {why}"
    );
    eprintln!("SKIPPED: no Slurm cluster ({why})");
    false
}

/// A job's `scontrol show job` fields (`JobState`, `ExitCode`...).
fn job(id: &str) -> String {
    let (_, out, _) = cmd("scontrol", &["show", "job", "-o", id]);
    out
}

fn field(job: &str, name: &str) -> String {
    job.split_whitespace()
        .find_map(|f| f.strip_prefix(&format!("{name}=")))
        .unwrap_or("")
        .to_owned()
}

fn state(id: &str) -> String {
    field(&job(id), "JobState")
}

/// Waits (at most `secs`) until `ok`; the message says what did not happen.
fn wait(what: &str, secs: u64, mut ok: impl FnMut() -> bool) {
    let start = Instant::now();
    while !ok() {
        assert!(
            start.elapsed() < Duration::from_secs(secs),
            "after {secs} s: {what}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Waits for a job to end; its `ExitCode` (`3:0`).
fn ended(id: &str, secs: u64) -> String {
    let mut last = String::new();
    wait(
        &format!("job {id} has not ended: {}", job(id)),
        secs,
        || {
            last = job(id);
            matches!(
                field(&last, "JobState").as_str(),
                "COMPLETED" | "FAILED" | "CANCELLED" | "TIMEOUT" | "NODE_FAIL" | "OUT_OF_MEMORY"
            )
        },
    );
    field(&last, "ExitCode")
}

/// The jobs the test submitted, cancelled when it ends (also when it fails).
struct Jobs(Vec<String>);

impl Drop for Jobs {
    fn drop(&mut self) {
        for id in &self.0 {
            let _ = cmd("scancel", &[id]);
        }
    }
}

/// `sh docs/runners/slurm.sh ARGS` as a user runs it, with the variables it reads, and a
/// DSN exported in the submitting shell that must not reach any job.
fn recipe(args: &[&str], dsn_file: &Path, decoy: &str) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/runners/slurm.sh");
    let out = Command::new("sh")
        .arg(&script)
        .args(args)
        .env("SCANLEDGER_BIN", util::bin())
        .env("SCANLEDGER_DSN_FILE", dsn_file)
        .env("SCANLEDGER_DSN", decoy)
        .env("SCANLEDGER_HOLD_SECONDS", "900")
        .env("SCANLEDGER_PLAN_WAIT", "120")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "slurm.sh {args:?}: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// `key=value` from the recipe's output.
fn printed(out: &str, key: &str) -> String {
    field(out, key)
}

fn receipt(store: &Path) -> Value {
    let (code, out, err) = util::run(&[
        "--json",
        "--store",
        &store.to_string_lossy(),
        "receipt",
        "latest",
    ]);
    // `receipt` exits with the run's status (3 for unknown).
    assert!([0, 3].contains(&code), "receipt exited {code}: {err}");
    serde_json::from_str(&out).unwrap()
}

/// Every file under `dir` whose bytes contain `needle`.
fn files_containing(dir: &Path, needle: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return found;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            found.extend(files_containing(&p, needle));
        } else if let Ok(bytes) = std::fs::read(&p) {
            if bytes.windows(needle.len()).any(|w| w == needle.as_bytes()) {
                found.push(p);
            }
        }
    }
    found
}

/// The recipe end to end: a killed task requeued, a killed task left failed and a task that
/// never ran (the merge after the array is `unknown`, names both, and the snapshot stays
/// held), both retried and merged again: the merged root is that of one scan of the held snapshot, though a
/// writer changed the table meanwhile; the snapshot is then released and the coordinator's
/// job ends. The DSN is read from its file inside the jobs only.
#[test]
fn the_slurm_recipe_merges_in_one_snapshot_through_a_killed_and_a_missing_task() {
    let Some(pg) = Pg::server() else { return };
    if !slurm() {
        return;
    }
    // 20,000 IDs over about 12 partitions (4 shards with data); 300 ms a page, so a shard
    // takes a few seconds and can be killed in the middle.
    let t = pg.table(
        "slurm",
        "CREATE TABLE $T (id bigint PRIMARY KEY); \
         INSERT INTO $T SELECT g * 40 FROM generate_series(1, 20000) g;",
    );
    let env = Env::new();
    let dir = env.dir.path();
    // Slurm's state directory must be readable by the test: on the one-node cluster it is.
    let (_, config, _) = cmd("scontrol", &["show", "config"]);
    let state_dir = config
        .lines()
        .find_map(|l| l.strip_prefix("StateSaveLocation"))
        .and_then(|l| l.split('=').nth(1))
        .map(|s| PathBuf::from(s.trim()))
        .expect("StateSaveLocation");
    let marker = format!("sl_slurm_secret_{}", std::process::id());
    let dsn_file = dir.join("dsn");
    std::fs::write(&dsn_file, format!("{DSN} application_name={marker}")).unwrap();
    Command::new("chmod")
        .args(["600", &dsn_file.to_string_lossy()])
        .status()
        .unwrap();
    let cfg = json!({"dsn_env": "SCANLEDGER_DSN", "table": t.name, "key": "id",
                     "page_delay_ms": 300});
    let source = format!(
        "postgres:{}",
        util::write(dir, "source.json", &cfg.to_string())
    );
    let contract = env.contract("c.json", &json!({"source": t.name, "page_size": 500}));
    let run = dir.join("run");
    let run_s = run.to_string_lossy().into_owned();
    let decoy = format!("{DSN} application_name={marker}_submit");

    let out = recipe(
        &["submit", &run_s, &contract, &source, "4"],
        &dsn_file,
        &decoy,
    );
    let (plan_job, array) = (printed(&out, "plan_job"), printed(&out, "array_job"));
    let merge_job = printed(&out, "merge_job");
    let mut jobs = Jobs(vec![plan_job.clone(), array.clone(), merge_job.clone()]);
    // Task 3 never runs: its shard is missing from the first merge.
    let (ok, _, err) = cmd("scancel", &[&format!("{array}_3")]);
    assert!(ok, "scancel: {err}");

    wait("no plan.json", 120, || run.join("plan.json").exists());
    let plan: Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("plan.json")).unwrap()).unwrap();
    let snapshot = plan["snapshot_id"].as_str().unwrap().to_owned();
    assert_eq!(plan["snapshot_held"], true);
    // Writes the snapshot must not see.
    pg.exec(&format!(
        "INSERT INTO {0} SELECT g * 40 + 1 FROM generate_series(1, 5000) g; \
         DELETE FROM {0} WHERE id % 400 = 0;",
        t.name
    ));

    // Tasks 1 and 2 killed in the middle of their scans; task 1 is requeued (it continues
    // from its store), task 2 is left failed.
    let kill = |k: u32| {
        let task = format!("{array}_{k}");
        let store = run.join(format!("shard-{k}.redb"));
        wait(&format!("shard {k} never began"), 60, || {
            state(&task) == "RUNNING" && store.exists()
        });
        std::thread::sleep(Duration::from_millis(800));
        assert_eq!(
            state(&task),
            "RUNNING",
            "shard {k} ended before it was killed"
        );
        let (ok, _, err) = cmd("scancel", &["--full", "--signal=KILL", &task]);
        assert!(ok, "scancel --signal=KILL: {err}");
        ended(&task, 60);
        task
    };
    let task1 = kill(1);
    let task2 = kill(2);
    let (ok, _, err) = cmd("scontrol", &["requeue", &task1]);
    assert!(ok, "scontrol requeue {task1}: {err}");

    // The merge after the array: shard 2 unfinished, shard 3 missing, not verified, the snapshot stays held.
    let code = ended(&merge_job, 180);
    assert_eq!(code, "3:0", "{}", job(&merge_job));
    assert!(!run.join("shard-3.redb").exists(), "task 3 ran");
    let first = receipt(&run.join("merged.redb"));
    assert_eq!(first["coverage_status"], "unknown", "{first}");
    let findings: Vec<&str> = first["shards"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["finding"].as_str().unwrap())
        .collect();
    assert_eq!(
        findings,
        ["merged", "merged", "unfinished", "missing"],
        "{first}"
    );
    // The requeued task continued the attempt it began (one run in its store), and said so.
    assert_eq!(first["shards"][1]["coverage_status"], "verified", "{first}");
    assert_eq!(first["shards"][1]["run_id"], "run-1", "{first}");
    let log1 =
        std::fs::read_to_string(run.join(format!("slurm-scanledger-shard-{array}_1.out"))).unwrap();
    assert!(log1.contains("continuing it"), "{log1}");
    let left = state(&task2);
    assert!(
        left == "FAILED" || left == "CANCELLED",
        "task 2 is {left}: {}",
        job(&task2)
    );
    let merge_log =
        std::fs::read_to_string(run.join(format!("slurm-scanledger-merge-{merge_job}.out")))
            .unwrap();
    assert!(
        merge_log.contains("stays held") && merge_log.contains("retry"),
        "{merge_log}"
    );
    assert!(!run.join("release").exists());
    assert_eq!(state(&plan_job), "RUNNING", "the snapshot was released");

    // No DSN in Slurm's state (the running coordinator's environment is there).
    let plan_id: u64 = plan_job.parse().unwrap();
    let held_env = state_dir.join(format!("hash.{}/job.{plan_id}/environment", plan_id % 10));
    assert!(held_env.exists(), "{held_env:?}");
    let leaked = files_containing(&state_dir, &marker);
    assert!(leaked.is_empty(), "the DSN is in {leaked:?}");

    // One scan of the held snapshot, while it is held.
    let pinned = env.contract(
        "pinned.json",
        &json!({"source": t.name, "page_size": 500, "snapshot_id": snapshot}),
    );
    let direct = env.source("direct", &t.name, "id", json!({}));
    let (code, single, err) = env.scan(&pinned, &direct);
    assert_eq!(code, 0, "{err}");
    assert_eq!(single["unique_ids_observed"], 20000);

    // The retry: shards 2 and 3 submitted again (2 continues its run), merged again, verified with the single scan's root.
    let out = recipe(&["retry", &run_s, "2", "3"], &dsn_file, &decoy);
    let merge2 = printed(&out, "merge_job");
    jobs.0.push(printed(&out, "retry_job"));
    jobs.0.push(merge2.clone());
    let code = ended(&merge2, 180);
    assert_eq!(code, "0:0", "{}", job(&merge2));
    let merged = receipt(&run.join("merged.redb"));
    for key in [
        "merkle_root",
        "unique_ids_observed",
        "snapshot_id",
        "query_digest",
    ] {
        assert_eq!(merged[key], single[key], "{key}");
    }
    assert_eq!(merged["coverage_status"], "verified");
    assert_eq!(merged["shards"][2]["run_id"], "run-1", "{merged}");
    assert_eq!(merged["conclusion_scope"], "all_records_in_snapshot");
    assert_eq!(ended(&plan_job, 60), "0:0", "{}", job(&plan_job));
    let coordinator =
        std::fs::read_to_string(run.join(format!("slurm-scanledger-plan-{plan_job}.out"))).unwrap();
    assert!(
        coordinator.contains("released snapshot") && coordinator.contains("a verified merge"),
        "{coordinator}"
    );
    drop(jobs);
}
