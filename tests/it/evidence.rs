//! Evidence through the real binary: receipts and `verify` (tamper tests), `diff`,
//! `missing`, `export`, `page` tokens, and the independent Python verifier.

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::{json, Value};

use crate::util::Env;

type TestResult = Result<(), Box<dyn std::error::Error>>;

/// The receipt fields of docs/REFERENCE.md §7, with exactly those names.
const RECEIPT_FIELDS: &[&str] = &[
    "run_id",
    "source",
    "tenant",
    "query_digest",
    "snapshot_id",
    "mode",
    "pages_observed",
    "records_expected",
    "records_observed",
    "unique_ids_observed",
    "duplicate_ids",
    "cursor_chain_digest",
    "terminal_cursor_observed",
    "limits_hit",
    "coverage_status",
    "conclusion_scope",
    "violations",
    "merkle_root",
    "partitions",
    "labels",
    "missing_id_ranges",
    "restarts",
    "started_at",
    "finished_at",
    "format_version",
];

fn run_id(receipt: &Value) -> String {
    receipt["run_id"].as_str().expect("run_id").to_owned()
}

fn json_out(out: &str) -> Value {
    serde_json::from_str(out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"))
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .expect("an array")
        .iter()
        .map(|s| s.as_str().expect("a string").to_owned())
        .collect()
}

/// A labelled, tenant-scoped, snapshot-pinned run of 20 000 IDs over several partitions.
fn labelled_run(env: &Env) -> Value {
    let contract = json!({
        "source": "customers", "tenant": "acme", "query": {"active": true},
        "id_codec": "int", "page_size": 500, "expected_count": 20000
    });
    let (code, receipt) = env.scan(
        "labelled",
        &contract,
        "sim:records=20000,ids=random,label_every=7",
    );
    assert_eq!(code, 0, "{receipt}");
    receipt
}

#[test]
fn receipt_json_has_every_documented_field_and_text_names_them() -> TestResult {
    let env = Env::new();
    let receipt = labelled_run(&env);
    let obj = receipt.as_object().ok_or("receipt is not an object")?;
    for field in RECEIPT_FIELDS {
        assert!(obj.contains_key(*field), "receipt lacks {field}: {receipt}");
    }
    let label = &receipt["labels"]["needs_migration"];
    assert_eq!(label["count"], json!(20000 / 7));
    assert!(label["ranges"].as_array().ok_or("ranges")?.len() <= 32);
    assert!(label["ranges_total"].as_u64().ok_or("ranges_total")? >= 32);

    let (code, text, _) = env.sl(&["receipt", &run_id(&receipt)]);
    assert_eq!(code, 0);
    for word in [
        "VERIFIED",
        "merkle root",
        "chain",
        "needs_migration",
        "partitions",
    ] {
        assert!(text.contains(word), "text receipt lacks {word}:\n{text}");
    }
    Ok(())
}

#[test]
fn untouched_receipts_verify() -> TestResult {
    let env = Env::new();
    let receipt = labelled_run(&env);
    let file = env.write("r.json", &serde_json::to_string_pretty(&receipt)?);
    let (code, out, err) = env.sl(&["verify", &file]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("verified"), "{out}");

    // The receipt `receipt RUN` prints later verifies too, in JSON.
    let (_, stored, _) = env.sl(&["--json", "receipt", &run_id(&receipt)]);
    assert_eq!(
        json_out(&stored),
        receipt,
        "scan-time and stored receipts differ"
    );
    let (code, out, _) = env.sl(&["--json", "verify", &file]);
    assert_eq!(code, 0);
    let report = json_out(&out);
    assert_eq!(report["verified"], json!(true));
    assert_eq!(report["mismatches"], json!([]));

    // A run that stopped early (unknown) has an authentic receipt as well; it matches its
    // store, and says so with its status, never as "verified", and exits with that status.
    let contract = json!({"source": "customers", "page_size": 10, "limits": {"max_pages": 3}});
    let (code, partial) = env.scan("partial", &contract, "sim:records=100");
    assert_eq!(code, 3, "{partial}");
    let file = env.write("partial.json", &partial.to_string());
    let (code, out, err) = env.sl(&["verify", &file]);
    assert_eq!(code, 3, "{out}{err}");
    assert!(
        out.contains("the receipt matches store") && out.contains("its status is unknown"),
        "{out}"
    );
    assert!(!out.contains("verified"), "{out}");
    let (code, out, _) = env.sl(&["--json", "verify", &file]);
    assert_eq!(code, 3);
    let report = json_out(&out);
    assert_eq!(
        (
            &report["matches"],
            &report["verified"],
            &report["coverage_status"]
        ),
        (&json!(true), &json!(false), &json!("unknown"))
    );
    Ok(())
}

/// A different value of the same JSON type for a receipt field, so the tampered receipt
/// still parses and verify must catch it by recomputation.
fn tampered(field: &str, v: &Value) -> Value {
    match (field, v) {
        ("coverage_status", _) => json!("unknown"),
        ("id_codec", _) => json!(if v == "string" { "int" } else { "string" }),
        ("conclusion_scope", _) => json!(if v == "none" {
            "all_records_live"
        } else {
            "none"
        }),
        ("end_signal", _) => json!(if v == "both" { "cursor_absent" } else { "both" }),
        ("labels", Value::Object(m)) if !m.is_empty() => {
            let mut m = m.clone();
            for l in m.values_mut() {
                l["count"] = json!(l["count"].as_u64().unwrap_or(0) + 1);
            }
            Value::Object(m)
        }
        ("labels", _) => json!({"x": {"count": 1, "ranges": ["1..1"], "ranges_total": 1}}),
        ("violations", _) => json!([{"kind": "duplicate_id", "page": 1, "detail": "x"}]),
        ("limits_hit", _) => json!(["max_pages"]),
        ("missing_id_ranges", Value::Null) => json!({"ranges": [], "ranges_total": 0}),
        ("records_expected" | "count_total", Value::Null) => json!(7),
        (_, Value::Null) => json!("run-77"),
        (_, Value::Bool(b)) => json!(!b),
        (_, Value::Number(n)) => json!(n.as_u64().unwrap_or(0) + 1),
        (_, Value::String(s)) if s.starts_with("sha256:") => {
            let mut s = s.clone();
            let last = if s.ends_with('0') { "1" } else { "0" };
            s.pop();
            s.push_str(last);
            json!(s)
        }
        (_, Value::String(s)) => json!(format!("{s}1")),
        (_, other) => panic!("no tampering for {field}: {other}"),
    }
}

#[test]
fn every_tampered_field_is_rejected_and_named() -> TestResult {
    let env = Env::new();
    let receipt = labelled_run(&env);
    let fields: Vec<String> = receipt
        .as_object()
        .ok_or("receipt")?
        .keys()
        .cloned()
        .collect();
    assert!(fields.len() >= RECEIPT_FIELDS.len());
    for field in &fields {
        if field == "format_version" {
            // Another format version is another format: refused as unusable (exit 2), below.
            continue;
        }
        let mut bad = receipt.clone();
        bad[field.as_str()] = tampered(field, &receipt[field.as_str()]);
        assert_ne!(bad, receipt, "{field} was not changed");
        let file = env.write(&format!("bad-{field}.json"), &bad.to_string());
        let (code, out, err) = env.sl(&["verify", &file]);
        assert_eq!(code, 4, "tampered {field} was not rejected: {out}{err}");
        let first_line = out.lines().next().unwrap_or("");
        assert!(
            first_line.contains("REJECTED") && first_line.contains(&format!(": {field}")),
            "tampered {field}: the first mismatch is not named:\n{out}"
        );
        let (code, out, _) = env.sl(&["--json", "verify", &file]);
        assert_eq!(code, 4);
        let report = json_out(&out);
        assert_eq!(report["verified"], json!(false));
        let first = report["first_mismatch"]["field"].as_str().ok_or("field")?;
        assert!(first.starts_with(field.as_str()), "{field}: {first}");
    }
    Ok(())
}

#[test]
fn verify_rejects_another_runs_receipt_and_an_unknown_run() -> TestResult {
    let env = Env::new();
    let a = env.scan_ints("a", "s", "t", &[1, 2, 3]);
    let b = env.scan_ints("b", "s", "t", &[1, 2, 4]);
    // run-2's receipt relabelled as run-1: its merkle root is not run-1's.
    let mut swapped = b.clone();
    swapped["run_id"] = a["run_id"].clone();
    let file = env.write("swapped.json", &swapped.to_string());
    let (code, out, _) = env.sl(&["verify", &file]);
    assert_eq!(code, 4, "{out}");
    assert!(out.contains("merkle_root"), "{out}");
    // An unknown run.
    let mut unknown = a.clone();
    unknown["run_id"] = json!("run-999");
    let file = env.write("unknown.json", &unknown.to_string());
    let (code, out, _) = env.sl(&["verify", &file]);
    assert_eq!(code, 4, "{out}");
    assert!(
        out.contains("run_id") && out.contains("no such run"),
        "{out}"
    );
    // The same receipt against another store that has a run-1 of other content.
    let other = Env::new();
    other.scan_ints("x", "s", "t", &[9]);
    let file = other.write("a.json", &a.to_string());
    let (code, out, _) = other.sl(&["verify", &file]);
    assert_eq!(code, 4, "{out}");
    Ok(())
}

#[test]
fn verify_refuses_unusable_input_with_exit_2() -> TestResult {
    let env = Env::new();
    let a = env.scan_ints("a", "s", "t", &[1, 2, 3]);
    let cases = [
        ("not-json.json", "this is not json".to_owned()),
        ("array.json", "[1, 2]".to_owned()),
        ("missing-field.json", {
            let mut m = a.as_object().ok_or("receipt")?.clone();
            m.remove("merkle_root");
            Value::Object(m).to_string()
        }),
        ("unknown-field.json", {
            let mut m = a.as_object().ok_or("receipt")?.clone();
            m.insert("extra".into(), json!(1));
            Value::Object(m).to_string()
        }),
        ("bad-status.json", {
            let mut m = a.clone();
            m["coverage_status"] = json!("great");
            m.to_string()
        }),
        ("older-format.json", {
            let mut m = a.clone();
            m["format_version"] = json!(1);
            m.to_string()
        }),
        // A key whose value may be null must still be there: a receipt never omits one.
        ("missing-nullable.json", {
            let mut m = a.as_object().ok_or("receipt")?.clone();
            m.remove("tenant");
            Value::Object(m).to_string()
        }),
        // Unknown keys nested in a violation are refused like top-level ones.
        ("nested-unknown.json", {
            let mut m = a.clone();
            m["violations"] =
                json!([{"kind": "duplicate_id", "page": 1, "detail": "x", "extra": 1}]);
            m.to_string()
        }),
        // A duplicate key is refused, never resolved by taking the last one.
        ("duplicate-key.json", {
            let text = a.to_string();
            let tail = text.strip_prefix('{').ok_or("receipt")?;
            format!("{{\"coverage_status\": \"failed\", {tail}")
        }),
        // An integer past 64 bits cannot be represented exactly.
        ("big-number.json", {
            let text = a.to_string();
            let tail = text.strip_prefix('{').ok_or("receipt")?;
            format!("{{\"x\": 100000000000000000000, {tail}")
        }),
    ];
    for (name, text) in cases {
        let file = env.write(name, &text);
        let (code, out, err) = env.sl(&["verify", &file]);
        assert_eq!(code, 2, "{name}: {out}{err}");
        assert!(
            err.contains("not a receipt") || err.contains("is not read by this build"),
            "{name}: {err}"
        );
    }
    let missing = env.path().join("nope.json");
    let (code, _, err) = env.sl(&["verify", &missing.to_string_lossy()]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("nope.json"), "{err}");
    Ok(())
}

/// FIXME(reconcile): a run whose snapshot is first echoed on page 2 starts its cursor chain
/// with no snapshot (page 1 saw none), but its receipt names the snapshot pinned later, so
/// the chain cannot be recomputed from the receipt and `verify` rejects the run's own
/// receipt. This asserts the current behaviour; when reconcile is fixed, expect exit 0.
#[test]
fn a_snapshot_first_echoed_on_a_later_page_does_not_pin_the_run() -> TestResult {
    // A bug found by this test's earlier, pinned version: the late echo pinned the run, so
    // the receipt named a snapshot the chain did not start from and `verify` rejected it.
    let env = Env::new();
    let pages = "{\"cursor\": null, \"items\": [1, 2], \"next\": \"rawcur_1\"}\n\
                 {\"cursor\": \"rawcur_1\", \"items\": [3], \"next\": null, \"snapshot\": \"late\"}\n";
    let src = format!("replay:{}", env.write("late.jsonl", pages));
    let (code, receipt) = env.scan("late", &json!({"source": "late"}), &src);
    assert_eq!(code, 0, "{receipt}");
    assert_eq!(receipt["snapshot_id"], Value::Null);
    assert_eq!(receipt["conclusion_scope"], json!("all_records_live"));
    let file = env.write("late.json", &receipt.to_string());
    let (code, out, _) = env.sl(&["verify", &file]);
    assert_eq!(code, 0, "{out}");
    Ok(())
}

fn prefixed(range: std::ops::RangeInclusive<u64>) -> Vec<Value> {
    range.map(|i| json!(format!("customer-{i}"))).collect()
}

fn scan_prefixed(env: &Env, name: &str, tenant: &str, ids: &[Value]) -> Value {
    let contract =
        json!({"source": "registry", "tenant": tenant, "id_codec": "prefixed", "page_size": 1000});
    let src = env.replay(&format!("{name}.jsonl"), ids, 1000, "snap");
    let (code, receipt) = env.scan(name, &contract, &src);
    assert_eq!(code, 0, "{receipt}");
    receipt
}

#[test]
fn diff_reports_ranges_in_original_form() -> TestResult {
    let env = Env::new();
    let a = scan_prefixed(&env, "a", "acme", &prefixed(1..=5000));
    let mut b_ids = prefixed(1..=9);
    b_ids.extend(prefixed(20..=5100));
    let b = scan_prefixed(&env, "b", "acme", &b_ids);
    let (code, out, err) = env.sl(&["--json", "diff", &run_id(&a), &run_id(&b)]);
    assert_eq!(code, 0, "{err}");
    let d = json_out(&out);
    assert_eq!(d["added_count"], json!(100));
    assert_eq!(d["removed_count"], json!(10));
    assert_eq!(
        strings(&d["added_ranges"]),
        ["customer-5001..customer-5100"]
    );
    assert_eq!(strings(&d["removed_ranges"]), ["customer-10..customer-19"]);
    assert_eq!(d["added_ranges_total"], json!(1));
    assert_eq!(d["partitions_differing"], json!([0]));
    assert_eq!(d["equal"], json!(false));

    let (code, text, _) = env.sl(&["diff", &run_id(&a), &run_id(&b)]);
    assert_eq!(code, 0);
    assert!(text.contains("100 added, 10 removed"), "{text}");
    assert!(text.contains("customer-5001..customer-5100"), "{text}");
    Ok(())
}

#[test]
fn diff_of_equal_runs_loads_no_partition() -> TestResult {
    let env = Env::new();
    let ids: Vec<u64> = (0..300_000).step_by(3).collect();
    let a = env.scan_ints("a", "s", "t", &ids);
    let b = env.scan_ints("b", "s", "t", &ids);
    assert_eq!(a["merkle_root"], b["merkle_root"]);
    let (code, out, _) = env.sl(&["--json", "diff", &run_id(&a), &run_id(&b)]);
    assert_eq!(code, 0);
    let d = json_out(&out);
    assert_eq!(d["equal"], json!(true));
    assert_eq!(d["added_count"], json!(0));
    assert_eq!(d["removed_count"], json!(0));
    assert_eq!(d["partitions_differing"], json!([]));
    assert_eq!(d["partitions_loaded"], json!(0));
    // One changed ID in one of five partitions: only that partition is loaded, once a side.
    let mut changed = ids.clone();
    changed[40_000] += 1;
    let c = env.scan_ints("c", "s", "t", &changed);
    let (_, out, _) = env.sl(&["--json", "diff", &run_id(&a), &run_id(&c)]);
    let d = json_out(&out);
    assert_eq!(d["partitions_differing"], json!([120_000 / 65_536]));
    assert_eq!(d["partitions_loaded"], json!(2));
    assert_eq!(strings(&d["added_ranges"]), ["120001..120001"]);
    assert_eq!(strings(&d["removed_ranges"]), ["120000..120000"]);
    Ok(())
}

#[test]
fn diff_refuses_runs_of_another_scope() -> TestResult {
    let env = Env::new();
    let a = env.scan_ints("a", "s", "acme", &[1, 2]);
    let b = env.scan_ints("b", "s", "globex", &[1, 2]);
    let c = env.scan_ints("c", "other", "acme", &[1, 2]);
    for other in [&b, &c] {
        let (code, out, err) = env.sl(&["diff", &run_id(&a), &run_id(other)]);
        assert_eq!(code, 2, "{out}{err}");
        assert!(err.contains("same (source, tenant)"), "{err}");
        let (code, _, err) = env.sl(&["missing", &run_id(&a), "--against", &run_id(other)]);
        assert_eq!(code, 2, "{err}");
    }
    let (code, _, err) = env.sl(&["diff", &run_id(&a), "run-99"]);
    assert_eq!(code, 2);
    assert!(err.contains("has no run-99"), "{err}");
    Ok(())
}

/// A small deterministic generator (xorshift) so the property runs need no extra crate.
fn pseudo_random_set(seed: u64, n: usize, space: u64) -> BTreeSet<u64> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut s = BTreeSet::new();
    while s.len() < n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let base = x % space;
        // Runs of 1 to 4 consecutive IDs, so ranges have some length.
        for i in 0..(x >> 60) % 4 + 1 {
            s.insert(base + i);
        }
    }
    s
}

