//! Regressions of the hostile and senior reviews, one test per reproduced
//! defect, through the real binary unless the defect is in the library. Each test says what
//! went wrong, how it showed, and what it simulates.

use serde_json::{json, Value};

use crate::util::{self, Env};

fn run_id(receipt: &Value) -> String {
    receipt["run_id"].as_str().expect("run_id").to_owned()
}

fn receipt_of(env: &Env, run: &str) -> (i32, Value) {
    let (code, out, err) = env.sl(&["--json", "receipt", run]);
    let v = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}{err}"));
    (code, v)
}

/// A replay file from literal lines.
fn replay(env: &Env, name: &str, lines: &[Value]) -> String {
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    format!("replay:{}", env.write(name, &text))
}

/// `count` mode answered by the source's own count exited 0 with `unknown`, while `receipt`
/// and `export` of the same run exited 3; a resume then kept the server's count through a
/// traversal; an `expected_count` that disagreed with the server's count raised nothing.
/// Then the count answered the scan with exit 0 while its receipt said UNKNOWN: the exit
/// code is now the status, always, so a server count nothing traversed
/// exits 3 from scan and receipt alike, keeps its total in `count_total`, cannot be resumed,
/// and a disagreeing expectation is R10.
#[test]
fn count_mode_answers_consistently_and_checks_the_expectation() {
    let env = Env::new();
    let (code, r) = env.scan(
        "count",
        &json!({"source": "s", "mode": "count"}),
        "sim:records=500,count=true",
    );
    assert_eq!(
        (code, r["coverage_status"].as_str()),
        (3, Some("unknown")),
        "{r}"
    );
    assert_eq!(r["count_total"], json!(500));
    let run = run_id(&r);
    let (code, again) = receipt_of(&env, &run);
    assert_eq!(code, 3, "the stored receipt answers the same way: {again}");
    assert_eq!(again["count_total"], json!(500));
    // No IDs were read: the export is no inventory.
    let (code, _, _) = env.sl(&["export", &run]);
    assert_eq!(code, 3);
    let (code, _, err) = env.sl(&["resume", &run]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("answered by the source's own count"), "{err}");

    let (code, r) = env.scan(
        "count-mismatch",
        &json!({"source": "s", "mode": "count", "expected_count": 400}),
        "sim:records=500,count=true",
    );
    assert_eq!(code, 4, "{r}");
    assert_eq!(r["violations"][0]["kind"], json!("count_mismatch"));
}

/// After one `high_water` continuation the snapshot policy stopped applying: pages echoing
/// A, then (after the expired cursor) B, C, A ended `verified` under `block`. The
/// continuation may re-pin once (to B); C is then a snapshot change.
#[test]
fn a_high_water_continuation_repins_once_and_the_policy_applies_after() {
    let env = Env::new();
    let src = replay(
        &env,
        "hw.jsonl",
        &[
            json!({"cursor": null, "items": [1, 2], "next": "c1", "snapshot": "A"}),
            json!({"cursor": "c1", "error": "expired_cursor"}),
            json!({"after": "2", "items": [3], "next": "c2", "snapshot": "B"}),
            json!({"cursor": "c2", "items": [4], "next": "c3", "snapshot": "C"}),
            json!({"cursor": "c3", "items": [5], "next": null, "snapshot": "A"}),
        ],
    );
    let (code, r) = env.scan(
        "hw",
        &json!({"source": "s", "on_expired_cursor": "high_water", "on_snapshot_change": "block"}),
        &src,
    );
    assert_eq!(code, 4, "{r}");
    assert_eq!(r["violations"][0]["kind"], json!("snapshot_changed"));
    assert_eq!(r["violations"][0]["page"], json!(3));
    // One re-pin alone verifies, but only about the live collection.
    let src = replay(
        &env,
        "hw-ok.jsonl",
        &[
            json!({"cursor": null, "items": [1, 2], "next": "c1", "snapshot": "A"}),
            json!({"cursor": "c1", "error": "expired_cursor"}),
            json!({"after": "2", "items": [3], "next": "c2", "snapshot": "B"}),
            json!({"cursor": "c2", "items": [4], "next": null, "snapshot": "B"}),
        ],
    );
    let (code, r) = env.scan(
        "hw-ok",
        &json!({"source": "s", "on_expired_cursor": "high_water"}),
        &src,
    );
    assert_eq!(code, 0, "{r}");
    assert_eq!(r["conclusion_scope"], json!("all_records_live"));
    assert_eq!(r["snapshot_id"], json!("A"));
}

