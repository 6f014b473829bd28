package ingest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sync/atomic"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/medium"
	"github.com/writeout/writeout/merger"
	"github.com/writeout/writeout/tmpfile"
)

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
// by a complete ingest. An input whose Path is one of the outputs is refused. An s3:// Out is
// staged in TmpDir and each segment uploaded as merger.MergeTo publishes (see Options.Out).
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
	out, err := opts.ensureDefaults()
	if err != nil {
		return res, err
	}
	if len(inputs) == 0 {
		return res, fmt.Errorf("%w: no inputs", ErrInvalid)
	}
	inputs = slices.Clone(inputs) // Names filled in
	given := make([]*inputFormat, len(inputs))
	for i, in := range inputs {
		if in.Reader == nil && in.open == nil && in.Path == "" && in.Rows == nil {
			return res, fmt.Errorf("%w: input %q has neither a Reader nor a Path nor Rows", ErrInvalid, in.Name)
		}
		if in.Name == "" {
			inputs[i].Name = in.Path
		}
		if in.Rows != nil {
			continue // no format
		}
		if given[i], err = inputFormatOf(sp, in); err != nil {
			return res, err
		}
		if given[i] == nil && in.Reader == nil && in.open == nil {
			if _, ok := formatOfFile(in.Path); !ok {
				return res, cannotTell(inputs[i].Name)
			}
		}
	}
	var existing []string
	if out.IsS3() {
		if err := checkObject(ctx, opts); err != nil {
			return res, err
		}
	} else {
		if existing, err = ExistingOutputs(opts.Out, opts.RowsPerSegment); err != nil {
			return res, err
		}
		if err := checkPaths(inputs, existing, opts.Replace); err != nil {
			return res, err
		}
	}
	pl, err := newPlan(sp, opts.MaxRecordBytes)
	if err != nil {
		return res, err
	}
	r := &runner{ctx: ctx, sp: sp, plan: pl, opts: opts, remote: out.IsS3(), med: opts.Medium, limit: opts.MemoryLimit}
	if r.limit > 0 {
		r.limit = max(r.limit/2, 1) // two builders: see MemoryLimit
	}
	if r.b, err = newBuilder(sp); err != nil {
		return res, err
	}
	if r.med == nil {
		tm, err := tmpfile.New(tmpfile.Options{Dir: opts.TmpDir, Durability: opts.Durability,
			BufferBudget: StagingBudget(opts.MemoryLimit)})
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
			res = Result{Skipped: r.res.Skipped, InputRows: r.res.InputRows, runs: r.res.runs}
		}
	}()
	for i, in := range inputs {
		if err := r.readInput(in, given[i]); err != nil {
			return r.res, err
		}
	}
	if r.res.InputRows == 0 && r.res.Skipped > 0 {
		// A segment of no rows (and an interval at 1970) is no answer to rows that all failed.
		return r.res, inputErr("ingest: none of the %d rows parsed (each skipped: MaxParseErrors, --max-parse-errors, is %d); no segment written",
			r.res.Skipped, opts.MaxParseErrors)
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

// runner is the state of one Run.
type runner struct {
	ctx    context.Context
	sp     *Spec
	plan   *plan
	remote bool // Out is an object: the outputs are staged in TmpDir and uploaded
	opts   Options
	med    medium.Medium
	b      *merger.Builder
	res    Result
	runDir string    // created on the first run
	runs   []runFile // runs of the current segment
	limit  int64     // MemoryLimit of one Builder (half the option's); negative for none
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
	// Options.Progress's count of input bytes: inBytes is read of the input being read (on the
	// read-ahead goroutine), at most inSize of it counts (-1: a stream, all of it); bytesDone
	// is of the inputs before.
	inBytes   atomic.Int64
	inSize    int64
	bytesDone int64
}

// readInput feeds the rows of one input to the Builder.
func (r *runner) readInput(in Input, format *inputFormat) (err error) {
	if in.Rows != nil {
		return r.readRows(in.Name, rowsReader{rows: in.Rows, name: in.Name}, nil)
	}
	var count *atomic.Int64 // the bytes read, for Options.Progress
	if r.opts.Progress != nil {
		count = &r.inBytes
		r.inBytes.Store(0)
		r.inSize = -1
		defer func() {
			if err != nil {
				return
			}
			// Read whole: a file counts its size, a stream what was read of it.
			if r.inSize >= 0 {
				r.bytesDone += r.inSize
			} else {
				r.bytesDone += r.inBytes.Load()
			}
			r.inBytes.Store(0)
			r.inSize = -1
			r.report()
		}()
	}
	src := in.Reader
	if src != nil && count != nil {
		src, r.inSize = countReader(src, count)
	}
	if src == nil {
		open := in.open
		if open == nil {
			open = func() (io.ReadCloser, error) { return openCounted(r.ctx, in.Path, count) }
		} else if count != nil {
			open = func() (io.ReadCloser, error) {
				rc, err := in.open()
				if _, ok := rc.(io.ReaderAt); err != nil || ok {
					return rc, err // a test's file: counted once read whole
				}
				return readCloser{countingReader{r: rc, n: count}, rc.Close}, nil
			}
		}
		rc, err := open()
		if err != nil {
			return err
		}
		if count != nil && in.open == nil {
			if fi, err := os.Stat(in.Path); err == nil && fi.Mode().IsRegular() {
				r.inSize = fi.Size()
			}
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
	return r.readRows(in.Name, rr, ahead)
}

// countReader returns r counting the bytes read (by Read and ReadAt) into count, and r's
// size: Size's, a regular file's, else -1. What it returns has the methods of r that the
// format readers look for (ReadAt with Size or Stat); an io.ReaderAt with neither is returned
// as it is, and counts once read whole.
func countReader(r io.Reader, count *atomic.Int64) (io.Reader, int64) {
	switch x := r.(type) {
	case sizedReaderAt:
		return countedSized{x, count}, x.Size()
	case statReaderAt:
		size := int64(-1)
		if fi, err := x.Stat(); err == nil && fi.Mode().IsRegular() {
			size = fi.Size()
		}
		return countedStat{x, count}, size
	case io.ReaderAt:
		return r, -1
	}
	return countingReader{r: r, n: count}, -1
}

type sizedReaderAt interface {
	io.Reader
	io.ReaderAt
	Size() int64
}

type statReaderAt interface {
	io.Reader
	io.ReaderAt
	Stat() (os.FileInfo, error)
}

// countedSized and countedStat count what is read of their reader into n.
type countedSized struct {
	sizedReaderAt
	n *atomic.Int64
}

type countedStat struct {
	statReaderAt
	n *atomic.Int64
}

func (c countedSized) Read(p []byte) (int, error) { return counted(c.n)(c.sizedReaderAt.Read(p)) }
func (c countedSized) ReadAt(p []byte, off int64) (int, error) {
	return counted(c.n)(c.sizedReaderAt.ReadAt(p, off))
}
func (c countedStat) Read(p []byte) (int, error) { return counted(c.n)(c.statReaderAt.Read(p)) }
func (c countedStat) ReadAt(p []byte, off int64) (int, error) {
	return counted(c.n)(c.statReaderAt.ReadAt(p, off))
}

// counted returns a function that adds a read's bytes to n and returns the read's results.
func counted(n *atomic.Int64) func(int, error) (int, error) {
	return func(k int, err error) (int, error) {
		n.Add(int64(k))
		return k, err
	}
}

// bytesRead is Progress.Bytes while an input is read.
func (r *runner) bytesRead() int64 {
	n := r.inBytes.Load()
	if r.inSize >= 0 {
		n = min(n, r.inSize)
	}
	return r.bytesDone + n
}

// rowsReader is the reader of an Input's Rows.
type rowsReader struct {
	rows func(*columns.Row) error
	name string
}

func (rr rowsReader) Read(row *columns.Row) error {
	err := rr.rows(row)
	if err != nil && err != io.EOF {
		return fmt.Errorf("ingest: %s: %w", rr.name, err)
	}
	return err
}

// readRows adds the rows of rr, the reader of input name, read ahead by ahead (nil: a new
// one, for a reader that reports no warnings).
func (r *runner) readRows(name string, rr reader, ahead *readAhead) error {
	if ahead == nil {
		ahead = newReadAhead(r.sp)
	}
	r.input = name
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
		r.res.warnings = append(r.res.warnings, w)
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
	if r.reporting() && r.res.InputRows >= r.nextProg {
		r.nextProg = r.res.InputRows + int64(r.opts.progressRows)
		r.progress()
		r.report()
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
	if r.reporting() {
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

// reporting reports whether progress is reported every progressRows rows (add).
func (r *runner) reporting() bool { return r.opts.progress != nil || r.opts.Progress != nil }

// report calls Options.Progress with the step StepRead.
func (r *runner) report() {
	if r.opts.Progress != nil {
		r.opts.Progress(Progress{Step: StepRead, Bytes: r.bytesRead(), Rows: r.res.InputRows + int64(r.res.Skipped)})
	}
}

// writeProgress returns the merger.Options.Progress of a write of a segment (the step
// StepWrite of Options.Progress), nil without Options.Progress.
func (r *runner) writeProgress() func(merger.Progress) {
	if r.opts.Progress == nil {
		return nil
	}
	p := Progress{Step: StepWrite, Bytes: r.bytesRead(), Rows: r.res.InputRows + int64(r.res.Skipped)}
	return func(mp merger.Progress) {
		p.WriteDone, p.WriteTotal = mp.RowsDone, mp.RowsTotal
		r.opts.Progress(p)
	}
}

func (r *runner) progress() {
	if r.opts.progress != nil {
		r.opts.progress(progressReport{Input: r.input, InputRows: r.res.InputRows, Skipped: r.res.Skipped,
			Runs: r.res.runs, Segments: len(r.res.Segments)})
	}
}
