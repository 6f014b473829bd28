#!/usr/bin/env bash
# quantiles_check.sh: the quantiles aggregator's accuracy on ROWS event rows (default 3 M),
# against exact quantiles computed in Python, before and after a Parquet round trip.
#
#   1. generate ROWS CSV events (time over 24 h, 30 services, log-normal integer latencies);
#   2. segtool ingest with a quantiles metric over latency (no rollup);
#   3. segtool merge --rollup --granularity hour;
#   4. segtool query --group-by svc --quantiles 0.5,0.9,0.99, checked against the exact lower
#      quantiles (rank floor(q*(n-1))): bar 2% relative error or 1 unit;
#   5. segtool export --format parquet --spec-out, ingest the Parquet back with that spec
#      (isInputSketch: the sketches' bytes), query and check again.
#
# Usage: bench/scripts/quantiles_check.sh [ROWS] [WORKDIR]
set -euo pipefail
ROWS=${1:-3000000}
cd "$(dirname "$0")/../.."
W=${2:-$(mktemp -d -t quantiles-check.XXXXXX)}
mkdir -p "$W"
here=bench/scripts
go build -o "$W/segtool" ./cmd/segtool
S="$W/segtool"

cat > "$W/spec.json" <<'JSON'
{
  "timestamp": {"field": "ts", "format": "millis"},
  "dimensions": [{"name": "svc"}],
  "metrics": [{"name": "events", "aggregator": "count"},
              {"name": "latency_q", "aggregator": "quantiles", "fieldName": "latency", "accuracy": 0.01}]
}
JSON

t() { local s=$SECONDS; "$@"; echo "  ($((SECONDS - s)) s)" >&2; }
echo "== generate $ROWS rows"; t python3 "$here/quantiles_check.py" gen "$ROWS" 42 "$W/events.csv"
echo "== ingest";   t "$S" ingest --quiet --durability none --replace --spec "$W/spec.json" --out "$W/events.seg" "$W/events.csv"
echo "== merge --rollup --granularity hour"
t "$S" merge --quiet --durability none --replace --rollup --granularity hour --out "$W/hourly.seg" "$W/events.seg"
"$S" inspect "$W/hourly.seg" | head -3 || true
Q=(query --group-by svc --quantiles 0.5,0.9,0.99)
echo "== query"; t "$S" "${Q[@]}" "$W/hourly.seg" > "$W/q1.csv"
head -3 "$W/q1.csv"
rc=0
python3 "$here/quantiles_check.py" check "$W/exact.json" "$W/q1.csv" "hour rollup" || rc=1
echo "== export to Parquet and ingest back"
t "$S" export --quiet --durability none --replace --format parquet --out "$W/hourly.parquet" --spec-out "$W/back-spec.json" "$W/hourly.seg"
grep -o '"isInputSketch": *true' "$W/back-spec.json" | head -1
t "$S" ingest --quiet --durability none --replace --spec "$W/back-spec.json" --out "$W/back.seg" "$W/hourly.parquet"
"$S" "${Q[@]}" "$W/back.seg" > "$W/q2.csv"
python3 "$here/quantiles_check.py" check "$W/exact.json" "$W/q2.csv" "after the Parquet round trip" || rc=1
if cmp -s <(cut -d, -f2- "$W/q1.csv") <(cut -d, -f2- "$W/q2.csv"); then
  echo "the round trip's query output equals the first one (time column aside)"
else
  echo "the round trip's query output differs"; rc=1
fi
echo "work dir: $W"
exit $rc
