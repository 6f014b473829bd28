package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/writeout/writeout/columns/objstore"
	"github.com/writeout/writeout/medium"
	"github.com/writeout/writeout/merger/ingest"
	"github.com/writeout/writeout/merger/location"
	"github.com/writeout/writeout/tmpfile"
)

type ingestFlags struct {
	spec            string
	out             string
	format          string
	maxParseErrors  int
	rowsPerSegment  int
	maxRowsInMemory int
	memory          memoryFlags
	replace         bool
	medium          string
	tmpDir          string
	durability      string
	quiet           bool
	progress        string
	maxFanIn        int
	maxRecordBytes  int64
	compression     string
	s3              *s3Flags
}

func newIngestCmd() *cobra.Command {
	f := ingestFlags{s3: &s3Flags{}}
	cmd := &cobra.Command{
		Use:   "ingest --spec SPEC.json --out SEG.seg FILE...",
		Short: "Build segments from CSV, NDJSON or Parquet files",
		Long: `ingest reads rows from CSV files (with a header line), NDJSON files or Parquet files, or '-'
for standard input (CSV or NDJSON only: a Parquet file is read from its end), and writes them as
a segment sorted by time and dimensions, rolled up if the spec says so. A Parquet file is known
by its magic bytes whatever its name; given with --format csv or ndjson it is an error.

Input streams: rows go into an in-memory builder (Druid's incremental index: values interned,
rows rolled up as they arrive) until it holds --max-rows-in-memory rows or its memory estimate
passes half of --max-bytes-in-memory; its rows are then written as an intermediate segment in a
temp directory (` + ingest.TempPattern + ` in --tmp-dir) in the background while a second
builder takes the next rows (so up to twice --max-rows-in-memory rows are in memory), and the
intermediate segments are merged into the output at the end, with the rows still in memory. With --rows-per-segment N every N input rows make one segment of their
own, named from --out with a four-digit number (--out day.seg gives day-0000.seg,
day-0001.seg, ...), even when there is only one.

The intermediate segments are merged at most --max-fan-in at a time (in phases when there are
more), so the files held open stay few however many there are, and no more at a time than
--max-bytes-in-memory has room for beside the rows still in memory (each counted by its
dictionaries' id maps, 4 bytes a value, and its read buffers). The Go runtime's soft memory
limit (--memory-limit) is by default twice --max-bytes-in-memory and 32 MiB more: with the
defaults, ingesting the 3,000,000 rows of 'segtool gen --schema basic --format csv' peaks
under 256 MiB.

--compression none, s2 (the default) or zstd is the codec of the outputs' chunks, as for merge
(the intermediate segments stay s2).

A row that does not parse is reported as FILE:LINE: column NAME: reason. --max-parse-errors N
skips up to N such rows (each reported on standard error) and fails at the next; the summary
counts the rows skipped. On failure no output is left behind.

On a terminal, standard error shows a progress bar: the input bytes read, against the sum of the
files' sizes (with a pipe or a named pipe, a count without a percentage), then the rows
of each segment as it is written; the summary goes to standard output (none with --quiet).

Outputs are written next to --out in a temp directory and moved into place only when the whole
ingest has succeeded: with --replace, a failed ingest leaves the old outputs as they were. An
input that is one of the outputs (the same file under any name) is refused. With
--rows-per-segment the outputs are a series (day-0000.seg, day-0001.seg, ...): without
--replace any existing member of it is an error; with --replace the new series replaces the
old one whole, and old members numbered past the new count are removed (each is reported), so
that a glob such as day-*.seg never mixes the two.

An s3://BUCKET/KEY --out is written in --tmp-dir (default: the system's temp directory) and
uploaded once the whole ingest has succeeded, each segment as one multipart upload that
appears whole or not at all. ` + s3Help + `

` + ingest.SpecHelp,
		Example: `  segtool ingest --spec spec.json --out events.seg events.csv
  segtool ingest --spec spec.json --out edits.seg edits.parquet
  segtool ingest --spec spec.json --compression zstd --out small.seg events.csv
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
	fl.StringVar(&f.out, "out", "", "output segment file, or s3://BUCKET/KEY (required)")
	fl.StringVar(&f.format, "format", "", "input format, "+ingest.FormatNames()+" (default: the spec's, else by extension; a Parquet file by its magic bytes)")
	fl.IntVar(&f.maxParseErrors, "max-parse-errors", 0, "rows that do not parse to skip before failing")
	fl.IntVar(&f.rowsPerSegment, "rows-per-segment", 0, "split the output: this many input rows per segment (0: one segment)")
	def := ingest.DefaultOptions()
	fl.IntVar(&f.maxRowsInMemory, "max-rows-in-memory", def.MaxRowsInMemory, "rows held in memory (after rollup) before an intermediate segment is written")
	fl.BoolVar(&f.replace, "replace", false, "replace existing output files")
	fl.StringVar(&f.medium, "medium", "tmpfile", "staging medium: heap, offheap, tmpfile or mmapfile")
	fl.StringVar(&f.tmpDir, "tmp-dir", "", "directory of temp files (default: the output's directory)")
	fl.StringVar(&f.durability, "durability", "output", "none, output (sync the published file) or all (also read it back from the disk and check it)")
	fl.BoolVar(&f.quiet, "quiet", false, "no progress bar, no summary")
	addProgressFlag(cmd, &f.progress, false)
	fl.IntVar(&f.maxFanIn, "max-fan-in", def.MaxFanIn, "intermediate segments merged at once (at least 2)")
	fl.Int64Var(&f.maxRecordBytes, "max-record-bytes", def.MaxRecordBytes, "longest CSV record (all its lines) or NDJSON line, in bytes; when not given, the spec's input.maxRecordBytes if set")
	addMemoryFlags(cmd, &f.memory, def.MemoryLimit)
	addCompressionFlag(cmd, &f.compression)
	addS3UploadFlags(cmd, f.s3)
	return cmd
}

func runIngest(ctx context.Context, cmd *cobra.Command, f ingestFlags, files []string) error {
	start := time.Now()
	switch {
	case f.maxParseErrors < 0:
		return usagef("--max-parse-errors must be 0 or more")
	case f.rowsPerSegment < 0:
		return usagef("--rows-per-segment must be 0 or more")
	case f.maxRowsInMemory < 1:
		return usagef("--max-rows-in-memory must be at least 1")
	case f.maxFanIn < 2:
		return usagef("--max-fan-in must be at least 2")
	case f.maxRecordBytes < 1:
		return usagef("--max-record-bytes must be positive")
	}
	if f.format != "" {
		if _, err := ingest.ParseFormat(f.format); err != nil {
			return usagef("--format %q: want %s", f.format, ingest.FormatNames())
		}
	}
	if err := f.memory.check(); err != nil {
		return err
	}
	comp, err := parseCompression(f.compression)
	if err != nil {
		return err
	}
	bar, err := newCommandProgress(f.progress, f.quiet, cmd.ErrOrStderr(), nil)
	if err != nil {
		return err
	}
	dur, err := parseDurability(f.durability)
	if err != nil {
		return err
	}
	defer f.memory.apply()()
	data, err := os.ReadFile(f.spec)
	if err != nil {
		return err
	}
	sp, err := ingest.ParseSpec(data)
	if err != nil {
		return fmt.Errorf("spec %s: %w", f.spec, err)
	}
	out, err := location.Parse(f.out)
	if err != nil {
		return usageError{fmt.Errorf("--out: %w", err)}
	}
	if !out.IsS3() {
		if err := checkOutputs(f); err != nil {
			return err
		}
	}
	stdinUsed := 0
	inputs := make([]ingest.Input, len(files))
	for i, p := range files {
		// Without --format, the spec's input.format, else the content or the extension
		// decides (ingest.Run checks that one of them does before it reads anything).
		in := ingest.Input{Name: p, Format: ingest.Format(f.format)}
		if p == "-" && in.Format == ingest.Parquet {
			return usagef("standard input: a Parquet file is read from its end, so it cannot come from standard input; give its path")
		}
		if p == "-" {
			stdinUsed++
			in.Name = "<stdin>"
			in.Reader = cmd.InOrStdin()
		} else {
			in.Path = p
		}
		inputs[i] = in
	}
	if stdinUsed > 1 {
		return usagef("'-' (standard input) given more than once")
	}
	removeTmp, err := makeTmpDir(f.tmpDir)
	if err != nil {
		return err
	}
	defer removeTmp()
	tmpDir, client, undo, err := ingestPlaces(f, out, dur)
	if err != nil {
		return err
	}
	med, err := openIngestMedium(f.medium, tmpDir, dur, f.memory.maxBytes)
	if err != nil {
		undo()
		return err
	}
	var maxRecordBytes int64 // the spec's, else the default
	if cmd.Flags().Changed("max-record-bytes") {
		maxRecordBytes = f.maxRecordBytes
	}
	stderr := bar.above(cmd.ErrOrStderr()) // messages while the bar is drawn go above it
	var progress func(ingest.Progress)
	if bar != nil {
		progress = newIngestBar(bar, inputBytes(files, cmd.InOrStdin())).update
	}
	res, err := ingest.Run(ctx, sp, inputs, ingest.Options{
		Out:             f.out,
		S3:              client,
		RowsPerSegment:  f.rowsPerSegment,
		MaxParseErrors:  f.maxParseErrors,
		OnSkip:          func(e *ingest.RowError) { fmt.Fprintf(stderr, "segtool: skipped %v\n", e) },
		OnWarning:       func(w ingest.Warning) { fmt.Fprintf(stderr, "segtool: warning: %v\n", w) },
		MaxRowsInMemory: f.maxRowsInMemory,
		MemoryLimit:     f.memory.maxBytes,
		Medium:          med,
		Durability:      dur,
		Compression:     comp,
		Replace:         f.replace,
		TmpDir:          tmpDir,
		MaxFanIn:        f.maxFanIn,
		MaxRecordBytes:  maxRecordBytes,
		Progress:        progress,
	})
	err = errors.Join(err, med.Close())
	bar.finish(err == nil)
	if err != nil {
		undo()
		if errors.Is(err, ingest.ErrInvalid) {
			return usageError{err}
		}
		var re *ingest.RowError
		if f.maxParseErrors > 0 && errors.As(err, &re) {
			return fmt.Errorf("%w (more than --max-parse-errors %d rows do not parse)", err, f.maxParseErrors)
		}
		return err
	}
	for _, p := range res.Removed {
		fmt.Fprintf(stderr, "segtool: removed %s: of the replaced series, past its new %d segment(s)\n", p, len(res.Segments))
	}
	if !f.quiet {
		out := cmd.OutOrStdout()
		var rows int64
		for _, s := range res.Segments {
			fmt.Fprintf(out, "wrote %s: %d rows (from %d input rows), %s, %s\n", s.Path, s.Rows, s.InputRows, humanBytes(s.Bytes), s.Interval)
			rows += s.Rows
		}
		el := time.Since(start)
		fmt.Fprintf(out, "ingested %d input rows from %d file(s), %d skipped, into %d segment(s) of %d rows in %s (%s)\n",
			res.InputRows, len(files), res.Skipped, len(res.Segments), rows, humanDuration(el), rate(res.InputRows, el))
	}
	return nil
}

// inputBytes is the sum of the sizes of the input files ('-' is stdin), or -1 when one is no
// regular file (a pipe, a named pipe): the bytes to read are then unknown.
func inputBytes(files []string, stdin io.Reader) int64 {
	var n int64
	for _, p := range files {
		var fi os.FileInfo
		var err error
		if p != "-" {
			fi, err = os.Stat(p)
		} else if f, ok := stdin.(*os.File); ok {
			fi, err = f.Stat()
		} else {
			return -1
		}
		if err != nil || !fi.Mode().IsRegular() {
			return -1
		}
		n += fi.Size()
	}
	return n
}

// ingestBar shows ingest.Progress: the input bytes read (a count without a percentage when
// their total is unknown), then the rows of each write of a segment.
type ingestBar struct {
	pb    *progressBar
	total int64 // input bytes; -1: unknown

	mu                    sync.Mutex
	step                  string
	writeDone, writeTotal int64
}

func newIngestBar(pb *progressBar, total int64) *ingestBar {
	pb.stage("reading", total, unitBytes, false)
	return &ingestBar{pb: pb, total: total, step: ingest.StepRead}
}

func (b *ingestBar) update(p ingest.Progress) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch p.Step {
	case ingest.StepRead:
		if b.step != ingest.StepRead {
			b.pb.stage("reading", b.total, unitBytes, false)
		}
		b.pb.set(p.Bytes)
	case ingest.StepWrite:
		if b.step != ingest.StepWrite || p.WriteTotal != b.writeTotal || p.WriteDone < b.writeDone {
			b.pb.stage("writing", p.WriteTotal, unitRows, false)
		}
		b.writeDone, b.writeTotal = p.WriteDone, p.WriteTotal
		b.pb.set(p.WriteDone)
	}
	b.step = p.Step
}

// checkOutputs checks the local outputs of an ingest: with --rows-per-segment, every member
// of the series that exists.
func checkOutputs(f ingestFlags) error {
	first := f.out
	if f.rowsPerSegment > 0 {
		first = ingest.SegmentName(f.out, 0)
	}
	if err := checkOutput(first, f.replace); err != nil {
		return err
	}
	existing, err := ingest.ExistingOutputs(f.out, f.rowsPerSegment)
	if err != nil {
		return err
	}
	for _, p := range existing {
		if err := checkOutput(p, f.replace); err != nil {
			return err
		}
	}
	return nil
}

// ingestPlaces returns the temp directory of an ingest to out, the S3 client of an s3:// out,
// and for a local out creates its directory (undo removes it if it was created).
func ingestPlaces(f ingestFlags, out location.Location, dur medium.Durability) (tmpDir string, client *objstore.Client, undo func(), err error) {
	tmpDir = f.tmpDir
	if out.IsS3() {
		if tmpDir == "" {
			tmpDir = os.TempDir()
		}
		client, err = f.s3.clientFor()
		return tmpDir, client, func() {}, err
	}
	if tmpDir == "" {
		tmpDir = filepath.Dir(f.out)
	}
	undo, err = makeOutputDir(filepath.Dir(f.out), dur)
	return tmpDir, nil, undo, err
}

// sameFile reports whether paths a and b name one existing file (through symbolic or hard
// links); merge uses it too, to refuse an input given as the output.
func sameFile(a, b string) bool {
	fa, err := os.Stat(a)
	if err != nil {
		return false
	}
	fb, err := os.Stat(b)
	return err == nil && os.SameFile(fa, fb)
}

// memoryFlags are the memory flags of ingest and gen: the bytes ingestion holds
// (--max-bytes-in-memory, ingest.Options.MemoryLimit) and the Go runtime's soft limit
// (--memory-limit), derived from it unless given.
type memoryFlags struct {
	maxBytes int64 // -1: no limit
	limitMiB int   // -1: derived from maxBytes; 0: none
}

func addMemoryFlags(cmd *cobra.Command, f *memoryFlags, maxBytes int64) {
	fl := cmd.Flags()
	fl.Int64Var(&f.maxBytes, "max-bytes-in-memory", maxBytes, "bytes ingestion holds, by estimate: the rows in memory (the builder taking rows and the one being written, half each), and at the end the rows left and the intermediate segments merged at once (-1: no limit)")
	fl.IntVar(&f.limitMiB, "memory-limit", -1, "soft memory limit of the Go runtime in MiB (-1: twice --max-bytes-in-memory and 32 MiB more; 0: none; the GOMEMLIMIT variable overrides it)")
}

func (f *memoryFlags) check() error {
	switch {
	case f.maxBytes == 0 || f.maxBytes < -1:
		return usagef("--max-bytes-in-memory must be positive, or -1 for no limit")
	case f.limitMiB < -1:
		return usagef("--memory-limit must be 0 or more, or -1 for the default")
	}
	return nil
}

// softLimitMiB is the runtime's soft memory limit the flags ask for, in MiB (0: none): by
// default twice what ingestion holds by its estimates, and 32 MiB more. Ingestion's live Go
// heap peaks near --max-bytes-in-memory and 50 MiB more (ingest.Options.MemoryLimit): the
// collector may then let garbage take most of as much again before it works harder, as it
// would with GOGC=100 and no limit, and no more. With --max-bytes-in-memory -1, merge's
// default.
func (f *memoryFlags) softLimitMiB() int {
	switch {
	case f.limitMiB >= 0:
		return f.limitMiB
	case f.maxBytes > 0:
		return int((2*f.maxBytes + 32<<20 + 1<<20 - 1) >> 20)
	}
	return defaultMemoryLimitMiB
}

// apply sets the runtime's soft memory limit (softLimitMiB) unless the GOMEMLIMIT variable
// is set, and returns what puts back the limit before, for when the command is done.
func (f *memoryFlags) apply() (restore func()) {
	mib := f.softLimitMiB()
	if mib <= 0 || os.Getenv("GOMEMLIMIT") != "" {
		return func() {}
	}
	prev := debug.SetMemoryLimit(int64(mib) << 20)
	return func() { debug.SetMemoryLimit(prev) }
}

// openIngestMedium opens the staging medium of an ingestion holding maxBytes
// (ingest.Options.MemoryLimit): a tmpfile medium's buffers get ingest.StagingBudget of it.
func openIngestMedium(name, dir string, d medium.Durability, maxBytes int64) (medium.Medium, error) {
	if name == "tmpfile" {
		return tmpfile.New(tmpfile.Options{Dir: dir, Durability: d, BufferBudget: ingest.StagingBudget(maxBytes)})
	}
	return openMedium(name, dir, d)
}