fn expand_ranges(ranges: &[String]) -> BTreeSet<u64> {
    let mut out = BTreeSet::new();
    for r in ranges {
        let (lo, hi) = r.split_once("..").expect("FIRST..LAST");
        let (lo, hi): (u64, u64) = (lo.parse().expect("lo"), hi.parse().expect("hi"));
        out.extend(lo..=hi);
    }
    out
}

fn naive_ranges(s: &BTreeSet<u64>) -> u64 {
    let mut n = 0;
    let mut prev: Option<u64> = None;
    for &i in s {
        if prev.is_none_or(|p| p + 1 != i) {
            n += 1;
        }
        prev = Some(i);
    }
    n
}

#[test]
fn diff_laws_hold_through_the_binary() -> TestResult {
    let env = Env::new();
    for seed in 1..=4u64 {
        // Few IDs (all ranges shown) and many (ranges capped): both against the model.
        for (n, space) in [(20usize, 200_000u64), (600, 400_000)] {
            let old = pseudo_random_set(seed, n, space);
            let new = pseudo_random_set(seed + 100, n, space);
            let tenant = format!("t{seed}-{n}");
            let a = env.scan_ints(
                &format!("a{seed}-{n}"),
                "s",
                &tenant,
                &old.iter().copied().collect::<Vec<_>>(),
            );
            let b = env.scan_ints(
                &format!("b{seed}-{n}"),
                "s",
                &tenant,
                &new.iter().copied().collect::<Vec<_>>(),
            );
            let (code, out, err) = env.sl(&["--json", "diff", &run_id(&a), &run_id(&b)]);
            assert_eq!(code, 0, "{err}");
            let d = json_out(&out);
            let added: BTreeSet<u64> = new.difference(&old).copied().collect();
            let removed: BTreeSet<u64> = old.difference(&new).copied().collect();
            assert_eq!(d["added_count"], json!(added.len()));
            assert_eq!(d["removed_count"], json!(removed.len()));
            assert_eq!(d["added_ranges_total"], json!(naive_ranges(&added)));
            assert_eq!(d["removed_ranges_total"], json!(naive_ranges(&removed)));
            let shown_added = expand_ranges(&strings(&d["added_ranges"]));
            let shown_removed = expand_ranges(&strings(&d["removed_ranges"]));
            assert!(shown_added.is_subset(&added));
            assert!(shown_removed.is_subset(&removed));
            if naive_ranges(&added) <= 32 && naive_ranges(&removed) <= 32 {
                // diff(A, B) applied to A gives B.
                let applied: BTreeSet<u64> = old
                    .difference(&shown_removed)
                    .copied()
                    .chain(shown_added.iter().copied())
                    .collect();
                assert_eq!(applied, new, "seed {seed}");
            }
            // diff(A, A) is empty.
            let (_, out, _) = env.sl(&["--json", "diff", &run_id(&a), &run_id(&a)]);
            let same = json_out(&out);
            assert_eq!(same["added_count"], json!(0));
            assert_eq!(same["removed_count"], json!(0));
            assert_eq!(same["equal"], json!(true));
        }
    }
    Ok(())
}

