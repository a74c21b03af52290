//! The MySQL/MariaDB source against the real server on 127.0.0.1:3306 (root, no password,
//! database `test`), mostly through the real binary.
//!
//! Every test makes its own tables, named `sl_my_<test>_<pid>` so concurrent runs never share
//! one, and drops them when done. Without a server a test prints `SKIPPED: ...` loudly, and
//! fails when the environment variable CI is set.
#![allow(clippy::unwrap_used, clippy::expect_used)] // Tests: a failed expectation is the report.

mod content;
mod resume;
mod scan;
mod security;
mod shards;

use std::cell::RefCell;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use serde_json::Value;

use crate::util;

/// The server every test uses, as root.
pub(crate) const ROOT_DSN: &str = "mysql://root@127.0.0.1:3306/test";

/// A connection to the test server, through its own runtime; drops the tables it was told of.
pub(crate) struct Db {
    rt: tokio::runtime::Runtime,
    tables: RefCell<Vec<String>>,
    users: RefCell<Vec<String>>,
}

/// The server, or `None` after printing why the test is skipped (a failure under CI).
pub(crate) fn db() -> Option<Db> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let up = rt.block_on(async {
        let conn = tokio::time::timeout(
            Duration::from_secs(5),
            mysql_async::Conn::new(mysql_async::Opts::from_url(ROOT_DSN).unwrap()),
        )
        .await;
        match conn {
            Ok(Ok(c)) => {
                let _ = c.disconnect().await;
                Ok(())
            }
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err("connect timed out".to_owned()),
        }
    });
    match up {
        Ok(()) => Some(Db {
            rt,
            tables: RefCell::new(Vec::new()),
            users: RefCell::new(Vec::new()),
        }),
        Err(why) => {
            assert!(
                std::env::var_os("CI").is_none(),
                "MariaDB is required under CI and is not reachable at 127.0.0.1:3306: {why}"
            );
            eprintln!("\n*** SKIPPED: no MariaDB at 127.0.0.1:3306 ({why}) ***\n");
            None
        }
    }
}

impl Db {
    /// Runs statements (separated by `;\n`) as root.
    pub(crate) fn exec(&self, sql: &str) {
        self.exec_as(ROOT_DSN, sql).unwrap();
    }

    /// Runs statements as the user of `dsn`.
    pub(crate) fn exec_as(&self, dsn: &str, sql: &str) -> Result<(), String> {
        self.rt.block_on(async {
            let mut c = mysql_async::Conn::new(mysql_async::Opts::from_url(dsn).unwrap())
                .await
                .map_err(|e| e.to_string())?;
            for stmt in sql.split(";\n").filter(|s| !s.trim().is_empty()) {
                c.query_drop(stmt)
                    .await
                    .map_err(|e| format!("{stmt}: {e}"))?;
            }
            let _ = c.disconnect().await;
            Ok(())
        })
    }

    /// The first column of every row of `sql`, as text (NULL as "NULL").
    pub(crate) fn column(&self, sql: &str) -> std::collections::BTreeSet<String> {
        self.rt.block_on(async {
            let mut c = mysql_async::Conn::new(mysql_async::Opts::from_url(ROOT_DSN).unwrap())
                .await
                .unwrap();
            let rows: Vec<Option<String>> = c.query(sql).await.unwrap();
            let _ = c.disconnect().await;
            rows.into_iter()
                .map(|v| v.unwrap_or_else(|| "NULL".to_owned()))
                .collect()
        })
    }

    /// A fresh table name for `tag`, dropped when the `Db` is.
    pub(crate) fn table(&self, tag: &str) -> String {
        let name = format!("sl_my_{tag}_{}", std::process::id());
        self.exec(&format!("DROP TABLE IF EXISTS {name}"));
        self.tables.borrow_mut().push(name.clone());
        name
    }

    /// A fresh user `sl_my_<tag>_<pid>`@`%` with `password`, dropped when the `Db` is.
    pub(crate) fn user(&self, tag: &str, password: &str) -> String {
        let name = format!("sl_my_{tag}_{}", std::process::id());
        self.exec(&format!(
            "DROP USER IF EXISTS '{name}'@'%';\nCREATE USER '{name}'@'%' IDENTIFIED BY '{password}'"
        ));
        self.users.borrow_mut().push(name.clone());
        name
    }

