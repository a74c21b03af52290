//! Scanning a MariaDB table through the `mysql:` source, with and without content digests.
//!
//! Run:   cargo bench --bench mysql
//!        SCANLEDGER_BENCH_ROWS=1000000,10000000 SCANLEDGER_BENCH_ROUNDS=3 cargo bench --bench mysql
//!
//! Needs the MariaDB server on 127.0.0.1:3306 (root, no password, database `test`). The table
//! `sl_my_bench_<rows>` (BIGINT key, VARCHAR, DECIMAL, DATETIME(6), INT, VARCHAR) is created
//! once from MariaDB's sequence engine and kept for later runs when SCANLEDGER_BENCH_KEEP=1.
//!
//! Each round scans the whole table twice, without and with five content columns, in
//! alternating order, through `scanledger::scan` (keyset pages of 10,000 in one consistent
//! snapshot, the reconciler, an in-memory sink). It prints the median time of each, the
//! rows per second and the ratio with/without (the target: at most 1.5).
//!
//! First it prints the driver's own floor in the same run: the same keyset pages read with
//! mysql_async alone, key only against key and the five columns, rows decoded and dropped.
//!
//! Last, one page in flight ahead (the default) against none (`"prefetch": false`), with
//! content into a store file, alternating, and their ratio.
//!
//! `SCANLEDGER_BENCH_ONLY=content` (or `plain`) scans only one of the two configs, into memory,
//! ten times: a loop to profile under `perf record`, with no ratio printed.
//!
//! Back of the envelope: a keyset page of 10,000 narrow rows is a short range scan of the
//! primary key, ~5 ms on the server and a few MB on the wire; 1 M rows are 100 pages, ~1 s.
//! Content adds ~60 bytes per row on the wire and one SHA-256 of ~80 bytes per row (~0.3 µs),
//! so well under 1.5x.

use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use scanledger::{
    now_ms, scan, scan_with, Contract, MemoryLog, MysqlSource, Reconciler, Status, Store,
    StoreOptions,
};

const DSN: &str = "mysql://root@127.0.0.1:3306/test";
const CONTENT: &str = r#"["email", "amount", "created", "status", "note"]"#;
const PAGE_SIZE: u32 = 10_000;

fn env_or(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_owned())
}

async fn sql(statements: &[String]) -> Result<Vec<u64>, mysql_async::Error> {
    let mut c = mysql_async::Conn::new(mysql_async::Opts::from_url(DSN)?).await?;
    let mut out = Vec::new();
    for s in statements {
        if s.starts_with("SELECT") {
            let n: Option<u64> = c.query_first(s.as_str()).await?;
            out.push(n.unwrap_or(0));
        } else {
            c.query_drop(s.as_str()).await?;
        }
    }
    c.disconnect().await?;
    Ok(out)
}

/// Creates `table` with `rows` rows unless it already has them.
async fn ensure_table(table: &str, rows: u64) -> Result<(), mysql_async::Error> {
    let have = sql(&[format!(
        "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'test' \
         AND TABLE_NAME = '{table}'"
    )])
    .await?;
    if have[0] == 1 && sql(&[format!("SELECT COUNT(*) FROM {table}")]).await?[0] == rows {
        return Ok(());
    }
    let t0 = Instant::now();
    let mut stmts = vec![
        format!("DROP TABLE IF EXISTS {table}"),
        format!(
            "CREATE TABLE {table} (id BIGINT UNSIGNED PRIMARY KEY, email VARCHAR(64) NOT NULL, \
             amount DECIMAL(12,2) NOT NULL, created DATETIME(6) NOT NULL, status INT NOT NULL, \
             note VARCHAR(100) NULL) ENGINE=InnoDB"
        ),
    ];
    let chunk = 1_000_000u64;
    let mut lo = 1u64;
    while lo <= rows {
        let hi = (lo + chunk - 1).min(rows);
        stmts.push(format!(
            "INSERT INTO {table} SELECT seq, CONCAT('user', seq, '@example.com'), \
             (seq % 100000) / 100, TIMESTAMP('2020-01-01') + INTERVAL seq SECOND, seq % 5, \
             IF(seq % 3 = 0, NULL, CONCAT('note ', seq)) FROM seq_{lo}_to_{hi}"
        ));
        lo = hi + 1;
    }
    sql(&stmts).await?;
    eprintln!(
        "created {table} ({rows} rows) in {:.1} s",
        t0.elapsed().as_secs_f64()
    );
    Ok(())
}

/// CPU seconds (user + system) a process has used, from /proc (Linux); 0 elsewhere.
fn cpu_seconds(pid: &str) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0.0;
    };
    // Fields after the command name (which may hold spaces, so split after its ')').
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // utime and stime are fields 14 and 15 of stat, 12 and 13 after the ')'; 100 ticks/s.
    (ticks(11) + ticks(12)) / 100.0
}