#[test]
fn missing_against_a_run_and_a_range() -> TestResult {
    let env = Env::new();
    let full = scan_prefixed(&env, "full", "acme", &prefixed(1..=200));
    let mut ids = prefixed(1..=49);
    ids.extend(prefixed(60..=150));
    let part = scan_prefixed(&env, "part", "acme", &ids);

    let (code, out, _) = env.sl(&[
        "--json",
        "missing",
        &run_id(&part),
        "--against",
        &run_id(&full),
    ]);
    assert_eq!(code, 0);
    let m = json_out(&out);
    assert_eq!(m["missing_count"], json!(10 + 50));
    assert_eq!(
        strings(&m["missing_ranges"]),
        ["customer-50..customer-59", "customer-151..customer-200"]
    );
    assert_eq!(m["missing_ranges_total"], json!(2));

    let (code, out, _) = env.sl(&[
        "missing",
        &run_id(&part),
        "--range",
        "customer-1..customer-300",
    ]);
    assert_eq!(code, 0);
    assert!(out.contains("lacks 160 IDs"), "{out}");
    assert!(
        out.contains("customer-50..customer-59, customer-151..customer-300"),
        "{out}"
    );

    let (_, out, _) = env.sl(&["missing", &run_id(&full), "--against", &run_id(&part)]);
    assert!(out.contains("lacks nothing"), "{out}");

    for bad in [
        vec!["missing", "1"],
        vec![
            "missing",
            "1",
            "--against",
            "2",
            "--range",
            "customer-1..customer-2",
        ],
        vec!["missing", "1", "--range", "customer-9..customer-2"],
        vec!["missing", "1", "--range", "customer-1"],
        vec!["missing", "1", "--range", "order-1..order-2"],
    ] {
        let (code, _, err) = env.sl(&bad);
        assert_eq!(code, 2, "{bad:?}: {err}");
    }
    Ok(())
}

