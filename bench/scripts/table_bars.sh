#!/bin/bash
# Issue 36, bars 1-4: a table of 50 segments, 3,000,000 rows over five months, on a local
# directory or on an S3-protocol server (bench/internal/s3serve: gofakes3 in a process of its
# own, which honours If-None-Match and If-Match), through segtool only.
#
#   bar 1  create, append the 50 segments, compact --segment-granularity day --target-rows
#          100000: every live segment inside one UTC day with at most 100,000 rows; query gives
#          exactly the inputs' answer; table log; vacuum --retain 0 leaves only what the newest
#          version lists.
#   bar 2  four compacts at once with a reader running query (count and a metric sum) in a loop
#          throughout: every read exact, every compact exits 0, the final table exact (every
#          metric); again with --shard I/4.
#   bar 3  KILLS (default 50) compacts SIGKILLed at a random moment, each on a fresh copy of the
#          appended table: query exact after each; after vacuum --retain 0 --pending-age 0, no
#          file (object) that the newest version does not list, no pending upload.
#
# The inputs: 45 segments of 60,000 rows, each over 5 days, one starting every 3 days from
# 2024-01-01 (so neighbours overlap and every segment crosses midnights), and 5 segments of
# 60,000 rows all on 2024-03-10 (a day of 300,000+ rows, cut to the target).
#
# Usage (from the repository's root):
#   bench/scripts/table_bars.sh [local|s3]         (default local)
# Environment: DIR (default /tmp/writeout-tables), KILLS (default 50), ROWS (rows a segment,
# default 60000), BARS (default "1 2 3": the bars to run; bar 3 kills within the time bar 1's
# compaction took, else within COMPACT_SECS, default 15).
set -euo pipefail

where=${1:-local}
dir=${DIR:-/tmp/writeout-tables}
kills=${KILLS:-50}
rows=${ROWS:-60000}
bars=" ${BARS:-1 2 3} "
compact_secs=${COMPACT_SECS:-15}
gran=day
target=100000
mkdir -p "$dir"
segtool=$dir/segtool
go build -o "$segtool" ./cmd/segtool
fail() { echo "FAIL: $*" >&2; exit 1; }

# Inputs, made once.
if [ ! -f "$dir/in/.done" ]; then
	rm -rf "$dir/in" "$dir/in2"
	"$segtool" gen --schema basic --rows "$rows" --segments 45 --seed 100 --start 2024-01-01 --span 5d --step 3d --out "$dir/in" >/dev/null
	"$segtool" gen --schema basic --rows "$rows" --segments 5 --seed 900 --start 2024-03-10 --span 1d --out "$dir/in2" >/dev/null
	touch "$dir/in/.done"
