package ingest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"os"
	"path/filepath"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/medium"
	"github.com/writeout/writeout/merger"
)

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
	r.runs = append(r.runs, runFile{path: path})
	r.res.runs++
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
	return filepath.Join(r.runDir, fmt.Sprintf("run-%06d.seg", r.res.runs)), nil
}

// waitSpill waits for the run being persisted, if any; its Builder, emptied, becomes the
// spare, and the run's entry gets its estimate (runFile.open).
func (r *runner) waitSpill() error {
	if r.pend == nil {
		return nil
	}
	p := r.pend
	r.pend = nil
	d := <-p.done
	if d.err != nil {
		return errors.Join(fmt.Errorf("ingest: run: %w", d.err), closeBuilder(p.b))
	}
	r.spare = p.b
	for i := len(r.runs) - 1; i >= 0; i-- {
		if r.runs[i].path == p.path {
			r.runs[i].open = d.open
			break
		}
	}
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

// pendingRun is a Builder being persisted as a run at path; done receives the outcome.
type pendingRun struct {
	b    *merger.Builder
	path string
	done chan persisted
}

// persisted is the outcome of a background persist: its error, or the run's estimate.
type persisted struct {
	err  error
	open int64 // runOpenBytes of the run
}

// runChunkRows is the rows of a chunk of a run's values and ids. A merge of runs holds a chunk
// of every column of every run it merges (decoded, and its bytes as read): runs chunked more
// finely than segments (4,096 rows) cost it a quarter of that. The output's chunks are its
// own, whatever its inputs': the bytes are the same.
const runChunkRows = 1024

// persistRun persists b's rows at path (no syncs) on a goroutine of its own, then empties b,
// keeping at most keep bytes of its arrays (merger.Builder.ResetKeep), and estimates what a
// merge holds for the run (runOpenBytes).
func persistRun(ctx context.Context, b *merger.Builder, path string, med medium.Medium, keep int64) *pendingRun {
	p := &pendingRun{b: b, path: path, done: make(chan persisted, 1)}
	go func() {
		var d persisted
		if testHookPersist != nil {
			d.err = testHookPersist(path)
		}
		if d.err == nil {
			_, d.err = b.Persist(ctx, path, merger.PersistOptions{Medium: med, Durability: medium.Durability{Sync: medium.SyncNone},
				Runs: true, ChunkRows: runChunkRows})
		}
		b.ResetKeep(keep)
		if d.err == nil {
			d.open, d.err = estimateRun(path)
		}
		p.done <- d
	}()
	return p
}

// runFile is a run of the segment being ingested: its file, and the estimate of the memory a
// merge holds for it while it is open (runOpenBytes; 0 until its persist is waited for).
type runFile struct {
	path string
	open int64
}

// estimateRun opens the run at path for its footer and dictionaries and returns
// runOpenBytes of it.
func estimateRun(path string) (n int64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer func() { err = errors.Join(err, f.Close()) }()
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	seg, err := columns.NewSegment(newBlockReaderAt(f, fi.Size()), fi.Size())
	if err != nil {
		return 0, fmt.Errorf("run %s: %w", path, err)
	}
	n = runOpenBytes(seg)
	return n, seg.Close()
}

// runOpenBytes estimates the memory a merge holds for seg, a run, while it merges it: the
// map from each of its dictionaries' ids to the merged ids (4 bytes an id, in a buffer of
// the next power of two), a chunk of each column (decoded values and their bytes as read: 16
// bytes a row of runChunkRows, for the widest columns) and its read blocks (readerBytes).
func runOpenBytes(seg *columns.Segment) int64 {
	sch := seg.Schema()
	cols := 1 + len(sch.Dimensions) + len(sch.Metrics)
	n := int64(readerBytes) + int64(cols)*runChunkRows*16
	for _, d := range sch.Dimensions {
		if d.Raw {
			continue
		}
		dc, err := seg.Dim(d.Name)
		if err != nil {
			continue // not a dictionary column: no id map
		}
		n += 4 << bits.Len(uint(max(dc.Cardinality(), 1)-1))
	}
	return n
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
	seg := Segment{Path: dst, InputRows: r.segRows, runs: len(r.runs)}
	staged, err := r.stagedPath(dst)
	if err != nil {
		return err
	}
	var mr merger.Result
	if len(r.runs) == 0 {
		mr, err = r.b.Persist(r.ctx, staged, merger.PersistOptions{Medium: r.med, Durability: r.opts.Durability,
			Progress: r.writeProgress(), Compression: r.opts.Compression})
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
		seg.runs = len(r.runs)
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
// fanIn runs are open at once: while there are more, runs are merged in phases, each merging
// groups of up to fanIn consecutive runs into one run, just enough of them that the runs left
// fit in one more merge. Groups are consecutive so that the rows keep their input order,
// which First and Last decide ties by.
func (r *runner) mergeRuns(staged, dst string) (merger.Result, error) {
	for fan := r.fanIn(); len(r.runs) > fan; fan = r.fanIn() { // the Builder, merged with the last group, is no file
		next := make([]runFile, 0, fan)
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
			if _, err := r.mergeGroup(r.runs[i:i+n], path, medium.Durability{Sync: medium.SyncNone}, columns.CompressionDefault, nil); err != nil {
				return merger.Result{}, fmt.Errorf("ingest: merge runs: %w", err)
			}
			open, err := estimateRun(path)
			if err != nil {
				return merger.Result{}, fmt.Errorf("ingest: merge runs: %w", err)
			}
			next = append(next, runFile{path: path, open: open})
			i += n
		}
		r.runs = next
	}
	res, err := r.mergeGroup(r.runs, staged, r.opts.Durability, r.opts.Compression, r.b)
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

// testHookMergeRuns, when set, is called with the runs of each merge of runs, before it, and
// runsBudget.
var testHookMergeRuns func(group []runFile, budget int64)

// fanIn is the most runs a merge of the segment's runs opens at once: MaxFanIn, or fewer
// when more would pass MemoryLimit. A merge of runs holds, besides the rows still in the
// Builder (merged after them), what it reads of each run (runOpenBytes): as many runs as the
// mean of their estimates fits in MemoryLimit less the Builders' memory (MemBytes: the
// Builder's rows, and the spare's kept arrays before the last segment), and 2 at least.
func (r *runner) fanIn() int {
	fan := r.opts.MaxFanIn
	if r.opts.MemoryLimit < 0 || len(r.runs) <= 2 {
		return fan
	}
	var total int64
	for _, rf := range r.runs {
		total += rf.open
	}
	mean := max(total/int64(len(r.runs)), 1)
	return int(max(2, min(int64(fan), r.runsBudget()/mean)))
}

// runsBudget is the memory the runs of a merge may take (fanIn): MemoryLimit less the
// Builders' (negative when they hold it all).
func (r *runner) runsBudget() int64 {
	budget := r.opts.MemoryLimit - r.b.MemBytes()
	if r.spare != nil {
		budget -= r.spare.MemBytes()
	}
	return budget
}

// mergeGroup merges runs, then b's rows when b is not nil, into out (its chunks compressed
// with comp) and removes the runs.
// Runs are read with pread through a few read-ahead blocks, not mapped, so that the pages
// read do not stay in the process's resident set.
func (r *runner) mergeGroup(group []runFile, out string, dur medium.Durability, comp columns.Compression, b *merger.Builder) (res merger.Result, err error) {
	if testHookMergeRuns != nil {
		testHookMergeRuns(group, r.runsBudget())
	}
	runs := make([]string, len(group))
	for i, rf := range group {
		runs[i] = rf.path
	}
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
		res, err = b.PersistAfter(r.ctx, segs, out, merger.PersistOptions{Medium: r.med, Durability: dur, InputNames: runs, Runs: true,
			Progress: r.writeProgress(), Compression: comp})
	} else {
		mo := merger.Options{
			Medium:      r.med,
			Durability:  dur,
			Compression: comp,
			Rollup:      r.sp.Schema.Rollup,
			Granularity: r.sp.Schema.Granularity,
			InputNames:  runs,
			Progress:    r.writeProgress(),
		}
		if len(segs) >= 2 {
			// In one phase, as planned against MemoryLimit (fanIn): not in phases of what the
			// merge's default memory budget would pick.
			mo.MaxFanIn = len(segs)
		}
		res, err = merger.Merge(r.ctx, segs, out, mo)
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