#[test]
fn export_writes_original_ids_in_order_or_roaring() -> TestResult {
    let env = Env::new();
    let mut ids = prefixed(5..=9);
    ids.extend(prefixed(100_000..=100_002));
    ids.reverse();
    let r = scan_prefixed(&env, "r", "acme", &ids);
    let (code, out, _) = env.sl(&["export", &run_id(&r)]);
    assert_eq!(code, 0);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines,
        [
            "customer-5",
            "customer-6",
            "customer-7",
            "customer-8",
            "customer-9",
            "customer-100000",
            "customer-100001",
            "customer-100002"
        ]
    );

    let bin = env.path().join("ids.bin");
    let (code, _, err) = env.sl(&[
        "export",
        &run_id(&r),
        "--format",
        "roaring",
        "--output",
        &bin.to_string_lossy(),
    ]);
    assert_eq!(code, 0, "{err}");
    let bytes = std::fs::read(&bin)?;
    let treemap = roaring::RoaringTreemap::deserialize_from(&bytes[..])?;
    let got: Vec<u64> = treemap.iter().collect();
    assert_eq!(got, [5, 6, 7, 8, 9, 100_000, 100_001, 100_002]);

    // A partial run's export says so and exits with its status.
    let contract = json!({"source": "s", "page_size": 10, "limits": {"max_pages": 2}});
    let (code, partial) = env.scan("partial", &contract, "sim:records=100");
    assert_eq!(code, 3);
    let (code, out, err) = env.sl(&["export", &run_id(&partial)]);
    assert_eq!(code, 3);
    assert_eq!(out.lines().count(), 20);
    assert!(err.contains("not a complete inventory"), "{err}");
    Ok(())
}