fi
inputs=("$dir"/in/*.seg "$dir"/in2/*.seg)
[ ${#inputs[@]} -eq 50 ] || fail "want 50 inputs, have ${#inputs[@]}"
"$segtool" query "${inputs[@]}" >"$dir/want.csv"
# The readers of bar 2 ask for the count and a metric sum (every metric, the sketch included,
# is checked on the final table).
readq=(query --metrics rows,sumLongSequential)
"$segtool" "${readq[@]}" "${inputs[@]}" >"$dir/want-read.csv"
echo "inputs: ${#inputs[@]} segments; query of the inputs:"
cat "$dir/want.csv"

s3pid=
cleanup() { [ -n "$s3pid" ] && kill "$s3pid" 2>/dev/null || true; }
trap cleanup EXIT
if [ "$where" = s3 ]; then
	go build -o "$dir/s3serve" ./bench/internal/s3serve
	"$dir/s3serve" -bucket seg >"$dir/s3.url" &
	s3pid=$!
	for _ in $(seq 50); do [ -s "$dir/s3.url" ] && break; sleep 0.1; done
	export AWS_ENDPOINT_URL=$(head -1 "$dir/s3.url") AWS_ACCESS_KEY_ID=bench AWS_SECRET_ACCESS_KEY=bench AWS_REGION=us-east-1
	echo "S3 server: $AWS_ENDPOINT_URL"
fi

# loc NAME: the location of table NAME.
loc() { if [ "$where" = s3 ]; then echo "s3://seg/$1/"; else echo "$dir/$1"; fi; }

# files NAME: every file (object) under table NAME, relative to it, sorted.
files() {
	if [ "$where" = s3 ]; then
		python3 - "$AWS_ENDPOINT_URL" "$1/" <<'EOF'
import sys, urllib.request, urllib.parse, xml.etree.ElementTree as ET
url, prefix = sys.argv[1], sys.argv[2]
ns = '{http://s3.amazonaws.com/doc/2006-03-01/}'
keys, token = [], None
while True:
    q = {'list-type': '2', 'prefix': prefix}
    if token: q['continuation-token'] = token
    root = ET.fromstring(urllib.request.urlopen(url + '/seg?' + urllib.parse.urlencode(q)).read())
    keys += [c.find(ns + 'Key').text[len(prefix):] for c in root.findall(ns + 'Contents')]
    token = root.findtext(ns + 'NextContinuationToken')
    if not token: break
print('\n'.join(sorted(keys)))
EOF
	else
		(cd "$dir/$1" && find . -type f | sed 's|^\./||' | sort)
	fi
}

# pending NAME: the multipart uploads pending under table NAME (S3), one a line.
pending() {
	[ "$where" = s3 ] || return 0
	python3 - "$AWS_ENDPOINT_URL" "$1/" <<'EOF'
import sys, urllib.request, urllib.parse, xml.etree.ElementTree as ET
url, prefix = sys.argv[1], sys.argv[2]
ns = '{http://s3.amazonaws.com/doc/2006-03-01/}'
root = ET.fromstring(urllib.request.urlopen(url + '/seg?uploads&' + urllib.parse.urlencode({'prefix': prefix})).read())
for u in root.findall(ns + 'Upload'):
    print(u.findtext(ns + 'Key'), u.findtext(ns + 'UploadId'))
EOF
}

# remove NAME: removes table NAME.
remove() {
	if [ "$where" = s3 ]; then
		files "$1" | python3 -c '
import sys, urllib.request
url, prefix = sys.argv[1], sys.argv[2]
for k in sys.stdin.read().split():
    urllib.request.urlopen(urllib.request.Request(url + "/seg/" + prefix + k, method="DELETE"))
' "$AWS_ENDPOINT_URL" "$1/"
	else
		rm -rf "${dir:?}/$1"
	fi
}

# compacted NAME: every live segment inside one UTC $gran with at most $target rows; prints
# the count of segments.
compacted() {
	"$segtool" table segments --json "$(loc "$1")" | python3 -c '
import json, sys
from datetime import datetime
target = int(sys.argv[1])
segs = json.load(sys.stdin)
def ms(s): return int(datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp() * 1000)
day = 86400000
for s in segs:
    a, b = s["interval"].split("/")
    start, end = ms(a), ms(b)
    assert start // day == (end - 1) // day, "%s crosses a day: %s" % (s["name"], s["interval"])
    assert s["rows"] <= target, "%s has %d rows" % (s["name"], s["rows"])
print(len(segs), "segments, every one inside one day, at most", max(s["rows"] for s in segs), "rows")
' "$target"
}

# exact NAME: query of table NAME equals the inputs'.
exact() { "$segtool" query "$(loc "$1")" | cmp -s - "$dir/want.csv"; }

# referenced NAME: the files under table NAME are exactly the newest version's segments and
# log entry, and no upload is pending.
referenced() {
	local live
	live=$("$segtool" table segments --json "$(loc "$1")" | python3 -c 'import json,sys; print("\n".join(sorted(s["name"] for s in json.load(sys.stdin))))')
	local newest
	newest=$("$segtool" table log "$(loc "$1")" | awk 'NR>1 && $1 ~ /^[0-9]+$/ {v=$1} END {printf "_log/%020d.json", v}')
	local want
	want=$(printf '%s\n%s\n' "$newest" "$live" | sort)
	local have
	have=$(files "$1")
	[ "$have" = "$want" ] || { diff <(echo "$want") <(echo "$have") >&2; return 1; }
	[ -z "$(pending "$1")" ] || { pending "$1" >&2; return 1; }
}

# fresh NAME: a new table NAME holding the 50 inputs (one append).
fresh() {
	remove "$1"
	"$segtool" table create "$(loc "$1")" >/dev/null
	"$segtool" table append "$(loc "$1")" "${inputs[@]}" >/dev/null
}

if [[ $bars == *" 1 "* ]]; then
echo "== bar 1 ($where)"
fresh t1
t0=$(date +%s.%N)
"$segtool" table compact --segment-granularity "$gran" --target-rows "$target" "$(loc t1)" | tail -1
t1=$(date +%s.%N)
compact_secs=$(echo "$t1 - $t0" | bc)
echo "compact took ${compact_secs}s"
compacted t1
exact t1 || fail "bar 1: query of the table differs from the inputs'"
echo "query of the table equals the inputs'"
"$segtool" table log "$(loc t1)" | (head -4; echo ...; tail -2)
"$segtool" table vacuum --retain 0 --pending-age 0 "$(loc t1)"
referenced t1 || fail "bar 1: files not referenced by the newest version after vacuum"
echo "after vacuum: $(files t1 | wc -l) files, exactly the newest version's entry and segments"
exact t1 || fail "bar 1: query after vacuum"
fi

# race NAME SHARDED: four compacts at once and a reader in a loop.
race() {
	fresh "$1"
	local stop=$dir/$1.stop reads=0 bad=0
	rm -f "$stop"
	(
		n=0 b=0
		while [ ! -f "$stop" ]; do
			if ! "$segtool" "${readq[@]}" "$(loc "$1")" >"$dir/$1.read" 2>"$dir/$1.read.err" || ! cmp -s "$dir/$1.read" "$dir/want-read.csv"; then
				b=$((b + 1))
				cp "$dir/$1.read" "$dir/$1.bad.$b" 2>/dev/null || true
				cat "$dir/$1.read.err" >&2
			fi
			n=$((n + 1))
		done
		echo "$n $b" >"$dir/$1.reads"
	) &
	local reader=$!
	local pids=()
	for i in 0 1 2 3; do
		if [ "$2" = sharded ]; then
			"$segtool" table compact --segment-granularity "$gran" --target-rows "$target" --shard "$i/4" "$(loc "$1")" >"$dir/$1.c$i" 2>&1 &
		else
			"$segtool" table compact --segment-granularity "$gran" --target-rows "$target" "$(loc "$1")" >"$dir/$1.c$i" 2>&1 &
		fi
		pids+=($!)
	done
	local codes=()
	for p in "${pids[@]}"; do
		if wait "$p"; then codes+=(0); else codes+=($?); fi
	done
	touch "$stop"
	wait "$reader"
	read -r reads bad <"$dir/$1.reads"
	echo "compacts exited ${codes[*]}; reads during them: $reads, wrong or failed: $bad"
	for i in 0 1 2 3; do tail -1 "$dir/$1.c$i"; done
	for c in "${codes[@]}"; do [ "$c" = 0 ] || fail "bar 2: a compact exited $c"; done
	[ "$bad" = 0 ] || fail "bar 2: $bad reads were wrong"
	[ "$reads" -ge 5 ] || fail "bar 2: only $reads reads"
	exact "$1" || fail "bar 2: the final table is not exact"
	compacted "$1"
}

if [[ $bars == *" 2 "* ]]; then
	echo "== bar 2 ($where): four compacts at once, a reader throughout"
	race t2 all
	echo "== bar 2 ($where): the same with --shard I/4"
	race t3 sharded
fi

if [[ $bars == *" 3 "* ]]; then
echo "== bar 3 ($where): $kills SIGKILLs of compact at random moments"
fresh base
killed=0 finished=0
for k in $(seq "$kills"); do
	if [ "$where" = s3 ]; then
		fresh t4
	else
		rm -rf "$dir/t4" && cp -a "$dir/base" "$dir/t4"
	fi
	# A moment uniform in [0, 1.2 x the time of a whole compaction of bar 1].
	delay=$(python3 -c "import random; print(round(random.uniform(0, 1.2 * $compact_secs), 3))")
	"$segtool" table compact --segment-granularity "$gran" --target-rows "$target" "$(loc t4)" >"$dir/t4.out" 2>&1 &
	pid=$!
	sleep "$delay"
	if kill -9 "$pid" 2>/dev/null; then killed=$((killed + 1)); fi
	wait "$pid" 2>/dev/null && finished=$((finished + 1)) || true
	exact t4 || fail "bar 3: trial $k (kill at ${delay}s): query not exact"
	"$segtool" table vacuum --retain 0 --pending-age 0 "$(loc t4)" >/dev/null
	referenced t4 || fail "bar 3: trial $k: unreferenced files after vacuum"
	exact t4 || fail "bar 3: trial $k: query after vacuum not exact"
	v=$("$segtool" table log "$(loc t4)" | awk 'NR>1 && $1 ~ /^[0-9]+$/ {v=$1} END {print v}')
	echo "trial $k: killed at ${delay}s, newest version $v: exact; after vacuum only its files"
done
echo "bar 3: $kills trials, $killed killed mid-run, $finished finished first; every query exact, nothing unreferenced after vacuum"
# Compaction resumes after the last kill and ends compacted.
"$segtool" table compact --segment-granularity "$gran" --target-rows "$target" "$(loc t4)" | tail -1
compacted t4
exact t4 || fail "bar 3: after the last compaction"
fi
echo "== bars$bars held ($where)"
