#!/usr/bin/env bash
# `scanledger migration verify` side by side with reladiff 0.6.0 (the maintained fork of
# datafold's data-diff) and with the bare reads of both tables, in one run, alternating.
#
# Run:   bash benches/reladiff.sh                      (1,000,000 rows, 5 rounds)
#        ROWS=10000000 ROUNDS=3 bash benches/reladiff.sh
#
# The table: six columns (id BIGINT key, name, email, amount DECIMAL(12,2), placed DATETIME,
# qty INT), MariaDB `bench_rd` copied to PostgreSQL `bench_rd` (numeric(12,2), timestamp).
# Two cases: equal tables, then 100 rows deleted from the target and 50 changed (per million
# rows: deletions at id % 10000 = 7, changes at id % 20000 = 11). Each round runs the three
# commands of a case in a rotating order; the figures are medians of wall time and of peak
# RSS (GNU time), and the script checks that scanledger and reladiff name the same keys.
#
#   scanledger   migration verify --from mysql:CONFIG --to postgres:CONFIG --content
#                (fresh store files each round; SCANLEDGER_FLAGS adds flags)
#   reladiff     reladiff mysql://... bench_rd postgresql://... bench_rd -k id -c ... (its
#                defaults: hashdiff, one thread a database)
#   floor        the bare reads of the key and content columns, in key order, by each
#                database's own client (mariadb --quick, psql COPY ... TO STDOUT), to
#                /dev/null; the slower side is the floor a two-sided scan cannot beat.
#   both at once the same two bare reads started together: what reading both sides costs
#                when they share the machine's cores, as the two scans of one `migration
#                verify` do (on two cores the two servers and the two clients take turns).
#
# scanledger's CPU (user + system, GNU time) is printed beside its wall time, and the two
# servers' CPU during its run (mariadbd's threads, and the PostgreSQL backends the postmaster
# reaped, from /proc): their sum over the cores says whether the cores, not the round trips,
# bound the run.
#
# Needs MariaDB on 127.0.0.1:3306 (root, no password, database test) and PostgreSQL on
# 127.0.0.1:5432 (user postgres, trust, database test). reladiff is installed into a virtual
# environment (RELADIFF_VENV, default target/reladiff-venv) from PyPI when absent, and the
# script says so. The binary is SCANLEDGER, default target/release/scanledger (built when
# absent).
set -euo pipefail
cd "$(dirname "$0")/.."

ROWS=${ROWS:-1000000}
ROUNDS=${ROUNDS:-5}
VENV=${RELADIFF_VENV:-target/reladiff-venv}
BIN=${SCANLEDGER:-target/release/scanledger}
FLAGS=${SCANLEDGER_FLAGS:-}
WORK=$(mktemp -d)
trap '[ -n "${KEEP:-}" ] || rm -rf "$WORK"' EXIT
COLS="id, name, email, amount, placed, qty"

say() { printf '%s\n' "$*" >&2; }
my() { mariadb -h 127.0.0.1 -P 3306 -u root test "$@"; }
pg() { psql -X -q -h 127.0.0.1 -p 5432 -U postgres -d test -v ON_ERROR_STOP=1 "$@"; }

if [ ! -x "$BIN" ]; then
  say "building $BIN (cargo build --release --bin scanledger)"
  cargo build --release --bin scanledger
fi
if [ ! -x "$VENV/bin/reladiff" ]; then
  say "installing reladiff 0.6.0 from PyPI into $VENV"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet 'reladiff[mysql,postgresql]==0.6.0'
fi
[ -x /usr/bin/time ] || { say "needs GNU time (/usr/bin/time)"; exit 1; }

say "creating bench_rd with $ROWS rows in MariaDB and PostgreSQL"
my -e "DROP TABLE IF EXISTS bench_rd;
CREATE TABLE bench_rd (id BIGINT PRIMARY KEY, name VARCHAR(64) NOT NULL,
  email VARCHAR(64) NOT NULL, amount DECIMAL(12,2) NOT NULL, placed DATETIME NOT NULL,
  qty INT NOT NULL) ENGINE=InnoDB;
INSERT INTO bench_rd SELECT seq, CONCAT('customer ', seq), CONCAT('buyer', seq % 5000, '@example.com'),
  (seq % 1000) * 1.25 + 0.5, TIMESTAMP '2026-01-01 00:00:00' + INTERVAL seq SECOND, seq % 97
  FROM seq_1_to_$ROWS;
