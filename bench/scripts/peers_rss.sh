#!/bin/sh
# Issue 14, bar 2 and item 3: whole-process memory of the peers' jobs. Each job runs in a
# process of its own (bench/peers/cmd/peerjob run), systems x jobs x layouts alternating, RUNS
# rounds; then the medians of each figure per (job, layout, system), and one cross-check of
# peerjob's VmHWM against /usr/bin/time -v's "Maximum resident set size".
# Usage (from the repository's root): bench/scripts/peers_rss.sh [DIR [RUNS]]
# DIR keeps the inputs (written once by peerjob prepare: 3,000,000 rows, ~160 MB) and the raw
# lines (DIR/rss.txt, appended to). Needs cgo + gcc (DuckDB), as bench/peers does.
# Memory figures are meaningful on a shared machine; wall times are not unless it is quiet.
# EVERY (default 2ms) is peerjob's sampling period. Two samplers that wake every 2 ms take a
# core's time slices from the job: writeout, a Go program whose goroutines share the Go
# scheduler with them, lost about a quarter of its wall time to them (the contiguous merge
# 0.31 s against 0.24 at EVERY=100ms), DuckDB about a tenth. Wall times for the bars come from
# a set with EVERY=1s (the peaks are then only the samples at the start and the end); memory
# from the default.
set -eu
dir=${1:-/tmp/writeout-peers-rss}
runs=${2:-5}
every=${EVERY:-2ms}
mkdir -p "$dir"
(cd bench/peers && go build -o "$dir/peerjob" ./cmd/peerjob)
if [ ! -f "$dir/prepared" ]; then
	"$dir/peerjob" prepare "$dir/in"
	touch "$dir/prepared"
fi
raw=$dir/rss.txt
: > "$raw"
i=1
while [ "$i" -le "$runs" ]; do
	for jl in merge:contiguous merge:overlapping rollup-hour:contiguous rollup-hour:overlapping; do
		job=${jl%%:*} layout=${jl#*:}
		for sys in writeout parquet-go duckdb; do
			if [ "$sys" = parquet-go ] && [ "$job" = rollup-hour ]; then
				continue
			fi
			line=$("$dir/peerjob" run -every "$every" -system "$sys" -job "$job" -layout "$layout" "$dir/in" "$dir/out")
			echo "run=$i $line" | tee -a "$raw"
			rm -f "$dir/out"
		done
	done
	echo "run=$i load: $(uptime | sed 's/.*load average: //')"
	i=$((i + 1))
done
echo
echo "medians of $runs runs (MiB; wall_s is noisy on a shared machine):"
# One line per (job, layout, system): the median of each figure.
awk '
function median(key, f,   n, a, i, j, t) {
	n = split(vals[key, f], a, " ")
	for (i = 2; i <= n; i++) { t = a[i] + 0; for (j = i - 1; j >= 1 && a[j] + 0 > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
	return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
{
	delete kv
	for (i = 1; i <= NF; i++) { split($i, p, "="); kv[p[1]] = p[2] }
	key = kv["job"] " " kv["layout"] " " kv["system"]
	if (!(key in seen)) { seen[key] = 1; order[++nk] = key }
	for (f in kv) vals[key, f] = vals[key, f] " " kv[f]
}
END {
	printf "%-12s %-12s %-10s %8s %9s %9s %9s %9s %9s\n", "job", "layout", "system", "wall_s", "peak_rss", "peak_anon", "peak_file", "base_rss", "go_heap"
	for (k = 1; k <= nk; k++) {
		key = order[k]; split(key, w, " ")
		printf "%-12s %-12s %-10s %8.3f %9.1f %9.1f %9.1f %9.1f %9.1f\n", w[1], w[2], w[3], median(key, "wall_s"),
			median(key, "peak_rss_MiB"), median(key, "peak_anon_MiB"), median(key, "peak_file_MiB"),
			median(key, "base_rss_MiB"), median(key, "go_heap_peak_MiB")
	}
}' "$raw"
echo
echo "cross-check, writeout merge contiguous: peerjob's VmHWM against /usr/bin/time -v"
out=$(/usr/bin/time -v "$dir/peerjob" run -system writeout -job merge -layout contiguous "$dir/in" "$dir/out" 2>"$dir/time.txt")
rm -f "$dir/out"
echo "$out" | sed 's/.*\(peak_rss_MiB=[0-9.]*\).*/peerjob: \1/'
sed -n 's/.*Maximum resident set size (kbytes): \(.*\)/time -v: maximum resident set size \1 kB/p' "$dir/time.txt" |
	awk '{ printf "%s = %.1f MiB\n", $0, $(NF - 1) / 1024 }'
