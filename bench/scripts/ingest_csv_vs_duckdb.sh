#!/bin/sh
# Issue 14, bar 4: `segtool ingest` of the peers' event table as 5 CSV files (3,000,000 rows,
# time order) into one segment, against DuckDB reading the same files with read_csv into one
# sorted zstd Parquet file (bench/peers/cmd/peerjob run -system duckdb -job ingest-csv, 2
# threads). Whole processes, alternating, RUNS rounds; /usr/bin/time -v gives each process's
# wall time and peak RSS; then the medians.
# Usage (from the repository's root): bench/scripts/ingest_csv_vs_duckdb.sh [DIR [RUNS]]
# DIR keeps the inputs (written once by peerjob prepare) and the binaries. Needs cgo + gcc.
set -eu
dir=${1:-/tmp/writeout-ingest-csv}
runs=${2:-5}
mkdir -p "$dir"
(cd bench/peers && go build -o "$dir/peerjob" ./cmd/peerjob)
go build -o "$dir/segtool" ./cmd/segtool
if [ ! -f "$dir/prepared" ]; then
	"$dir/peerjob" prepare "$dir/in"
	touch "$dir/prepared"
fi
csv=$dir/in/csv
raw=$dir/ingest.txt
: > "$raw"
measure() { # name, command...
	name=$1
	shift
	out=$(/usr/bin/time -v "$@" 2>&1 >/dev/null)
	wall=$(printf '%s\n' "$out" | sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' | awk -F: '{ print $(NF-1) * 60 + $NF }')
	rss=$(printf '%s\n' "$out" | sed -n 's/.*Maximum resident set size (kbytes): //p')
	echo "system=$name wall_s=$wall peak_rss_MiB=$((rss / 1024))" | tee -a "$raw"
}
i=1
while [ "$i" -le "$runs" ]; do
	measure writeout "$dir/segtool" ingest --quiet --replace --durability none --spec "$csv/spec.json" \
		--out "$dir/out.seg" "$csv/events-0.csv" "$csv/events-1.csv" "$csv/events-2.csv" "$csv/events-3.csv" "$csv/events-4.csv"
	measure duckdb "$dir/peerjob" run -system duckdb -job ingest-csv -layout contiguous "$dir/in" "$dir/out.parquet"
	echo "run=$i load: $(uptime | sed 's/.*load average: //')"
	i=$((i + 1))
done
rm -f "$dir/out.seg" "$dir/out.parquet"
echo
echo "medians of $runs runs:"
awk '
{ split($1, s, "="); split($2, w, "="); split($3, r, "="); sys = s[2]
  if (!(sys in n)) order[++k] = sys
  n[sys]++; wall[sys, n[sys]] = w[2]; rss[sys, n[sys]] = r[2] }
function med(arr, sys, m,   i, j, t, a) {
	for (i = 1; i <= m; i++) a[i] = arr[sys, i] + 0
	for (i = 2; i <= m; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
	return m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
}
END {
	for (i = 1; i <= k; i++) { sys = order[i]; mw[sys] = med(wall, sys, n[sys]); printf "%-9s wall_s=%.3f peak_rss_MiB=%d\n", sys, mw[sys], med(rss, sys, n[sys]) }
	if (("writeout" in mw) && ("duckdb" in mw)) printf "writeout/duckdb wall: %.2fx\n", mw["writeout"] / mw["duckdb"]
}' "$raw"
