//! Shard queries open at their outer ends: no row of the scope falls in
//! no shard, so a sharded scan says what one plain scan of the same table says.

use serde_json::{json, Value};

use super::{pg, pg_source, scan, Dropped};
use crate::postgres::Env;

/// Plans `shards` shards of `source` under `codec`, scans each into its own store and merges
/// them: the merge's JSON.
fn sharded(env: &Env, source: &str, codec: &str, shards: u32) -> Value {
    let contract = env.contract(
        "whole.json",
        &json!({"source": "t", "page_size": 5000, "id_codec": codec}),
    );
    let dir = env.dir.path().join(format!("plan-{codec}"));
    let dir_s = dir.to_string_lossy().into_owned();
    let (code, _, err) = env.json(&[
        "plan",
        "--contract",
        &contract,
        "--source",
        source,
        "--shards",
        &shards.to_string(),
        "--out",
        &dir_s,
    ]);
    assert_eq!(code, 0, "plan: {err}");
    let plan = dir.join("plan.json").to_string_lossy().into_owned();
    let mut stores = Vec::new();
    for k in 0..shards {
        let store = dir
            .join(format!("s{k}.redb"))
            .to_string_lossy()
            .into_owned();
        let (code, out, err) = crate::util::run(&[
            "--store",
            &store,
            "scan",
            "--plan",
            &plan,
            "--shard",
            &k.to_string(),
        ]);
        assert!(code == 0 || code == 4, "shard {k}: {err}{out}");
        stores.push(store);
    }
    let merged = dir.join("m.redb").to_string_lossy().into_owned();
    let mut args = vec!["merge", "--plan", plan.as_str(), "--out", merged.as_str()];
    args.extend(stores.iter().map(String::as_str));
    let (_, m, err) = env.json(&args);
    assert!(m.is_object(), "merge: {err}");
    m
}

/// Regression: `plan` cut the key space from the smallest key the codec can hold (a negative
/// key counts as 0) and each shard's query read only its range, so the rows with negative keys
/// were in no shard: the merged run was `verified` while one plain scan of the table is
/// `failed` (a negative key is no `int` ID). The first shard's query now has no lower bound
/// (and the last no upper bound): the negative keys are read by shard 0, judged there
/// (`invalid_page`), and the merge is not verified. Under `signed` the same table shards and
/// merges to the plain scan's verdict and root.
#[test]
fn negative_keys_are_read_by_the_first_shard_never_left_in_none() {
    let Some(pg) = pg() else { return };
    let mut d = Dropped::new(|s| pg.exec(s));
    let t = d.name("TABLE", "shard_negative");
    pg.exec(&format!(
        "CREATE TABLE {t} (k bigint PRIMARY KEY);
         INSERT INTO {t} SELECT g FROM generate_series(-3, 200000) g;"
    ));
    let env = Env::new();
    let src = pg_source(&env, "s.json", &t, "k");
    let (code, single, _) = scan(&env, &src, 5000, "int");
    assert_eq!(code, 4, "one plain scan fails on the negative keys");
    assert_eq!(single["coverage_status"], "failed");
    let m = sharded(&env, &src, "int", 3);
    assert_ne!(m["receipt"]["coverage_status"], "verified", "{m}");

    let (code, single, err) = scan(&env, &src, 5000, "signed");
    assert_eq!(code, 0, "{err}");
    let m = sharded(&env, &src, "signed", 3);
    assert_eq!(m["receipt"]["coverage_status"], "verified", "{m}");
    for key in ["merkle_root", "unique_ids_observed"] {
        assert_eq!(m["receipt"][key], single[key], "{key}");
    }
}

/// Regression: a plan's last shard ended just before 2^64 - 1, so a MySQL `BIGINT UNSIGNED` key
/// of 18446744073709551615, read by the last shard (open at its end), was outside its range:
/// the merge was `failed` where one plain scan is `verified`. The last shard now runs to the
/// end, that key included, and the merge is the plain scan's; so is a signed table's from -2^63
/// to 2^63 - 1 (IDs 0 and 2^64 - 1 under `signed`).
#[cfg(feature = "mysql")]
#[test]
fn mysql_keys_at_both_ends_of_the_id_space_merge_to_the_plain_scan() {
    let Some(db) = crate::mysql::db() else { return };
    let mut d = Dropped::new(|s| db.exec(s));
    let unsigned = d.name("TABLE", "shard_top");
    let signed = d.name("TABLE", "shard_ends");
    db.exec(&format!(
        "CREATE TABLE {unsigned} (k BIGINT UNSIGNED PRIMARY KEY) ENGINE=InnoDB;\n\
         INSERT INTO {unsigned} VALUES (0), (1), (70000), (9223372036854775808), (18446744073709551614), (18446744073709551615);\n\
         CREATE TABLE {signed} (k BIGINT PRIMARY KEY) ENGINE=InnoDB;\n\
         INSERT INTO {signed} VALUES (-9223372036854775808), (-5), (0), (7), (9223372036854775807)"
    ));
    for (t, codec) in [(&unsigned, "int"), (&signed, "signed")] {
        for n in [2, 3] {
            let env = Env::new();
            let src = super::my_source(&env, "s.json", t, "k");
            let (code, single, err) = scan(&env, &src, 5000, codec);
            assert_eq!(code, 0, "{t}: {err}");
            let m = sharded(&env, &src, codec, n);
            assert_eq!(m["receipt"]["coverage_status"], "verified", "{t} {n}: {m}");
            for key in ["merkle_root", "unique_ids_observed"] {
                assert_eq!(m["receipt"][key], single[key], "{t} {n}: {key}");
            }
        }
    }
}

/// The same at both ends of PostgreSQL's `bigint` under `signed`: the keys -2^63 and 2^63 - 1
/// are the IDs 0 and 2^64 - 1, and the merge is the plain scan's (it was `failed`: the last
/// shard read 2^63 - 1 and found it outside its range).
#[test]
fn postgres_bigint_keys_at_both_ends_merge_to_the_plain_scan() {
    let Some(pg) = pg() else { return };
    let mut d = Dropped::new(|s| pg.exec(s));
    let t = d.name("TABLE", "shard_pg_ends");
    pg.exec(&format!(
        "CREATE TABLE {t} (k bigint PRIMARY KEY);
         INSERT INTO {t} VALUES (-9223372036854775808), (-5), (0), (7), (9223372036854775807);"
    ));
    for n in [2, 3] {
        let env = Env::new();
        let src = pg_source(&env, "s.json", &t, "k");
        let (code, single, err) = scan(&env, &src, 5000, "signed");
        assert_eq!(code, 0, "{err}");
        let m = sharded(&env, &src, "signed", n);
        assert_eq!(m["receipt"]["coverage_status"], "verified", "{n}: {m}");
        for key in ["merkle_root", "unique_ids_observed"] {
            assert_eq!(m["receipt"][key], single[key], "{n}: {key}");
        }
    }
}
