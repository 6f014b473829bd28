package ingest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/medium"
	"github.com/writeout/writeout/merger"
	"github.com/writeout/writeout/tmpfile"
)

// TempPattern names the temp directory (in Options.TmpDir) that holds an ingestion's runs while
// it lasts; a killed process can leave one behind, which `segtool sweep` removes.
const TempPattern = "writeout-ingest-*.tmp"

// DefaultMaxRowsInMemory is Options.MaxRowsInMemory's default.
const DefaultMaxRowsInMemory = 500_000

// DefaultMemoryLimit is Options.MemoryLimit's default: the Builder's estimate of the memory its
// rows hold, past which they are persisted as a run. Persisting takes about as much again
// (sorted dictionaries, each dimension's rows by value), so a process ingesting with this
// default peaks near 200 MiB.
const DefaultMemoryLimit = 64 << 20

// Input is one input of Run.
type Input struct {
	// Name names the input in messages (FILE:LINE: ...); its extension gives the format when
	// neither Format nor the spec's input.format does (FormatOf).
	Name string
	// Format is csv or ndjson; empty means the spec's input.format, else by Name.
	Format Format
	// Reader is the input's bytes. When nil, Open is called when the input's turn comes, and
	// what it returns is closed once the input is read.
	Reader io.Reader
	Open   func() (io.ReadCloser, error)
}

// Options configure Run. The zero value of each field is its default.
type Options struct {
	// Out is the output segment's path. With RowsPerSegment, the segments are named by
	// SegmentName(Out, k) instead: day.seg gives day-0000.seg, day-0001.seg, ...
	Out string
	// RowsPerSegment, when positive, ends a segment after that many input rows (rows added,
	// before rollup) and starts the next; there is one segment at least, even when empty.
	RowsPerSegment int
	// MaxParseErrors is the number of rows that do not parse that are skipped (each reported
	// to OnSkip); the next one fails the run with its *RowError.
	MaxParseErrors int
	// OnSkip, when set, is called with each row skipped.
	OnSkip func(*RowError)
	// OnWarning, when set, is called with each warning of the readers as it comes (see
	// ReaderOptions.OnWarning); Result.Warnings lists them too.
	OnWarning func(Warning)
	// MaxRowsInMemory bounds the rows the Builder holds (after rollup): when it holds that many,
	// they are persisted as a run. 0 means DefaultMaxRowsInMemory.
	MaxRowsInMemory int
	// MemoryLimit bounds the Builder's estimate of the memory its rows hold, in bytes
	// (merger.Builder.MemBytes): past it they are persisted as a run. 0 means
	// DefaultMemoryLimit; a negative value means no limit.
	MemoryLimit int64
	// Medium stages the parts of runs and outputs. Nil means a tmpfile medium in TmpDir,
	// opened for the run and closed at its end; a medium given here stays the caller's.
	Medium medium.Medium
	// Durability of the published outputs; runs are never synced.
	Durability medium.Durability
	// Replace allows replacing existing output files.
	Replace bool
	// TmpDir holds the runs' directory (TempPattern) and the default medium's file; empty means
	// Out's directory.
	TmpDir string
	// Progress, when set, is called every ProgressRows input rows, after each run and after
	// each segment, from Run's goroutine. It must return quickly.
	Progress func(Progress)
	// ProgressRows is the interval of Progress calls; 0 means 65536 rows.
	ProgressRows int
}

// Progress reports how far a Run is.
type Progress struct {
	Input     string // the input being read
	InputRows int64  // rows read and added so far
	Skipped   int    // rows skipped so far
	Runs      int    // runs persisted so far
	Segments  int    // output segments written so far
}

// Result describes a finished Run.
type Result struct {
	Segments  []Segment // the outputs, in order
	InputRows int64     // rows added (skipped rows excluded)
	Skipped   int       // rows that did not parse, skipped
	Runs      int       // runs persisted and merged, over every segment
	Warnings  []Warning // the readers' warnings, in order
}

// Segment describes one output segment.
type Segment struct {
	Path      string
	InputRows int64 // the input rows it holds, before rollup
	Rows      int64 // its rows
	Bytes     int64 // its file's size
	Interval  columns.Interval
	Runs      int // the runs merged into it; 0 when its rows went straight from the Builder
}

// SegmentName returns the name of output segment k of a split: SEG.seg gives SEG-0000.seg.
func SegmentName(out string, k int) string {
	ext := filepath.Ext(out)
	return fmt.Sprintf("%s-%04d%s", strings.TrimSuffix(out, ext), k, ext)
}

