#!/usr/bin/env bash
# What a crash costs in syncs, through the release binary and counted by strace (every fsync
# and fdatasync of the process: the store, its journal, its key file, directories):
#   killed:  `scan` killed with SIGKILL mid-run, then the `resume` that finishes it;
#   clean:   `scan` stopped with Ctrl-C (SIGINT: it writes its stop and closes the store), the
#            syncs it makes after the signal, then the `resume` that finishes it.
# Each resume continues from the stored cursor against a `sim:` source that ends there, so it
# fetches one empty last page and writes the finish: both resumes do the same work after
# they are ready, and what differs is getting ready (the killed one repairs the file and folds
# the journal the dead writer left).
#
# Usage: benches/crash_syncs.sh [REPEATS]        (default 5; prints each repeat and medians)
# Needs strace and python3.
set -euo pipefail
cd "$(dirname "$0")/.."

repeats="${1:-5}"
case "$repeats" in
  '' | *[!0-9]*) echo "crash_syncs: REPEATS must be a whole number" >&2; exit 2 ;;
esac
command -v strace >/dev/null || { echo "crash_syncs: needs strace" >&2; exit 2; }

cargo build --release --quiet --bin scanledger
bin="$PWD/target/release/scanledger"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"
echo '{"source": "crash-sim", "tenant": "t", "page_size": 100}' > contract.json
# 400 pages, 20 ms apart: the signal lands after about 70 of them.
source="sim:records=40000,delay_ms=20"

count_syncs() { grep -cE '^[0-9]+ +f(data)?sync\(' "$1" || true; }
pages_of() {
  "$bin" --store "$1" --json runs |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["runs"][0]["pages_observed"])'
}
# Resumes the store's run against a source that ends at its cursor; prints the syncs.
resume_syncs() {
  local n
  n="$(pages_of "$1")"
  strace -f -e trace=fsync,fdatasync -o "$1.resume.log" \
    "$bin" -q --store "$1" resume latest --source "sim:records=$((n * 100))" >/dev/null 2>&1 || true
  "$bin" --store "$1" --json runs | grep -q '"coverage_status": "verified"' ||
    { echo "crash_syncs: the resume of $1 did not end verified" >&2; exit 1; }
  count_syncs "$1.resume.log"
}
median() { sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }

: > killed.txt
: > clean.txt
: > clean_resume.txt
for i in $(seq 1 "$repeats"); do
  rm -f k.redb* s.redb*
  "$bin" -q --store k.redb scan --contract contract.json --source "$source" >/dev/null 2>&1 &
  pid=$!
  sleep 1.5
  kill -KILL "$pid"
  wait "$pid" 2>/dev/null || true

  strace -f -e trace=fsync,fdatasync -o s.scan.log \
    "$bin" -q --store s.redb scan --contract contract.json --source "$source" >/dev/null 2>&1 &
  tracer=$!
  sleep 1.5
  kill -INT "$(pgrep -P "$tracer")"
  wait "$tracer" || true
  stop="$(awk '/SIGINT/ {after = 1} after && /f(data)?sync\(/' s.scan.log | wc -l)"

  killed="$(resume_syncs k.redb)"
  clean="$(resume_syncs s.redb)"
  echo "$killed" >> killed.txt
  echo "$((stop + clean))" >> clean.txt
  echo "$clean" >> clean_resume.txt
  echo "repeat $i: killed: resume $killed syncs | clean: stop $stop + resume $clean = $((stop + clean)) syncs"
done
echo "median: killed resume $(median < killed.txt) syncs | clean stop + resume $(median < clean.txt) syncs (the resume alone $(median < clean_resume.txt))"
