#!/bin/sh
# Issue 13, bar 2: peak resident memory and wall time of `segtool ingest` of the same rows as
# Parquet and as CSV, alternating runs. Usage (from the repository's root):
#   bench/scripts/ingest_parquet_vs_csv.sh [DIR [ROWS [RUNS]]]
# DIR (default /tmp/writeout-pq-bench) receives the files (written once, by
# merger/ingest's TestWriteParquetBenchFiles: ROWS rows, default 3000000, as Parquet in row
# groups of 100,000 rows, CSV and NDJSON) and a segtool binary built from this tree.
set -eu
dir=${1:-/tmp/writeout-pq-bench}
rows=${2:-3000000}
runs=${3:-3}
mkdir -p "$dir"
if [ ! -f "$dir/rows-$rows-100000.parquet" ]; then
	WRITEOUT_PQ_BENCH_DIR="$dir" WRITEOUT_PQ_BENCH_ROWS="$rows" \
		go test ./merger/ingest -run TestWriteParquetBenchFiles -count=1 -timeout 30m >/dev/null
fi
go build -o "$dir/segtool" ./cmd/segtool
i=1
while [ "$i" -le "$runs" ]; do
	for f in "rows-$rows-100000.parquet" "rows-$rows.csv"; do
		out=$(/usr/bin/time -v "$dir/segtool" ingest --quiet --replace --durability none \
			--spec "$dir/spec.json" --out "$dir/out.seg" "$dir/$f" 2>&1 >/dev/null)
		wall=$(printf '%s\n' "$out" | sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p')
		rss=$(printf '%s\n' "$out" | sed -n 's/.*Maximum resident set size (kbytes): //p')
		echo "run=$i file=$f wall=$wall peak_rss_MiB=$((rss / 1024))"
	done
	i=$((i + 1))
done
rm -f "$dir/out.seg"
