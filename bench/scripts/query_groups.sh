#!/bin/sh
# Issue 14, bar 5: `segtool query --granularity hour --group-by origin,destination` over a
# 3,000,000-row table with about 2.9 million groups, against the rollup merge that builds the
# same table (`segtool merge --rollup --granularity hour`), alternating, with /usr/bin/time -v.
# Usage (from the repository's root): bench/scripts/query_groups.sh [DIR [RUNS]]
# The table: 31 days of flights, origin and destination from 350 airports (skewed), delay and
# distance; written once as CSV by awk and ingested (rollup off) into DIR/flights.seg.
set -eu
dir=${1:-/tmp/writeout-query-groups}
runs=${2:-3}
mkdir -p "$dir"
go build -o "$dir/segtool" ./cmd/segtool
if [ ! -f "$dir/flights.seg" ]; then
	awk 'BEGIN {
		srand(7); n = 3000000; start = 1704067200000; span = 31 * 24 * 3600 * 1000
		print "time,origin,destination,delay,distance"
		for (i = 0; i < n; i++) {
			o = int(350 * rand() ^ 1.4); d = int(350 * rand() ^ 1.4)
			printf "%.0f,A%03d,A%03d,%d,%d\n", start + int(i * (span / n)), o, d, int(rand() * 320) - 20, 100 + int(rand() * 2900)
		}
	}' > "$dir/flights.csv"
	cat > "$dir/spec.json" <<'SPEC'
{"timestamp": {"field": "time"},
 "dimensions": [{"name": "origin"}, {"name": "destination"}],
 "metrics": [{"name": "rows", "aggregator": "count"}, {"name": "delay", "aggregator": "longSum"},
             {"name": "maxDelay", "aggregator": "longMax", "fieldName": "delay"},
             {"name": "distance", "aggregator": "longSum"}]}
SPEC
	"$dir/segtool" ingest --quiet --durability none --spec "$dir/spec.json" --out "$dir/flights.seg" "$dir/flights.csv"
fi
measure() {
	out=$(/usr/bin/time -v "$@" 2>&1 >/dev/null)
	wall=$(printf '%s\n' "$out" | sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p')
	rss=$(printf '%s\n' "$out" | sed -n 's/.*Maximum resident set size (kbytes): //p')
	echo "wall=$wall peak_rss_MiB=$((rss / 1024))"
}
echo "groups: $("$dir/segtool" query --granularity hour --group-by origin,destination "$dir/flights.seg" | tail -n +2 | wc -l)"
echo "before: $(uptime)"
i=1
while [ "$i" -le "$runs" ]; do
	echo "run=$i query  $(measure "$dir/segtool" query --granularity hour --group-by origin,destination "$dir/flights.seg")"
	echo "run=$i rollup $(measure "$dir/segtool" merge --quiet --rollup --granularity hour --durability none --replace --out "$dir/rolled.seg" "$dir/flights.seg")"
	i=$((i + 1))
done
echo "after: $(uptime)"
rm -f "$dir/rolled.seg"