// Run reads the inputs in order, row by row, into a merger.Builder of the spec's schema (which
// rolls rows up when the schema says so, and truncates their times to its granularity) and
// writes the rows as one segment at opts.Out, or as several with RowsPerSegment.
//
// Ingestion streams: when the Builder holds MaxRowsInMemory rows, or its memory estimate
// passes MemoryLimit, its rows are persisted (Builder.Persist, no syncs) as a run in a temp
// directory in TmpDir and the Builder is reset. A segment of one run is persisted straight to
// its output; the runs of a segment of several are merged into it with merger.Merge (rollup
// and granularity from the schema) and removed.
//
// A row that does not parse is skipped while MaxParseErrors allows; the next one fails the run
// with its *RowError, whose message is FILE:LINE: column NAME: reason. On any failure, or when
// ctx is cancelled, Run leaves nothing behind: no output (the segments written before are
// removed too), no run, no temp directory; its Result then holds the counts so far and no
// Segments.
func Run(ctx context.Context, sp *Spec, inputs []Input, opts Options) (res Result, err error) {
	if sp == nil {
		return res, fmt.Errorf("%w: nil spec", ErrInvalid)
	}
	if err := sp.Validate(); err != nil {
		return res, err
	}
	if err := opts.ensureDefaults(); err != nil {
		return res, err
	}
	if len(inputs) == 0 {
		return res, fmt.Errorf("%w: no inputs", ErrInvalid)
	}
	formats := make([]Format, len(inputs))
	for i, in := range inputs {
		if in.Reader == nil && in.Open == nil {
			return res, fmt.Errorf("%w: input %q has neither a Reader nor Open", ErrInvalid, in.Name)
		}
		if formats[i], err = inputFormat(sp, in); err != nil {
			return res, err
		}
	}
	first := opts.Out
	if opts.RowsPerSegment > 0 {
		first = SegmentName(opts.Out, 0)
	}
	if !opts.Replace {
		if _, err := os.Lstat(first); err == nil {
			return res, fmt.Errorf("ingest: %s: %w", first, fs.ErrExist)
		}
	}
	r := &runner{ctx: ctx, sp: sp, opts: opts, med: opts.Medium}
	if r.b, err = merger.NewBuilder(typedSchema(sp.Schema), merger.BuilderOptions{}); err != nil {
		return res, fmt.Errorf("ingest: %w", err)
	}
	if r.med == nil {
		tm, err := tmpfile.New(tmpfile.Options{Dir: opts.TmpDir, Durability: opts.Durability})
		if err != nil {
			return res, fmt.Errorf("ingest: staging medium: %w", err)
		}
		r.med = tm
		defer func() {
			if cerr := tm.Close(); cerr != nil {
				err = errors.Join(err, fmt.Errorf("ingest: staging medium: %w", cerr))
			}
		}()
	}
	defer func() {
		if r.runDir != "" {
			if rerr := os.RemoveAll(r.runDir); rerr != nil {
				err = errors.Join(err, fmt.Errorf("ingest: removing runs: %w", rerr))
			}
		}
		if err != nil {
			for _, s := range r.res.Segments { // leave no output behind
				_ = os.Remove(s.Path)
			}
			res = Result{Skipped: r.res.Skipped, InputRows: r.res.InputRows, Runs: r.res.Runs}
		}
	}()
	row := sp.NewRow()
	for i, in := range inputs {
		if err := r.readInput(in, formats[i], &row); err != nil {
			return r.res, err
		}
	}
	if err := r.endSegment(); err != nil {
		return r.res, err
	}
	return r.res, nil
}

func (o *Options) ensureDefaults() error {
	switch {
	case o.Out == "":
		return fmt.Errorf("%w: no output path", ErrInvalid)
	case o.RowsPerSegment < 0:
		return fmt.Errorf("%w: RowsPerSegment %d", ErrInvalid, o.RowsPerSegment)
	case o.MaxParseErrors < 0:
		return fmt.Errorf("%w: MaxParseErrors %d", ErrInvalid, o.MaxParseErrors)
	case o.MaxRowsInMemory < 0:
		return fmt.Errorf("%w: MaxRowsInMemory %d", ErrInvalid, o.MaxRowsInMemory)
	}
	if err := o.Durability.Validate(); err != nil {
		return fmt.Errorf("ingest: %w", err)
	}
	if o.MaxRowsInMemory == 0 {
		o.MaxRowsInMemory = DefaultMaxRowsInMemory
	}
	if o.MemoryLimit == 0 {
		o.MemoryLimit = DefaultMemoryLimit
	}
	if o.TmpDir == "" {
		o.TmpDir = filepath.Dir(o.Out)
	}
	if o.ProgressRows <= 0 {
		o.ProgressRows = 1 << 16
	}
	return nil
}

