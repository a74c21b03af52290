//! Shared helpers of the integration tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{json, Value};

/// The `scanledger` binary cargo built for these tests.
pub(crate) fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_scanledger"))
}

/// Runs the binary with `args`; returns (exit code, stdout, stderr).
pub(crate) fn run(args: &[&str]) -> (i32, String, String) {
    let out: Output = Command::new(bin())
        .args(args)
        .output()
        .expect("spawn scanledger");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Writes `text` to `dir/name` and returns the path as a String.
pub(crate) fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).expect("write fixture");
    p.to_string_lossy().into_owned()
}

/// A store in a temporary directory and the commands run against it.
pub(crate) struct Env {
    pub(crate) dir: tempfile::TempDir,
    pub(crate) store: String,
}

impl Env {
    pub(crate) fn new() -> Env {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = dir.path().join("s.redb").to_string_lossy().into_owned();
        Env { dir, store }
    }

    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }

    /// `scanledger --store S ARGS...`; asserts no raw cursor leaks into the output.
    pub(crate) fn sl(&self, args: &[&str]) -> (i32, String, String) {
        let mut all = vec!["--store", self.store.as_str()];
        all.extend_from_slice(args);
        let (code, out, err) = run(&all);
        for text in [&out, &err] {
            assert!(
                !text.contains("sim-offset-") && !text.contains("rawcur_"),
                "a raw cursor was printed by {args:?}:\n{text}"
            );
        }
        (code, out, err)
    }

    pub(crate) fn write(&self, name: &str, text: &str) -> String {
        write(self.path(), name, text)
    }

    /// Scans under `contract` from `source`; returns (exit code, receipt JSON).
    pub(crate) fn scan(&self, name: &str, contract: &Value, source: &str) -> (i32, Value) {
        let c = self.write(&format!("{name}.contract.json"), &contract.to_string());
        let (code, out, err) = self.sl(&["--json", "scan", "--contract", &c, "--source", source]);
        let receipt: Value = serde_json::from_str(&out)
            .unwrap_or_else(|e| panic!("scan {name}: no JSON receipt ({e}): {out}\n{err}"));
        (code, receipt)
    }

    /// A replay file serving `ids` in pages of `per_page`, each ID rendered by `render`.
    /// Cursors are `rawcur_N`, so a leak is caught by `sl`.
    pub(crate) fn replay(
        &self,
        name: &str,
        ids: &[Value],
        per_page: usize,
        snapshot: &str,
    ) -> String {
        let mut lines = String::new();
        let chunks: Vec<&[Value]> = if ids.is_empty() {
            vec![&[]]
        } else {
            ids.chunks(per_page).collect()
        };
        for (i, chunk) in chunks.iter().enumerate() {
            let cursor = if i == 0 {
                Value::Null
            } else {
                json!(format!("rawcur_{i}"))
            };
            let next = if i + 1 == chunks.len() {
                Value::Null
            } else {
                json!(format!("rawcur_{}", i + 1))
            };
            let line =
                json!({"cursor": cursor, "items": chunk, "next": next, "snapshot": snapshot});
            lines.push_str(&line.to_string());
            lines.push('\n');
        }
        format!("replay:{}", self.write(name, &lines))
    }

    /// Scans the int IDs `ids` as a run of `source`/`tenant`; returns the receipt.
    pub(crate) fn scan_ints(&self, name: &str, source: &str, tenant: &str, ids: &[u64]) -> Value {
        let contract =
            json!({"source": source, "tenant": tenant, "id_codec": "int", "page_size": 1000});
        let items: Vec<Value> = ids.iter().map(|i| json!(i)).collect();
        let src = self.replay(&format!("{name}.jsonl"), &items, 1000, "snap-1");
        let (code, receipt) = self.scan(name, &contract, &src);
        assert_eq!(code, 0, "scan {name}: {receipt}");
        receipt
    }
}
