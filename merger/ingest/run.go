package ingest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
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

// DefaultMaxFanIn is Options.MaxFanIn's default: the most runs merged at once, so that
// ingesting holds about that many files open whatever the number of runs (far below the usual
// limit of 1,024 open files).
const DefaultMaxFanIn = 64

// DefaultMemoryLimit is Options.MemoryLimit's default: the estimate of the memory the rows held
// take (merger.Builder.MemBytes), by the Builder taking rows and the one being persisted as a
// run in the background together: each gets half. Persisting takes about as much again as the
// rows persisted (sorted dictionaries, each dimension's rows by value), so a process ingesting
// with this default peaks near 200 MiB.
const DefaultMemoryLimit = 64 << 20

// Input is one input of Run.
type Input struct {
	// Name names the input in messages (FILE:LINE: ...); its extension gives the format when
	// neither Format nor the spec's input.format does (FormatOf).
	Name string
	// Format is csv, ndjson or parquet; empty means the spec's input.format, else by Name. A
	// Parquet file (known by its magic bytes) is read as Parquet whatever its name says, and
	// is an error (wrapping ErrInput) when Format or input.format says csv or ndjson.
	Format Format
	// Reader is the input's bytes. When nil, Open is called when the input's turn comes, and
	// what it returns is closed once the input is read. A Parquet input must be an
	// io.ReaderAt with a size (see NewReader): OpenFile's files are.
	Reader io.Reader
	Open   func() (io.ReadCloser, error)
	// Path, when set, is the file the input reads: Run refuses to start when it is one of the
	// outputs (the same file, through any name, symbolic or hard link).
	Path string
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
	// OnWarning, when set, is called with each warning of the readers (see
	// ReaderOptions.OnWarning), from Run's goroutine, before the row it came with is added;
	// Result.Warnings lists them too.
	OnWarning func(Warning)
	// MaxRowsInMemory bounds the rows the Builder holds (after rollup): when it holds that many,
	// they are persisted as a run. 0 means DefaultMaxRowsInMemory. A run is persisted in the
	// background while a second Builder takes the next rows (as Druid's persists are): up to
	// twice this many rows are in memory at once.
	MaxRowsInMemory int
	// MemoryLimit bounds the estimate of the memory the rows in memory hold, in bytes
	// (merger.Builder.MemBytes), over the Builder taking rows and the one being persisted in
	// the background: each gets half, and past its half a Builder's rows are persisted as a
	// run. 0 means DefaultMemoryLimit; a negative value means no limit.
	MemoryLimit int64
	// Medium stages the parts of runs and outputs. Nil means a tmpfile medium in TmpDir,
	// opened for the run and closed at its end; a medium given here stays the caller's.
	Medium medium.Medium
	// Durability of the published outputs; runs are never synced.
	Durability medium.Durability
	// Replace allows replacing existing output files. Outputs are replaced only when the whole
	// ingest succeeds: until then they are staged in a temp directory (TempPattern) in Out's
	// directory, and on failure the old ones stay as they were. With RowsPerSegment the new
	// series replaces the old one whole: existing members numbered past the new count are
	// removed too (Result.Removed). Without Replace, an existing output (with RowsPerSegment,
	// any member of the series) is an error wrapping fs.ErrExist before any input is read.
	Replace bool
	// MaxFanIn is the most runs merged at once (each is an open file while merged): a segment
	// of more runs is merged in phases, groups of MaxFanIn consecutive runs becoming one run
	// each, until MaxFanIn or fewer are left. 0 means DefaultMaxFanIn; 1 is invalid.
	MaxFanIn int
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
	Runs      int    // runs persisted so far (the last may still be being persisted)
	Segments  int    // output segments written so far
}

// Result describes a finished Run.
type Result struct {
	Segments  []Segment // the outputs, in order
	InputRows int64     // rows added (skipped rows excluded)
	Skipped   int       // rows that did not parse, skipped
	Runs      int       // runs persisted and merged, over every segment
	// Removed lists the files of a replaced series (Replace with RowsPerSegment) numbered past
	// the new count, removed so that no glob of the series mixes old and new segments.
	Removed  []string
	Warnings []Warning // the readers' warnings, in order
}

