#!/usr/bin/env python3
# A/B of segtool builds on issue 14 bar 5's grouped query: each binary runs
# `query --granularity hour --group-by origin,destination SEG` RUNS times, the order of the
# binaries reversed every other round, output to /dev/null; prints each binary's median and
# minimum wall time and CPU time (user + system, from wait4). The CPU time is the steadier
# figure on a shared machine. SEG is query_groups.sh's DIR/flights.seg.
# Usage: bench/scripts/query_ab.py SEG RUNS SEGTOOL...
import os
import statistics
import subprocess
import sys
import time

seg, runs, bins = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
args = ["query", "--granularity", "hour", "--group-by", "origin,destination", seg]
wall = {b: [] for b in bins}
cpu = {b: [] for b in bins}
for i in range(runs):
    for b in bins if i % 2 == 0 else bins[::-1]:
        t = time.perf_counter()
        p = subprocess.Popen([b] + args, stdout=subprocess.DEVNULL)
        _, status, ru = os.wait4(p.pid, 0)
        if status != 0:
            sys.exit(f"{b}: exit status {status}")
        wall[b].append(time.perf_counter() - t)
        cpu[b].append(ru.ru_utime + ru.ru_stime)
for b in bins:
    print(f"{b}: wall median {statistics.median(wall[b]):.3f} s, min {min(wall[b]):.3f}; "
          f"cpu median {statistics.median(cpu[b]):.3f} s, min {min(cpu[b]):.3f}")
