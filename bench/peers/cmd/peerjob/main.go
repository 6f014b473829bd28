// Command peerjob runs one job of the peers benchmark (writeout, DuckDB or parquet-go) in a
// process of its own, so that its whole-process memory can be measured: the Go heap figures
// of BenchmarkPeers miss DuckDB's C++ memory and the process RSS, and the in-process
// generation of 3,000,000 events would pollute any RSS figure taken there.
//
//	peerjob prepare [-rows N] [-shape S] [-csv=false] [-batch N] [-run-rows N] [-tmp DIR] DIR
//	    writes the inputs of both layouts under DIR (5 segments and 5 Parquet files each),
//	    the CSV files under DIR/csv, and DIR/manifest.json last
//	peerjob run -system S -job J -layout L [-every D] [-memprofile F] [-cpuprofile F] [-trace F]
//	    [-duckdb-memory-limit M] [-duckdb-temp-dir DIR] DIR OUT
//	    runs one job on DIR's inputs into OUT and prints one line of figures
//	peerjob pqsizes FILE [FILE ...]
//	    prints each column of each Parquet file with its bytes (DuckDB's parquet_metadata(),
//	    summed over the row groups), to set against segtool inspect's parts
//
// prepare streams (peers.Prepare): its memory does not grow with -rows (but for the merge of
// each input segment's runs, which is merger.Merge's), and the files are those of the
// in-memory generation, byte for byte. It ends with a line of its wall time and peak RSS.
// Shapes (-shape): events (the default, the peers' events) and minutes (issue 34's two
// ~300-value dimensions and two skewed metrics over six months of minutes); run takes the
// shape from DIR's manifest (a directory without one is events).
//
// Systems: writeout, writeout-zstd, duckdb, parquet-go; jobs: merge, rollup-hour (not with
// parquet-go), ingest-csv (writeout and duckdb: prepare's CSV files, DIR/csv, into one sorted
// output; issue 14, bar 4); layouts: contiguous, overlapping. DuckDB runs with SET threads=2
// and, when given, SET memory_limit and SET temp_directory (where it spills what does not fit).
// The line run prints:
//
//	shape=events system=writeout job=merge layout=contiguous rows_out=3000000 out_bytes=47575309
//	wall_s=1.340 base_rss_MiB=28.5 base_anon_MiB=3.1 base_file_MiB=25.4 peak_rss_MiB=112.7
//	peak_anon_MiB=40.8 peak_file_MiB=72.1 peak_shmem_MiB=0.0 go_heap_peak_MiB=35.8 samples=418
//
// peak_rss_MiB is the kernel's VmHWM at the end (the whole process's peak resident set,
// what /usr/bin/time -v calls "Maximum resident set size"); peak_anon_MiB, peak_file_MiB and
// peak_shmem_MiB the highest RssAnon, RssFile and RssShmem of /proc/self/status sampled every
// D (2 ms) during the job, each on its own (they may come from different samples); base_rss_MiB
// the VmRSS just before the job (the runtime, the binary's touched pages, DuckDB's open
// database), base_anon_MiB and base_file_MiB its RssAnon and RssFile (every system runs in
// the same binary, which links DuckDB); go_heap_peak_MiB the Go heap's live objects at their highest, sampled likewise.
// wall_s is the job's wall time alone. A writeout merge or rollup adds its steps' times,
// from merger.Result: dict_ms, rows_ms, bitmaps_ms, publish_ms (the checksum pass of the parts
// it did not read counts in publish_ms), and total_ms, the merge's own wall time (what is left of
// wall_s after it is the job's set-up around the merge).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/writeout/writeout/bench/internal/meminfo"
	"github.com/writeout/writeout/bench/peers"
	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/medium"
	"github.com/writeout/writeout/merger"
	"github.com/writeout/writeout/merger/ingest"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "peerjob:", err)
		os.Exit(1)
	}
}

const usage = "usage: peerjob prepare [-rows N] [-shape S] [-csv=false] [-batch N] [-run-rows N] [-tmp DIR] DIR | " +
	"peerjob run -system S -job J -layout L [-every D] [-memprofile F] [-cpuprofile F] [-trace F] " +
	"[-duckdb-memory-limit M] [-duckdb-temp-dir DIR] DIR OUT | peerjob pqsizes FILE [FILE ...]"

func run(args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return errors.New(usage)
	}
	switch args[0] {
	case "prepare":
		return prepare(args[1:], stdout)
	case "run":
		return runJob(args[1:], stdout)
	case "pqsizes":
		return pqSizes(args[1:], stdout)
	default:
		return fmt.Errorf("unknown command %q; %s", args[0], usage)
	}
}