fn page(env: &Env, run: &str, token: Option<&str>, size: &str) -> (i32, Value, String) {
    let mut args = vec!["page", run, "--size", size];
    if let Some(t) = token {
        args.extend(["--token", t]);
    }
    let (code, out, err) = env.sl(&args);
    // A page is printed for every run; the exit code is the run's status (0, 3, 4).
    let v = if matches!(code, 0 | 3 | 4) {
        json_out(&out)
    } else {
        Value::Null
    };
    (code, v, err)
}

#[test]
fn page_serves_a_run_in_order_with_bound_tokens() -> TestResult {
    let env = Env::new();
    let r = labelled_run(&env);
    let run = run_id(&r);
    let (_, export, _) = env.sl(&["export", &run]);
    let expected: Vec<u64> = export.lines().map(str::parse).collect::<Result<_, _>>()?;

    let mut got = Vec::new();
    let mut token: Option<String> = None;
    let mut first_token = None;
    for _ in 0..100 {
        let (code, v, err) = page(&env, &run, token.as_deref(), "997");
        assert_eq!(code, 0, "{err}");
        got.extend(
            v["ids"]
                .as_array()
                .ok_or("ids")?
                .iter()
                .filter_map(Value::as_u64),
        );
        token = v["next_token"].as_str().map(str::to_owned);
        if first_token.is_none() {
            first_token.clone_from(&token);
        }
        if token.is_none() {
            break;
        }
    }
    assert_eq!(got, expected, "pages do not reassemble the run");
    let first_token = first_token.ok_or("no second page")?;

    // Replayed against a run of another tenant, another query, the same scope: refused.
    let other_tenant = env.scan(
        "t2",
        &json!({"source": "customers", "tenant": "globex", "query": {"active": true}}),
        "sim:records=20000,ids=random",
    );
    let other_query = env.scan(
        "q2",
        &json!({"source": "customers", "tenant": "acme", "query": {"active": false}}),
        "sim:records=20000,ids=random",
    );
    let same_scope = env.scan(
        "s2",
        &json!({"source": "customers", "tenant": "acme", "query": {"active": true}}),
        "sim:records=20000,ids=random",
    );
    for ((_, other), why) in [
        (other_tenant, "another tenant"),
        (other_query, "another query"),
        (same_scope, "another run of the same scope"),
    ] {
        let (code, _, err) = page(&env, &run_id(&other), Some(&first_token), "10");
        assert_eq!(code, 2, "{err}");
        assert!(err.contains(why) && err.contains(&run), "{why}: {err}");
    }

    // Edited, truncated or foreign tokens are refused; the token holds no raw ID list.
    let mut edited: Vec<char> = first_token.chars().collect();
    let i = edited.len() / 2;
    edited[i] = if edited[i] == 'A' { 'B' } else { 'A' };
    let edited: String = edited.into_iter().collect();
    for bad in [
        edited.as_str(),
        &first_token[..first_token.len() - 4],
        "slpt1_AAAA",
        "hello",
    ] {
        let (code, _, err) = page(&env, &run, Some(bad), "10");
        assert_eq!(code, 2, "{bad}: {err}");
        assert!(err.contains("page token"), "{err}");
    }
    let foreign = Env::new();
    labelled_run(&foreign);
    let (code, _, err) = page(&foreign, &run, Some(&first_token), "10");
    assert_eq!(code, 2);
    assert!(err.contains("not issued"), "{err}");

    // An expired token.
    let (code, out, _) = env.sl(&["page", &run, "--size", "5", "--ttl-seconds", "0"]);
    assert_eq!(code, 0);
    let t = json_out(&out)["next_token"]
        .as_str()
        .ok_or("token")?
        .to_owned();
    let (code, _, err) = page(&env, &run, Some(&t), "5");
    assert_eq!(code, 2);
    assert!(err.contains("expired"), "{err}");

    for bad_size in ["0", "100001", "x"] {
        let (code, _, _) = page(&env, &run, None, bad_size);
        assert_eq!(code, 2, "--size {bad_size}");
    }
    Ok(())
}

