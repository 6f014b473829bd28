package table

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/internal/multierr"
	"github.com/writeout/writeout/merger"
)

// Replacement is one commit of a compaction: the chunk's segments it removed and the outputs
// it added in their place, as version Version. A split (Split) replaced one segment crossing
// chunk boundaries, whose interval Chunk is then, by pieces inside one chunk each.
type Replacement struct {
	Version int
	Chunk   columns.Interval
	Split   bool
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
	// Plan is the last plan: with nothing left to do when Compact returns no error.
	Plan *Plan
}

// maxCompactRounds bounds the plans of one Compact: each round commits at least one
// replacement or meets a conflict, which another writer's commit caused.
const maxCompactRounds = 10_000

// Compact compacts the table: it plans the newest version (PlanCompaction), first splits
// each segment that crosses a chunk boundary into pieces inside one chunk each (at most
// o.TargetRows rows each; one replacement a segment), then merges each group of each chunk's
// pieces into one output (merger.MergeInputsTo, a piece of a segment cut by rows read as a
// merger.RowRange, rows combined as the table's schema says), stores the outputs under new
// names in segments/ as Append stores segments, and commits each chunk as one version of
// kind replace: its inputs removed, its outputs added. A chunk whose inputs another writer
// replaced first (ErrConflict), or a vacuum removed (an input's file, or the entry of the
// version planned), has its outputs removed and is planned again from the newest version, as
// are chunks that a replacement leaves packable. It returns when a plan has nothing left to
// do, with what it replaced (none: nothing to do, no error). A segment granularity finer
// than the granularity of a segment the compaction keeps (its interval is whole granules of
// it, so it would cross every chunk), or than o.RollupGranularity, is ErrInvalid.
//
// With o.Rollup, every output, splits' included, is merged with rollup at
// o.RollupGranularity, and segments not rolled up at it are rewritten even alone: the table's
// rows are rolled up chunk by chunk, a version a chunk, and readers stay exact throughout
// (an output holds its inputs' rows combined). Without it, outputs keep their inputs' rollup
// and granularity (Entry.SegmentSchema), which a group's inputs share.
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
		if err := t.checkGranularities(e, o); err != nil {
			return res, err
		}
		p, err := PlanCompaction(e, o)
		if err != nil {
			return res, fmt.Errorf("table: %s: compact: %w", t, err)
		}
		res.Plan = p
		if len(p.Chunks) == 0 && len(p.Crossing) == 0 {
			return res, nil
		}
		if err := rewritesOwn(p, res); err != nil {
			return res, fmt.Errorf("table: %s: compact: %w", t, err)
		}
		if res.Conflicts > 0 {
			// Another writer works on the table: start at a random chunk rather than where
			// it is likely to be, having planned the same.
			rotate(p)
		}
		if err := t.compactPlan(ctx, e, p, o, res); errors.Is(err, ErrConflict) {
			res.Conflicts++ // plan again from the newest version
		} else if err != nil {
			return res, err
		}
	}
}

// rewritesOwn fails when plan p would rewrite, alone and whole, a segment that this
// compaction wrote (in res): planning and merging disagree about what a finished segment is,
// and compacting again would loop until maxCompactRounds.
func rewritesOwn(p *Plan, res *CompactResult) error {
	own := map[string]bool{}
	for _, r := range res.Replaced {
		for _, s := range r.Added {
			own[s.Name] = true
		}
	}
	for _, c := range p.Chunks {
		for _, g := range c.Groups {
			if len(g) == 1 && g[0].Whole() && own[g[0].Name] {
				return fmt.Errorf("%w: the plan would rewrite %s, which this compaction wrote, as it is: a bug, stopped rather than loop", ErrInvalid, g[0].Name)
			}
		}
	}
	return nil
}

// rotate starts p's splits and chunks at random ones, keeping their cyclic order.
func rotate(p *Plan) {
	if n := len(p.Crossing); n > 1 {
		k := rand.IntN(n)
		p.Crossing = slices.Concat(p.Crossing[k:], p.Crossing[:k])
	}
	if n := len(p.Chunks); n > 1 {
		k := rand.IntN(n)
		p.Chunks = slices.Concat(p.Chunks[k:], p.Chunks[:k])
	}
}

// compactPlan carries out plan p of version e: the splits, or when there are none the chunks,
// adding what it replaced to res. It stops at the first error (ErrConflict: plan again).
func (t *Table) compactPlan(ctx context.Context, e *Entry, p *Plan, o CompactOptions, res *CompactResult) error {
	for _, s := range p.Crossing {
		r, err := t.splitSegment(ctx, e, s, o)
		if err != nil {
			return err
		}
		res.Replaced = append(res.Replaced, r)
	}
	if len(p.Crossing) > 0 {
		return nil // the pieces join their chunks in the next plan
	}
	for _, c := range p.Chunks {
		r, err := t.compactChunk(ctx, e, c, o)
		if err != nil {
			return err
		}
		res.Replaced = append(res.Replaced, r)
	}
	return nil
}