func prepare(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("prepare", flag.ContinueOnError)
	rows := fs.Int("rows", 3_000_000, "rows of the generated table")
	shape := fs.String("shape", peers.Events.Name, "the table: "+shapeHelp())
	csv := fs.Bool("csv", true, "also write the CSV files of the ingest-csv job (DIR/csv), the largest inputs")
	batch := fs.Int("batch", peers.DefaultBatchRows, "rows of a generation bucket, sorted in memory")
	runRows := fs.Int("run-rows", peers.DefaultRunRows, "rows of a segment's runs (overlapping layout: a fifth of this, every input at once)")
	tmp := fs.String("tmp", "", "directory of the temp files (buckets, runs, Parquet page buffers); default DIR")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New(usage)
	}
	if *rows < peers.Inputs {
		return fmt.Errorf("prepare: -rows %d: want at least %d", *rows, peers.Inputs)
	}
	s, err := peers.ShapeNamed(*shape)
	if err != nil {
		return fmt.Errorf("prepare: -shape: %w", err)
	}
	dir := fs.Arg(0)
	start := time.Now()
	m, err := peers.Prepare(dir, peers.PrepareOptions{Shape: s, Rows: *rows, NoCSV: !*csv, BatchRows: *batch, RunRows: *runRows, TempDir: *tmp})
	if err != nil {
		return err
	}
	wall := time.Since(start)
	for _, layout := range m.Layouts {
		fmt.Fprintf(stdout, "shape=%s layout=%s rows=%d seg_bytes=%d parquet_bytes=%d\n", s.Name, layout, *rows, m.SegBytes[layout], m.ParquetBytes[layout])
	}
	if *csv {
		fmt.Fprintf(stdout, "shape=%s csv rows=%d csv_bytes=%d dir=%s\n", s.Name, *rows, m.CSVBytes, filepath.Join(dir, "csv"))
	}
	st, err := meminfo.ReadStatus()
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "shape=%s prepared rows=%d wall_s=%.1f peak_rss_MiB=%.1f\n", s.Name, *rows, wall.Seconds(), float64(st.VmHWM)/(1<<20))
	return err
}

func shapeHelp() string {
	var b strings.Builder
	for i, s := range peers.Shapes {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s (%s)", s.Name, s.Doc)
	}
	return b.String()
}

// dirShape returns the shape of the inputs prepare wrote in dir: its manifest's, or Events for
// a directory prepared before there were shapes (and manifests).
func dirShape(dir string) (*peers.Shape, error) {
	m, err := peers.ReadManifest(dir)
	if errors.Is(err, os.ErrNotExist) {
		return peers.Events, nil
	}
	if err != nil {
		return nil, err
	}
	return peers.ShapeNamed(m.Shape)
}

// job is one run's choice.
type job struct {
	system, job string
	layout      peers.Layout
	shape       *peers.Shape
	dir         string              // the directory prepare wrote
	duck        peers.DuckDBOptions // DuckDB's memory_limit and temp_directory
	steps       *merger.Result      // a writeout merge's: its steps' times, for the line
}

// ingestCSV returns the ingest-csv job's op: the CSV files prepare wrote under dir/csv into
// one sorted output, through ingest.Run (what segtool ingest does) or DuckDB's read_csv.
func (j job) ingestCSV() (func(ctx context.Context, out string) (int64, error), func() error, error) {
	paths, err := peers.CSVInputs(filepath.Join(j.dir, "csv"))
	if err != nil {
		return nil, nil, err
	}
	switch j.system {
	case "writeout":
		sp, err := ingest.ParseSpec([]byte(j.shape.IngestSpec()))
		if err != nil {
			return nil, nil, err
		}
		return func(ctx context.Context, out string) (int64, error) {
			inputs := make([]ingest.Input, len(paths))
			for i, p := range paths {
				inputs[i] = ingest.Input{Path: p}
			}
			res, err := ingest.Run(ctx, sp, inputs, ingest.Options{Out: out, Durability: medium.Durability{Sync: medium.SyncNone}})
			return res.InputRows, err
		}, func() error { return nil }, nil
	case "duckdb":
		db, err := peers.OpenDuckDBWith(j.duck)
		if err != nil {
			return nil, nil, err
		}
		return func(ctx context.Context, out string) (int64, error) {
			return db.Exec(ctx, j.shape.IngestCSVSQL(paths, out))
		}, db.Close, nil
	}
	return nil, nil, fmt.Errorf("job ingest-csv: unknown system %q (writeout, duckdb)", j.system)
}

