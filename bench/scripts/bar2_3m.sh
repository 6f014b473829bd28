#!/bin/bash
# Issue 34, bar 2 at 3 M rows: each round, for each job and layout, writeout built from two trees
# (OLD, NEW: peerjob binaries) and DuckDB, one run each, on the peers' events.
# Usage: OLD=/tmp/peerjob-old NEW=/tmp/peerjob-new bench/scripts/bar2_3m.sh [ROUNDS [DATA]]
#   (build each with: cd bench/peers && go build -o /tmp/peerjob-X ./cmd/peerjob)
# Prints one line a run: binary job layout wall_s peak_rss_MiB.
set -euo pipefail
R=${1:-5}
data=${2:-/work/data/p3m}
out=$(mktemp -u)
run() {
  local o
  o=$("$1" run -system "$2" -job "$3" -layout "$4" "$data" "$out" 2>&1 | tail -1)
  echo "$5 $3 $4 $(echo "$o" | grep -o 'wall_s=[0-9.]*' | cut -d= -f2) $(echo "$o" | grep -o 'peak_rss_MiB=[0-9.]*' | cut -d= -f2)"
  rm -f "$out"
}
# A binary just built maps its text from the page cache's large folios, which adds ~7 MiB to
# its RSS (RssFile) that an older copy's pages do not: each round drops the binaries' pages first.
evict() { python3 -c 'import os,sys
for p in sys.argv[1:]:
    fd = os.open(p, os.O_RDONLY); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED); os.close(fd)' "$OLD" "$NEW"; }
for r in $(seq 1 "$R"); do
  evict
  for J in merge rollup-hour; do for L in contiguous overlapping; do
    run "$OLD" writeout $J $L old
    run "$NEW" writeout $J $L new
    run "$NEW" duckdb $J $L duckdb
  done; done
done