// checkGranularities checks that the chunks of o are at least as coarse as the granularity of
// every live segment of e the compaction keeps: with o.Rollup none (every output is at
// o.RollupGranularity, which ensureDefaults checked), else all.
func (t *Table) checkGranularities(e *Entry, o CompactOptions) error {
	if o.Rollup {
		return nil
	}
	for _, s := range e.Segments {
		if g := s.classIn(e.Schema).gran; g.Millis() > o.SegmentGranularity.Millis() {
			return fmt.Errorf("%w: %s: compact by %s: segment %s has granularity %s, and a segment granularity must be at least as coarse",
				ErrInvalid, t, o.SegmentGranularity, s.Name, g)
		}
	}
	return nil
}

// outputClass returns the class of the output of pieces g of version e: o's target with
// o.Rollup, else the pieces' own (PlanCompaction groups pieces of one class).
func outputClass(e *Entry, g []Piece, o CompactOptions) class {
	if c, ok := o.target(); ok {
		return c
	}
	return g[0].classIn(e.Schema)
}

// splitSegment splits segment s of version e, which crosses a chunk boundary, into pieces
// inside one chunk each, of at most o.TargetRows rows each, and commits them in its place.
// The pieces keep s's rollup and granularity, or are rolled up as o.Rollup says.
func (t *Table) splitSegment(ctx context.Context, e *Entry, s Segment, o CompactOptions) (Replacement, error) {
	iv, err := ParseInterval(s.Interval)
	if err != nil {
		return Replacement{}, fmt.Errorf("%w: %s: segment %s: %w", ErrCorrupt, t, s.Name, err)
	}
	r := Replacement{Chunk: iv, Split: true, Removed: []string{s.Name}, RowsIn: s.Rows}
	seg, closeSeg, err := t.OpenSegment(ctx, s)
	if err != nil {
		return r, conflictIfGone(err)
	}
	shared := sharedSegments{s.Name: seg}
	var put []string
	err = func() error {
		pieces, err := chunkPieces(seg, s, o)
		if err != nil {
			return fmt.Errorf("table: %s: split %s: %w", t, s.Name, err)
		}
		for _, pc := range pieces {
			out, err := t.mergePieces(ctx, e, pc.chunk, []Piece{pc.Piece}, shared, o)
			if out.Name != "" {
				put = append(put, out.Name)
			}
			if err != nil {
				return err
			}
			r.Added = append(r.Added, out)
		}
		return nil
	}()
	err = multierr.Join(err, closeSeg())
	if err == nil {
		r.Version, err = t.commitReplace(ctx, e, r, fmt.Sprintf("split %s", s.Name))
	}
	if err != nil && !errors.Is(err, errUncertain) {
		err = t.removeAll(ctx, put, err)
	}
	return r, err
}

// chunkPiece is a piece of a segment and the chunk it lies in.
type chunkPiece struct {
	Piece
	chunk columns.Interval
}

// chunkPieces returns the rows of seg (segment s of the log) as pieces inside one chunk of
// o.SegmentGranularity each, cut to at most o.TargetRows rows, in row order: the rows of a
// chunk are a range (rows are in time order), found by binary search from the chunk of the
// first row not yet in a piece.
func chunkPieces(seg *columns.Segment, s Segment, o CompactOptions) ([]chunkPiece, error) {
	if int64(seg.Rows()) != s.Rows {
		return nil, fmt.Errorf("%w: %d rows, the log lists %d", ErrCorrupt, seg.Rows(), s.Rows)
	}
	g := o.SegmentGranularity
	cur := seg.Time().Cursor()
	defer cur.Release()
	var out []chunkPiece
	for row := 0; row < seg.Rows(); {
		ts, err := cur.At(row)
		if err != nil {
			return nil, err
		}
		c := columns.Interval{Start: g.Truncate(ts), End: g.Truncate(ts) + g.Millis()}
		lo, hi, err := seg.TimeRows(c.Start, c.End)
		if err != nil {
			return nil, err
		}
		if lo != row || hi <= lo {
			return nil, fmt.Errorf("%w: rows out of time order near row %d", ErrCorrupt, row)
		}
		for _, pc := range cutRange(s, int64(lo), int64(hi), o.TargetRows) {
			out = append(out, chunkPiece{Piece: pc, chunk: c})
		}
		row = hi
	}
	return out, nil
}

// sharedSegments are segments a compaction reads in several merges (pieces of them), opened
// once, by name: an object is fetched once, its checksums checked once.
type sharedSegments map[string]*columns.Segment

