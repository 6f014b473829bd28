#!/bin/sh
# Issue 34, item 4: proof at scale. For each size (rows), shape and layout: prepare the inputs
# (bench/peers/cmd/peerjob prepare, streamed, reused when DIR already holds them), then run each
# job in a process of its own, one at a time: writeout merge and rollup-hour, DuckDB merge and
# rollup-hour (SET memory_limit and temp_directory, so that it can spill), parquet-go merge.
# Prints one table: rows, shape, layout, system, job, wall time, peak RSS, output size, and
# what happened (ok, or why the job could not finish: timeout, killed, error).
#
# Usage (from the repository's root):
#   bench/scripts/scale.sh [options] [SIZE...]        (default sizes: 3000000 30000000 300000000)
# Options:
#   -dir DIR        inputs, outputs and logs (default /tmp/writeout-scale); DIR/scale.txt keeps
#                   every job's line, DIR/table.md the table
#   -shapes "S..."  shapes (default "events minutes"; see peerjob prepare -h)
#   -layouts "L..." layouts (default "contiguous overlapping")
#   -timeout SEC    time limit of one job (default 1200); a job over it is killed and reported
#   -duckdb-memory-limit M   DuckDB's SET memory_limit (default 4GB); its temp_directory is
#                   DIR/duckdb-tmp, whose largest size during the job is reported
#   -clean          remove each size's inputs once its jobs have run (and the outputs always)
#   -dry-run        print the plan and the disk estimates, prepare and run nothing
#
# Before preparing a size it checks the free space of DIR's file system against an estimate
# made from the largest size of the same shape already prepared (DIR/estimate-SHAPE.txt keeps
# its bytes per row: inputs, temp files of prepare, largest output, DuckDB's largest spill),
# or from built-in figures measured at 3,000,000 and 30,000,000 rows, and refuses with a message
# if it will not fit. Every job runs alone; the machine may be shared (the load average at the
# start of each job is in the table): wall times then say little, peak RSS still does.
# EVERY (default 100ms) is peerjob's sampling period; the peak RSS is the kernel's (VmHWM) and
# /usr/bin/time's for jobs that did not finish.
set -eu

dir=/tmp/writeout-scale
shapes="events minutes"
layouts="contiguous overlapping"
limit=1200
duckmem=4GB
clean=0
dry=0
every=${EVERY:-100ms}
while [ $# -gt 0 ]; do
	case $1 in
	-dir) dir=$2; shift 2 ;;
	-shapes) shapes=$2; shift 2 ;;
	-layouts) layouts=$2; shift 2 ;;
	-timeout) limit=$2; shift 2 ;;
	-duckdb-memory-limit) duckmem=$2; shift 2 ;;
	-clean) clean=1; shift ;;
	-dry-run) dry=1; shift ;;
	-h | -help | --help) sed -n '2,/^set -eu/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	-*) echo "scale.sh: unknown option $1 (-h for help)" >&2; exit 2 ;;
	*) break ;;
	esac
done
sizes=${*:-3000000 30000000 300000000}
for n in $sizes; do
	case $n in
	'' | *[!0-9]*) echo "scale.sh: size $n: want a number of rows" >&2; exit 2 ;;
	esac
done

mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
root=$(cd "$(dirname "$0")/../.." && pwd)
peerjob=$dir/peerjob
(cd "$root/bench/peers" && go build -o "$peerjob" ./cmd/peerjob)
raw=$dir/scale.txt
spill=$dir/duckdb-tmp
mib=1048576

# Built-in bytes per row: inputs of both layouts without CSV, prepare's temp files beyond the
# inputs at their largest, the largest output of a job (measured at 3,000,000 and 30,000,000
# rows, rounded up; prepare's temp files stayed below the finished inputs, 5 is a margin), and
# DuckDB's spill: none at 30,000,000 rows under 4GB, so from its spill under 1GB there (events
# merge 1,491 MiB, minutes 972) scaled to the working set at 300,000,000 rows, less 4GB.
default_estimate() {
	case $1 in
	events) echo "49 5 13 80" ;;
	minutes) echo "31 5 9 60" ;;
	*) echo "64 5 24 100" ;;
	esac
}