ANALYZE TABLE bench_rd;" >/dev/null
pg -c "SET client_min_messages = warning; DROP TABLE IF EXISTS bench_rd;
CREATE TABLE bench_rd (id bigint PRIMARY KEY, name varchar(64) NOT NULL, email varchar(64) NOT NULL,
  amount numeric(12,2) NOT NULL, placed timestamp NOT NULL, qty int NOT NULL);
INSERT INTO bench_rd SELECT g, 'customer ' || g, 'buyer' || (g % 5000) || '@example.com',
  (g % 1000) * 1.25 + 0.5, TIMESTAMP '2026-01-01 00:00:00' + g * INTERVAL '1 second', g % 97
  FROM generate_series(1, $ROWS) g;" -c "VACUUM ANALYZE bench_rd" >/dev/null

cat > "$WORK/my.json" <<EOF
{"dsn": "mysql://root@127.0.0.1:3306/test", "table": "bench_rd", "key": "id",
 "content": ["name", "email", "amount", "placed", "qty"]}
EOF
cat > "$WORK/pg.json" <<EOF
{"dsn": "host=127.0.0.1 port=5432 user=postgres dbname=test", "table": "bench_rd", "key": "id",
 "content": ["name", "email", "amount", "placed", "qty"]}
EOF

# One timed command: appends "seconds peak_kb cpu_seconds" to $WORK/$1.times; its stdout to
# $WORK/$1.out.
timed() {
  local name=$1; shift
  /usr/bin/time -o "$WORK/time" -f '%e %M %U %S' "$@" >"$WORK/$name.out" 2>"$WORK/$name.err" || true
  tail -n 1 "$WORK/time" | awk '{printf "%s %s %.2f\n", $1, $2, $3 + $4}' >>"$WORK/$name.times"
}
# CPU ticks so far of mariadbd and of the postmaster's reaped children: "mariadb postgres".
server_ticks() {
  local m p
  m=$(pgrep -o -x mariadbd || pgrep -o -x mysqld || true)
  p=$(pgrep -o -x postgres || true)
  [ -n "$m" ] && [ -n "$p" ] || { echo "0 0"; return; }
  echo "$(awk '{print $14 + $15}' "/proc/$m/stat") $(awk '{print $16 + $17}' "/proc/$p/stat")"
}
run_scanledger() {
  rm -f "$WORK"/s.*
  local before after
  before=$(server_ticks)
  # shellcheck disable=SC2086
  timed scanledger "$BIN" --store "$WORK/s.redb" migration verify --from "mysql:$WORK/my.json" \
    --to "postgres:$WORK/pg.json" --content --json $FLAGS
  sleep 0.5 # the postmaster reaps the finished backends
  after=$(server_ticks)
  echo "$before $after" | awk -v hz="$(getconf CLK_TCK)" \
    '{printf "%.2f %.2f\n", ($3 - $1) / hz, ($4 - $2) / hz}' >>"$WORK/servers.times"
}
run_reladiff() {
  timed reladiff "$VENV/bin/reladiff" mysql://root@127.0.0.1:3306/test bench_rd \
    postgresql://postgres@127.0.0.1:5432/test bench_rd -k id \
    -c name -c email -c amount -c placed -c qty
}
run_floor() {
  timed floor_my mariadb -h 127.0.0.1 -P 3306 -u root test --quick -N -B \
    -e "SELECT $COLS FROM bench_rd ORDER BY id"
  timed floor_pg psql -X -q -h 127.0.0.1 -p 5432 -U postgres -d test \
    -c "COPY (SELECT $COLS FROM bench_rd ORDER BY id) TO STDOUT"
  timed floor_both bash -c "mariadb -h 127.0.0.1 -P 3306 -u root test --quick -N -B \
    -e 'SELECT $COLS FROM bench_rd ORDER BY id' >/dev/null & psql -X -q -h 127.0.0.1 -p 5432 \
    -U postgres -d test -c 'COPY (SELECT $COLS FROM bench_rd ORDER BY id) TO STDOUT' \
    >/dev/null & wait"
}