/// The server's process ID, when it runs on this machine.
fn server_pid() -> Option<String> {
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let comm = std::fs::read_to_string(e.path().join("comm")).ok()?;
        matches!(comm.trim(), "mariadbd" | "mysqld")
            .then(|| e.file_name().to_string_lossy().into_owned())
    })
}

/// One measured scan: wall time, client CPU, server CPU.
#[derive(Clone, Copy)]
struct Sample {
    wall: Duration,
    client_cpu_s: f64,
    server_cpu_s: f64,
}

async fn measure(
    config: &std::path::Path,
    rows: u64,
    server: Option<&str>,
    store: Option<&std::path::Path>,
) -> Sample {
    let (c0, s0) = (cpu_seconds("self"), server.map_or(0.0, cpu_seconds));
    let wall = scan_once(config, rows, store).await;
    Sample {
        wall,
        client_cpu_s: cpu_seconds("self") - c0,
        server_cpu_s: server.map_or(0.0, cpu_seconds) - s0,
    }
}

/// One scan; into a fresh store file at `store` (as the CLI records), or into memory.
async fn scan_once(
    config: &std::path::Path,
    rows: u64,
    store: Option<&std::path::Path>,
) -> Duration {
    let mut source = MysqlSource::open(config).expect("bench config");
    let mut contract = Contract::new("bench");
    contract.page_size = PAGE_SIZE;
    if let Some(path) = store {
        let _ = std::fs::remove_file(path);
    }
    let t0 = Instant::now();
    let done = match store {
        None => {
            let rec = Reconciler::new(&contract);
            scan_with(&contract, rec, MemoryLog::default(), now_ms(), &mut source).await
        }
        Some(path) => {
            let mut s = Store::open(path, StoreOptions::new()).expect("store");
            scan(&contract, &mut source, &mut s).await
        }
    }
    .expect("scan");
    let took = t0.elapsed();
    let receipt = done.receipt();
    assert_eq!(receipt.coverage_status, Status::Verified, "{receipt:?}");
    assert_eq!(receipt.unique_ids_observed, rows);
    took
}

/// The driver's own floor: the same keyset pages read with mysql_async alone, the rows decoded
/// and dropped (no IDs, no digests, no reconciler), with the key only or with the five content
/// columns. Their ratio is what reading the columns costs before any hashing.
async fn driver_floor(table: &str, with_content: bool) -> Result<Duration, mysql_async::Error> {
    let mut c = mysql_async::Conn::new(mysql_async::Opts::from_url(DSN)?).await?;
    let cols = if with_content {
        "id, email, amount, created, status, note"
    } else {
        "id"
    };
    let first = c
        .prep(format!("SELECT {cols} FROM {table} ORDER BY id LIMIT ?"))
        .await?;
    let next = c
        .prep(format!(
            "SELECT {cols} FROM {table} WHERE id > ? ORDER BY id LIMIT ?"
        ))
        .await?;
    let t0 = Instant::now();
    let mut last: Option<u64> = None;
    loop {
        let mut result = match last {
            None => c.exec_iter(&first, (PAGE_SIZE + 1,)).await?,
            Some(k) => c.exec_iter(&next, (k, PAGE_SIZE + 1)).await?,
        };
        let (mut n, mut key) = (0u32, None);
        while let Some(row) = result.next().await? {
            n += 1;
            if n > PAGE_SIZE {
                break;
            }
            key = row.get::<u64, _>(0);
        }
        result.drop_result().await?;
        if n <= PAGE_SIZE {
            break;
        }
        last = key;
    }
    let took = t0.elapsed();
    c.disconnect().await?;
    Ok(took)
}

fn median<T: Copy + PartialOrd>(mut v: Vec<T>) -> T {
    v.sort_unstable_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    v[v.len() / 2]
}

fn report(rows: u64, rounds: usize, sink: &str, without: &[Sample], with: &[Sample]) {
    let wall = |v: &[Sample]| median(v.iter().map(|s| s.wall.as_secs_f64()).collect());
    let client = |v: &[Sample]| median(v.iter().map(|s| s.client_cpu_s).collect());
    let server = |v: &[Sample]| median(v.iter().map(|s| s.server_cpu_s).collect());
    let (a, b) = (wall(without), wall(with));
    println!(
        "mysql scan {rows} rows, pages of {PAGE_SIZE}, {sink}, {rounds} rounds (medians):\n  \
         without content: {a:.3} s wall ({:.0} rows/s), client CPU {:.2} s, server CPU {:.2} s\n  \
         with 5 content columns: {b:.3} s wall ({:.0} rows/s), client CPU {:.2} s, server CPU {:.2} s\n  \
         ratio with/without: wall {:.2} (target <= 1.5), client CPU {:.2}, client+server CPU {:.2}",
        rows as f64 / a,
        client(without),
        server(without),
        rows as f64 / b,
        client(with),
        server(with),
        b / a,
        client(with) / client(without).max(0.01),
        (client(with) + server(with)) / (client(without) + server(without)).max(0.01),
    );
}

