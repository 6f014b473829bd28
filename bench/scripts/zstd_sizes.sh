#!/bin/bash
# Issue 37, bar 2 (sizes): a zstd merge (and hour rollup) of the peers' inputs against DuckDB's
# zstd Parquet of the same columns, one run each (sizes do not vary between runs). The inputs
# are what `peerjob prepare` writes (bench/peers): events and minutes, at 3 M and 30 M rows.
#
# Usage (from the repository's root):
#   bench/scripts/zstd_sizes.sh DATA_DIR...      e.g. /work/data/p3m /work/data/m3m
# Environment: PEERJOB (default: built here into a temporary directory), OUT (default /tmp),
# JOBS (default "merge rollup-hour"), LAYOUTS (default "contiguous overlapping"; a layout the
# directory lacks is skipped).
# Prints one line per data set, job and layout: both sizes and their ratio.
set -euo pipefail

if [ -z "${PEERJOB:-}" ]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  (cd bench/peers && go build -o "$tmp/peerjob" ./cmd/peerjob)
  PEERJOB=$tmp/peerjob
fi
out=${OUT:-/tmp}/zstd-sizes-$$
size() { "$PEERJOB" run -system "$1" -job "$2" -layout "$3" "$4" "$out" 2>&1 | tail -1 | grep -o 'out_bytes=[0-9]*' | cut -d= -f2; rm -f "$out"; }
for d in "$@"; do
  for job in ${JOBS:-merge rollup-hour}; do
    for layout in ${LAYOUTS:-contiguous overlapping}; do
      ls "$d/$layout"-0.seg >/dev/null 2>&1 || continue
      w=$(size writeout-zstd "$job" "$layout" "$d")
      k=$(size duckdb "$job" "$layout" "$d")
      printf '%s %s %s writeout-zstd=%s duckdb=%s ratio=%s\n' "$(basename "$d")" "$job" "$layout" "$w" "$k" "$(echo "scale=3; $w/$k" | bc)"
    done
  done
done
