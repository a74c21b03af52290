#!/usr/bin/env bash
# Runs every fuzz target (or the ones named) for SECONDS each, default 10, and exits
# non-zero if any target crashes. CI runs this as the fuzz smoke; locally, run one target
# for longer with: cargo +nightly fuzz run TARGET -- -max_total_time=600
#
# Usage: fuzz/smoke.sh [SECONDS] [TARGET...]
#
# cargo-fuzz needs a nightly compiler (sanitizer flags). The script uses the `nightly`
# toolchain when rustup has one, else the default toolchain with RUSTC_BOOTSTRAP=1, and
# says which. Crash inputs land in fuzz/artifacts/TARGET/; replay one with
# cargo +nightly fuzz run TARGET fuzz/artifacts/TARGET/crash-…
set -euo pipefail
cd "$(dirname "$0")"

secs="${1:-10}"
[ $# -gt 0 ] && shift
case "$secs" in
  '' | *[!0-9]*) echo "smoke: SECONDS must be a whole number, got '$secs'" >&2; exit 2 ;;
esac

if command -v rustup >/dev/null && rustup toolchain list | grep -q '^nightly'; then
  fuzz=(cargo +nightly fuzz)
  echo "smoke: using the nightly toolchain ($(rustc +nightly --version))"
else
  export RUSTC_BOOTSTRAP=1
  fuzz=(cargo fuzz)
  echo "smoke: no nightly toolchain; using $(rustc --version) with RUSTC_BOOTSTRAP=1"
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "smoke: cargo-fuzz is missing; install it with: cargo install cargo-fuzz" >&2
  exit 2
fi

if [ $# -gt 0 ]; then
  targets=("$@")
else
  mapfile -t targets < <("${fuzz[@]}" list)
fi

"${fuzz[@]}" build

# The store leaks a redb handle on purpose after catching a storage-engine panic on a damaged
# file (dropping it would panic again); leak reports are not findings here.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
logs="$(mktemp -d)"
failed=()
for t in "${targets[@]}"; do
  echo "smoke: $t for ${secs}s"
  # -rss_limit_mb: the targets are bounded; a run that needs more memory is a finding.
  if "${fuzz[@]}" run "$t" -- -max_total_time="$secs" -rss_limit_mb=512 \
      >"$logs/$t.log" 2>&1; then
    grep -E '^Done [0-9]+ runs' "$logs/$t.log" | sed "s/^/smoke: $t: /" || true
  else
    failed+=("$t")
    echo "smoke: $t CRASHED; the end of its log ($logs/$t.log):"
    tail -n 40 "$logs/$t.log"
  fi
done

if [ ${#failed[@]} -gt 0 ]; then
  echo "smoke: FAILED: ${failed[*]}"
  exit 1
fi
echo "smoke: all ${#targets[@]} targets ran ${secs}s without a crash"
