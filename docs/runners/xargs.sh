#!/bin/sh
# Scan every shard of a plan as local processes, JOBS at a time, then merge them.
#
#   scanledger plan --contract contract.json --source SPEC --shards 8 --out plan
#   JOBS=4 sh docs/runners/xargs.sh plan/plan.json 8
#
# Each shard writes plan/shard-K.redb; the merged run goes to plan/merged.redb, and the
# script exits with the merge's code (0 verified, 3 unknown, 4 failed). A shard's exit code
# is not what decides: the merge reads every shard's receipt from its store. Running the
# script again continues the shards that did not finish (a shard scan resumes its own run).
# SCANLEDGER_BIN names the binary (default: scanledger on PATH).
set -u
plan=${1:?usage: xargs.sh PLAN.json N}
n=${2:?usage: xargs.sh PLAN.json N}
bin=${SCANLEDGER_BIN:-scanledger}
jobs=${JOBS:-4}
dir=$(dirname "$plan")

# Shards that end unknown or failed are reported by the merge; keep going.
seq 0 $((n - 1)) | xargs -P "$jobs" -I{} \
    "$bin" --quiet --store "$dir/shard-{}.redb" scan --plan "$plan" --shard {} --no-progress >/dev/null 2>&1 || true

set --
k=0
while [ "$k" -lt "$n" ]; do
    set -- "$@" "$dir/shard-$k.redb"
    k=$((k + 1))
done
# A shard that never ran has no store: merge only the ones that exist, the rest are missing.
existing=""
for f in "$@"; do
    [ -f "$f" ] && existing="$existing $f"
done
# shellcheck disable=SC2086 # the list is space-separated paths made above
exec "$bin" --store "$dir/merged.redb" merge --plan "$plan" --out "$dir/merged.redb" $existing
