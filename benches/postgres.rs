//! Throughput of the PostgreSQL source against the floor of the server's own bulk export.
//!
//! Run:   cargo bench --bench postgres
//! Env:   SL_PG_BENCH_DSN   (default `host=127.0.0.1 port=5432 user=postgres dbname=test
//!                           sslmode=disable`), SL_PG_BENCH_ROWS (default 10,000,000),
//!        SL_PG_BENCH_REPS (default 3), SL_PG_BENCH_PAGE_SIZES (default `1000,10000`).
//!
//! The table `sl_pg_bench_keys_<ROWS>` (bigint primary key, vacuumed so that index-only
//! scans apply) is created on first use and kept for later runs; drop it by hand.
//!
//! Cases, each timed `REPS` times and reported as the median, in one run so the ratios
//! compare like with like:
//! - `copy`: `COPY (SELECT id FROM t) TO STDOUT` over a tokio-postgres connection of the
//!   same DSN: the floor, the fastest the server hands out the keys;
//! - `source+store`: `collect::scan` through `PostgresSource` into a durable store with a
//!   durable checkpoint every 100 pages (the binary's `--checkpoint-every 100`);
//! - `source+memory`: the same scan into `MemoryLog` (reconciler, no store);
//! - `source alone`: the source's pages fetched in a loop, nothing else.
//!
//! Back of the envelope: COPY streams ~10 M int8 keys as ~80 MB of text in a couple of
//! seconds. A keyset page is one index-only range scan of `n + 1` rows in binary; per page a
//! round trip (~0.1 ms on loopback) and per row the server's tuple output plus our decode
//! (~100 ns), so pages of 10,000 should reach a large fraction of COPY, and the store's
//! bitmap updates (~10 M IDs/s with group commit) should not be the bound.

use std::path::Path;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use scanledger::{
    now_ms, Contract, MemoryLog, PageRequest, PageSource, PostgresSource, Reconciler, Request,
    Status,
};
use scanledger::{Store, StoreOptions};

fn env_or(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_owned())
}

fn median(mut xs: Vec<Duration>) -> Duration {
    xs.sort();
    xs[xs.len() / 2]
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

async fn connect(dsn: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(dsn, tokio_postgres::NoTls)
        .await
        .unwrap_or_else(|e| panic!("no PostgreSQL for the bench ({dsn}): {e}"));
    // Bench-only: the connection task lives as long as the runtime.
    tokio::spawn(connection);
    client
}

async fn ensure_table(client: &tokio_postgres::Client, table: &str, rows: i64) {
    let have = client
        .query_one(
            "SELECT count(*) FROM pg_catalog.pg_class WHERE relname = $1",
            &[&table],
        )
        .await
        .expect("catalog")
        .get::<_, i64>(0);
    if have == 1 {
        let n: i64 = client
            .query_one(&format!("SELECT count(*) FROM {table}"), &[])
            .await
            .expect("count")
            .get(0);
        if n == rows {
            return;
        }
    }
    eprintln!("creating {table} with {rows} rows (once; kept for later runs)");
    let t0 = Instant::now();
    client
        .batch_execute(&format!(
            "DROP TABLE IF EXISTS {table};
             CREATE TABLE {table} (id bigint NOT NULL);
             INSERT INTO {table} SELECT generate_series(1, {rows});
             ALTER TABLE {table} ADD PRIMARY KEY (id);"
        ))
        .await
        .expect("create the bench table");
    // Alone: VACUUM cannot run in the implicit transaction of a multi-statement query.
    client
        .batch_execute(&format!("VACUUM ANALYZE {table}"))
        .await
        .expect("vacuum the bench table");
    eprintln!("  created in {:.1} s", t0.elapsed().as_secs_f64());
}

async fn copy_floor(client: &tokio_postgres::Client, table: &str) -> (Duration, u64) {
    let t0 = Instant::now();
    let stream = client
        .copy_out(&format!("COPY (SELECT id FROM {table}) TO STDOUT"))
        .await
        .expect("copy");
    let mut stream = std::pin::pin!(stream);
    let mut lines = 0u64;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.expect("copy chunk");
        lines += chunk.iter().filter(|b| **b == b'\n').count() as u64;
    }
    (t0.elapsed(), lines)
}

fn open_source(config: &Path) -> PostgresSource {
    PostgresSource::open(config).expect("source config")
}

async fn source_alone(config: &Path, page_size: u32) -> (Duration, u64) {
    let mut source = open_source(config);
    let t0 = Instant::now();
    let mut request = Request::First;
    let mut snapshot = None;
    let mut rows = 0u64;
    loop {
        let page = source
            .fetch(&PageRequest {
                request: request.clone(),
                page_size,
                snapshot: snapshot.clone(),
                query: serde_json::Value::Null,
            })
            .await
            .unwrap_or_else(|e| panic!("fetch: {e:?}"));
        rows += page.items.len() as u64;
        snapshot = page.snapshot;
        match page.next {
            Some(c) => request = Request::Cursor(c),
            None => return (t0.elapsed(), rows),
        }
    }
}

