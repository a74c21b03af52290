#!/usr/bin/env bash
# The main job, end to end on the embedded store: last week's verified scan; this week's scan
# stopped by its page budget (unknown), its resume into a verified run; the diff between the
# two weeks; the independent verification of a receipt; a scan that must fail; and the review
# packet: the HTML report of the resumed run against the week-before run.
#
# Usage: bash scripts/demo.sh [DIR]   (default DIR: target/demo). Everything it writes stays in
# DIR, named at the end. It says what it does from its first line: which binary, the build's
# progress when it builds one, then each step.
#
# The binary, first found: $SCANLEDGER_BIN; `scanledger` on PATH when it is this checkout's
# version (`cargo install --path .` puts it there); else this checkout, built with only what
# the demo needs: `cargo build --profile quick --no-default-features --features cli` (the
# store, the replay and sim sources; no network source, so no TLS, database or MCP crates to
# compile; unoptimized, which the demo's 2 million IDs barely notice: Cargo.toml,
# [profile.quick]). Figures measured on 2 cores are in the README ("Set-up on a fresh machine").
set -euo pipefail
cd "$(dirname "$0")/.."
started=$SECONDS

# Bold headings on a terminal only: never an escape code into a pipe or a file, nor with NO_COLOR.
if [ -t 1 ] && [ -z "${NO_COLOR:-}" ]; then
  say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
else
  say() { printf '\n== %s\n' "$*"; }
fi

version="$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)"
if [ -n "${SCANLEDGER_BIN:-}" ]; then
  bin="$SCANLEDGER_BIN"
  say "The binary: $bin (SCANLEDGER_BIN)"
elif on_path="$(command -v scanledger)" && [ "$("$on_path" --version 2>/dev/null)" = "scanledger $version" ]; then
  bin="$on_path"
  say "The binary: $bin (on PATH, scanledger $version; SCANLEDGER_BIN=PATH picks another)"
else
  say "Building scanledger $version for the demo (store, replay and sim sources only)"
  echo "cargo build --profile quick --no-default-features --features cli --bin scanledger"
  echo "(a fresh clone compiles about 95 crates: 101 s on 2 busy cores; then it takes seconds."
  echo " A scanledger on PATH from \`cargo install --path .\`, or SCANLEDGER_BIN=PATH, skips this.)"
  # Cargo's own progress: a bar on a terminal, a line per crate in a pipe.
  cargo build --profile quick --no-default-features --features cli --bin scanledger
  # Where cargo put it: CARGO_TARGET_DIR or a config may move the target folder.
  target_dir="$(cargo metadata --no-deps --format-version 1 | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')"
  bin="${target_dir:-$PWD/target}/quick/scanledger"
  echo "built in $((SECONDS - started)) s: $bin"
fi
work="${1:-target/demo}"
mkdir -p "$work"
work="$(cd "$work" && pwd)"
store="$work/demo.redb"
# A fresh store each time (so the runs are run-1, run-2, ...): remove only what the demo writes.
rm -f "$store" "$store.journal" "$store.keys" "$work"/contract-week1.json "$work"/contract-week2.json \
  "$work"/receipt-run-2.json "$work"/tampered.json "$work"/run-2.txt "$work"/loop.json \
  "$work"/loop.jsonl "$work"/report-run-2.html
sl() { "$bin" --store "$store" "$@"; }
# Exit codes 3 (unknown) and 4 (failed) are answers, not errors, in this demo.
answer() { set +e; "$@"; local code=$?; set -e; echo "(exit $code)"; }

cat > "$work/contract-week2.json" <<'JSON'
{
  "source": "customer-registry",
  "tenant": "acme",
  "query": {"schema_version": {"ne": 3}},
  "order": ["id"],
  "page_size": 1000,
  "expected_count": 1010000,
  "limits": {"max_pages": 300, "retries": 2, "page_timeout_ms": 2000},
  "on_expired_cursor": "restart"
}
JSON
sed -e 's/"expected_count": 1010000/"expected_count": 1000000/' -e 's/"max_pages": 300/"max_pages": 2000/' \
  "$work/contract-week2.json" > "$work/contract-week1.json"
week1="sim:records=1000000,start=1,snapshot=customers-2026-11-22,label_every=250"
week2="sim:records=1010000,start=1,snapshot=customers-2026-11-29,label_every=250"

say "1. Last week: scan the 1,000,000 customers of snapshot 2026-11-22 (run-1)"
answer sl scan --contract "$work/contract-week1.json" --source "$week1" --checkpoint-every 10

say "2. This week the collection has grown by 10,000: scan it with a budget of 300 pages; a partial read is never an inventory"
answer sl scan --contract "$work/contract-week2.json" --source "$week2"

say "3. Resume run-2 from its stored cursor with a raised budget"
answer sl resume run-2 --max-pages 2000 --progress   # the run recorded its source

say "4. The runs in the store"
sl runs

say "5. What changed between the two weeks (Merkle leaves first, then only differing partitions)"
sl diff run-1 run-2

say "6. Verify run-2's receipt against the store, then tamper with it"
sl --json receipt run-2 > "$work/receipt-run-2.json"
answer sl verify "$work/receipt-run-2.json"
sed 's/"unique_ids_observed": 1010000/"unique_ids_observed": 1009999/' "$work/receipt-run-2.json" > "$work/tampered.json"
answer sl verify "$work/tampered.json"

say "7. Recompute the Merkle root independently (Python, standard library only)"
sl export run-2 > "$work/run-2.txt"
python3 contrib/verify_receipt.py "$work/receipt-run-2.json" "$work/run-2.txt"

say "8. A source whose page 3 repeats page 2's cursor: failed, never verified"
cat > "$work/loop.jsonl" <<'JSONL'
{"cursor": null, "items": ["customer-1", "customer-2"], "next": "c2", "snapshot": "S"}
{"cursor": "c2", "items": ["customer-3"], "next": "c3", "snapshot": "S"}
{"cursor": "c3", "items": ["customer-4"], "next": "c2", "snapshot": "S"}
JSONL
echo '{"source": "customer-registry", "tenant": "acme", "id_codec": "prefixed"}' > "$work/loop.json"
answer sl scan --contract "$work/loop.json" --source "replay:$work/loop.jsonl"

say "9. The review packet: the report of the resumed run-2 against the week-before run-1"
answer sl report run-2 --against run-1 -o "$work/report-run-2.html"

say "Kept in $work"
echo "  store    $store   (try: $bin --store $store runs)"
echo "  receipt  $work/receipt-run-2.json"
echo "  report   open file://$work/report-run-2.html in a browser"
echo "  done in $((SECONDS - started)) s"