median() { sort -n | awk '{a[NR]=$1} END {if (NR==0) print "-"; else if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
col() { awk -v c="$2" '{print $c}' "$WORK/$1.times"; }

# The keys reladiff names ("- 7, customer 7, ..." and "+ 11, ..." lines), deduplicated.
reladiff_keys() { sed -n 's/^[-+] \([0-9]*\),.*/\1/p' "$WORK/reladiff.out" | sort -n | uniq; }
# scanledger's answer against reladiff's keys: its exact totals must add up to reladiff's
# number of keys, and every key its (capped) lists name must be one of reladiff's.
same_keys() {
  reladiff_keys >"$WORK/reladiff.keys"
  python3 - "$WORK/scanledger.out" "$WORK/reladiff.keys" <<'EOF'
import json, sys
doc = json.loads(open(sys.argv[1]).read())
theirs = {int(k) for k in open(sys.argv[2]).read().split()}
total = doc["missing_count"] + doc["extra_count"] + (doc.get("changed_count") or 0)
listed = set(doc.get("changed_ids") or [])
for r in doc.get("missing_ranges", []) + doc.get("extra_ranges", []):
    lo, _, hi = str(r).partition("..")
    listed.update(range(int(lo), int(hi or lo) + 1))
if total == len(theirs) and listed <= theirs:
    print(f"  both name the same {total} keys ({len(listed)} listed by scanledger)")
else:
    print(f"  DIFFERENT: scanledger {total} keys (changed_count {doc.get('changed_count')}), "
          f"reladiff {len(theirs)}; listed but not reladiff's: {sorted(listed - theirs)[:10]}")
    sys.exit(1)
EOF
}

measure() {
  local case=$1
  rm -f "$WORK"/*.times
  for round in $(seq 1 "$ROUNDS"); do
    case $((round % 3)) in
      0) run_scanledger; run_reladiff; run_floor ;;
      1) run_reladiff; run_floor; run_scanledger ;;
      2) run_floor; run_scanledger; run_reladiff ;;
    esac
    say "  $case round $round/$ROUNDS: scanledger $(tail -n 1 "$WORK/scanledger.times"), reladiff $(tail -n 1 "$WORK/reladiff.times") (s, KB)"
  done
  local s r fm fp fb floor sm rm_ sc
  s=$(col scanledger 1 | median); r=$(col reladiff 1 | median)
  fm=$(col floor_my 1 | median); fp=$(col floor_pg 1 | median); fb=$(col floor_both 1 | median)
  sc=$(col scanledger 3 | median)
  say "  servers' CPU during scanledger's runs (medians): MariaDB $(col servers 1 | median) s, PostgreSQL $(col servers 2 | median) s"
  sm=$(col scanledger 2 | median); rm_=$(col reladiff 2 | median)
  floor=$(awk -v a="$fm" -v b="$fp" 'BEGIN {print (a > b ? a : b)}')
  printf '| %s | %s | %s s, %s s CPU, %s MB | %s s, %s MB | %s | %s s / %s s | %s | %s s | %s |\n' \
    "$ROWS" "$case" "$s" "$sc" "$((sm / 1024))" "$r" "$((rm_ / 1024))" \
    "$(awk -v a="$s" -v b="$r" 'BEGIN {printf "%.2fx", a / b}')" "$fm" "$fp" \
    "$(awk -v a="$s" -v b="$floor" 'BEGIN {printf "%.2fx", a / b}')" "$fb" \
    "$(awk -v a="$s" -v b="$fb" 'BEGIN {printf "%.2fx", a / b}')"
  same_keys >&2 || { say "  scanledger's answer: $(head -c 600 "$WORK/scanledger.out")"; exit 1; }
}

say "machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); binary $BIN"
echo "| rows | case | scanledger (median wall, CPU, peak RSS) | reladiff | scanledger / reladiff | floor MariaDB / PostgreSQL | scanledger / floor | both floors at once | scanledger / both at once |"
echo "|---|---|---|---|---|---|---|---|---|"
measure equal
pg -c "DELETE FROM bench_rd WHERE id % 10000 = 7; UPDATE bench_rd SET amount = amount + 1 WHERE id % 20000 = 11;" >/dev/null
measure "$((ROWS / 10000)) missing, $((ROWS / 20000)) changed"
say "load at the end $(cut -d' ' -f1-3 /proc/loadavg)"