fn main() {
    let rows_list: Vec<u64> = env_or("SCANLEDGER_BENCH_ROWS", "1000000")
        .split(',')
        .map(|s| s.trim().parse().expect("SCANLEDGER_BENCH_ROWS: integers"))
        .collect();
    let rounds: usize = env_or("SCANLEDGER_BENCH_ROUNDS", "5")
        .parse()
        .expect("SCANLEDGER_BENCH_ROUNDS: an integer");
    let keep = std::env::var_os("SCANLEDGER_BENCH_KEEP").is_some();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    if let Err(e) = rt.block_on(sql(&["SELECT 1".to_owned()])) {
        assert!(
            std::env::var_os("CI").is_none(),
            "MariaDB is required under CI: {e}"
        );
        eprintln!("SKIPPED: no MariaDB at 127.0.0.1:3306 ({e})");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    for rows in rows_list {
        let table = format!("sl_my_bench_{rows}");
        rt.block_on(ensure_table(&table, rows))
            .expect("bench table");
        let plain = dir.path().join(format!("plain-{rows}.json"));
        let content = dir.path().join(format!("content-{rows}.json"));
        std::fs::write(
            &plain,
            format!(r#"{{"dsn": "{DSN}", "table": "{table}", "key": "id"}}"#),
        )
        .expect("write config");
        std::fs::write(
            &content,
            format!(r#"{{"dsn": "{DSN}", "table": "{table}", "key": "id", "content": {CONTENT}}}"#),
        )
        .expect("write config");
        // One warm-up scan each, so the buffer pool holds the table for both.
        rt.block_on(scan_once(&plain, rows, None));
        rt.block_on(scan_once(&content, rows, None));
        if let Ok(only) = std::env::var("SCANLEDGER_BENCH_ONLY") {
            let config = if only == "content" { &content } else { &plain };
            for _ in 0..10 {
                rt.block_on(scan_once(config, rows, None));
            }
            continue;
        }
        let server = server_pid();
        // The driver's floor, in the same run: key-only pages against the five columns.
        let (mut key_only, mut five) = (Vec::new(), Vec::new());
        for round in 0..rounds {
            let run = |w| rt.block_on(driver_floor(&table, w)).expect("driver floor");
            if round % 2 == 0 {
                key_only.push(run(false));
                five.push(run(true));
            } else {
                five.push(run(true));
                key_only.push(run(false));
            }
        }
        let (k, f) = (median(key_only), median(five));
        println!(
            "driver alone (mysql_async, rows decoded and dropped), {rows} rows, {rounds} rounds \
             (medians):\n  key only: {:.3} s; key and the 5 content columns: {:.3} s; \
             ratio {:.2} (reading the columns, before any digest)",
            k.as_secs_f64(),
            f.as_secs_f64(),
            f.as_secs_f64() / k.as_secs_f64()
        );
        let store_path = dir.path().join("bench.redb");
        for (sink, store) in [
            ("in-memory sink", None),
            ("store file", Some(store_path.as_path())),
        ] {
            let (mut without, mut with) = (Vec::new(), Vec::new());
            let once = |config: &std::path::Path| {
                rt.block_on(measure(config, rows, server.as_deref(), store))
            };
            for round in 0..rounds {
                if round % 2 == 0 {
                    without.push(once(&plain));
                    with.push(once(&content));
                } else {
                    with.push(once(&content));
                    without.push(once(&plain));
                }
            }
            report(rows, rounds, sink, &without, &with);
        }
        // One page in flight ahead against none, in the same run: the content config into a
        // store file (where each page waits for its checkpoint's fsync), alternating.
        let serial = dir.path().join(format!("serial-{rows}.json"));
        std::fs::write(
            &serial,
            format!(
                r#"{{"dsn": "{DSN}", "table": "{table}", "key": "id", "content": {CONTENT}, "prefetch": false}}"#
            ),
        )
        .expect("write config");
        let (mut ahead, mut none) = (Vec::new(), Vec::new());
        let once = |config: &std::path::Path| {
            rt.block_on(measure(
                config,
                rows,
                server.as_deref(),
                Some(store_path.as_path()),
            ))
        };
        for round in 0..rounds {
            if round % 2 == 0 {
                none.push(once(&serial));
                ahead.push(once(&content));
            } else {
                ahead.push(once(&content));
                none.push(once(&serial));
            }
        }
        let wall = |v: &[Sample]| median(v.iter().map(|s| s.wall.as_secs_f64()).collect());
        let (n, a) = (wall(&none), wall(&ahead));
        println!(
            "one page in flight ahead, {rows} rows with 5 content columns into a store file, \
             {rounds} rounds (medians):\n  none ahead (\"prefetch\": false): {n:.3} s; one ahead: \
             {a:.3} s; ratio ahead/none {:.2}",
            a / n
        );
        if !keep {
            rt.block_on(sql(&[format!("DROP TABLE IF EXISTS {table}")]))
                .expect("drop bench table");
        }
    }
}
