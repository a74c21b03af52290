#!/usr/bin/env bash
# End-to-end replay figures, through the release binary (the source's own parse
# rate, without the store, is `cargo bench --bench replay`):
#   1. `scan --checkpoint-every 100` of IDS `customer-N` string IDs (prefixed codec) listed in
#      pages of 1,000: the median wall time of RUNS runs, in IDs/s;
#   2. `resume` of the last page of a 2 M-ID replay (the scan stopped by max_pages one page
#      short): the median wall time (process start to exit) and peak RSS (/usr/bin/time -v)
#      of RUNS runs.
# Targets: >= 10 M IDs/s; resume <= 50 ms and <= 32 MB.
#
# Usage: benches/replay_e2e.sh [IDS] [RUNS]        (defaults: 10000000 5)
#   REPLAY_E2E_BASELINE=/path/to/an/older/scanledger runs every measurement with that binary
#   too, alternating with this tree's, over the same files, and prints the ratios of the
#   medians (before/after measured in the same run).
# Needs python3 (to write the replay files), bc, and GNU time at /usr/bin/time.
set -euo pipefail
cd "$(dirname "$0")/.."

ids="${1:-10000000}"
runs="${2:-5}"
case "$ids$runs" in
  *[!0-9]*) echo "replay_e2e: IDS and RUNS must be whole numbers" >&2; exit 2 ;;
esac
[ -x /usr/bin/time ] || { echo "replay_e2e: needs GNU time at /usr/bin/time" >&2; exit 2; }
baseline="${REPLAY_E2E_BASELINE:-}"
[ -z "$baseline" ] || [ -x "$baseline" ] || { echo "replay_e2e: $baseline is not an executable" >&2; exit 2; }

cargo build --release --quiet
bin="$PWD/target/release/scanledger"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# The binaries measured: this tree's first, the baseline's second.
names=(this)
bins=("$bin")
if [ -n "$baseline" ]; then
  names+=(baseline)
  bins+=("$baseline")
fi

# pages.jsonl of N IDs: {"cursor": ..., "items": ["customer-1", ...], "next": ..., "snapshot": "s1"}
write_pages() {
  python3 - "$1" "$2" <<'EOF'
import json, sys
n, path = int(sys.argv[1]), sys.argv[2]
per = 1000
pages = n // per
with open(path, "w") as f:
    for p in range(pages):
        line = {"cursor": None if p == 0 else f"c{p}",
                "items": [f"customer-{p * per + i + 1}" for i in range(per)],
                "next": f"c{p + 1}" if p + 1 < pages else None,
                "snapshot": "s1"}
        f.write(json.dumps(line) + "\n")
EOF
}

median() { sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
# A store is its file and the key file beside it (docs/FORMAT.md): both go, or are copied, together.
rm_store() { rm -f "$1" "$1.keys" "$1.keys.stale" "$1.journal"; }
cp_store() {
  rm_store "$2"
  cp "$1" "$2"
  [ ! -e "$1.keys" ] || cp "$1.keys" "$2.keys"
  [ ! -e "$1.journal" ] || cp "$1.journal" "$2.journal"
}

echo "replay_e2e: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"

# 1. Scan throughput.
write_pages "$ids" "$work/pages.jsonl"
echo '{"source": "customers", "id_codec": "prefixed", "page_size": 1000, "snapshot_id": "s1"}' >"$work/c.json"
declare -A times cpus
for _ in $(seq "$runs"); do
  for i in "${!bins[@]}"; do
    rm_store "$work/s.redb"
    start=$(date +%s.%N)
    /usr/bin/time -f "%U %S" -o "$work/cpu.txt" "${bins[$i]}" --store "$work/s.redb" scan \
      --contract "$work/c.json" --source "replay:$work/pages.jsonl" --checkpoint-every 100 >/dev/null
    end=$(date +%s.%N)
    times[$i]+="$(echo "$end - $start" | bc -l | cut -c1-6) "
    cpus[$i]+="$(awk '{print $1 + $2}' "$work/cpu.txt") "
  done
done
declare -a tmed cmed
for i in "${!bins[@]}"; do
  t=$(printf '%s\n' ${times[$i]} | median)
  c=$(printf '%s\n' ${cpus[$i]} | median)
  tmed[$i]=$t
  cmed[$i]=$c
  echo "${names[$i]}: scan of $ids customer-N IDs, --checkpoint-every 100: median wall $t s of [${times[$i]% }] = $(echo "$ids / $t / 1000000" | bc -l | cut -c1-5) M IDs/s"
  # On a shared machine the wall time includes waiting for a core; the CPU time (user + system,
  # all threads) bounds what an idle machine would take, fsync waits aside.
  echo "  median CPU (user + system) $c s of [${cpus[$i]% }] = $(echo "$ids / $c / 1000000" | bc -l | cut -c1-5) M IDs per CPU-second"
done
if [ -n "$baseline" ]; then
  echo "  this / baseline: wall $(echo "${tmed[0]} / ${tmed[1]}" | bc -l | cut -c1-5)x, CPU $(echo "${cmed[0]} / ${cmed[1]}" | bc -l | cut -c1-5)x (below 1 is faster)"
fi

# 2. Resume of the last page of a 2 M-ID replay.
write_pages 2000000 "$work/p2m.jsonl"
echo '{"source": "customers", "id_codec": "prefixed", "page_size": 1000, "snapshot_id": "s1", "limits": {"max_pages": 1999}}' >"$work/c1999.json"
for i in "${!bins[@]}"; do
  rm_store "$work/r$i.redb"
  "${bins[$i]}" --store "$work/r$i.redb" scan --contract "$work/c1999.json" --source "replay:$work/p2m.jsonl" \
    --checkpoint-every 100 >/dev/null || [ $? -eq 3 ]
done
declare -A walls rss rcpus
for _ in $(seq "$runs"); do
  for i in "${!bins[@]}"; do
    cp_store "$work/r$i.redb" "$work/r2.redb"
    # GNU time prints the wall time in centiseconds only: the wall time is taken here.
    start=$(date +%s.%N)
    if ! /usr/bin/time -v "${bins[$i]}" --store "$work/r2.redb" resume run-1 --max-pages 2000 >/dev/null 2>"$work/time.txt"; then
      echo "replay_e2e: the resume failed (${names[$i]}):" >&2
      cat "$work/time.txt" >&2
      exit 1
    fi
    end=$(date +%s.%N)
    wall=$(echo "($end - $start) * 1000" | bc -l | cut -d. -f1)
    kb=$(grep 'Maximum resident set size' "$work/time.txt" | awk '{print $NF}')
    user=$(grep 'User time' "$work/time.txt" | awk '{print $NF}')
    sys=$(grep 'System time' "$work/time.txt" | awk '{print $NF}')
    walls[$i]+="$wall "
    rss[$i]+="$kb "
    rcpus[$i]+="$(echo "($user + $sys) * 1000" | bc -l | cut -d. -f1) "
  done
done
declare -a wmed
for i in "${!bins[@]}"; do
  wmed[$i]=$(printf '%s\n' ${walls[$i]} | median)
  echo "${names[$i]}: resume of the last page of a 2 M-ID replay: median wall ${wmed[$i]} ms of [${walls[$i]% }], median peak RSS $(printf '%s\n' ${rss[$i]} | median) KB of [${rss[$i]% }]"
  echo "  median CPU (user + system, all threads) $(printf '%s\n' ${rcpus[$i]} | median) ms of [${rcpus[$i]% }] (10 ms resolution)"
done
if [ -n "$baseline" ]; then
  echo "  this / baseline: resume wall $(echo "${wmed[0]} / ${wmed[1]}" | bc -l | cut -c1-5)x"
fi
