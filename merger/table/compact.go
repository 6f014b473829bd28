package table

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/internal/multierr"
	"github.com/writeout/writeout/merger"
)

// Replacement is one commit of a compaction: the chunk's segments it removed and the outputs
// it added in their place, as version Version.
type Replacement struct {
	Version int
	Chunk   columns.Interval
	Removed []string
	Added   []Segment
	RowsIn  int64 // rows of the removed segments
}

// CompactResult is what Compact did.
type CompactResult struct {
	Replaced []Replacement
	// Conflicts counts the chunks whose inputs another writer replaced first: their outputs
	// were removed and the chunk planned again from the newest version.
	Conflicts int
	// Plan is the last plan: with no chunk, what is left (Crossing, Oversized) is what
	// compaction does not split yet.
	Plan *Plan
}

// maxCompactRounds bounds the plans of one Compact: each round commits at least one
// replacement or meets a conflict, which another writer's commit caused.
const maxCompactRounds = 10_000

// Compact compacts the table: it plans the newest version (PlanCompaction), merges each
// group of each chunk's segments into one output (merger.MergeInputsTo, rows combined as
// the table's schema says), stores the outputs under new names in segments/ as Append stores
// segments, and commits each chunk as one version of kind replace: its inputs removed, its
// outputs added. A chunk whose inputs another writer replaced first (ErrConflict), or a
// vacuum removed (an input's file, or the entry of the version planned), has its outputs
// removed and is planned again from the newest version, as are chunks that a
// replacement leaves packable. It returns when a plan has nothing left to do, with what it
// replaced (none: nothing to do, no error). A rollup other than the table's is ErrInvalid.
//
// Readers see the inputs or the outputs of a chunk, never both nor neither: the outputs are
// in no entry until the commit, which removes the inputs in the same entry. What a failure
// or a crash leaves (an output not committed) no entry lists.
func (t *Table) Compact(ctx context.Context, o CompactOptions) (*CompactResult, error) {
	if err := o.ensureDefaults(); err != nil {
		return nil, fmt.Errorf("table: %s: compact: %w", t, err)
	}
	if err := t.checkExclusive(ctx); err != nil {
		return nil, err
	}
	res := &CompactResult{}
	for round := 0; ; round++ {
		if round >= maxCompactRounds {
			return res, fmt.Errorf("%w: %s: compact: gave up after %d plans", ErrConflict, t, round)
		}
		e, err := t.Snapshot(ctx, 0)
		if err != nil {
			return res, err
		}
		if e.Schema != nil && o.Rollup && (!e.Schema.Rollup || e.Schema.Granularity != o.RollupGranularity) {
			return res, fmt.Errorf("%w: %s: compact with rollup at %s: the table's segments are rollup %v at %s, and outputs must share their schema",
				ErrInvalid, t, o.RollupGranularity, e.Schema.Rollup, e.Schema.Granularity)
		}
		p, err := PlanCompaction(e, o)
		if err != nil {
			return res, fmt.Errorf("table: %s: compact: %w", t, err)
		}
		res.Plan = p
		if len(p.Chunks) == 0 {
			return res, nil
		}
		for _, c := range p.Chunks {
			r, err := t.compactChunk(ctx, e, c, o)
			if errors.Is(err, ErrConflict) {
				res.Conflicts++
				break // plan again from the newest version
			}
			if err != nil {
				return res, err
			}
			res.Replaced = append(res.Replaced, r)
		}
	}
}

