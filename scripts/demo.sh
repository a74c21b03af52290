#!/usr/bin/env bash
# The main job, end to end on the embedded store: last week's verified scan; this week's scan
# stopped by its page budget (unknown), its resume into a verified run; the diff between the
# two weeks; the independent verification of a receipt; a scan that must fail; and the review
# packet: the HTML report of the resumed run against the week-before run.
# Usage: bash scripts/demo.sh [DIR]   (default DIR: target/demo; builds in release; takes
# about a minute on 2 cores). Everything it writes stays in DIR, named at the end.
# SCANLEDGER_BIN=PATH runs that binary instead of building one (the test suite runs the
# demo this way with its debug build).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -n "${SCANLEDGER_BIN:-}" ]; then
  bin="$SCANLEDGER_BIN"
else
  cargo build --release --quiet
  bin="$PWD/target/release/scanledger"
fi
work="${1:-target/demo}"
mkdir -p "$work"
work="$(cd "$work" && pwd)"
store="$work/demo.redb"
# A fresh store each time (so the runs are run-1, run-2, ...): remove only what the demo writes.
rm -f "$store" "$work"/contract-week1.json "$work"/contract-week2.json "$work"/receipt-run-2.json \
  "$work"/tampered.json "$work"/run-2.txt "$work"/loop.json "$work"/loop.jsonl "$work"/report-run-2.html
sl() { "$bin" --store "$store" "$@"; }
# Bold headings on a terminal only: never an escape code into a pipe or a file, nor with NO_COLOR.
if [ -t 1 ] && [ -z "${NO_COLOR:-}" ]; then
  say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
else
  say() { printf '\n== %s\n' "$*"; }
fi
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