fn contract(page_size: u32) -> Contract {
    let mut c = Contract::new("sl_pg_bench");
    c.page_size = page_size;
    c
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` runs this too, once, quickly.
    let quick = !std::env::args().any(|a| a == "--bench");
    let dsn = env_or(
        "SL_PG_BENCH_DSN",
        "host=127.0.0.1 port=5432 user=postgres dbname=test sslmode=disable",
    );
    let rows: i64 = env_or("SL_PG_BENCH_ROWS", if quick { "20000" } else { "10000000" })
        .parse()
        .expect("SL_PG_BENCH_ROWS");
    let reps: usize = env_or("SL_PG_BENCH_REPS", if quick { "1" } else { "3" })
        .parse()
        .expect("SL_PG_BENCH_REPS");
    let page_sizes: Vec<u32> = env_or("SL_PG_BENCH_PAGE_SIZES", "1000,10000")
        .split(',')
        .map(|s| s.trim().parse().expect("SL_PG_BENCH_PAGE_SIZES"))
        .collect();
    let table = format!("sl_pg_bench_keys_{rows}");
    let rt = runtime();
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("pg.json");
    std::fs::write(
        &config,
        serde_json::json!({"dsn": dsn, "table": table, "key": "id"}).to_string(),
    )
    .expect("config");

    let client = rt.block_on(async {
        let client = connect(&dsn).await;
        ensure_table(&client, &table, rows).await;
        client
    });
    let expect_rows = u64::try_from(rows).expect("rows");

    // Every repetition runs every case, so that a machine shared with other work slows all
    // of them alike and the ratios stay comparable.
    let cases = ["source+store", "source+memory", "source alone"];
    let mut copy = Vec::new();
    let mut times = vec![vec![Vec::new(); cases.len()]; page_sizes.len()];
    for _ in 0..reps {
        let (t, n) = rt.block_on(copy_floor(&client, &table));
        assert_eq!(n, expect_rows);
        copy.push(t);
        for (p, &page_size) in page_sizes.iter().enumerate() {
            let store_path = dir.path().join("bench.redb");
            let _ = std::fs::remove_file(&store_path);
            let mut store =
                Store::open(&store_path, StoreOptions::new().checkpoint_every(100)).expect("store");
            let mut source = open_source(&config);
            let t0 = Instant::now();
            let done = rt
                .block_on(scanledger::scan(
                    &contract(page_size),
                    &mut source,
                    &mut store,
                ))
                .expect("scan");
            times[p][0].push(t0.elapsed());
            assert_eq!(done.reconciler.status(), Status::Verified);
            assert_eq!(done.receipt().unique_ids_observed, expect_rows);
            drop(store);

            let mut source = open_source(&config);
            let t0 = Instant::now();
            let done = rt
                .block_on(scanledger::scan_with(
                    &contract(page_size),
                    Reconciler::new(&contract(page_size)),
                    MemoryLog::default(),
                    now_ms(),
                    &mut source,
                ))
                .expect("scan");
            times[p][1].push(t0.elapsed());
            assert_eq!(done.receipt().unique_ids_observed, expect_rows);

            let (t, n) = rt.block_on(source_alone(&config, page_size));
            assert_eq!(n, expect_rows);
            times[p][2].push(t);
        }
    }
    let copy = median(copy);
    let rate = |t: Duration| expect_rows as f64 / t.as_secs_f64();
    println!(
        "postgres/{rows} rows, median of {reps}, {kind}, load average {load}",
        kind = if dsn.contains("sslmode=disable") {
            "plain TCP"
        } else {
            "sslmode per DSN"
        },
        load = std::fs::read_to_string("/proc/loadavg")
            .map(|l| l.split(' ').take(3).collect::<Vec<_>>().join(" "))
            .unwrap_or_default()
    );
    println!(
        "  copy (floor)              {:>8.3} s  {:>12.0} rows/s  1.00x",
        copy.as_secs_f64(),
        rate(copy)
    );
    for (p, page_size) in page_sizes.iter().enumerate() {
        for (c, name) in cases.iter().enumerate() {
            let t = median(times[p][c].clone());
            println!(
                "  {:<25} {:>8.3} s  {:>12.0} rows/s  {:.2}x of copy",
                format!("{name} p={page_size}"),
                t.as_secs_f64(),
                rate(t),
                copy.as_secs_f64() / t.as_secs_f64()
            );
        }
    }
}