#[test]
fn a_page_token_goes_stale_when_its_run_is_resumed() -> TestResult {
    let env = Env::new();
    let contract = json!({"source": "s", "page_size": 10, "limits": {"max_pages": 2}});
    let (code, r) = env.scan("partial", &contract, "sim:records=100");
    assert_eq!(code, 3);
    let run = run_id(&r);
    let (code, v, _) = page(&env, &run, None, "5");
    assert_eq!(
        code, 3,
        "a page of an unknown run is never a page of an inventory"
    );
    assert_eq!(v["coverage_status"], json!("unknown"));
    let token = v["next_token"].as_str().ok_or("token")?.to_owned();
    let (code, out, err) = env.sl(&[
        "resume",
        &run,
        "--source",
        "sim:records=100",
        "--max-pages",
        "100",
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let (code, _, err) = page(&env, &run, Some(&token), "5");
    assert_eq!(code, 2);
    assert!(err.contains("changed since"), "{err}");
    Ok(())
}

/// Runs contrib/verify_receipt.py; a missing python3 fails the test, never skips it.
pub(crate) fn python_verifier(args: &[&str]) -> (i32, String, String) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("contrib/verify_receipt.py");
    let out = std::process::Command::new("python3")
        .arg(&script)
        .args(args)
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "python3 is required by this test (the independent receipt verifier, \
                 contrib/verify_receipt.py) and could not be run: {e}; install python3"
            )
        });
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn the_python_verifier_agrees_with_the_rust_implementation() -> TestResult {
    let env = Env::new();
    // Sparse (array leaves) and dense (bitmap leaves) partitions, int codec.
    let dense = labelled_run(&env);
    // Prefixed and string codecs.
    let pre = scan_prefixed(&env, "pre", "acme", &prefixed(1..=7000));
    // String IDs, some of them awkward: a line break, a quote, a backslash, a tab, non-ASCII.
    let mut strs: Vec<Value> = (0..300)
        .map(|i| json!(format!("user-{i:04}@example.org")))
        .collect();
    for awkward in [
        "two\nlines",
        "say \"hi\"",
        "back\\slash",
        "tab\there",
        "ünïcödé",
    ] {
        strs.push(json!(awkward));
    }
    let src = env.replay("strs.jsonl", &strs, 100, "snap");
    let (code, string_run) = env.scan(
        "strs",
        &json!({"source": "users", "id_codec": "string"}),
        &src,
    );
    assert_eq!(code, 0, "{string_run}");

    for (receipt, strings) in [(&dense, false), (&pre, false), (&string_run, true)] {
        let run = run_id(receipt);
        let receipt_file = env.write(&format!("{run}.json"), &receipt.to_string());
        let mut formats = Vec::new();
        // A string run's root is over its strings, so only text forms can check it.
        let kinds: &[&str] = if strings {
            &["text", "jsonl"]
        } else {
            &["roaring", "text", "jsonl"]
        };
        for format in kinds {
            let file = env
                .path()
                .join(format!("{run}.{format}"))
                .to_string_lossy()
                .into_owned();
            let (code, _, err) = env.sl(&["export", &run, "--format", format, "--output", &file]);
            assert_eq!(code, 0, "{err}");
            formats.push((file, *format));
        }
        for (file, format) in &formats {
            let (code, out, err) =
                python_verifier(&[&receipt_file, file, "--format", format, "--json"]);
            assert_eq!(code, 0, "{run} {format}: {out}{err}");
            let report = json_out(&out);
            assert_eq!(report["recomputed"]["merkle_root"], receipt["merkle_root"]);
            assert_eq!(
                report["recomputed"]["unique_ids_observed"],
                receipt["unique_ids_observed"]
            );
            assert_eq!(report["recomputed"]["partitions"], receipt["partitions"]);
            if strings {
                continue;
            }
            // Per-partition counts equal the store's, read through the library.
            let store = scanledger::Store::open_read(Path::new(&env.store))?;
            let ids = store.read()?.ids(run.parse()?)?;
            let counts: serde_json::Map<String, Value> = ids
                .partitions()
                .map(|(p, b)| (p.to_string(), json!(b.len())))
                .collect();
            assert_eq!(
                report["partition_counts"],
                Value::Object(counts),
                "{run} {format}"
            );
        }
    }

    // Another run's export does not match: exit 4.
    let other_txt = env.path().join("other.txt").to_string_lossy().into_owned();
    env.sl(&["export", &run_id(&pre), "--output", &other_txt]);
    let receipt_file = env.write("dense.json", &dense.to_string());
    let (code, out, _) = python_verifier(&[&receipt_file, &other_txt]);
    assert_eq!(code, 4, "{out}");
    assert!(out.contains("DIFF merkle_root"), "{out}");
    Ok(())
}

/// The stored Merkle leaves are what `diff` trusts to skip equal partitions, so `verify`
/// checks them against the bitmaps: a leaf edited in the file is reported as the store
/// disagreeing with itself, even though the receipt is the store's own.
#[test]
fn verify_names_a_store_that_disagrees_with_itself() -> TestResult {
    const LEAVES: redb::TableDefinition<(u64, u64), &[u8]> = redb::TableDefinition::new("leaves");
    let env = Env::new();
    let r = env.scan_ints("a", "s", "t", &[1, 2, 70_000]);
    {
        let db = redb::Database::open(&env.store)?;
        let txn = db.begin_write()?;
        {
            let mut leaves = txn.open_table(LEAVES)?;
            leaves.insert((1u64, 0u64), [7u8; 32].as_slice())?;
        }
        txn.commit()?;
    }
    let file = env.write("r.json", &r.to_string());
    let (code, out, _) = env.sl(&["verify", &file]);
    assert_eq!(code, 4, "{out}");
    assert!(
        out.contains("merkle_root")
            && out.contains("store inconsistent")
            && out.contains("partition 0"),
        "{out}"
    );
    Ok(())
}