// Segment describes one output segment.
type Segment struct {
	Path      string
	InputRows int64 // the input rows it holds, before rollup
	Rows      int64 // its rows
	Bytes     int64 // its file's size
	Interval  columns.Interval
	Runs      int // the runs merged into it (with the rows still in the Builder); 0 when its rows went straight from the Builder
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
// directory in TmpDir, in the background while a second Builder takes the next rows (see
// MaxRowsInMemory and MemoryLimit). A segment whose rows all fit in the Builder is persisted
// straight to its output; else its runs, then the rows still in the Builder, are merged into
// it (merger.Builder.PersistAfter; rollup and granularity from the schema, at most MaxFanIn
// runs at once) and the runs removed.
//
// Outputs are staged in the output's directory and put in place together once every input is
// read and every segment written (see Options.Replace): an existing output is replaced only
// by a complete ingest. An input whose Path is one of the outputs is refused.
//
// A row that does not parse is skipped while MaxParseErrors allows; the next one fails the run
// with its *RowError, whose message is FILE:LINE: column NAME: reason. On any failure, or when
// ctx is cancelled, Run leaves nothing behind: no new output (the outputs that existed are as
// they were), no run, no temp directory; its Result then holds the counts so far and no
// Segments. (Once the outputs are in place, a failure to remove the staging directory, which
// then holds only replaced outputs, is returned with the complete Result.)
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
	given := make([]*inputFormat, len(inputs))
	for i, in := range inputs {
		if in.Reader == nil && in.Open == nil {
			return res, fmt.Errorf("%w: input %q has neither a Reader nor Open", ErrInvalid, in.Name)
		}
		if given[i], _, err = inputFormatOf(sp, in); err != nil {
			return res, err
		}
	}
	existing, err := ExistingOutputs(opts.Out, opts.RowsPerSegment)
	if err != nil {
		return res, err
	}
	if err := checkPaths(inputs, existing, opts.Replace); err != nil {
		return res, err
	}
	pl, err := newPlan(sp)
	if err != nil {
		return res, err
	}
	r := &runner{ctx: ctx, sp: sp, plan: pl, opts: opts, med: opts.Medium, limit: opts.MemoryLimit}
	if r.limit > 0 {
		r.limit = max(r.limit/2, 1) // two builders: see MemoryLimit
	}
	if r.b, err = newBuilder(sp); err != nil {
		return res, err
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
		// A run still being persisted (after a failure) is waited for before its directory
		// goes.
		if werr := r.waitSpill(); werr != nil && (err == nil || ctx.Err() == nil) { // not the cancellation again
			err = errors.Join(err, werr)
		}
		if cerr := r.closeBuilders(); cerr != nil {
			err = errors.Join(err, cerr)
		}
		if r.runDir != "" {
			if rerr := os.RemoveAll(r.runDir); rerr != nil {
				err = errors.Join(err, fmt.Errorf("ingest: removing runs: %w", rerr))
			}
		}
		if r.stageDir != "" && !r.keepStage {
			// After a commit it holds the replaced outputs; else the staged new ones.
			if rerr := os.RemoveAll(r.stageDir); rerr != nil {
				err = errors.Join(err, fmt.Errorf("ingest: removing the staging directory: %w", rerr))
			}
		}
		if err != nil && !r.committed {
			res = Result{Skipped: r.res.Skipped, InputRows: r.res.InputRows, Runs: r.res.Runs}
		}
	}()
	for i, in := range inputs {
		if err := r.readInput(in, given[i]); err != nil {
			return r.res, err
		}
	}
	r.final = true
	if err := r.endSegment(); err != nil {
		return r.res, err
	}
	if err := ctx.Err(); err != nil {
		return r.res, fmt.Errorf("ingest: %w", err)
	}
	if err := r.commit(existing); err != nil {
		return r.res, err
	}
	r.committed = true
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
	case o.MaxFanIn < 0 || o.MaxFanIn == 1:
		return fmt.Errorf("%w: MaxFanIn %d (want 0 for the default, or at least 2)", ErrInvalid, o.MaxFanIn)
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
	if o.MaxFanIn == 0 {
		o.MaxFanIn = DefaultMaxFanIn
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

// runner is the state of one Run.
type runner struct {
	ctx    context.Context
	sp     *Spec
	plan   *plan
	opts   Options
	med    medium.Medium
	b      *merger.Builder
	res    Result
	runDir string   // created on the first run
	runs   []string // runs of the current segment
	limit  int64    // MemoryLimit of one Builder (half the option's); negative for none
	// Background persists: pend is the run being persisted, if any; spare is a Builder whose
	// rows have been persisted, emptied, to take rows after r.b.
	pend  *pendingRun
	spare *merger.Builder
	final bool // every input is read: the segment ended is the last
	grown bool // r.b has room reserved for its rows (Builder.Grow)
	// Input rows added to r.b since it was emptied, and the count at which to ask it how many
	// rows it holds.
	added, rowsCheck int
	merged           int   // runs written by merging runs, to name them
	segRows          int64 // input rows in the current segment
	// The outputs are published into stageDir (created with the first) and moved into place
	// by commit: staged[k] is where output k waits.
	stageDir  string
	staged    []string
	keepStage bool // commit could not put the old outputs back: they are in stageDir
	committed bool // the outputs are in place
	// The memory check: the Builder's estimate is taken when untilCheck rows have been added
	// since the last one, a number that shrinks as the estimate nears the limit.
	untilCheck int
	nextProg   int64
	input      string
}

// readInput feeds the rows of one input to the Builder.
func (r *runner) readInput(in Input, format *inputFormat) (err error) {
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
	if format, src, err = chooseFormat(in, format, src); err != nil {
		return err
	}
	ahead := newReadAhead(r.sp)
	rr, err := newReader(format, r.plan, in.Name, src, readerOptions{Context: r.ctx, OnWarning: ahead.warn})
	if err != nil {
		r.warn(ahead.takeWarns())
		return err
	}
	if c, ok := rr.(io.Closer); ok {
		defer func() {
			if cerr := c.Close(); cerr != nil && err == nil {
				err = fmt.Errorf("%s: %w", in.Name, cerr)
			}
		}()
	}
	r.input = in.Name
	// The Builder copies every dictionary value it keeps, but keeps raw values as they are.
	ahead.start(r.ctx, rr, !hasRaw(r.sp.Schema))
	defer ahead.close() // before the reader's Close
	for {
		b := ahead.next()
		for k := 0; k < b.n; k++ {
			it := &b.items[k]
			if it.warns == nil && it.err == nil {
				// The rows up to the next with a warning or an error go in runs.
				e := k + 1
				for e < b.n && b.items[e].warns == nil && b.items[e].err == nil {
					e++
				}
				if err := r.addRows(b.rows[k:e]); err != nil {
					return err
				}
				k = e - 1
				continue
			}
			r.warn(it.warns)
			if re := asRowError(it.err); re != nil {
				r.res.Skipped++
				if r.res.Skipped > r.opts.MaxParseErrors {
					return re
				}
				if r.opts.OnSkip != nil {
					r.opts.OnSkip(re)
				}
				continue
			}
			if err := r.add(&b.rows[k]); err != nil {
				return err
			}
		}
		r.warn(b.endWarn)
		if b.end != nil {
			if isEnd(b.end) {
				return nil
			}
			return b.end
		}
		ahead.recycle(b)
	}
}

// hasRaw reports whether schema has a raw dimension.
func hasRaw(schema columns.Schema) bool {
	for _, d := range schema.Dimensions {
		if d.Raw {
			return true
		}
	}
	return false
}

// warn reports the reader's warnings, in order, from Run's goroutine.
func (r *runner) warn(ws []Warning) {
	for _, w := range ws {
		r.res.Warnings = append(r.res.Warnings, w)
		if r.opts.OnWarning != nil {
			r.opts.OnWarning(w)
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
	r.added++
	r.res.InputRows++
	if r.opts.Progress != nil && r.res.InputRows >= r.nextProg {
		r.nextProg = r.res.InputRows + int64(r.opts.ProgressRows)
		r.progress()
	}
	return nil
}

// addRows adds rows as add adds each, but those between the rows where something is due (a
// segment's end, a look at the Builder's size, a progress report: quietRows) in one call of
// merger.Builder.AddRows, under one lock of the Builder.
func (r *runner) addRows(rows []columns.Row) error {
	for len(rows) > 0 {
		n := min(len(rows), r.quietRows())
		if n <= 1 {
			if err := r.add(&rows[0]); err != nil {
				return err
			}
			rows = rows[1:]
			continue
		}
		k, err := r.b.AddRows(rows[:n])
		r.segRows += int64(k)
		r.added += k
		r.res.InputRows += int64(k)
		if r.limit >= 0 {
			r.untilCheck -= k // as full counts down for each row
		}
		if err != nil {
			return fmt.Errorf("ingest: %s: %w", r.input, err)
		}
		rows = rows[n:]
	}
	return nil
}

// quietRows is how many rows add would add from now on doing nothing else: no segment ends
// before any of them, full returns false for each without looking at the Builder, and no
// progress is reported after any of them.
func (r *runner) quietRows() int {
	n := r.rowsCheck - r.added // full asks the Builder's rows once added reaches rowsCheck
	if r.limit >= 0 {
		if r.added == 0 {
			return 0
		}
		n = min(n, r.untilCheck-1) // full estimates the memory when its countdown reaches 0
	}
	if r.opts.RowsPerSegment > 0 {
		n = min(n, int(int64(r.opts.RowsPerSegment)-r.segRows))
	}
	if r.opts.Progress != nil {
		n = min(n, int(r.nextProg-r.res.InputRows)-1)
	}
	return n
}

// full reports whether the Builder should be persisted before it takes another row.
func (r *runner) full() bool {
	// The Builder holds at most r.added rows (fewer with rollup): its count (a lock) is
	// asked only when it may have reached the limit.
	if r.added >= r.rowsCheck {
		rows := r.b.Rows()
		if rows >= r.opts.MaxRowsInMemory {
			return true
		}
		r.rowsCheck = r.added + r.opts.MaxRowsInMemory - rows
	}
	if r.limit < 0 || r.added == 0 {
		return false
	}
	if r.untilCheck--; r.untilCheck > 0 {
		return false
	}
	rows := r.b.Rows()
	if rows == 0 {
		return false
	}
	mem := r.b.MemBytes()
	if mem >= r.limit {
		return true
	}
	if !r.grown && rows >= growAfter {
		// When, at the rate so far, MaxRowsInMemory rows fit in the limit, the run will end
		// there: room for them now costs less than growing the arrays step by step (each
		// step a copy into fresh memory), and does not end the run sooner.
		r.grown = true
		if int64(rows)*r.limit/mem >= int64(r.opts.MaxRowsInMemory) {
			r.b.Grow(r.opts.MaxRowsInMemory - rows)
		}
	}
	// Check again when about half the room left is used, at the rate so far.
	perRow := max(mem/int64(rows), 1)
	r.untilCheck = int(min(max((r.limit-mem)/perRow/2, 1), maxCheckRows))
	return false
}

// growAfter is the rows a first Builder takes before it decides whether to reserve room for
// the rest (runner.full): by then the rate of its memory a row counts its dictionaries' start
// less.
const growAfter = 1 << 16

// maxCheckRows is the most rows added between two memory estimates.
const maxCheckRows = 4096

func (r *runner) progress() {
	if r.opts.Progress != nil {
		r.opts.Progress(Progress{Input: r.input, InputRows: r.res.InputRows, Skipped: r.res.Skipped,
			Runs: r.res.Runs, Segments: len(r.res.Segments)})
	}
}

// spill hands the Builder's rows to a goroutine that persists them as a run, and goes on with
// a second Builder: the one persisted before, once its persist has finished (waitSpill), so
// that at most one run is persisted at a time and two Builders' rows are in memory at most.
func (r *runner) spill() error {
	if err := r.waitSpill(); err != nil {
		return err
	}
	path, err := r.runPath()
	if err != nil {
		return err
	}
	next := r.spare
	if next == nil {
		if next, err = newBuilder(r.sp); err != nil {
			return err
		}
		// Room for as many rows as the first Builder took (rows are most often alike):
		// filling arrays of the right size at once costs less than growing them.
		next.Grow(r.b.Rows())
	}
	r.spare = nil
	r.pend = persistRun(r.ctx, r.b, path, r.med, r.keepBytes())
	r.runs = append(r.runs, path)
	r.res.Runs++
	r.b = next
	r.grown = true // kept or grown arrays
	r.untilCheck, r.added, r.rowsCheck = 0, 0, 0
	r.progress()
	return nil
}

// runPath returns the path of the next run, creating the runs' directory on the first.
func (r *runner) runPath() (string, error) {
	if r.runDir == "" {
		d, err := os.MkdirTemp(r.opts.TmpDir, TempPattern)
		if err != nil {
			return "", fmt.Errorf("ingest: runs: %w", err)
		}
		r.runDir = d
	}
	return filepath.Join(r.runDir, fmt.Sprintf("run-%06d.seg", r.res.Runs)), nil
}

// waitSpill waits for the run being persisted, if any; its Builder, emptied, becomes the
// spare.
func (r *runner) waitSpill() error {
	if r.pend == nil {
		return nil
	}
	p := r.pend
	r.pend = nil
	if err := <-p.done; err != nil {
		return errors.Join(fmt.Errorf("ingest: run: %w", err), closeBuilder(p.b))
	}
	r.spare = p.b
	return nil
}

// newBuilder returns a Builder of the spec's schema whose row arrays are in scratch memory
// (merger.BuilderOptions.ScratchArrays): every Builder made must be closed.
func newBuilder(sp *Spec) (*merger.Builder, error) {
	b, err := merger.NewBuilder(typedSchema(sp.Schema), merger.BuilderOptions{ScratchArrays: true})
	if err != nil {
		return nil, fmt.Errorf("ingest: %w", err)
	}
	if testHookNewBuilder != nil {
		testHookNewBuilder(b)
	}
	return b, nil
}

// testHookNewBuilder, when set, is called with each Builder newBuilder makes.
var testHookNewBuilder func(*merger.Builder)

// closeBuilders closes the Builder taking rows and the spare, once no persist is under way.
func (r *runner) closeBuilders() error {
	err := errors.Join(closeBuilder(r.spare), closeBuilder(r.b))
	r.spare = nil
	return err
}

// closeBuilder closes b, if any (merger.Builder.Close: a second Close does nothing).
func closeBuilder(b *merger.Builder) error {
	if b == nil {
		return nil
	}
	if err := b.Close(); err != nil {
		return fmt.Errorf("ingest: %w", err)
	}
	return nil
}

// pendingRun is a Builder being persisted as a run; done receives the persist's error.
type pendingRun struct {
	b    *merger.Builder
	done chan error
}

// persistRun persists b's rows at path (no syncs) on a goroutine of its own, then empties b,
// keeping at most keep bytes of its arrays (merger.Builder.ResetKeep).
func persistRun(ctx context.Context, b *merger.Builder, path string, med medium.Medium, keep int64) *pendingRun {
	p := &pendingRun{b: b, done: make(chan error, 1)}
	go func() {
		var err error
		if testHookPersist != nil {
			err = testHookPersist(path)
		}
		if err == nil {
			_, err = b.Persist(ctx, path, merger.PersistOptions{Medium: med, Durability: medium.Durability{Sync: medium.SyncNone}, Runs: true})
		}
		b.ResetKeep(keep)
		p.done <- err
	}()
	return p
}

// keepBytes is the most memory of row arrays a Builder keeps from one run to the next
// (merger.Builder.ResetKeep): 7/8 of its memory limit, so that a builder that starts with them is
// not full at once (MemBytes counts them) and has room for the dictionaries of its rows.
func (r *runner) keepBytes() int64 {
	if r.limit < 0 {
		return math.MaxInt64
	}
	return r.limit - r.limit/8
}

// endSegment writes the current segment: the Builder's rows straight to the output when there
// is no run, else the runs and then the Builder's rows merged into the output.
func (r *runner) endSegment() error {
	dst := r.opts.Out
	if r.opts.RowsPerSegment > 0 {
		dst = SegmentName(r.opts.Out, len(r.res.Segments))
	}
	seg := Segment{Path: dst, InputRows: r.segRows, Runs: len(r.runs)}
	staged, err := r.stagedPath(dst)
	if err != nil {
		return err
	}
	var mr merger.Result
	if len(r.runs) == 0 {
		mr, err = r.b.Persist(r.ctx, staged, merger.PersistOptions{Medium: r.med, Durability: r.opts.Durability})
		if err != nil {
			return fmt.Errorf("ingest: %s: %w", dst, err)
		}
	} else {
		// The rows still in the Builder are merged after the runs (Builder.PersistAfter)
		// rather than persisted as one more run and read back.
		if err := r.waitSpill(); err != nil {
			return err
		}
		if r.final {
			// No more rows: its kept arrays go before the merge (to the scratch pool, for
			// the merge's own arrays).
			err := closeBuilder(r.spare)
			r.spare = nil
			if err != nil {
				return err
			}
		}
		seg.Runs = len(r.runs)
		if mr, err = r.mergeRuns(staged, dst); err != nil {
			return err
		}
	}
	seg.Rows, seg.Bytes, seg.Interval = mr.RowsOut, mr.Bytes, mr.Info.Interval
	r.res.Segments = append(r.res.Segments, seg)
	r.staged = append(r.staged, staged)
	r.b.ResetKeep(r.keepBytes())
	r.segRows = 0
	r.untilCheck, r.added, r.rowsCheck = 0, 0, 0
	r.progress()
	return nil
}

// mergeRuns merges the segment's runs into its staged output and removes them. At most
// MaxFanIn runs are open at once: while there are more, runs are merged in phases, each
// merging groups of up to MaxFanIn consecutive runs into one run, just enough of them that the
// runs left fit in one more merge. Groups are consecutive so that the rows keep their input
// order, which First and Last decide ties by.
func (r *runner) mergeRuns(staged, dst string) (merger.Result, error) {
	fan := r.opts.MaxFanIn
	for len(r.runs) > fan { // the Builder, merged with the last group, is no file
		next := make([]string, 0, fan)
		for i := 0; i < len(r.runs); {
			excess := len(next) + len(r.runs) - i - fan
			if excess <= 0 {
				next = append(next, r.runs[i:]...)
				break
			}
			n := min(fan, excess+1, len(r.runs)-i)
			if n == 1 { // the last run: the next phase merges it
				next = append(next, r.runs[i])
				break
			}
			path := filepath.Join(r.runDir, fmt.Sprintf("merged-%06d.seg", r.merged))
			r.merged++
			if _, err := r.mergeGroup(r.runs[i:i+n], path, medium.Durability{Sync: medium.SyncNone}, nil); err != nil {
				return merger.Result{}, fmt.Errorf("ingest: merge runs: %w", err)
			}
			next = append(next, path)
			i += n
		}
		r.runs = next
	}
	res, err := r.mergeGroup(r.runs, staged, r.opts.Durability, r.b)
	if err != nil {
		return res, fmt.Errorf("ingest: merge runs into %s: %w", dst, err)
	}
	r.runs = r.runs[:0]
	return res, nil
}

// testHookPersist, when set, is called on a background persist's goroutine before it
// persists the run at path; an error it returns is the persist's.
var testHookPersist func(path string) error

// testHookRunsOpen, when set, is called with the number of runs open at once in each merge.
var testHookRunsOpen func(n int)

// mergeGroup merges runs, then b's rows when b is not nil, into out and removes the runs.
// Runs are read with pread through a few read-ahead blocks, not mapped, so that the pages
// read do not stay in the process's resident set.
func (r *runner) mergeGroup(runs []string, out string, dur medium.Durability, b *merger.Builder) (res merger.Result, err error) {
	segs := make([]*columns.Segment, 0, len(runs))
	var closers []func() error
	defer func() {
		for _, c := range closers {
			if cerr := c(); cerr != nil && err == nil {
				err = fmt.Errorf("run: %w", cerr)
			}
		}
	}()
	for _, p := range runs {
		f, err := os.Open(p)
		if err != nil {
			return res, fmt.Errorf("run: %w", err)
		}
		fi, err := f.Stat()
		if err != nil {
			_ = f.Close()
			return res, fmt.Errorf("run: %w", err)
		}
		sg, err := columns.NewSegment(newBlockReaderAt(f, fi.Size()), fi.Size())
		if err != nil {
			_ = f.Close()
			return res, fmt.Errorf("run %s: %w", p, err)
		}
		segs = append(segs, sg)
		closers = append(closers, func() error { return errors.Join(sg.Close(), f.Close()) })
	}
	if testHookRunsOpen != nil {
		testHookRunsOpen(len(segs))
	}
	if b != nil {
		// Runs: the output has the bitmap indexes the runs were written without.
		res, err = b.PersistAfter(r.ctx, segs, out, merger.PersistOptions{Medium: r.med, Durability: dur, InputNames: runs, Runs: true})
	} else {
		res, err = merger.Merge(r.ctx, segs, out, merger.Options{
			Medium:      r.med,
			Durability:  dur,
			Rollup:      r.sp.Schema.Rollup,
			Granularity: r.sp.Schema.Granularity,
			InputNames:  runs,
		})
	}
	if err != nil {
		return res, err
	}
	// The output is written: a failure from here on removes it.
	var errs []error
	for _, c := range closers {
		errs = append(errs, c())
	}
	closers = nil
	for _, p := range runs {
		errs = append(errs, os.Remove(p))
	}
	if err := errors.Join(errs...); err != nil {
		_ = os.Remove(out)
		return res, fmt.Errorf("run: %w", err)
	}
	return res, nil
}
