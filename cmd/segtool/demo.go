package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/internal/gen"
	"github.com/writeout/writeout/medium"
	"github.com/writeout/writeout/merger/ingest"
	"github.com/writeout/writeout/merger/query"
	"github.com/writeout/writeout/merger/query/filter"
)

type demoFlags struct {
	keep        bool
	rows        int
	segments    int
	granularity string
	dir         string
}

func newDemoCmd() *cobra.Command {
	var f demoFlags
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Generate, merge through every medium, verify and query: the main job, no set-up",
		Long: `demo runs writeout's main job end to end in a temp directory:

 1. generates 5 segments of 75,000 rows of Druid's basic benchmark schema (seeds 9999..10003);
 2. merges them through every medium (heap, offheap, tmpfile, and mmapfile where the platform
    has it), with rollup off and on (at granularity none, as Druid's IndexMergeBenchmark; the
    basic schema's rows are distinct, so rollup keeps them all), publishing with the default
    durability (fdatasync the output, fsync the directory);
 3. verifies every output (every CRC and invariant) and runs one filtered query on it;
 4. prints a table: medium, rollup, rows in, rows out, output bytes, wall time of the merge,
    peak Go heap during the merge (sampled; offheap memory is outside it), syncs done, and
    the query's answer, which must be the same for every medium;
 5. removes the temp directory, unless --keep.`,
		Example: `  segtool demo
  segtool demo --rows 10000 --segments 3 --keep`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runDemo(cmd.Context(), cmd.OutOrStdout(), f)
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&f.keep, "keep", false, "keep the temp directory and print its name")
	fl.IntVar(&f.rows, "rows", 75000, "rows per generated segment")
	fl.IntVar(&f.segments, "segments", 5, "generated segments")
	fl.StringVar(&f.granularity, "granularity", "none", "granularity of the rollup merges")
	fl.StringVar(&f.dir, "dir", "", "parent of the temp directory (default: the system's)")
	return cmd
}

// demoQuery is the filtered query the demo runs on every output.
const demoQuery = `dimMultivalEnumerated = 'Hello' and dimZipf in ('1', '2', '3') and dimSequentialHalfNull is not null`

// demoQueryAnswer runs the demo's query on a segment: the input rows it matches (the count
// metric "rows" summed), which must not depend on the medium or on rollup.
func demoQueryAnswer(ctx context.Context, path string) (string, error) {
	f, err := filter.Parse(demoQuery)
	if err != nil {
		return "", err
	}
	var res query.Result
	err = querySegments(ctx, []string{path}, query.Spec{Filter: f, All: true, Metrics: []string{"rows"}}, &s3Flags{}, nil,
		func(r query.Result) error { res = r; return nil })
	if err != nil {
		return "", err
	}
	var n int64
	for _, r := range res.Rows {
		n += r.Values[0].Long
	}
	return fmt.Sprint(n), nil
}

type demoRow struct {
	medium       string
	rollup       bool
	rowsIn       int64
	rowsOut      int64
	bytes        int64
	wall         time.Duration
	peakHeap     uint64
	syncs        int
	queryAnswer  string
	verifyStatus string
}