# estimate SHAPE: bytes per row "inputs prepare_tmp output spill", those of the largest size
# of at least 1,000,000 rows run (smaller ones are mostly fixed costs).
estimate() {
	f=$dir/estimate-$1.txt
	if [ -s "$f" ] && awk '$1 >= 1000000 { ok = 1 } END { exit !ok }' "$f"; then
		awk '$1 >= 1000000' "$f" | sort -n -k1,1 | tail -n 1 | cut -d' ' -f2-
	else
		default_estimate "$1"
	fi
}

free_bytes() { df -P -B1 "$dir" | awk 'NR == 2 { print $4 }'; }

human() { awk -v b="$1" 'BEGIN { if (b >= 2^30) printf "%.1f GiB", b / 2^30; else printf "%.0f MiB", b / 2^20 }'; }

# need ROWS SHAPE: the bytes a size needs free before its inputs are prepared: the inputs, plus
# the larger of prepare's temp files and a job's output with DuckDB's spill, plus 2 GiB. DuckDB
# spills only past its memory_limit, so a smaller size may not have spilled at all: its spill is
# taken as at least the built-in figure.
need() {
	floor=$(default_estimate "$2" | cut -d' ' -f4)
	set -- "$1" $(estimate "$2")
	awk -v r="$1" -v in_="$2" -v tmp="$3" -v out="$4" -v sp="$5" -v floor="$floor" \
		'BEGIN { if (sp < floor) sp = floor; x = out + sp; if (tmp > x) x = tmp; printf "%.0f", r * (in_ + x) + 2 * 2^30 }'
}

# manifest_ok DIR ROWS SHAPE: DIR holds complete inputs of ROWS rows of SHAPE.
manifest_ok() {
	[ -f "$1/manifest.json" ] &&
		grep -q "\"rows\": $2," "$1/manifest.json" &&
		grep -q "\"shape\": \"$3\"" "$1/manifest.json"
}

# field KEY LINE: the value of key=value in LINE.
field() { echo "$2" | tr ' ' '\n' | sed -n "s/^$1=//p"; }

# sample_du PID PATH OUT: the largest du of PATH while PID runs (every 0.2 s), in OUT.
sample_du() {
	top=0
	while kill -0 "$1" 2>/dev/null; do
		s=$(du -sb "$2" 2>/dev/null | cut -f1)
		if [ -n "$s" ] && [ "$s" -gt "$top" ]; then top=$s; fi
		echo "$top" > "$3"
		sleep 0.2
	done
}

# Prepare's temp files (its own directory under the input dir) are sampled alike.
prepare() { # ROWS SHAPE IN
	log=$3.prepare.log
	"$peerjob" prepare -rows "$1" -shape "$2" -csv=false "$3" > "$log" 2>&1 &
	pid=$!
	sample_du "$pid" "$3" "$3.du" &
	spid=$!
	rc=0
	wait "$pid" || rc=$?
	wait "$spid" || true
	cat "$log"
	if [ "$rc" -ne 0 ]; then
		echo "scale.sh: prepare $1 rows of $2 failed (exit $rc); see $log" >&2
		exit 1
	fi
}