/// The deadline was overrun by up to 2 s (a retry's backoff sleep was not cut at the
/// deadline) and then reported on "page 0". A source that always times out, a 1-second
/// deadline and retries whose backoffs add up past it: the run stops at the deadline, on the
/// page whose request it cut.
#[test]
fn the_deadline_cuts_backoff_and_names_the_page_it_cut() {
    let env = Env::new();
    let src = replay(
        &env,
        "slow.jsonl",
        &[
            json!({"cursor": null, "items": [1], "next": "c1"}),
            json!({"cursor": "c1", "error": "server_error"}),
        ],
    );
    let start = std::time::Instant::now();
    let (code, r) = env.scan(
        "slow",
        &json!({"source": "s", "limits": {"deadline_seconds": 1, "retries": 10}}),
        &src,
    );
    let took = start.elapsed();
    assert_eq!(code, 3, "{r}");
    let v = &r["violations"][0];
    assert_eq!(v["kind"], json!("limit_reached"), "{r}");
    assert_eq!(
        v["page"],
        json!(2),
        "the deadline cut the request of page 2: {r}"
    );
    assert_eq!(r["limits_hit"], json!(["deadline"]));
    // Backoffs of 50, 100, ... 2000 ms would sum to ~10 s; the deadline cuts them at 1 s.
    assert!(took.as_secs_f64() < 4.0, "ran {took:?} past a 1 s deadline");
}

/// A run stopped by R8 was refused for resume with a false reason ("cursor not kept").
#[test]
fn a_run_stopped_by_r8_is_refused_with_the_true_reason() {
    let env = Env::new();
    let src = replay(
        &env,
        "r8.jsonl",
        &[json!({"cursor": null, "items": [1], "next": null})],
    );
    let (code, r) = env.scan(
        "r8",
        &json!({"source": "s", "end_signal": "complete_flag"}),
        &src,
    );
    assert_eq!(code, 3, "{r}");
    let (code, _, err) = env.sl(&["resume", &run_id(&r)]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("completion evidence"), "{err}");
    assert!(!err.contains("not kept"), "{err}");
}

/// `page` served failed and superseded runs with exit 0 while `export` exited 4: a page of a
/// run is never a page of an inventory unless the run is verified.
#[test]
fn page_exits_with_the_runs_status() {
    let env = Env::new();
    let src = replay(
        &env,
        "dup.jsonl",
        &[
            json!({"cursor": null, "items": [1, 2], "next": "c1"}),
            json!({"cursor": "c1", "items": [2], "next": null}),
        ],
    );
    let (code, r) = env.scan("dup", &json!({"source": "s"}), &src);
    assert_eq!(code, 4);
    let (code, out, _) = env.sl(&["page", &run_id(&r)]);
    assert_eq!(code, 4, "{out}");
    let (code, _, _) = env.sl(&["export", &run_id(&r)]);
    assert_eq!(code, 4);
}

/// `page` of a superseded run: a restart leaves the old run with the violation that caused
/// it, so its pages are never an inventory's; `page` exits with its status, as `export` does
/// (4 after a snapshot change, 3 after an expired cursor).
#[test]
fn page_of_a_superseded_run_exits_with_its_status() {
    let env = Env::new();
    let src = replay(
        &env,
        "moved.jsonl",
        &[
            json!({"cursor": null, "items": [1, 2], "next": "c1", "snapshot": "A"}),
            json!({"cursor": "c1", "items": [3], "next": null, "snapshot": "B"}),
            json!({"cursor": null, "items": [1, 2], "next": "c1", "snapshot": "B"}),
        ],
    );
    let (code, r) = env.scan(
        "moved",
        &json!({"source": "s", "on_snapshot_change": "restart"}),
        &src,
    );
    assert_eq!(code, 0, "{r}");
    assert_eq!(r["restarted_from"], json!("run-1"));
    let (code, expired) = env.scan(
        "expired",
        &json!({"source": "t", "page_size": 100, "on_expired_cursor": "restart"}),
        "sim:records=1000,expire_at=5",
    );
    assert_eq!(code, 0, "{expired}");
    assert_eq!(expired["restarted_from"], json!("run-3"));
    for (old, status) in [("run-1", 4), ("run-3", 3)] {
        let (_, header) = receipt_of(&env, old);
        assert!(header["superseded_by"].is_string(), "{header}");
        let (code, out, err) = env.sl(&["page", old, "--size", "10"]);
        assert_eq!(code, status, "page {old}: {out}{err}");
        assert!(err.contains("not pages of a complete inventory"), "{err}");
        let (code, _, _) = env.sl(&["export", old]);
        assert_eq!(code, status, "export {old}");
    }
}