func runDemo(ctx context.Context, out io.Writer, f demoFlags) (err error) {
	if f.rows < 1 || f.segments < 1 {
		return usagef("--rows and --segments must be at least 1")
	}
	gran, err := columns.ParseGranularity(f.granularity)
	if err != nil {
		return usageError{err}
	}
	dir, err := os.MkdirTemp(f.dir, "segtool-demo-*")
	if err != nil {
		return err
	}
	defer func() {
		if f.keep {
			fmt.Fprintf(out, "\nkept %s\n", dir)
			return
		}
		if rerr := os.RemoveAll(dir); rerr != nil {
			err = errors.Join(err, rerr)
			return
		}
		fmt.Fprintf(out, "\nremoved %s\n", dir)
	}()

	// 1. Generate.
	start := time.Now()
	inDir := filepath.Join(dir, "inputs")
	if err := os.Mkdir(inDir, 0o755); err != nil {
		return err
	}
	var inputs []string
	var inBytes int64
	for k := range f.segments {
		p := filepath.Join(inDir, fmt.Sprintf("basic-%04d.seg", k))
		seg, err := genSegment(ctx, p, genSource{schema: "basic", seed: gen.BasicSeed + int64(k), rows: f.rows}, false, columns.GranularityNone,
			ingest.Options{Durability: medium.Durability{Sync: medium.SyncNone}, MemoryLimit: genMemoryLimit})
		if err != nil {
			return err
		}
		inputs = append(inputs, p)
		inBytes += seg.Bytes
	}
	fmt.Fprintf(out, "generated %d segments x %d rows of the basic schema (seeds %d..%d), %s, in %s\n",
		f.segments, f.rows, gen.BasicSeed, gen.BasicSeed+f.segments-1, humanBytes(inBytes), humanDuration(time.Since(start)))
	fmt.Fprintf(out, "query: %s\n\n", demoQuery)

	// 2-3. Merge through every medium, verify, query.
	var rows []demoRow
	for _, med := range mediumNames {
		if med == "mmapfile" && !mmapfileAvailable() {
			continue
		}
		for _, rollup := range []bool{false, true} {
			r, err := demoMerge(ctx, dir, inputs, med, rollup, gran)
			if err != nil {
				return err
			}
			rows = append(rows, r)
		}
	}

	// 4. The table.
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "medium\trollup\trows in\trows out\toutput bytes\twall time\tpeak Go heap\tsyncs\tverify\tquery: rows matched\t")
	for _, r := range rows {
		ru := "off"
		if r.rollup {
			ru = "on"
			if gran != columns.GranularityNone {
				ru += " (" + gran.String() + ")"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\t%s\t%d\t%s\t%s\t\n", r.medium, ru, r.rowsIn, r.rowsOut, humanBytes(r.bytes),
			humanDuration(r.wall), humanBytes(int64(r.peakHeap)), r.syncs, r.verifyStatus, r.queryAnswer)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range rows {
		if r.rollup && r.rowsOut == r.rowsIn {
			// Not a rollup that did nothing: the basic schema's rows differ in their
			// dimensions (dimSequential alone cycles through 1,000 values), as in Druid's
			// IndexMergeBenchmark, so no two share a time bucket and every dimension value.
			fmt.Fprintf(out, "\nrollup on: rows out = rows in because no two generated rows share both their time bucket (%s)\n"+
				"and every dimension value, which is what rollup combines; ingest and merge --rollup of\n"+
				"real events combine rows (README, \"A tour of segtool\").\n", gran)
			break
		}
	}
	// Every medium must give the same output for the same rollup setting.
	for _, r := range rows {
		for _, o := range rows {
			if r.rollup == o.rollup && (r.rowsOut != o.rowsOut || r.queryAnswer != o.queryAnswer) {
				return fmt.Errorf("demo: media %s and %s disagree (rollup %v)", r.medium, o.medium, r.rollup)
			}
		}
	}
	return nil
}

// demoMerge runs one merge and checks its output and directory.
func demoMerge(ctx context.Context, dir string, inputs []string, med string, rollup bool, gran columns.Granularity) (demoRow, error) {
	name := fmt.Sprintf("merged-%s", med)
	if rollup {
		name += "-rollup"
	}
	dst := filepath.Join(dir, name+".seg")
	s := mergeSettings{mediumName: med, tmpDir: dir, rollup: rollup}
	if rollup {
		s.granularity = gran
	}
	before, err := listFiles(dir)
	if err != nil {
		return demoRow{}, err
	}
	runtime.GC()
	sampler := startHeapSampler()
	start := time.Now()
	res, err := mergeFiles(ctx, inputs, dst, s)
	wall := time.Since(start)
	peak := sampler.stop()
	if err != nil {
		return demoRow{}, err
	}
	after, err := listFiles(dir)
	if err != nil {
		return demoRow{}, err
	}
	if len(after) != len(before)+1 {
		return demoRow{}, fmt.Errorf("demo: merge through %s left %v in %s (before: %v)", med, after, dir, before)
	}
	if _, err := verifyFile(dst); err != nil {
		return demoRow{}, fmt.Errorf("demo: verify %s: %w", dst, err)
	}
	answer, err := demoQueryAnswer(ctx, dst)
	if err != nil {
		return demoRow{}, err
	}
	return demoRow{medium: med, rollup: rollup, rowsIn: res.rowsIn, rowsOut: res.rowsOut, bytes: res.bytes, wall: wall,
		peakHeap: peak, syncs: res.Syncs, verifyStatus: "ok", queryAnswer: answer}, nil
}

// heapSampler records the peak of the Go heap's live and not yet swept objects while it runs.
type heapSampler struct {
	done chan struct{}
	wg   sync.WaitGroup
	peak uint64
}

func startHeapSampler() *heapSampler {
	h := &heapSampler{done: make(chan struct{})}
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() {
		metrics.Read(sample)
		if v := sample[0].Value.Uint64(); v > h.peak {
			h.peak = v
		}
	}
	read()
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-h.done:
				read()
				return
			case <-t.C:
				read()
			}
		}
	}()
	return h
}

func (h *heapSampler) stop() uint64 {
	close(h.done)
	h.wg.Wait()
	return h.peak
}
