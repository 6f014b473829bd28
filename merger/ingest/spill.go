package ingest

import (
	"context"
	"errors"
	"fmt"
	"math"
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
	r.runs = append(r.runs, path)
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
	seg := Segment{Path: dst, InputRows: r.segRows, runs: len(r.runs)}
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
