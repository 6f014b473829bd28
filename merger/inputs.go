package merger

import (
	"context"
	"fmt"
	"time"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/internal/multierr"
	"github.com/writeout/writeout/merger/internal/source"
)

// Input is an input of MergeInputs: a segment the merge opens itself, only while it reads it.
type Input interface {
	// Name names the input in errors, unless Options.InputNames does.
	Name() string
	// Open opens the segment; close releases everything Open took (the segment, its file, its
	// mapping, a cache), and the merge calls it once done with the segment, on every path. A
	// merge in phases opens an input twice, one at a time: once before the first phase to
	// read its schema and row count (and close it again), once when the phase that merges it
	// begins. The segment must be the same both times.
	Open(ctx context.Context) (seg *columns.Segment, close func() error, err error)
}

// FileInput returns the Input of the segment file at path, opened with columns.Open (mapped
// where the platform allows: one descriptor while open).
func FileInput(path string) Input { return fileInput(path) }

type fileInput string

func (f fileInput) Name() string { return string(f) }

func (f fileInput) Open(context.Context) (*columns.Segment, func() error, error) {
	seg, err := columns.Open(string(f))
	if err != nil {
		return nil, nil, err
	}
	return seg, seg.Close, nil
}

// RowRange returns the Input of rows [lo, hi) of in's segment, in the segment's order: a merge
// reads it as a segment of hi-lo rows holding just those, whose dictionaries hold only the
// values those rows hold. A segment's rows are in time order, so the rows of a time interval
// are a range (columns.Segment.TimeRows): compaction splits a segment by time or by rows with
// it. A range outside the segment fails the merge with ErrInvalid; the checksums verified
// (Options.SkipChecksums false) are the whole segment's.
func RowRange(in Input, lo, hi int) Input { return rowRange{in: in, lo: lo, hi: hi} }

type rowRange struct {
	in     Input
	lo, hi int
}

func (r rowRange) Name() string {
	if n := r.in.Name(); n != "" {
		return fmt.Sprintf("%s rows [%d, %d)", n, r.lo, r.hi)
	}
	return ""
}

func (r rowRange) Open(ctx context.Context) (*columns.Segment, func() error, error) {
	return r.in.Open(ctx)
}

// sourceOf returns the source a merge reads of in, opened as seg: the segment, or the range
// of its rows RowRange gives.
func sourceOf(in Input, seg *columns.Segment) (source.Source, error) {
	src := source.OfSegment(seg)
	r, ok := in.(rowRange)
	if !ok {
		return src, nil
	}
	if r.lo < 0 || r.hi <= r.lo || r.hi > seg.Rows() {
		return nil, fmt.Errorf("%w: rows [%d, %d) of a segment of %d rows", ErrInvalid, r.lo, r.hi, seg.Rows())
	}
	return source.Slice(src, r.lo, r.hi)
}

// MergeInputs is Merge over inputs it opens itself: a phase opens only the inputs it merges
// and closes them when it is done, so that at most Options.MaxFanIn inputs are open at once,
// and with MaxFanIn 0 it picks a fan-in that fits the process's limit on open files when all
// the inputs would not (see the package documentation). The inputs are read first, one at a
// time, for their schemas (when the merge runs in phases; in one phase they open once and
// stay open to its end), so that an input that does not open, or whose schema conflicts,
// fails the merge before it writes anything. The output is the one Merge writes of the same
// inputs opened; every input is closed when MergeInputs returns, whatever happens.
func MergeInputs(ctx context.Context, inputs []Input, dst string, opts Options) (Result, error) {
	return mergeInputs(ctx, inputs, target{path: dst}, opts)
}

// MergeInputsTo is MergeInputs publishing to out, as MergeTo is Merge publishing to out.
func MergeInputsTo(ctx context.Context, inputs []Input, out Output, opts Options) (Result, error) {
	if out == nil {
		return Result{}, fmt.Errorf("%w: nil output", ErrInvalid)
	}
	return mergeInputs(ctx, inputs, target{out: out}, opts)
}

func mergeInputs(ctx context.Context, inputs []Input, dst target, opts Options) (res Result, err error) {
	start := time.Now()
	if err := opts.ensureDefaults(); err != nil {
		return res, err
	}
	if len(inputs) == 0 {
		return res, fmt.Errorf("%w: no inputs", ErrInvalid)
	}
	for i, in := range inputs {
		if in == nil {
			return res, fmt.Errorf("%w: input %d is nil", ErrInvalid, i)
		}
	}
	if opts.MaxFanIn == 0 {
		fan, err := pickFanIn(len(inputs), opts.Fs)
		if err != nil {
			return res, err
		}
		opts.MaxFanIn = fan
	}
	// In one phase every input opens now and stays open; in several, each is opened for its
	// footer and closed again, and opened for good when its phase comes.
	onePhase := opts.MaxFanIn == 0 || len(inputs) <= opts.MaxFanIn
	ls := make([]level, len(inputs))
	defer func() {
		if derr := dropLevels(ls); derr != nil && err == nil {
			err = derr
		}
	}()
	schemas := make([]columns.Schema, len(inputs))
	for i, in := range inputs {
		if err := ctx.Err(); err != nil {
			return res, fmt.Errorf("merger: %w", err)
		}
		seg, closeSeg, err := in.Open(ctx)
		if err != nil {
			return res, fmt.Errorf("merger: input %d: %w", i, err)
		}
		name := opts.inputName(i)
		if i >= len(opts.InputNames) || opts.InputNames[i] == "" {
			if name = in.Name(); name == "" {
				name = opts.inputNameOf(i, seg)
			}
		}
		schemas[i] = seg.Schema()
		src, err := sourceOf(in, seg)
		if err != nil {
			return res, multierr.Join(fmt.Errorf("merger: %s: %w", name, err), closeSeg())
		}
		l := level{name: name, rows: src.Rows(), verify: !opts.SkipChecksums,
			open: reopen(in, name, seg.Rows(), schemas[i])}
		if onePhase {
			l.src, l.closeFn = src, closeSeg
		} else if err := closeSeg(); err != nil {
			return res, fmt.Errorf("merger: close %s: %w", name, err)
		}
		ls[i] = l
	}
	out, err := outputSchemaOf(ls, schemas, &opts)
	if err != nil {
		return res, err
	}
	if err := ctx.Err(); err != nil {
		return res, fmt.Errorf("merger: %w", err)
	}
	return mergeSources(ctx, ls, out, dst, opts, start)
}

// reopen returns the open function of a level of in, whose segment a merge read before as
// holding rows rows of schema sc: it fails if the segment is no longer that one.
func reopen(in Input, name string, rows int, sc columns.Schema) func(ctx context.Context) (source.Source, func() error, error) {
	return func(ctx context.Context) (source.Source, func() error, error) {
		seg, closeSeg, err := in.Open(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("merger: open %s: %w", name, err)
		}
		var changed string
		switch {
		case seg.Rows() != rows:
			changed = fmt.Sprintf("%d rows, %d when the merge began", seg.Rows(), rows)
		case !seg.Schema().Equal(sc):
			changed = "its schema is not the one it had when the merge began"
		default:
			src, err := sourceOf(in, seg)
			if err != nil {
				return nil, nil, multierr.Join(fmt.Errorf("merger: %s: %w", name, err), closeSeg())
			}
			return src, closeSeg, nil
		}
		return nil, nil, multierr.Join(fmt.Errorf("%w: %s changed during the merge: %s", ErrInvalid, name, changed), closeSeg())
	}
}
