#!/usr/bin/env bash
# The main job, end to end on the embedded store: a scan stopped by its page budget (unknown),
# its receipt, a resume into a verified run, a second run a week later, the diff between them,
# the independent verification of a receipt, and a scan that must fail.
# Usage: bash scripts/demo.sh   (builds in release; takes about a minute on 2 cores)
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build --release --quiet
bin="$PWD/target/release/scanledger"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
store="$work/demo.redb"
sl() { "$bin" --store "$store" "$@"; }
say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
# Exit codes 3 (unknown) and 4 (failed) are answers, not errors, in this demo.
answer() { set +e; "$@"; local code=$?; set -e; echo "(exit $code)"; }

cat > "$work/contract.json" <<'JSON'
{
  "source": "customer-registry",
  "tenant": "acme",
  "query": {"schema_version": {"ne": 3}},
  "order": ["id"],
  "page_size": 1000,
  "expected_count": 1000000,
  "limits": {"max_pages": 300, "retries": 2, "page_timeout_ms": 2000},
  "on_expired_cursor": "restart"
}
JSON
week1="sim:records=1000000,start=1,snapshot=customers-2026-11-22,label_every=250"
week2="sim:records=1010000,start=1,snapshot=customers-2026-11-29,label_every=250"

say "1. Scan 1,000,000 customers with a budget of 300 pages: a partial read is never an inventory"
answer sl scan --contract "$work/contract.json" --source "$week1"

say "2. Resume run-1 from its stored cursor with a raised budget"
answer sl resume run-1 --max-pages 2000 --progress   # the run recorded its source

say "3. The runs in the store"
sl runs

say "4. A week later the collection has grown by 10,000: scan it again under a new snapshot"
sed -e 's/"expected_count": 1000000/"expected_count": 1010000/' -e 's/"max_pages": 300/"max_pages": 2000/' "$work/contract.json" > "$work/contract2.json"
answer sl scan --contract "$work/contract2.json" --source "$week2" --checkpoint-every 10

say "5. What changed between the two runs (Merkle leaves first, then only differing partitions)"
sl diff run-1 run-2

say "6. Verify run-1's receipt against the store, then tamper with it"
sl --json receipt run-1 > "$work/receipt.json"
answer sl verify "$work/receipt.json"
sed 's/"unique_ids_observed": 1000000/"unique_ids_observed": 999999/' "$work/receipt.json" > "$work/tampered.json"
answer sl verify "$work/tampered.json"

say "7. Recompute the Merkle root independently (Python, standard library only)"
sl export run-1 > "$work/run-1.txt"
python3 contrib/verify_receipt.py "$work/receipt.json" "$work/run-1.txt"

say "8. A source whose page 3 repeats page 2's cursor: failed, never verified"
cat > "$work/loop.jsonl" <<'JSONL'
{"cursor": null, "items": ["customer-1", "customer-2"], "next": "c2", "snapshot": "S"}
{"cursor": "c2", "items": ["customer-3"], "next": "c3", "snapshot": "S"}
{"cursor": "c3", "items": ["customer-4"], "next": "c2", "snapshot": "S"}
JSONL
echo '{"source": "customer-registry", "tenant": "acme", "id_codec": "prefixed"}' > "$work/loop.json"
answer sl scan --contract "$work/loop.json" --source "replay:$work/loop.jsonl"