    /// A table `name` with `n` rows: `id` 1..=n (BIGINT primary key), `grp` = id % 7 and
    /// `email`.
    pub(crate) fn numbered(&self, name: &str, n: u64) {
        self.exec(&format!(
            "CREATE TABLE {name} (id BIGINT UNSIGNED PRIMARY KEY, grp INT NOT NULL, \
             email VARCHAR(64)) ENGINE=InnoDB;\n\
             INSERT INTO {name} SELECT seq, seq % 7, CONCAT('u', seq, '@example.com') \
             FROM seq_1_to_{n}"
        ));
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        for t in self.tables.borrow().iter() {
            let _ = self.exec_as(ROOT_DSN, &format!("DROP TABLE IF EXISTS {t}"));
        }
        for u in self.users.borrow().iter() {
            let _ = self.exec_as(ROOT_DSN, &format!("DROP USER IF EXISTS '{u}'@'%'"));
        }
    }
}

/// A temporary folder with a store.
pub(crate) struct Env {
    pub(crate) dir: tempfile::TempDir,
    pub(crate) store: String,
}

impl Env {
    pub(crate) fn new() -> Env {
        let dir = tempfile::tempdir().unwrap();
        let store = dir.path().join("s.redb").to_string_lossy().into_owned();
        Env { dir, store }
    }

    pub(crate) fn file(&self, name: &str, text: &str) -> String {
        util::write(self.dir.path(), name, text)
    }

    /// A `mysql:` source spec for `table` keyed by `key`, with extra config keys (JSON members).
    pub(crate) fn source(&self, name: &str, table: &str, key: &str, extra: &str) -> String {
        let sep = if extra.is_empty() { "" } else { ", " };
        let path = self.file(
            name,
            &format!(r#"{{"dsn": "{ROOT_DSN}", "table": "{table}", "key": "{key}"{sep}{extra}}}"#),
        );
        format!("mysql:{path}")
    }

    /// Runs the binary against the store with `--json`: (exit, parsed stdout or Null, stderr).
    pub(crate) fn json(&self, args: &[&str]) -> (i32, Value, String) {
        let mut all = vec!["--store", self.store.as_str(), "--json"];
        all.extend_from_slice(args);
        let (code, out, err) = util::run(&all);
        (code, serde_json::from_str(&out).unwrap_or(Value::Null), err)
    }

    /// Starts `scan` in the background with `--ack-pages`.
    pub(crate) fn spawn_scan(&self, contract: &str, source: &str) -> Scan {
        let mut child = Command::new(util::bin())
            .args([
                "--store",
                &self.store,
                "--json",
                "scan",
                "--contract",
                contract,
                "--source",
                source,
                "--ack-pages",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (tx, rx) = mpsc::channel();
        let stderr = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Scan {
            child,
            lines: rx,
            seen: Vec::new(),
        }
    }
}

/// A scan running as a child process.
pub(crate) struct Scan {
    child: Child,
    lines: mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl Scan {
    /// Waits (at most 60 s) until page `page` of run-1 is durably checkpointed.
    pub(crate) fn wait_for_ack(&mut self, page: u32) {
        let deadline = Instant::now() + Duration::from_secs(60);
        let want = format!("ack run-1 page {page}");
        while Instant::now() < deadline {
            if let Ok(line) = self.lines.recv_timeout(Duration::from_millis(100)) {
                let hit = line == want;
                self.seen.push(line);
                if hit {
                    return;
                }
            }
        }
        panic!(
            "page {page} was never acknowledged; stderr so far: {:?}",
            self.seen
        );
    }

    /// Whether the scan is still running (so what happened meanwhile happened during it).
    pub(crate) fn running(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    /// Sends SIGKILL and reaps the process.
    pub(crate) fn kill(mut self) {
        self.child.kill().unwrap();
        let status = self.child.wait().unwrap();
        assert!(!status.success(), "the scan ended before the kill");
    }

    /// Waits for the scan to end: (exit code, parsed stdout).
    pub(crate) fn finish(mut self) -> (i32, Value) {
        // Read to the end first: the child may block on a full pipe until we do.
        let mut text = String::new();
        std::io::Read::read_to_string(&mut self.child.stdout.take().unwrap(), &mut text).unwrap();
        let status = self.child.wait().unwrap();
        (
            status.code().unwrap_or(-1),
            serde_json::from_str(&text).unwrap_or(Value::Null),
        )
    }
}

/// The Merkle root of IDs 1..=n, from a simulated source (the same set gives the same root).
pub(crate) fn root_of_1_to(n: u64) -> Value {
    let env = Env::new();
    let c = env.file("c.json", r#"{"source": "sim", "page_size": 1000}"#);
    let (code, r, err) = env.json(&[
        "scan",
        "--contract",
        &c,
        "--source",
        &format!("sim:records={n}"),
    ]);
    assert_eq!(code, 0, "{err}");
    r["merkle_root"].clone()
}