// op returns the function that runs j on fx into out and returns the rows written, and
// what must be set up first (DuckDB's database) with its cleanup.
func (j job) op(fx peers.Fixture) (func(ctx context.Context, out string) (int64, error), func() error, error) {
	if j.job == "ingest-csv" {
		return j.ingestCSV()
	}
	if j.job != "merge" && j.job != "rollup-hour" {
		return nil, nil, fmt.Errorf("unknown job %q (merge, rollup-hour, ingest-csv)", j.job)
	}
	rollup := j.job == "rollup-hour"
	noop := func() error { return nil }
	switch j.system {
	case "writeout", "writeout-zstd":
		comp := columns.CompressionDefault
		if j.system == "writeout-zstd" {
			comp = columns.CompressionZstd
		}
		return func(ctx context.Context, out string) (int64, error) {
			var res merger.Result
			var err error
			if rollup {
				res, err = j.shape.WriteoutRollupHour(ctx, fx.Segs, out, comp)
			} else {
				res, err = peers.WriteoutMerge(ctx, fx.Segs, out, comp)
			}
			*j.steps = res
			return res.RowsOut, err
		}, noop, nil
	case "duckdb":
		db, err := peers.OpenDuckDBWith(j.duck)
		if err != nil {
			return nil, nil, err
		}
		return func(ctx context.Context, out string) (int64, error) {
			if rollup {
				return db.Exec(ctx, j.shape.RollupSQL(fx.Parquets, out))
			}
			return db.Exec(ctx, j.shape.MergeSQL(fx.Parquets, out))
		}, db.Close, nil
	case "parquet-go":
		if rollup {
			return nil, nil, errors.New("parquet-go has no group-by: it runs only the merge job")
		}
		return func(_ context.Context, out string) (int64, error) {
			return j.shape.ParquetGoMerge(fx.Parquets, out)
		}, noop, nil
	default:
		return nil, nil, fmt.Errorf("unknown system %q (writeout, writeout-zstd, duckdb, parquet-go)", j.system)
	}
}

// heapSample is heapObjects' sample, reused: only the heap sampler's goroutine reads it.
var heapSample = []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}

func heapObjects() (int64, error) {
	metrics.Read(heapSample)
	return int64(heapSample[0].Value.Uint64()), nil
}