/// Zero budgets (`limits.max_pages`, `max_records`, `max_bytes`, `page_timeout_ms`,
/// `deadline_seconds` = 0) were accepted by some keys and refused by others; a zero budget
/// stops a run before its first page and is always a mistake, so each is refused, placed at
/// its key.
#[test]
fn zero_budgets_are_refused_naming_the_key() {
    let env = Env::new();
    for key in [
        "max_pages",
        "max_records",
        "max_bytes",
        "page_timeout_ms",
        "deadline_seconds",
    ] {
        let contract = env.write(
            &format!("{key}.json"),
            &format!("{{\"source\": \"s\",\n \"limits\": {{\"{key}\": 0}}}}"),
        );
        let (code, out, err) = env.sl(&[
            "--json",
            "scan",
            "--contract",
            &contract,
            "--source",
            "sim:records=10",
        ]);
        assert_eq!(code, 2, "{key}: {out}{err}");
        let e: Value = serde_json::from_str(&err).unwrap_or_else(|e| panic!("{e}: {err}"));
        let e = &e["error"];
        assert_eq!(e["kind"], json!("contract"), "{key}: {err}");
        assert_eq!(
            e["message"],
            json!(format!("key \"limits.{key}\": must be at least 1")),
            "{key}: {err}"
        );
        assert_eq!(e["field"], json!(format!("limits.{key}")), "{key}: {err}");
        assert_eq!(e["line"], json!(2), "{key}: {err}");
        // Nothing was begun.
        assert!(!std::path::Path::new(&env.store).exists(), "{key}");
    }
}

/// `resume` without raised limits fetched one more page each time (max_pages 30 -> 31, 32,
/// 33 pages). It is refused now, naming the budget to raise, and nothing is fetched.
#[test]
fn resume_without_raising_the_budget_fetches_nothing() {
    let env = Env::new();
    let (code, r) = env.scan(
        "budget",
        &json!({"source": "s", "page_size": 10, "limits": {"max_pages": 3}}),
        "sim:records=100",
    );
    assert_eq!(code, 3);
    let run = run_id(&r);
    for _ in 0..2 {
        let (code, _, err) = env.sl(&["resume", &run]);
        assert_eq!(code, 2, "{err}");
        assert!(err.contains("--max-pages"), "{err}");
    }
    let (_, after) = receipt_of(&env, &run);
    assert_eq!(after["pages_observed"], json!(3));
    let (code, out, err) = env.sl(&["--json", "resume", &run, "--max-pages", "100"]);
    assert_eq!(code, 0, "{out}{err}");
}

/// `resume` of a sample run switched mode and limits only in memory: the receipt it printed
/// failed `verify` on `mode`. The effective contract is recorded with the run.
#[test]
fn a_resumed_sample_records_its_effective_contract() {
    let env = Env::new();
    let (code, r) = env.scan(
        "sample",
        &json!({"source": "s", "page_size": 10, "mode": {"sample": 20}}),
        "sim:records=100",
    );
    assert_eq!(code, 3, "{r}");
    let run = run_id(&r);
    let (code, out, err) = env.sl(&["--json", "resume", &run]);
    assert_eq!(code, 0, "{err}");
    let resumed: Value = serde_json::from_str(&out).expect("receipt");
    assert_eq!(resumed["mode"], json!("all"));
    let file = env.write("resumed.json", &out);
    let (code, out, err) = env.sl(&["verify", &file]);
    assert_eq!(code, 0, "{out}{err}");
}

