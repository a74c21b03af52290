//! The SQL keyset core against the real servers (PostgreSQL on 127.0.0.1:5432, MariaDB on
//! 127.0.0.1:3306): the key-order rule (`order`), signed and full-range integer keys
//! (`signed`), and the key-order property (`props`).
//!
//! Tables are named `sqlcore_<test>_<pid>` and dropped by a guard. Without a server a test
//! says "SKIPPED" loudly, and fails when CI is set (the helpers of `postgres` and `mysql`).
#![allow(clippy::unwrap_used, clippy::expect_used)] // Tests: a failed expectation is the report.

mod order;

use serde_json::{json, Value};

#[cfg(feature = "mysql")]
use crate::mysql::ROOT_DSN;
use crate::postgres::{Env, Pg};

/// Tables (and other objects) of a test, dropped with the guard.
pub(crate) struct Dropped<'a> {
    exec: Box<dyn Fn(&str) + 'a>,
    drops: Vec<String>,
}

impl<'a> Dropped<'a> {
    pub(crate) fn new(exec: impl Fn(&str) + 'a) -> Dropped<'a> {
        Dropped {
            exec: Box::new(exec),
            drops: Vec::new(),
        }
    }

    /// A name `sqlcore_<what>_<pid>`, dropped (with `DROP <kind> IF EXISTS`) at the end.
    pub(crate) fn name(&mut self, kind: &str, what: &str) -> String {
        let name = format!("sqlcore_{what}_{}", std::process::id());
        let drop = format!("DROP {kind} IF EXISTS {name}");
        (self.exec)(&drop);
        self.drops.push(drop);
        name
    }
}

impl Drop for Dropped<'_> {
    fn drop(&mut self) {
        for d in self.drops.iter().rev() {
            (self.exec)(d);
        }
    }
}

/// A `postgres:` source for `table` keyed by `key`.
pub(crate) fn pg_source(env: &Env, name: &str, table: &str, key: &str) -> String {
    env.source(name, table, key, json!({}))
}

/// A `mysql:` source for `table` keyed by `key`.
#[cfg(feature = "mysql")]
pub(crate) fn my_source(env: &Env, name: &str, table: &str, key: &str) -> String {
    let path = crate::util::write(
        env.dir.path(),
        name,
        &json!({"dsn": ROOT_DSN, "table": table, "key": key}).to_string(),
    );
    format!("mysql:{path}")
}

/// Scans `source` under a contract of `page_size` and `codec`: (exit code, receipt or error).
pub(crate) fn scan(env: &Env, source: &str, page_size: u32, codec: &str) -> (i32, Value, String) {
    let c = env.contract(
        "c.json",
        &json!({"source": "t", "page_size": page_size, "id_codec": codec}),
    );
    env.scan(&c, source)
}

/// The message of a `--json` error on stderr.
pub(crate) fn message(stderr: &str) -> String {
    serde_json::from_str::<Value>(stderr)
        .ok()
        .and_then(|v| v["error"]["message"].as_str().map(str::to_owned))
        .unwrap_or_else(|| stderr.to_owned())
}

/// A test's PostgreSQL connection and a guard for its objects.
pub(crate) fn pg() -> Option<Pg> {
    Pg::server()
}