: >> "$raw"
header="# scale.sh $(date -u +%FT%TZ) sizes: $sizes; shapes: $shapes; layouts: $layouts; timeout ${limit}s;"
header="$header DuckDB memory_limit $duckmem, temp_directory $spill; $(nproc) cores, $(free -g | awk '/^Mem:/ { print $2 }') GiB"
if [ "$dry" -eq 1 ]; then echo "$header (dry run)"; else echo "$header" | tee -a "$raw"; fi
for n in $sizes; do
	for shape in $shapes; do
		in=$dir/in-$n-$shape
		if manifest_ok "$in" "$n" "$shape"; then
			echo "rows=$n shape=$shape: inputs in $in (reused)"
		else
			want=$(need "$n" "$shape")
			have=$(free_bytes)
			if [ -d "$in" ]; then # a partial or other preparation: its space comes back
				have=$((have + $(du -sb "$in" | cut -f1)))
			fi
			echo "rows=$n shape=$shape: needs about $(human "$want") of disk (inputs, temp files, outputs, DuckDB's spill); $(human "$have") free"
			if [ "$want" -gt "$have" ]; then
				echo "scale.sh: rows=$n shape=$shape: not enough disk in $dir: about $(human "$want") needed," \
					"$(human "$have") free. Free some, use -dir on a larger disk, -clean, or fewer rows." >&2
				exit 1
			fi
			[ "$dry" -eq 1 ] && continue
			rm -rf "$in"
			prepare "$n" "$shape" "$in"
		fi
		[ "$dry" -eq 1 ] && continue
		in_bytes=$(du -sb "$in" | cut -f1)
		tmp_top=$(cat "$in.du" 2>/dev/null || echo "$in_bytes")
		out_top=0
		spill_top=0
		for layout in $layouts; do
			for sj in writeout:merge writeout:rollup-hour duckdb:merge duckdb:rollup-hour parquet-go:merge; do
				sys=${sj%%:*} job=${sj#*:}
				out=$dir/out
				rm -rf "$out" "$spill"
				mkdir -p "$spill"
				load=$(cut -d' ' -f1 /proc/loadavg)
				tm=$dir/time.txt
				: > "$tm"
				timeout -k 30 "$limit" /usr/bin/time -f "%M %e" -o "$tm" "$peerjob" run -every "$every" -system "$sys" -job "$job" -layout "$layout" \
					-duckdb-memory-limit "$duckmem" -duckdb-temp-dir "$spill" "$in" "$out" > "$dir/job.out" 2> "$dir/job.err" &
				pid=$!
				sample_du "$pid" "$spill" "$dir/spill.du" &
				spid=$!
				rc=0
				wait "$pid" || rc=$?
				wait "$spid" || true
				sp=$(cat "$dir/spill.du" 2>/dev/null || echo 0)
				[ "$sp" -gt "$spill_top" ] && spill_top=$sp
				line=$(cat "$dir/job.out")
				if [ "$rc" -eq 0 ]; then
					status=ok
					ob=$(field out_bytes "$line")
					[ "$ob" -gt "$out_top" ] && out_top=$ob
				else
					case $rc in
					124 | 137) if [ "$rc" -eq 124 ] || ! grep -q "signal 9" "$tm"; then status="timeout>${limit}s"; else status="killed(SIGKILL,OOM?)"; fi ;;
					*) status="error (exit $rc): $(grep -v '^$' "$dir/job.err" | head -n 1 | sed 's/^peerjob: //' | tr '|' '/' | cut -c1-160)" ;;
					esac
					# What /usr/bin/time saw of the process before it ended (none if timeout killed it).
					rss=$(awk 'NF == 2 { printf "%.1f", $1 / 1024 }' "$tm" 2>/dev/null)
					line="shape=$shape system=$sys job=$job layout=$layout wall_s=- peak_rss_MiB=${rss:--} out_bytes=-"
				fi
				echo "rows=$n $line spill_bytes=$sp load=$load status=$status" | tee -a "$raw"
				rm -rf "$out" "$spill"
			done
		done
		echo "$n $(awk -v r="$n" -v a="$in_bytes" -v b="$tmp_top" -v c="$out_top" -v d="$spill_top" \
			'BEGIN { printf "%.1f %.1f %.1f %.1f", a / r, (b > a ? b - a : 0) / r, c / r, d / r }')" >> "$dir/estimate-$shape.txt"
		if [ "$clean" -eq 1 ]; then
			rm -rf "$in" "$in.du" "$in.prepare.log"
			echo "rows=$n shape=$shape: inputs removed (-clean)"
		fi
	done
done
[ "$dry" -eq 1 ] && exit 0

# The table of this invocation's lines (those after its header in scale.txt).
table=$dir/table.md
awk -v sizes=" $sizes " -v mib=$mib '
/^# scale.sh/ { delete seen; n = 0; next }
{
	delete kv
	for (i = 1; i <= NF; i++) { k = $i; sub(/=.*/, "", k); v = $i; sub(/^[^=]*=/, "", v); kv[k] = v }
	if (index(sizes, " " kv["rows"] " ") == 0) next
	out = kv["out_bytes"] == "-" ? "-" : sprintf("%.1f", kv["out_bytes"] / mib)
	sp = kv["system"] == "duckdb" ? sprintf("%.0f", kv["spill_bytes"] / mib) : ""
	status = substr($0, index($0, " status=") + 8) # the last field, which may hold spaces
	rows[++n] = sprintf("| %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |", kv["rows"], kv["shape"], kv["layout"],
		kv["system"], kv["job"], kv["wall_s"], kv["peak_rss_MiB"], out, sp, kv["load"], status)
}
END {
	print "| rows | shape | layout | system | job | wall s | peak RSS MiB | output MiB | DuckDB spill MiB | load | status |"
	print "|---|---|---|---|---|---|---|---|---|---|---|"
	for (i = 1; i <= n; i++) print rows[i]
}' "$raw" > "$table"
echo
cat "$table"