// compactChunk merges each group of chunk c of version e into an output and commits the
// chunk's replacement. On an error but an uncertain commit the outputs are removed.
func (t *Table) compactChunk(ctx context.Context, e *Entry, c Chunk, o CompactOptions) (Replacement, error) {
	r := Replacement{Chunk: c.Interval}
	var put []string
	shared := sharedSegments{}
	err := func() error {
		for _, g := range c.Groups {
			for _, pc := range g {
				if _, ok := shared[pc.Name]; ok || pc.Whole() {
					continue
				}
				seg, closeSeg, err := t.OpenSegment(ctx, pc.Segment)
				if err != nil {
					return conflictIfGone(err)
				}
				shared[pc.Name] = seg
				defer func() { _ = closeSeg() }() // read only: nothing of ours to lose
			}
		}
		seen := map[string]bool{}
		for _, g := range c.Groups {
			s, err := t.mergePieces(ctx, e, c.Interval, g, shared, o)
			if s.Name != "" {
				put = append(put, s.Name)
			}
			if err != nil {
				return err
			}
			r.Added = append(r.Added, s)
			for _, pc := range g {
				if !seen[pc.Name] {
					seen[pc.Name] = true
					r.Removed = append(r.Removed, pc.Name)
				}
				r.RowsIn += pc.Len()
			}
		}
		return nil
	}()
	if err == nil {
		r.Version, err = t.commitReplace(ctx, e, r, c.String())
	}
	if err != nil && !errors.Is(err, errUncertain) {
		err = t.removeAll(ctx, put, err)
	}
	return r, err
}

// commitReplace commits replacement r on top of version e (what names the change in errors).
func (t *Table) commitReplace(ctx context.Context, e *Entry, r Replacement, what string) (int, error) {
	v, uncertain, err := t.commit(ctx, e.Version, Change{Kind: KindReplace, Added: r.Added, Removed: r.Removed, Schema: e.Schema})
	if err != nil {
		if uncertain { // the outputs may be live (vacuum finds them if not): they stay
			if !errors.Is(err, errUncertain) {
				err = fmt.Errorf("%w: %w", errUncertain, err)
			}
			return 0, err
		}
		if errors.Is(err, ErrNotExist) && !errors.Is(err, ErrConflict) {
			// The base version's entry, removed by a vacuum: plan again from the newest.
			err = fmt.Errorf("%w: %w", ErrConflict, err)
		}
		return 0, fmt.Errorf("table: %s: compact %s: %w", t, what, err)
	}
	return v, nil
}

// removeAll removes the segments put (outputs not committed) and returns err joined with what
// fails.
func (t *Table) removeAll(ctx context.Context, put []string, err error) error {
	for _, n := range put {
		err = multierr.Join(err, t.st.remove(context.WithoutCancel(ctx), n))
	}
	return err
}

// conflictIfGone marks an input that is gone (removed by a vacuum after another writer
// replaced it) as a conflict: the chunk is planned again.
func conflictIfGone(err error) error {
	if errors.Is(err, fs.ErrNotExist) && !errors.Is(err, ErrConflict) {
		return fmt.Errorf("%w: an input is gone: %w", ErrConflict, err)
	}
	return err
}

// mergePieces merges the pieces g, inside interval within, into a new segment of the table,
// rolled up as outputClass says, and returns its entry (recording its own rollup when that is
// not the table's); segments in shared are read as they are open. A non-empty name with an
// error is an output that may exist and must be removed.
func (t *Table) mergePieces(ctx context.Context, e *Entry, within columns.Interval, g []Piece, shared sharedSegments, o CompactOptions) (Segment, error) {
	inputs := make([]merger.Input, len(g))
	for i, pc := range g {
		var in merger.Input = tableInput{t: t, seg: pc.Segment}
		if seg, ok := shared[pc.Name]; ok {
			in = openInput{name: t.Location(pc.Name), seg: seg}
		}
		if !pc.Whole() {
			in = merger.RowRange(in, int(pc.Lo), int(pc.Hi))
		}
		inputs[i] = in
	}
	name := newSegmentName(within.Start)
	what := fmt.Sprintf("%s/%s", fmtTime(within.Start), fmtTime(within.End))
	out := segmentOutput{t: t, name: name}
	c := outputClass(e, g, o)
	want := c.apply(e.Schema.Clone())
	mres, err := merger.MergeInputsTo(ctx, inputs, out, merger.Options{
		Rollup:      c.rollup,
		Granularity: c.gran,
		MemoryLimit: o.MemoryLimit,
	})
	if err != nil {
		return Segment{}, conflictIfGone(fmt.Errorf("table: %s: compact %s: merge: %w", t, what, err))
	}
	info := mres.Info
	s := Segment{Name: name, Interval: info.Interval.String(), Rows: int64(info.Rows), Bytes: info.Size, Footer: FooterChecksum(info)}.
		withClass(*e.Schema, c)
	if info.Interval.Start < within.Start || info.Interval.End > within.End {
		return s, fmt.Errorf("table: %s: compact %s: output %s has interval %s, outside the chunk", t, what, name, s.Interval)
	}
	if !mres.Schema.Equal(want) {
		return s, fmt.Errorf("%w: %s: compact %s: the output's schema differs from the table's columns with %s", ErrSchema, t, what, c)
	}
	return s, nil
}

// openInput is a segment already open as a merger.Input: the merge does not close it.
type openInput struct {
	name string
	seg  *columns.Segment
}

func (in openInput) Name() string { return in.name }

func (in openInput) Open(context.Context) (*columns.Segment, func() error, error) {
	return in.seg, func() error { return nil }, nil
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

// fmtTime formats ms since the epoch as the log writes times.
func fmtTime(ms int64) string { return time.UnixMilli(ms).UTC().Format(timeLayout) }