// typedSchema returns s with every column's type spelled out, as merger.Merge writes them: a
// segment persisted straight from the Builder and one merged from runs then have the same
// footer.
func typedSchema(s columns.Schema) columns.Schema {
	s = s.Clone()
	for i := range s.Dimensions {
		if s.Dimensions[i].Type == "" {
			s.Dimensions[i].Type = columns.DimString
		}
	}
	for i := range s.Metrics {
		if s.Metrics[i].Type == "" {
			s.Metrics[i].Type = s.Metrics[i].ValueType()
		}
	}
	return s
}

// inputFormat decides an input's format: its own, else the spec's, else its name's.
func inputFormat(sp *Spec, in Input) (Format, error) {
	f := in.Format
	if f == "" {
		f = sp.Input.Format
	}
	if f == "" {
		var ok bool
		if f, ok = FormatOf(in.Name); !ok {
			return "", fmt.Errorf("%w: %s: cannot tell the format from the name (.csv, .ndjson, .jsonl, .json)", ErrInvalid, in.Name)
		}
	}
	if f != CSV && f != NDJSON {
		return "", fmt.Errorf("%w: %s: unknown input format %q (want csv or ndjson)", ErrInvalid, in.Name, f)
	}
	return f, nil
}

// runner is the state of one Run.
type runner struct {
	ctx     context.Context
	sp      *Spec
	opts    Options
	med     medium.Medium
	b       *merger.Builder
	res     Result
	runDir  string   // created on the first run
	runs    []string // runs of the current segment
	segRows int64    // input rows in the current segment
	// The memory check: the Builder's estimate is taken when untilCheck rows have been added
	// since the last one, a number that shrinks as the estimate nears the limit.
	untilCheck int
	nextProg   int64
	input      string
}

// readInput feeds the rows of one input to the Builder.
func (r *runner) readInput(in Input, format Format, row *columns.Row) (err error) {
	src := in.Reader
	if src == nil {
		rc, err := in.Open()
		if err != nil {
			return err
		}
		defer func() {
			if cerr := rc.Close(); cerr != nil && err == nil {
				err = fmt.Errorf("%s: %w", in.Name, cerr)
			}
		}()
		src = rc
	}
	rr, err := NewReaderOptions(r.sp, format, in.Name, src, ReaderOptions{Context: r.ctx, OnWarning: func(w Warning) {
		r.res.Warnings = append(r.res.Warnings, w)
		if r.opts.OnWarning != nil {
			r.opts.OnWarning(w)
		}
	}})
	if err != nil {
		return err
	}
	r.input = in.Name
	for n := 0; ; n++ {
		if n&1023 == 0 {
			if err := r.ctx.Err(); err != nil {
				return fmt.Errorf("ingest: %w", err)
			}
		}
		err := rr.Read(row)
		if err == io.EOF {
			return nil
		}
		var re *RowError
		if errors.As(err, &re) {
			r.res.Skipped++
			if r.res.Skipped > r.opts.MaxParseErrors {
				return re
			}
			if r.opts.OnSkip != nil {
				r.opts.OnSkip(re)
			}
			continue
		}
		if err != nil {
			return err
		}
		if err := r.add(row); err != nil {
			return err
		}
	}
}

// add adds one parsed row, first ending the segment or persisting a run when due: deciding
// before adding means that a run is written only when more rows follow.
func (r *runner) add(row *columns.Row) error {
	if r.opts.RowsPerSegment > 0 && r.segRows == int64(r.opts.RowsPerSegment) {
		if err := r.endSegment(); err != nil {
			return err
		}
	}
	if r.full() {
		if err := r.spill(); err != nil {
			return err
		}
	}
	if err := r.b.Add(*row); err != nil {
		return fmt.Errorf("ingest: %s: %w", r.input, err)
	}
	r.segRows++
	r.res.InputRows++
	if r.opts.Progress != nil && r.res.InputRows >= r.nextProg {
		r.nextProg = r.res.InputRows + int64(r.opts.ProgressRows)
		r.progress()
	}
	return nil
}

// full reports whether the Builder should be persisted before it takes another row.
func (r *runner) full() bool {
	rows := r.b.Rows()
	if rows >= r.opts.MaxRowsInMemory {
		return true
	}
	if r.opts.MemoryLimit < 0 || rows == 0 {
		return false
	}
	if r.untilCheck--; r.untilCheck > 0 {
		return false
	}
	mem := r.b.MemBytes()
	if mem >= r.opts.MemoryLimit {
		return true
	}
	// Check again when about half the room left is used, at the rate so far.
	perRow := max(mem/int64(rows), 1)
	r.untilCheck = int(min(max((r.opts.MemoryLimit-mem)/perRow/2, 1), maxCheckRows))
	return false
}