func runJob(args []string, stdout io.Writer) (err error) {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	var j job
	var layout string
	fs.StringVar(&j.system, "system", "", "writeout, writeout-zstd, duckdb or parquet-go")
	fs.StringVar(&j.job, "job", "", "merge, rollup-hour or ingest-csv (writeout and duckdb; the layout is contiguous)")
	fs.StringVar(&layout, "layout", "", "contiguous or overlapping")
	every := fs.Duration("every", 2*time.Millisecond, "sampling period of /proc/self/status and the Go heap")
	memprofile := fs.String("memprofile", "", "write the allocs profile (in use and allocated) of the job to this file")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the job to this file")
	trace := fs.String("trace", "", "write every sample of /proc/self/status (ms since the start, MiB of VmRSS, RssAnon, RssFile) to this file")
	fs.StringVar(&j.duck.MemoryLimit, "duckdb-memory-limit", "", "DuckDB's SET memory_limit (\"4GB\"); default DuckDB's (80% of the memory)")
	fs.StringVar(&j.duck.TempDirectory, "duckdb-temp-dir", "", "DuckDB's SET temp_directory, where it spills; default DuckDB's (.tmp in the working directory)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 2 {
		return errors.New(usage)
	}
	j.layout = peers.Layout(layout)
	if j.layout != peers.Contiguous && j.layout != peers.Overlapping {
		return fmt.Errorf("unknown layout %q (contiguous, overlapping)", layout)
	}
	dir, out := fs.Arg(0), fs.Arg(1)
	j.dir = dir
	if j.shape, err = dirShape(dir); err != nil {
		return err
	}
	fx, err := peers.StatFixture(dir, j.layout)
	if err != nil {
		return fmt.Errorf("%w (run peerjob prepare %s first)", err, dir)
	}
	j.steps = new(merger.Result)
	op, closeOp, err := j.op(fx)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := closeOp(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	if err := os.Remove(out); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if *memprofile != "" {
		runtime.MemProfileRate = 64 << 10
	}
	runtime.GC()
	base, err := meminfo.ReadStatus()
	if err != nil {
		return err
	}
	// The samplers allocate nothing per sample (StatusReader, one metrics slice): they add
	// no garbage to the Go heap they measure. -trace's samples are kept in a slice sized for
	// a minute of them.
	sr, err := meminfo.OpenStatus()
	if err != nil {
		return err
	}
	var samples []timedStatus
	if *trace != "" {
		samples = make([]timedStatus, 0, int(time.Minute / *every))
	}
	heap := meminfo.StartFunc(*every, heapObjects)
	start := time.Now()
	status := meminfo.StartStatusFunc(*every, func() (meminfo.Status, error) {
		st, err := sr.Read()
		if err == nil && *trace != "" {
			samples = append(samples, timedStatus{time.Since(start), st})
		}
		return st, err
	})
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			_ = f.Close()
			return err
		}
		defer func() {
			pprof.StopCPUProfile()
			if cerr := f.Close(); cerr != nil && err == nil {
				err = cerr
			}
		}()
	}
	rows, jobErr := op(context.Background(), out)
	wall := time.Since(start)
	peak, nsamples, serr := status.Stop()
	heapPeak, herr := heap.Stop()
	serr = errors.Join(serr, sr.Close())
	if jobErr != nil {
		return fmt.Errorf("%s %s %s: %w", j.system, j.job, j.layout, jobErr)
	}
	if err := errors.Join(serr, herr); err != nil {
		return err
	}
	// VmHWM at the end: the kernel's peak, which no sampling can miss.
	end, err := meminfo.ReadStatus()
	if err != nil {
		return err
	}
	st, err := os.Stat(out)
	if err != nil {
		return err
	}
	if *memprofile != "" {
		if err := writeProfile(*memprofile); err != nil {
			return err
		}
	}
	if *trace != "" {
		if err := writeTrace(*trace, samples); err != nil {
			return err
		}
	}
	const mib = 1 << 20
	line := fmt.Sprintf("shape=%s system=%s job=%s layout=%s rows_out=%d out_bytes=%d wall_s=%.3f base_rss_MiB=%.1f base_anon_MiB=%.1f base_file_MiB=%.1f peak_rss_MiB=%.1f "+
		"peak_anon_MiB=%.1f peak_file_MiB=%.1f peak_shmem_MiB=%.1f go_heap_peak_MiB=%.1f samples=%d",
		j.shape.Name, j.system, j.job, j.layout, rows, st.Size(), wall.Seconds(), float64(base.VmRSS)/mib, float64(base.RssAnon)/mib, float64(base.RssFile)/mib, float64(end.VmHWM)/mib,
		float64(peak.RssAnon)/mib, float64(peak.RssFile)/mib, float64(peak.RssShmem)/mib, float64(heapPeak)/mib, nsamples)
	if r := j.steps; r.RowsIn > 0 {
		// A writeout merge's steps (merger.Result), where its wall time went.
		ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
		line += fmt.Sprintf(" dict_ms=%.1f rows_ms=%.1f bitmaps_ms=%.1f publish_ms=%.1f total_ms=%.1f",
			ms(r.Dictionaries), ms(r.Rows), ms(r.Bitmaps), ms(r.Publish), ms(r.Total))
	}
	_, err = fmt.Fprintln(stdout, line)
	return err
}

func writeProfile(path string) (err error) {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	runtime.GC() // the profile is as of the last GC: take in the job's last allocations
	return pprof.Lookup("allocs").WriteTo(f, 0)
}

// timedStatus is one sample of -trace.
type timedStatus struct {
	at time.Duration
	st meminfo.Status
}

func writeTrace(path string, samples []timedStatus) error {
	var b []byte
	b = append(b, "ms vmrss_MiB rssanon_MiB rssfile_MiB\n"...)
	for _, s := range samples {
		b = fmt.Appendf(b, "%.1f %.1f %.1f %.1f\n", float64(s.at.Microseconds())/1000,
			float64(s.st.VmRSS)/(1<<20), float64(s.st.RssAnon)/(1<<20), float64(s.st.RssFile)/(1<<20))
	}
	return os.WriteFile(path, b, 0o644)
}

// pqSizes prints the columns of each Parquet file with their sizes, one line each, and the
// file's total.
func pqSizes(args []string, stdout io.Writer) (err error) {
	if len(args) == 0 {
		return errors.New(usage)
	}
	db, err := peers.OpenDuckDB()
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, db.Close()) }()
	for _, path := range args {
		cols, err := db.ColumnSizes(context.Background(), path)
		if err != nil {
			return err
		}
		st, err := os.Stat(path)
		if err != nil {
			return err
		}
		var sum int64
		for _, c := range cols {
			sum += c.Compressed
			fmt.Fprintf(stdout, "%s column=%s bytes=%d uncompressed=%d row_groups=%d compression=%s encodings=%s\n",
				path, c.Column, c.Compressed, c.Uncompressed, c.RowGroups, c.Compression, c.Encodings)
		}
		fmt.Fprintf(stdout, "%s columns_bytes=%d file_bytes=%d\n", path, sum, st.Size())
	}
	return nil
}
