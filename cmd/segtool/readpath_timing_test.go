//go:build unix

package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/internal/gen"
	"github.com/writeout/writeout/medium"
	"github.com/writeout/writeout/merger/ingest"
)

// BenchmarkReadCommands runs the commands that read segments (dump, export, query, merge) in
// process on generated basic segments (WRITEOUT_BENCH_ROWS rows each, default 200,000), each
// iteration opening its inputs afresh, so that every part a command reads has its checksum and
// structural checks run once, as a segtool run does. Output goes to io.Discard, or to a file
// in the benchmark's directory (export, merge; no syncs). cpu-ns/op is the process's CPU time
// (user and system) per run: on a shared machine it varies less than the elapsed time.
func BenchmarkReadCommands(b *testing.B) {
	rows := 200_000
	if s := os.Getenv("WRITEOUT_BENCH_ROWS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			b.Fatalf("WRITEOUT_BENCH_ROWS=%q", s)
		}
		rows = n
	}
	dir := b.TempDir()
	var segs []string
	var size int64
	for k := range 2 {
		p := filepath.Join(dir, fmt.Sprintf("basic-%d.seg", k))
		res, err := genSegment(context.Background(), p, genSource{schema: "basic", seed: gen.BasicSeed + int64(k), rows: rows}, false,
			columns.GranularityNone, ingest.Options{Durability: medium.Durability{Sync: medium.SyncNone}})
		if err != nil {
			b.Fatal(err)
		}
		segs = append(segs, p)
		if k == 0 {
			size = res.Bytes
		}
	}
	out := func(ext string) string { return filepath.Join(dir, "out."+ext) }
	ops := []struct {
		name  string
		bytes int64
		args  []string
	}{
		{"dump", size, []string{"dump", segs[0]}},
		{"export", size, []string{"export", "--out", out("parquet"), "--replace", "--medium", "heap", "--durability", "none", "--quiet", segs[0]}},
		{"query-filter", size, []string{"query", "--filter", "dimZipf = '9' and dimMultivalEnumerated = 'Bar'", "--group-by", "dimSequentialHalfNull", segs[0]}},
		{"query-groupby", size, []string{"query", "--group-by", "dimZipf,dimMultivalEnumerated2", "--granularity", "hour", segs[0]}},
		{"merge", 2 * size, []string{"merge", "--out", out("seg"), "--replace", "--medium", "heap", "--durability", "none", "--quiet", segs[0], segs[1]}},
	}
	for _, op := range ops {
		b.Run(fmt.Sprintf("rows=%d/op=%s", rows, op.name), func(b *testing.B) {
			b.SetBytes(op.bytes)
			b.ReportAllocs()
			var cpu time.Duration
			for b.Loop() {
				c0 := cpuTime(b)
				var errb strings.Builder
				if code := run(context.Background(), op.args, strings.NewReader(""), io.Discard, &errb); code != 0 {
					b.Fatalf("segtool %s: %s", strings.Join(op.args, " "), errb.String())
				}
				cpu += cpuTime(b) - c0
			}
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}

// cpuTime is the process's CPU time so far, user and system.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
