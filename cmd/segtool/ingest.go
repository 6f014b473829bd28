package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/medium"
)

type ingestFlags struct {
	spec            string
	out             string
	format          string
	maxParseErrors  int
	rowsPerSegment  int
	maxRowsInMemory int
	replace         bool
	medium          string
	tmpDir          string
	durability      string
	quiet           bool
	memoryLimitMiB  int
}

// defaultMaxRowsInMemory bounds a batch: about 150 bytes a row for the basic schema.
const defaultMaxRowsInMemory = 500_000

// runTempPattern names the directory of an ingestion's intermediate segments; sweep removes
// leftovers.
const runTempPattern = "writeout-segtool-*.tmp"

func newIngestCmd() *cobra.Command {
	var f ingestFlags
	cmd := &cobra.Command{
		Use:   "ingest --spec SPEC.json --out SEG.seg FILE...",
		Short: "Build segments from CSV or NDJSON files",
		Long: `ingest reads rows from CSV files (with a header line) or NDJSON files, or '-' for standard
input, and writes them as a segment sorted by time and dimensions, rolled up if the spec says so.

Input streams: rows are held in memory in compact form up to --max-rows-in-memory, then sorted
and written as an intermediate segment in a temp directory (` + runTempPattern + ` in --tmp-dir);
the intermediate segments are merged into the output at the end. With --rows-per-segment N
every N input rows make one segment of their own, named from --out with a four-digit number
(--out day.seg gives day-0000.seg, day-0001.seg, ...), even when there is only one.

A row that does not parse is reported as FILE:LINE: column NAME: reason. --max-parse-errors N
skips up to N such rows (each reported on standard error) and fails at the next; the summary
counts the rows skipped. On failure no output is left behind.

` + specHelp,
		Example: `  segtool ingest --spec spec.json --out events.seg events.csv
  segtool ingest --spec spec.json --out day.seg --rows-per-segment 1000000 day-*.ndjson
  zcat events.csv.gz | segtool ingest --spec spec.json --format csv --out events.seg -`,
		Args: usageArgs(cobra.MinimumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, name := range []string{"spec", "out"} {
				if err := requireFlag(cmd, name); err != nil {
					return err
				}
			}
			return runIngest(cmd.Context(), cmd, f, args)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.spec, "spec", "", "ingestion spec: the schema JSON plus the input mapping (required)")
	fl.StringVar(&f.out, "out", "", "output segment file (required)")
	fl.StringVar(&f.format, "format", "", "input format, csv or ndjson (default: the spec's, else by extension)")
	fl.IntVar(&f.maxParseErrors, "max-parse-errors", 0, "rows that do not parse to skip before failing")
	fl.IntVar(&f.rowsPerSegment, "rows-per-segment", 0, "split the output: this many input rows per segment (0: one segment)")
	fl.IntVar(&f.maxRowsInMemory, "max-rows-in-memory", defaultMaxRowsInMemory, "rows held in memory before an intermediate segment is written")
	fl.BoolVar(&f.replace, "replace", false, "replace existing output files")
	fl.StringVar(&f.medium, "medium", "tmpfile", "staging medium: heap, offheap, tmpfile or mmapfile")
	fl.StringVar(&f.tmpDir, "tmp-dir", "", "directory of temp files (default: the output's directory)")
	fl.StringVar(&f.durability, "durability", "output", "none, output (sync the published file) or all (also the stages)")
	fl.BoolVar(&f.quiet, "quiet", false, "print no summary")
	addMemoryLimitFlag(cmd, &f.memoryLimitMiB)
	return cmd
}

// ingestion is the state of one ingest run.
type ingestion struct {
	ctx     context.Context
	f       ingestFlags
	sp      *spec
	stderr  io.Writer
	dur     medium.Durability
	med     medium.Medium
	tmpDir  string
	runDir  string   // intermediate segments, created on first use
	runs    []string // intermediate segments of the current output segment
	outputs []segmentSummary
	batch   *batch
	segRows int // input rows in the current output segment
	inRows  int64
	skipped int
}

type segmentSummary struct {
	path     string
	inRows   int
	rows     int
	size     int64
	interval columns.Interval
}

func runIngest(ctx context.Context, cmd *cobra.Command, f ingestFlags, files []string) (err error) {
	start := time.Now()
	switch {
	case f.maxParseErrors < 0:
		return usagef("--max-parse-errors must be 0 or more")
	case f.rowsPerSegment < 0:
		return usagef("--rows-per-segment must be 0 or more")
	case f.maxRowsInMemory < 1:
		return usagef("--max-rows-in-memory must be at least 1")
	}
	if f.format != "" && f.format != "csv" && f.format != "ndjson" {
		return usagef("--format %q: want csv or ndjson", f.format)
	}
	dur, err := parseDurability(f.durability)
	if err != nil {
		return err
	}
	setMemoryLimit(f.memoryLimitMiB)
	sp, err := parseSpec(f.spec)
	if err != nil {
		return err
	}
	first := f.out
	if f.rowsPerSegment > 0 {
		first = segmentName(f.out, 0)
	}
	if err := checkOutput(first, f.replace); err != nil {
		return err
	}
	stdinUsed := 0
	formats := make([]string, len(files))
	for i, p := range files {
		if p == "-" {
			stdinUsed++
		}
		if formats[i], err = inputFormat(p, f.format, sp); err != nil {
			return err
		}
	}
	if stdinUsed > 1 {
		return usagef("'-' (standard input) given more than once")
	}
	in := &ingestion{ctx: ctx, f: f, sp: sp, stderr: cmd.ErrOrStderr(), dur: dur, batch: newBatch(sp.Schema)}
	in.tmpDir = f.tmpDir
	if in.tmpDir == "" {
		in.tmpDir = filepath.Dir(f.out)
	}
	if in.med, err = openMedium(f.medium, in.tmpDir, dur); err != nil {
		return err
	}
	defer func() {
		err = errors.Join(err, in.med.Close())
		if in.runDir != "" {
			err = errors.Join(err, os.RemoveAll(in.runDir))
		}
		if err != nil {
			for _, o := range in.outputs { // leave no output behind
				os.Remove(o.path)
			}
		}
	}()

	row := newInRow(sp.Schema)
	for i, p := range files {
		if err := in.readFile(p, formats[i], cmd.InOrStdin(), row); err != nil {
			return err
		}
	}
	if err := in.endSegment(); err != nil {
		return err
	}
	if !f.quiet {
		out := cmd.OutOrStdout()
		var rows int64
		for _, o := range in.outputs {
			fmt.Fprintf(out, "wrote %s: %d rows (from %d input rows), %s, %s\n", o.path, o.rows, o.inRows, humanBytes(o.size), o.interval)
			rows += int64(o.rows)
		}
		el := time.Since(start)
		fmt.Fprintf(out, "ingested %d input rows from %d file(s), %d skipped, into %d segment(s) of %d rows in %s (%s)\n",
			in.inRows, len(files), in.skipped, len(in.outputs), rows, humanDuration(el), rate(in.inRows, el))
	}
	return nil
}

// readFile feeds the rows of one input to the batch.
func (in *ingestion) readFile(path, format string, stdin io.Reader, row *inRow) error {
	rr, err := openInput(path, format, in.sp, stdin)
	if err != nil {
		return err
	}
	defer rr.close()
	for n := 0; ; n++ {
		if n&4095 == 0 {
			if err := in.ctx.Err(); err != nil {
				return fmt.Errorf("ingest: %w", err)
			}
		}
		err := rr.read(row)
		if err == io.EOF {
			return nil
		}
		var re *rowError
		if errors.As(err, &re) {
			in.skipped++
			if in.skipped > in.f.maxParseErrors {
				if in.f.maxParseErrors > 0 {
					return fmt.Errorf("%w (more than --max-parse-errors %d rows do not parse)", err, in.f.maxParseErrors)
				}
				return err
			}
			fmt.Fprintf(in.stderr, "segtool: skipped %v\n", err)
			continue
		}
		if err != nil {
			return err
		}
		if err := in.addRow(row); err != nil {
			return err
		}
	}
}

// addRow adds one parsed row, first closing the output segment or flushing the batch if full.
// Deciding before adding means a flush knows more rows follow.
func (in *ingestion) addRow(r *inRow) error {
	if in.f.rowsPerSegment > 0 && in.segRows == in.f.rowsPerSegment {
		if err := in.endSegment(); err != nil {
			return err
		}
	}
	if in.batch.rows() >= in.f.maxRowsInMemory {
		if err := in.writeRun(); err != nil {
			return err
		}
	}
	in.batch.add(r)
	in.segRows++
	in.inRows++
	return nil
}

// outName is the path of the current output segment.
func (in *ingestion) outName() string {
	if in.f.rowsPerSegment > 0 {
		return segmentName(in.f.out, len(in.outputs))
	}
	return in.f.out
}

// writeRun writes the batch as an intermediate segment.
func (in *ingestion) writeRun() error {
	if in.runDir == "" {
		d, err := os.MkdirTemp(in.tmpDir, runTempPattern)
		if err != nil {
			return err
		}
		in.runDir = d
	}
	dst := filepath.Join(in.runDir, fmt.Sprintf("run-%06d.seg", len(in.runs)))
	if _, err := in.writeBatch(dst, medium.Durability{Sync: medium.SyncNone}, false); err != nil {
		return err
	}
	in.runs = append(in.runs, dst)
	return nil
}

// writeBatch sorts and writes the batch to dst and resets it.
func (in *ingestion) writeBatch(dst string, d medium.Durability, replace bool) (columns.Info, error) {
	info, err := writeSegment(in.batch, dst, columns.WriterOptions{Medium: in.med},
		columns.PublishOptions{Durability: d, Replace: replace})
	if err != nil {
		return info, err
	}
	in.batch.reset()
	return info, nil
}

// endSegment writes the current output segment: the batch straight to the output when it is
// the only run, else the batch as a last run and the runs merged into the output.
func (in *ingestion) endSegment() error {
	dst := in.outName()
	sum := segmentSummary{path: dst, inRows: in.segRows}
	if len(in.runs) == 0 {
		info, err := in.writeBatch(dst, in.dur, in.f.replace)
		if err != nil {
			return err
		}
		sum.rows, sum.size, sum.interval = info.Rows, info.Size, info.Interval
	} else {
		if in.batch.rows() > 0 {
			if err := in.writeRun(); err != nil {
				return err
			}
		}
		res, err := mergeFiles(in.ctx, in.runs, dst, mergeSettings{
			medium: in.med, durability: in.dur, replace: in.f.replace, rollup: in.sp.Schema.Rollup,
			granularity: in.sp.Schema.Granularity, readAt: true,
		})
		if err != nil {
			return err
		}
		for _, r := range in.runs {
			if err := os.Remove(r); err != nil {
				return err
			}
		}
		in.runs = in.runs[:0]
		sum.rows, sum.size, sum.interval = int(res.rowsOut), res.bytes, res.interval
	}
	in.outputs = append(in.outputs, sum)
	in.segRows = 0
	return nil
}