// maxCheckRows is the most rows added between two memory estimates.
const maxCheckRows = 4096

func (r *runner) progress() {
	if r.opts.Progress != nil {
		r.opts.Progress(Progress{Input: r.input, InputRows: r.res.InputRows, Skipped: r.res.Skipped,
			Runs: r.res.Runs, Segments: len(r.res.Segments)})
	}
}

// spill persists the Builder's rows as a run and resets it.
func (r *runner) spill() error {
	if r.runDir == "" {
		d, err := os.MkdirTemp(r.opts.TmpDir, TempPattern)
		if err != nil {
			return fmt.Errorf("ingest: runs: %w", err)
		}
		r.runDir = d
	}
	path := filepath.Join(r.runDir, fmt.Sprintf("run-%06d.seg", r.res.Runs))
	if _, err := r.b.Persist(r.ctx, path, merger.PersistOptions{Medium: r.med,
		Durability: medium.Durability{Sync: medium.SyncNone}}); err != nil {
		return fmt.Errorf("ingest: run: %w", err)
	}
	r.runs = append(r.runs, path)
	r.res.Runs++
	r.b.Reset()
	r.untilCheck = 0
	r.progress()
	return nil
}

// endSegment writes the current segment: the Builder's rows straight to the output when there
// is no run, else as a last run, all runs then merged into the output.
func (r *runner) endSegment() error {
	dst := r.opts.Out
	if r.opts.RowsPerSegment > 0 {
		dst = SegmentName(r.opts.Out, len(r.res.Segments))
	}
	seg := Segment{Path: dst, InputRows: r.segRows, Runs: len(r.runs)}
	var mr merger.Result
	if len(r.runs) == 0 {
		var err error
		mr, err = r.b.Persist(r.ctx, dst, merger.PersistOptions{Medium: r.med, Durability: r.opts.Durability, Replace: r.opts.Replace})
		if err != nil {
			return fmt.Errorf("ingest: %w", err)
		}
	} else {
		if r.b.Rows() > 0 {
			if err := r.spill(); err != nil {
				return err
			}
		}
		seg.Runs = len(r.runs)
		var err error
		if mr, err = r.mergeRuns(dst); err != nil {
			return err
		}
	}
	seg.Rows, seg.Bytes, seg.Interval = mr.RowsOut, mr.Bytes, mr.Info.Interval
	r.res.Segments = append(r.res.Segments, seg)
	r.b.Reset()
	r.segRows = 0
	r.untilCheck = 0
	r.progress()
	return nil
}

// mergeRuns merges the segment's runs into dst and removes them. Runs are read with pread
// through a few read-ahead blocks, not mapped, so that the pages read do not stay in the
// process's resident set.
func (r *runner) mergeRuns(dst string) (res merger.Result, err error) {
	segs := make([]*columns.Segment, 0, len(r.runs))
	var closers []func() error
	defer func() {
		for _, c := range closers {
			if cerr := c(); cerr != nil && err == nil {
				err = fmt.Errorf("ingest: run: %w", cerr)
			}
		}
	}()
	for _, p := range r.runs {
		f, err := os.Open(p)
		if err != nil {
			return res, fmt.Errorf("ingest: run: %w", err)
		}
		fi, err := f.Stat()
		if err != nil {
			_ = f.Close()
			return res, fmt.Errorf("ingest: run: %w", err)
		}
		sg, err := columns.NewSegment(newBlockReaderAt(f, fi.Size()), fi.Size())
		if err != nil {
			_ = f.Close()
			return res, fmt.Errorf("ingest: run %s: %w", p, err)
		}
		segs = append(segs, sg)
		closers = append(closers, func() error { return errors.Join(sg.Close(), f.Close()) })
	}
	res, err = merger.Merge(r.ctx, segs, dst, merger.Options{
		Medium:      r.med,
		Durability:  r.opts.Durability,
		Replace:     r.opts.Replace,
		Rollup:      r.sp.Schema.Rollup,
		Granularity: r.sp.Schema.Granularity,
		InputNames:  r.runs,
	})
	if err != nil {
		return res, fmt.Errorf("ingest: merge runs into %s: %w", dst, err)
	}
	// The output is published: a failure from here on removes it.
	var errs []error
	for _, c := range closers {
		errs = append(errs, c())
	}
	closers = nil
	for _, p := range r.runs {
		errs = append(errs, os.Remove(p))
	}
	r.runs = r.runs[:0]
	if err := errors.Join(errs...); err != nil {
		_ = os.Remove(dst)
		return res, fmt.Errorf("ingest: run: %w", err)
	}
	return res, nil
}