/// `resume --deadline-seconds 9223372036854775807` panicked (exit 101): the deadline was added
/// to the clock unchecked. A deadline past the bound is a clear input error.
#[test]
fn a_huge_deadline_is_refused_not_a_panic() {
    let env = Env::new();
    let (_, r) = env.scan(
        "d",
        &json!({"source": "s", "page_size": 10, "limits": {"max_pages": 1}}),
        "sim:records=100",
    );
    let (code, _, err) = env.sl(&[
        "resume",
        &run_id(&r),
        "--deadline-seconds",
        "9223372036854775807",
        "--max-pages",
        "50",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

/// A damaged run counter made the next scan silently overwrite an existing run; `export` and
/// `page` of it then answered as verified with the wrong IDs. A new run's ID is checked
/// against the runs table and a counter behind it is reported as damage.
#[test]
fn a_damaged_run_counter_never_overwrites_a_run() {
    let env = Env::new();
    let first = env.scan_ints("a", "s", "t", &[1, 2, 3]);
    assert_eq!(run_id(&first), "run-1");
    crate::store_files::write_one::<&str, &[u8]>(
        &env.store,
        false,
        "meta",
        "next_run",
        1u64.to_le_bytes().as_slice(),
    );
    let contract = env.write("c.json", r#"{"source": "s", "tenant": "t"}"#);
    let (code, _, err) = env.sl(&["scan", "--contract", &contract, "--source", "sim:records=5"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("run counter"), "{err}");
    let (code, out, _) = env.sl(&["export", "run-1"]);
    assert_eq!(code, 0);
    assert_eq!(out, "1\n2\n3\n", "run-1 is intact");
}

/// `export RUN --output` naming the store file itself (or a link to it) destroyed the store,
/// exit 0.
#[test]
fn export_never_overwrites_the_store() {
    let env = Env::new();
    let r = env.scan_ints("a", "s", "t", &[1, 2, 3]);
    let before = std::fs::read(&env.store).expect("store bytes");
    let link = env.path().join("link.redb");
    std::os::unix::fs::symlink(&env.store, &link).expect("symlink");
    for target in [env.store.clone(), link.to_string_lossy().into_owned()] {
        let (code, _, err) = env.sl(&["export", &run_id(&r), "--output", &target]);
        assert_eq!(code, 2, "{err}");
        assert!(err.contains("store file itself"), "{err}");
    }
    assert_eq!(std::fs::read(&env.store).expect("store bytes"), before);
}

/// Raw cursors stayed in the store file after a run had finished. Now no raw cursor is
/// written in clear at all (the resume request is encrypted under a per-run key), and a
/// finished run keeps neither request nor key. The key was deleted from a redb table, whose
/// freed page still held it (and the page journal carried it in every record): it now lives
/// only in a slot of the key file, zeroed when the run finishes. A canary cursor and the
/// run's key are looked for in the bytes of the store, its journal and its key file while the
/// run is resumable and after it finished.
#[test]
fn no_raw_cursor_is_ever_in_the_store_file() {
    let env = Env::new();
    let canary = "CANARYCURSOR7f3a9b";
    let src = replay(
        &env,
        "canary.jsonl",
        &[
            json!({"cursor": null, "items": [1, 2], "next": canary}),
            json!({"cursor": canary, "items": [3], "next": null}),
        ],
    );
    let c = json!({"source": "s", "limits": {"max_pages": 1}});
    let (code, r) = env.scan("canary", &c, &src);
    assert_eq!(code, 3);
    let find = |hay: &[u8], needle: &[u8]| hay.windows(needle.len()).position(|w| w == needle);
    // The store, its page journal and its key file: every file beside the store.
    let files = || -> Vec<(String, Vec<u8>)> {
        let store = std::path::Path::new(&env.store);
        let dir = store.parent().expect("dir");
        let name = store
            .file_name()
            .expect("name")
            .to_string_lossy()
            .into_owned();
        std::fs::read_dir(dir)
            .expect("dir")
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with(&name))
            })
            .map(|p| (p.display().to_string(), std::fs::read(&p).expect("read")))
            .collect()
    };
    let no_canary = |when: &str| {
        for (name, bytes) in files() {
            assert_eq!(
                find(&bytes, canary.as_bytes()),
                None,
                "the raw cursor is in {name} {when}"
            );
        }
    };
    no_canary("while the run is resumable");
    // The run's key, read from its slot of the key file (docs/FORMAT.md §10b): header 32
    // bytes, then slots of u64le run, 32-byte key, check, zeros.
    let keys = std::fs::read(format!("{}.keys", env.store)).expect("key file");
    let slot = keys
        .get(32..)
        .unwrap_or_default()
        .chunks_exact(64)
        .find(|s| s[..8] == 1u64.to_le_bytes())
        .expect("a resumable run has its key's slot");
    let key = slot[8..40].to_vec();
    for (name, bytes) in files() {
        if !name.ends_with(".keys") {
            assert_eq!(find(&bytes, &key), None, "the cursor key is in {name}");
        }
    }
    let (code, _, err) = env.sl(&["resume", &run_id(&r), "--max-pages", "5"]);
    assert_eq!(code, 0, "{err}");
    no_canary("after the run finished");
    for (name, bytes) in files() {
        assert_eq!(
            find(&bytes, &key),
            None,
            "the key of the finished run is still in {name}"
        );
    }
    let (code, out, err) = env.sl(&["resume", &run_id(&r)]);
    assert_eq!(
        code, 2,
        "a finished run keeps nothing to resume from: {out}{err}"
    );
}

/// Text output printed source-controlled strings raw: a snapshot name with escape codes or a
/// line break could forge a `VERIFIED` line in a failed run's receipt. They are escaped.
#[test]
fn source_strings_cannot_forge_terminal_lines() {
    let env = Env::new();
    let forged = "snap\n  VERIFIED\u{1b}[2K\u{202e}";
    let src = replay(
        &env,
        "forge.jsonl",
        &[
            json!({"cursor": null, "items": [1], "next": "c1", "snapshot": forged}),
            json!({"cursor": "c1", "items": [1], "next": null, "snapshot": forged}),
        ],
    );
    let c = env.write("c.json", r#"{"source": "s"}"#);
    let (code, out, _) = env.sl(&["scan", "--contract", &c, "--source", &src]);
    assert_eq!(code, 4, "{out}");
    assert!(
        !out.contains('\u{1b}'),
        "an escape code reached the terminal: {out:?}"
    );
    assert!(
        !out.contains('\u{202e}'),
        "a bidi override reached the terminal: {out:?}"
    );
    assert!(
        !out.lines().any(|l| l.trim_start().starts_with("VERIFIED")),
        "a forged line: {out}"
    );
}

/// With the `string` codec, one flipped bit in a stored string made `export` print a wrong
/// ID with exit 0, and the original receipt still passed `verify`: the Merkle root covered the
/// interned numbers, not the strings. Now the root is over the strings' digests and every
/// stored string is checked against its digest when read.
#[test]
fn a_damaged_stored_string_is_detected_by_export_and_verify() {
    let env = Env::new();
    let ids: Vec<Value> = (0..50)
        .map(|i| json!(format!("user-{i:03}@example.org")))
        .collect();
    let src = env.replay("u.jsonl", &ids, 20, "snap");
    let (code, r) = env.scan("u", &json!({"source": "users", "id_codec": "string"}), &src);
    assert_eq!(code, 0);
    let receipt_file = env.write("r.json", &r.to_string());
    let mut bytes = std::fs::read(&env.store).expect("store");
    let needle = b"user-017@example.org";
    // Every copy (the dictionary both ways, and old pages): user-017 -> user-117, still a
    // plausible ID.
    let places: Vec<usize> = bytes
        .windows(needle.len())
        .enumerate()
        .filter(|(_, w)| *w == needle)
        .map(|(i, _)| i)
        .collect();
    assert!(!places.is_empty(), "the string is stored");
    for at in places {
        bytes[at + 5] ^= 0x01;
    }
    std::fs::write(&env.store, &bytes).expect("write");
    let (code, out, err) = env.sl(&["export", &run_id(&r)]);
    assert_ne!(code, 0, "export printed a damaged ID: {out}");
    assert!(!out.contains("user-117"), "{out}");
    assert!(err.contains("does not match its digest"), "{err}");
    let (code, out, err) = env.sl(&["verify", &receipt_file]);
    assert_ne!(
        code, 0,
        "a receipt verified against a damaged store: {out}{err}"
    );
}

/// A string run's root depended on the order in which its strings were first interned, so
/// two stores, a merge of shards or an outside verifier could not agree on it. The same set
/// of strings in two stores, scanned in different orders after different other runs, has one
/// root, which the Python verifier recomputes from the strings alone.
#[test]
fn a_string_runs_root_is_a_function_of_its_strings() {
    let a = Env::new();
    let b = Env::new();
    let ids: Vec<Value> = (0..40).map(|i| json!(format!("k-{i}"))).collect();
    let mut reversed = ids.clone();
    reversed.reverse();
    // Store b first interns other strings, so its interned numbers differ.
    let other: Vec<Value> = (0..7).map(|i| json!(format!("other-{i}"))).collect();
    let src = b.replay("o.jsonl", &other, 10, "s");
    b.scan("o", &json!({"source": "x", "id_codec": "string"}), &src);
    let src_a = a.replay("a.jsonl", &ids, 15, "s");
    let src_b = b.replay("b.jsonl", &reversed, 9, "s");
    let (ca, ra) = a.scan("a", &json!({"source": "x", "id_codec": "string"}), &src_a);
    let (cb, rb) = b.scan("b", &json!({"source": "x", "id_codec": "string"}), &src_b);
    assert_eq!((ca, cb), (0, 0));
    assert_eq!(ra["merkle_root"], rb["merkle_root"]);
    assert_eq!(ra["partitions"], rb["partitions"]);
}

/// The first `page` call on a store failed "locked" while a scan wrote: it opened the store
/// writable to create its token key. The key is made with the store, so `page` only reads.
#[test]
fn page_works_while_another_process_scans() {
    let env = Env::new();
    let r = env.scan_ints("a", "s", "t", &(1..=50).collect::<Vec<_>>());
    let contract = env.write("c.json", r#"{"source": "s"}"#);
    let mut writer = std::process::Command::new(util::bin())
        .args([
            "--store",
            &env.store,
            "scan",
            "--contract",
            &contract,
            "--source",
            "sim:records=2000,delay_ms=20",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn");
    std::thread::sleep(std::time::Duration::from_millis(300));
    let (code, out, err) = env.sl(&["page", &run_id(&r), "--size", "10"]);
    let _ = writer.kill();
    let _ = writer.wait();
    assert_eq!(code, 0, "{out}{err}");
    let v: Value = serde_json::from_str(&out).expect("page");
    assert_eq!(v["ids"].as_array().map(Vec::len), Some(10));
    assert!(v["next_token"].is_string());
}

/// Read-only commands wrote: opening a crashed store to read repaired it by opening it for
/// writing (the file changed after `runs`). A writer is killed mid-scan; `runs`, `receipt`
/// and `verify` then read it, and the file's bytes do not change.
#[test]
fn reading_a_crashed_store_never_writes_it() {
    let env = Env::new();
    let contract = env.write("c.json", r#"{"source": "s", "page_size": 10}"#);
    let mut writer = std::process::Command::new(util::bin())
        .args([
            "--store",
            &env.store,
            "scan",
            "--contract",
            &contract,
            "--source",
            "sim:records=100000,delay_ms=5",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn");
    std::thread::sleep(std::time::Duration::from_millis(500));
    writer.kill().expect("kill");
    let _ = writer.wait();
    let before = std::fs::read(&env.store).expect("store");
    let (code, out, err) = env.sl(&["--json", "runs"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("\"interrupted\""),
        "a dead writer's run reads as interrupted: {out}"
    );
    let (code, out, err) = env.sl(&["--json", "receipt", "run-1"]);
    assert_eq!(code, 3, "{out}{err}");
    let file = env.write("r.json", &out);
    let (code, out, err) = env.sl(&["verify", &file]);
    // The receipt matches its store; it exits with its status (unknown), as the scan did.
    assert_eq!(code, 3, "{out}{err}");
    assert!(out.contains("the receipt matches store"), "{out}");
    assert_eq!(
        std::fs::read(&env.store).expect("store"),
        before,
        "a read command changed the file"
    );
    // The next writer repairs it and the run resumes.
    let (code, _, err) = env.sl(&["resume", "run-1", "--source", "sim:records=100000"]);
    assert_eq!(code, 0, "{err}");
}

/// `verify` of a running run's receipt read the store in several transactions and, during a
/// concurrent scan, reported the store as inconsistent ("the store records X, its evidence
/// recomputes Y"). Every read of a command now goes through one snapshot: the receipt may be
/// stale (a receipt mismatch), never the store inconsistent with itself.
#[test]
fn verify_during_a_scan_never_sees_a_torn_store() {
    let env = Env::new();
    let contract = env.write("c.json", r#"{"source": "s", "page_size": 5}"#);
    let mut writer = std::process::Command::new(util::bin())
        .args([
            "--store",
            &env.store,
            "scan",
            "--contract",
            &contract,
            "--source",
            "sim:records=20000,delay_ms=2",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn");
    let mut checked = 0;
    for _ in 0..40 {
        std::thread::sleep(std::time::Duration::from_millis(25));
        let (code, out, _) = env.sl(&["--json", "receipt", "run-1"]);
        if code != 3 {
            continue;
        }
        let file = env.write("running.json", &out);
        let (_, out, err) = env.sl(&["--json", "verify", &file]);
        let report: Value = match serde_json::from_str(&out) {
            Ok(v) => v,
            Err(_) => continue,
        };
        for m in report["mismatches"].as_array().into_iter().flatten() {
            assert_ne!(m["found_in"], json!("store"), "a torn read: {m} {err}");
        }
        checked += 1;
    }
    let _ = writer.kill();
    let _ = writer.wait();
    assert!(checked > 5, "too few checks ran ({checked})");
}

/// Content digests survive the store: the per-leaf accumulators are written with each
/// checkpoint and read back, so a stored run's receipt carries the same `content_root` as the
/// scan printed, and `verify` accepts it; two runs with one changed record differ in exactly
/// that record's leaf.
#[test]
fn content_roots_survive_the_store_and_name_the_changed_leaf() {
    use scanledger::{FetchError, Item, Page, PageRequest, PageSource, RawId};
    struct Rows(Vec<(u64, u8)>);
    impl PageSource for Rows {
        async fn fetch(&mut self, req: &PageRequest) -> Result<Page, FetchError> {
            let start: usize = req.request.cursor().map_or(0, |c| c.parse().unwrap_or(0));
            let end = (start + 100).min(self.0.len());
            let mut page = Page::default();
            for (id, tag) in &self.0[start..end] {
                let mut item = Item::new(RawId::Int(*id));
                item.content = Some([*tag; 32]);
                page.items.push(item);
            }
            page.next = (end < self.0.len()).then(|| end.to_string());
            Ok(page)
        }
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let mut store =
        scanledger::Store::open(&dir.path().join("c.redb"), scanledger::StoreOptions::new())
            .expect("store");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime");
    let rows: Vec<(u64, u8)> = (0..1000).map(|i| (i * 200, 1)).collect();
    let mut changed = rows.clone();
    changed[777].1 = 2; // the record with ID 155_400, in partition 2
    let a = rt
        .block_on(scanledger::scan(
            &scanledger::Contract::new("t"),
            &mut Rows(rows),
            &mut store,
        ))
        .expect("scan a");
    let b = rt
        .block_on(scanledger::scan(
            &scanledger::Contract::new("t"),
            &mut Rows(changed),
            &mut store,
        ))
        .expect("scan b");
    let printed = a.receipt();
    assert!(printed.content_root.is_some());
    let snap = store.read().expect("read");
    let stored = snap.receipt(a.meta.run_id).expect("receipt");
    assert_eq!(stored.content_root, printed.content_root);
    assert!(scanledger::verify_receipt(&snap, &stored)
        .expect("verify")
        .is_empty());
    assert_ne!(b.receipt().content_root, printed.content_root);
    assert_eq!(b.receipt().merkle_root, printed.merkle_root, "the same IDs");
    let (ca, cb) = (
        snap.content(a.meta.run_id).expect("content a"),
        snap.content(b.meta.run_id).expect("content b"),
    );
    let differing: Vec<u64> = ca
        .iter()
        .filter(|(leaf, acc)| cb.get(leaf) != Some(acc))
        .map(|(leaf, _)| *leaf)
        .collect();
    assert_eq!(differing, vec![155_400 >> 16]);
}