// compactChunk merges each group of chunk c of version e into an output and commits the
// chunk's replacement. On ErrConflict the outputs are removed.
func (t *Table) compactChunk(ctx context.Context, e *Entry, c Chunk, o CompactOptions) (Replacement, error) {
	r := Replacement{Chunk: c.Interval}
	var put []string
	cleanup := func(err error) error {
		for _, n := range put {
			err = multierr.Join(err, t.st.remove(context.WithoutCancel(ctx), n))
		}
		return err
	}
	for _, g := range c.Groups {
		s, err := t.mergeGroup(ctx, e, c, g, o)
		if s.Name != "" {
			put = append(put, s.Name)
		}
		if errors.Is(err, fs.ErrNotExist) && !errors.Is(err, ErrConflict) {
			// An input removed by a vacuum after another writer replaced it.
			err = fmt.Errorf("%w: an input is gone: %w", ErrConflict, err)
		}
		if err != nil {
			return r, cleanup(err)
		}
		r.Added = append(r.Added, s)
		for _, in := range g {
			r.Removed = append(r.Removed, in.Name)
			r.RowsIn += in.Rows
		}
	}
	v, uncertain, err := t.commit(ctx, e.Version, Change{Kind: KindReplace, Added: r.Added, Removed: r.Removed, Schema: e.Schema})
	if err != nil {
		if uncertain {
			return r, err // the outputs may be live: vacuum finds them if not
		}
		if errors.Is(err, ErrNotExist) && !errors.Is(err, ErrConflict) {
			// The base version's entry, removed by a vacuum: plan again from the newest.
			err = fmt.Errorf("%w: %w", ErrConflict, err)
		}
		return r, cleanup(fmt.Errorf("table: %s: compact %s: %w", t, c, err))
	}
	r.Version = v
	return r, nil
}

// mergeGroup merges the segments g of chunk c into a new segment of the table and returns its
// entry. A non-empty name with an error is an output that may exist and must be removed.
func (t *Table) mergeGroup(ctx context.Context, e *Entry, c Chunk, g []Segment, o CompactOptions) (Segment, error) {
	inputs := make([]merger.Input, len(g))
	for i, s := range g {
		inputs[i] = tableInput{t: t, seg: s}
	}
	name := newSegmentName(c.Interval.Start)
	out := segmentOutput{t: t, name: name}
	mres, err := merger.MergeInputsTo(ctx, inputs, out, merger.Options{
		Rollup:      e.Schema.Rollup,
		Granularity: e.Schema.Granularity,
		MemoryLimit: o.MemoryLimit,
	})
	if err != nil {
		return Segment{}, fmt.Errorf("table: %s: compact %s: merge: %w", t, c, err)
	}
	info := mres.Info
	s := Segment{Name: name, Interval: info.Interval.String(), Rows: int64(info.Rows), Bytes: info.Size, Footer: FooterChecksum(info)}
	if info.Interval.Start < c.Interval.Start || info.Interval.End > c.Interval.End {
		return s, fmt.Errorf("table: %s: compact %s: output %s has interval %s, outside the chunk", t, c, name, s.Interval)
	}
	seg, closeSeg, err := t.OpenSegment(ctx, s)
	if err != nil {
		return s, err
	}
	same := seg.Schema().Equal(*e.Schema)
	if err := closeSeg(); err != nil {
		return s, fmt.Errorf("table: %s: compact %s: %w", t, c, err)
	}
	if !same {
		return s, fmt.Errorf("%w: %s: compact %s: the output's schema differs from the table's", ErrSchema, t, c)
	}
	return s, nil
}

// tableInput is a live segment of the table as a merger.Input.
type tableInput struct {
	t   *Table
	seg Segment
}

func (in tableInput) Name() string { return in.t.Location(in.seg.Name) }

func (in tableInput) Open(ctx context.Context) (*columns.Segment, func() error, error) {
	return in.t.OpenSegment(ctx, in.seg)
}

// segmentOutput is a new segment of the table as a merger.Output.
type segmentOutput struct {
	t    *Table
	name string
}

func (out segmentOutput) Name() string { return out.t.Location(out.name) }

func (out segmentOutput) Check(context.Context) error { return nil }

func (out segmentOutput) Publish(ctx context.Context, write func(w io.Writer) error) error {
	return out.t.st.publishSegment(ctx, out.name, write)
}
