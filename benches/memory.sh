#!/usr/bin/env bash
# Peak memory of the commands whose input grows without bound, through the release binary:
#   1. `scan` of IDS dense IDs (sim source) in pages of 100,000 with `--checkpoint-every
#      10000`: what waits for the next durable checkpoint is bounded in bytes, whatever the
#      page size and the group;
#   2. two runs of DIFF_IDS IDs (dense, and 20%-dense random), then `diff`, `diff --output`,
#      `missing --all` and `missing --output` between them: ranges are counted and written
#      partition by partition, never gathered.
# Each command runs under GNU time; the peak RSS (`%M`) and the wall time are printed.
# Target: every command at most 128 MB, whatever the number of IDs, except the scan of random
# IDs, whose figure is printed only: a scan keeps its run's ID set in memory (that is how a
# duplicate is caught), and 20%-dense random IDs need a bitmap of 8 KiB per 65,536-ID
# partition: the set itself, about 62 MB at 100 M IDs, grows with the collection by design.
#
# Usage: benches/memory.sh [IDS] [DIFF_IDS]     (defaults: 1000000000 100000000)
#   SCANLEDGER_BIN=PATH uses a binary already built instead of `cargo build --release`.
#   MEMORY_DIR=PATH keeps the stores there (several GB at the defaults) instead of a temp dir.
# Needs GNU time at /usr/bin/time and bc.
set -euo pipefail
cd "$(dirname "$0")/.."

ids="${1:-1000000000}"
diff_ids="${2:-100000000}"
case "$ids$diff_ids" in
  '' | *[!0-9]*) echo "memory: IDS and DIFF_IDS must be whole numbers" >&2; exit 2 ;;
esac
[ -x /usr/bin/time ] || { echo "memory: needs GNU time at /usr/bin/time" >&2; exit 2; }
if [ -n "${SCANLEDGER_BIN:-}" ]; then
  bin="$SCANLEDGER_BIN"
else
  cargo build --release --quiet
  bin="$PWD/target/release/scanledger"
fi
[ -x "$bin" ] || { echo "memory: $bin is not an executable" >&2; exit 2; }
work="${MEMORY_DIR:-$(mktemp -d)}"
mkdir -p "$work"
[ -n "${MEMORY_DIR:-}" ] || trap 'rm -rf "$work"' EXIT
limit_mb=128
worst=0

# measure [--no-target] NAME CMD...: runs CMD (its output to a file), prints its peak RSS
# and wall time; with --no-target the peak is not held to the target.
measure() {
  local target=1
  if [ "$1" = --no-target ]; then target=0; shift; fi
  local name="$1"
  shift
  local code=0
  /usr/bin/time -f '%M %e' -o "$work/time" "$@" >"$work/out" 2>"$work/err" || code=$?
  if [ "$code" -gt 4 ]; then
    echo "memory: $name exited $code" >&2
    cat "$work/err" >&2
    exit 1
  fi
  local kib secs
  read -r kib secs <"$work/time"
  [ "$target" = 0 ] || [ "$kib" -le "$worst" ] || worst=$kib
  printf '%-44s peak %7.1f MB  wall %8.1f s  exit %d%s\n' "$name" "$(echo "$kib / 1024" | bc -l)" \
    "$secs" "$code" "$([ "$target" = 1 ] || echo '  (no target)')"
}

echo '{"source": "mem", "page_size": 100000}' >"$work/contract.json"
echo "memory: $bin, stores in $work"

store="$work/scan.redb"
rm -f "$store"*
measure "scan $ids dense IDs, group of 10,000 pages" \
  "$bin" scan --store "$store" --contract "$work/contract.json" \
  --source "sim:records=$ids" --checkpoint-every 10000 --json
rm -f "$store"*

store="$work/diff.redb"
rm -f "$store"*
measure "scan $diff_ids dense IDs" \
  "$bin" scan --store "$store" --contract "$work/contract.json" --source "sim:records=$diff_ids" --json
measure --no-target "scan $diff_ids random IDs (20% dense)" \
  "$bin" scan --store "$store" --contract "$work/contract.json" \
  --source "sim:records=$diff_ids,ids=random" --json
measure "diff (32-range summary)" "$bin" diff --store "$store" run-1 run-2
measure "diff --output FILE" "$bin" diff --store "$store" run-1 run-2 --output "$work/diff.txt"
measure "missing --all" "$bin" missing --store "$store" run-2 --against run-1 --all
measure "missing --output FILE" \
  "$bin" missing --store "$store" run-2 --against run-1 --output "$work/missing.txt"
rm -f "$store"* "$work/diff.txt" "$work/missing.txt"

echo "memory: the largest peak held to the target was $((worst / 1024)) MB (target: at most $limit_mb MB)"
[ "$worst" -le $((limit_mb * 1024)) ]
