#!/usr/bin/env bash
# Peak memory and wall time of `scanledger merge` through the release binary, under GNU time:
# a plan of SHARDS shards and one store per shard holding IDS IDs in all, `0, STEP, 2 STEP, ...`
# (STEP 1: dense, full partitions; STEP 5: every fifth ID, one 8 KiB bitmap per partition),
# written by the merge bench's setup (`cargo bench --bench merge -- --setup DIR ...`, not
# measured), then merged. The merge streams the shard stores partition by partition into the
# merged run: target at most 128 MB whatever the number of IDs. The merged run must be
# `verified` with the root the setup computed of the whole set.
#
# Usage: benches/merge_memory.sh [IDS SHARDS STEP]...   (default: 6400000000 64 1 1000000000 64 5)
#   SCANLEDGER_BIN=PATH uses a binary already built instead of `cargo build --release`.
#   MEMORY_DIR=PATH keeps the stores there (GBs at the defaults) instead of a temp dir.
# Needs GNU time at /usr/bin/time, bc and jq.
set -euo pipefail
cd "$(dirname "$0")/.."

[ "$#" -gt 0 ] || set -- 6400000000 64 1 1000000000 64 5
[ $(($# % 3)) = 0 ] || { echo "merge_memory: give IDS SHARDS STEP triples" >&2; exit 2; }
case "$*" in
  *[!0-9\ ]*) echo "merge_memory: IDS, SHARDS and STEP must be whole numbers" >&2; exit 2 ;;
esac
[ -x /usr/bin/time ] || { echo "merge_memory: needs GNU time at /usr/bin/time" >&2; exit 2; }
if [ -n "${SCANLEDGER_BIN:-}" ]; then
  bin="$SCANLEDGER_BIN"
else
  cargo build --release --quiet --bin scanledger
  bin="$PWD/target/release/scanledger"
fi
[ -x "$bin" ] || { echo "merge_memory: $bin is not an executable" >&2; exit 2; }
work="${MEMORY_DIR:-$(mktemp -d)}"
mkdir -p "$work"
[ -n "${MEMORY_DIR:-}" ] || trap 'rm -rf "$work"' EXIT
limit_mb=128
worst=0

while [ "$#" -ge 3 ]; do
  ids="$1" shards="$2" step="$3"
  shift 3
  dir="$work/merge-$ids-$shards-$step"
  rm -rf "$dir"
  start=$(date +%s)
  cargo bench --quiet --bench merge -- --setup "$dir" "$ids" "$shards" "$step" >/dev/null
  setup_s=$(($(date +%s) - start))
  shard_mb=$(du -cm "$dir"/shard-*.redb | tail -1 | cut -f1)
  stores=()
  for ((k = 0; k < shards; k++)); do stores+=("$dir/shard-$k.redb"); done
  code=0
  /usr/bin/time -f '%M %e' -o "$dir/time" "$bin" --quiet merge --plan "$dir/plan.json" \
    --out "$dir/merged.redb" --json "${stores[@]}" >"$dir/out.json" 2>"$dir/err" || code=$?
  if [ "$code" != 0 ]; then
    echo "merge_memory: merge exited $code" >&2
    cat "$dir/err" >&2
    exit 1
  fi
  read -r kib secs <"$dir/time"
  status=$(jq -r .receipt.coverage_status "$dir/out.json")
  root=$(jq -r .receipt.merkle_root "$dir/out.json")
  if [ "$status" != verified ] || [ "$root" != "$(cat "$dir/root")" ]; then
    echo "merge_memory: merged $status, root $root, the whole set's $(cat "$dir/root")" >&2
    exit 1
  fi
  [ "$kib" -le "$worst" ] || worst=$kib
  printf 'merge of %s IDs (every %s) in %s shards: peak %7.1f MB  wall %7.1f s  (shard stores %s MB, merged store %s MB, setup %s s)\n' \
    "$ids" "$step" "$shards" "$(echo "$kib / 1024" | bc -l)" "$secs" "$shard_mb" \
    "$(du -m "$dir/merged.redb" | cut -f1)" "$setup_s"
  rm -rf "$dir"
done

echo "merge_memory: the largest peak was $((worst / 1024)) MB (target: at most $limit_mb MB)"
[ "$worst" -le $((limit_mb * 1024)) ]
