package merger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/medium"
	"github.com/writeout/writeout/merger/internal/source"
)

// Persisting a Builder: its rows written as one segment, through the merge's column tasks.

// PersistOptions configure Builder.Persist: the subset of Options that applies to writing one
// segment from the builder's rows (whose schema, rollup and granularity are the builder's).
type PersistOptions struct {
	Medium      medium.Medium
	Durability  medium.Durability
	Replace     bool
	Parallelism int
	Progress    func(Progress)
	Compression columns.Compression
	ChunkRows   int
	// InputNames name the segments of PersistAfter in error messages (see Options.InputNames).
	InputNames []string
	// Runs marks ingestion's intermediate segments. Persist then writes no bitmap index for
	// single-value dimensions: a merge builds their bitmaps from the merged ids, never from
	// its inputs' bitmaps, so those of a segment only merged again are never read (multi-value
	// dimensions keep theirs: a merge reads them). PersistAfter then takes each dimension's
	// bitmap index from the builder's schema, where the union of the schemas would drop the
	// indexes its runs lack. A segment persisted with Runs is for merging, not for queries.
	Runs bool
}

// runSchema is the schema of a run: s without the bitmap indexes of single-value dictionary
// dimensions.
func runSchema(s columns.Schema) columns.Schema {
	s = s.Clone()
	for i, d := range s.Dimensions {
		if !d.Raw && !d.MultiValue {
			s.Dimensions[i].NoBitmapIndex = true
		}
	}
	return s
}

// Persist writes the builder's rows as a segment at dst, through the merge's write path (the
// builder is its one input): rows sorted by (time, dimensions), dictionaries sorted, bitmaps
// rebuilt one value at a time, parts staged in the medium and published per Durability. The
// rows stay in the builder (Reset drops them); Add waits while Persist runs, queries do not.
func (b *Builder) Persist(ctx context.Context, dst string, opts PersistOptions) (res Result, err error) {
	start := time.Now()
	mo := Options{Medium: opts.Medium, Durability: opts.Durability, Replace: opts.Replace, Parallelism: opts.Parallelism,
		Progress: opts.Progress, Compression: opts.Compression, ChunkRows: opts.ChunkRows,
		Rollup: b.schema.Rollup, Granularity: b.schema.Granularity}
	if err := mo.ensureDefaults(); err != nil {
		return Result{}, err
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return Result{}, fmt.Errorf("merger: builder: persist: %w", medium.ErrClosed)
	}
	src := b.persistView()
	defer func() {
		if rerr := src.release(); rerr != nil {
			err = errors.Join(err, rerr)
		}
	}()
	out := b.schema
	if opts.Runs {
		out = runSchema(out)
	}
	return mergeSources(ctx, []level{{name: "builder", rows: src.Rows(), src: src}}, out, target{path: dst}, mo, start)
}

// PersistAfter is Persist merging segments before the builder's rows: the segments' rows come
// first, in order, then the builder's, as if the builder's rows had been persisted as one
// more segment and merged with Merge after them (same rollup, same bytes), without writing
// and reading back that segment. Ingestion merges its runs with the rows still in memory
// this way. The segments' checksums are verified as Merge does them (before the output is
// published); the segments stay open and the caller's.
func (b *Builder) PersistAfter(ctx context.Context, before []*columns.Segment, dst string, opts PersistOptions) (res Result, err error) {
	start := time.Now()
	mo := Options{Medium: opts.Medium, Durability: opts.Durability, Replace: opts.Replace, Parallelism: opts.Parallelism,
		Progress: opts.Progress, Compression: opts.Compression, ChunkRows: opts.ChunkRows,
		Rollup: b.schema.Rollup, Granularity: b.schema.Granularity, InputNames: opts.InputNames}
	if err := mo.ensureDefaults(); err != nil {
		return Result{}, err
	}
	srcs := make([]source.Source, 0, len(before)+1)
	schemas := make([]columns.Schema, 0, len(before)+1)
	names := make([]string, 0, len(before)+1)
	for i, in := range before {
		if in == nil {
			return Result{}, fmt.Errorf("%w: input %d is nil", ErrInvalid, i)
		}
		srcs = append(srcs, source.OfSegment(in))
		schemas = append(schemas, in.Schema())
		names = append(names, mo.inputNameOf(i, in))
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return Result{}, fmt.Errorf("merger: builder: persist: %w", medium.ErrClosed)
	}
	view := b.persistView()
	defer func() {
		if rerr := view.release(); rerr != nil {
			err = errors.Join(err, rerr)
		}
	}()
	srcs = append(srcs, view)
	schemas = append(schemas, b.schema)
	names = append(names, "builder")
	out, err := outputSchema(schemas, func(i int) string { return names[i] }, nil, mo.Rollup, mo.Granularity)
	if err != nil {
		return Result{}, err
	}
	if opts.Runs {
		for i, d := range out.Dimensions {
			if k := b.schema.Dimension(d.Name); k >= 0 {
				out.Dimensions[i].NoBitmapIndex = b.schema.Dimensions[k].NoBitmapIndex
			}
		}
	}
	if opts.Runs && len(srcs) >= 2 {
		// Runs are merged as they were planned (ingestion counts them against its own
		// MemoryLimit), in one phase: not in phases of what Options.MemoryLimit would pick.
		mo.MaxFanIn = len(srcs)
	}
	ls := make([]level, len(srcs))
	for i, src := range srcs {
		// The segments' checksums are checked as Merge's inputs' are; the builder's rows have none.
		ls[i] = level{name: names[i], rows: src.Rows(), verify: i < len(before), src: src}
	}
	defer func() { _ = dropLevels(ls) }()
	return mergeSources(ctx, ls, out, target{path: dst}, mo, start)
}
