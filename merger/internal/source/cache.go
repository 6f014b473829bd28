package source

import (
	"fmt"

	"github.com/writeout/writeout/columns"
)

// Chunk caches: a reader by row that decodes each chunk once when rows come in order.

type (
	LongCache   = ChunkCache[int64]
	DoubleCache = ChunkCache[float64]
)

// ChunkCache reads a long or double column by row, keeping the chunk it read last.
type ChunkCache[T columns.Number] struct {
	C     Chunker[T]
	first int
	vals  []T
	// bound, when bounded, is the magnitude bound of vals' chunk (see Bound).
	bound   uint64
	bounded bool
}

// Bounder is a Chunker that bounds the magnitudes of the values of the chunk it returned last
// (columns.Cursor.Bound).
type Bounder interface {
	Bound() (m uint64, ok bool)
}

// Bound returns m with |v| <= m for every value the cache holds (the values Range returned
// last), when its Chunker is a Bounder that gives one; ok is false otherwise.
func (l *ChunkCache[T]) Bound() (m uint64, ok bool) { return l.bound, l.bounded }

// At returns the value of row.
func (l *ChunkCache[T]) At(row int) (T, error) {
	if k := row - l.first; k >= 0 && k < len(l.vals) {
		return l.vals[k], nil
	}
	first, vals, err := l.C.Chunk(row)
	if err != nil {
		return 0, err
	}
	if k := row - first; k < 0 || k >= len(vals) {
		return 0, fmt.Errorf("merger: chunk at %d does not hold row %d: %w", first, row, columns.ErrCorrupt)
	}
	l.first, l.vals = first, vals
	l.bounded = false
	if b, ok := l.C.(Bounder); ok {
		l.bound, l.bounded = b.Bound()
	}
	return vals[row-first], nil
}

// Cached returns the value of row when the chunk read last holds it.
func (l *ChunkCache[T]) Cached(row int) (T, bool) {
	if k := row - l.first; k >= 0 && k < len(l.vals) {
		return l.vals[k], true
	}
	var zero T
	return zero, false
}

// Range returns the values of rows [row, row+n), or of the first of them, up to the end of
// the chunk holding row: at least one value. The slice is the cache's: valid until the next
// call.
func (l *ChunkCache[T]) Range(row, n int) ([]T, error) {
	if k := row - l.first; k < 0 || k >= len(l.vals) {
		if _, err := l.At(row); err != nil {
			return nil, err
		}
	}
	k := row - l.first
	return l.vals[k:min(len(l.vals), k+n)], nil
}

// Gather reads the values of rows (increasing) into out.
func (l *ChunkCache[T]) Gather(rows []uint32, out []T) error {
	for i := 0; i < len(rows); {
		row := int(rows[i])
		if k := row - l.first; k < 0 || k >= len(l.vals) {
			if _, err := l.At(row); err != nil {
				return err
			}
		}
		first, vals := l.first, l.vals
		end := first + len(vals)
		for ; i < len(rows) && int(rows[i]) < end && int(rows[i]) >= first; i++ {
			out[i] = vals[int(rows[i])-first]
		}
	}
	return nil
}

// IDCache reads a dictionary dimension's ids by row, keeping the chunk it read last.
type IDCache struct {
	C     IDChunker
	first int
	n     int
	ids   []uint32
	offs  []uint32
}

// At returns the ids of row: one for a single-value chunk.
func (l *IDCache) At(row int) ([]uint32, error) {
	k := row - l.first
	if k < 0 || k >= l.n {
		first, ids, offs, err := l.C.Chunk(row)
		if err != nil {
			return nil, err
		}
		n := len(ids)
		if offs != nil {
			n = len(offs) - 1
		}
		if k = row - first; k < 0 || k >= n {
			return nil, fmt.Errorf("merger: chunk at %d does not hold row %d: %w", first, row, columns.ErrCorrupt)
		}
		l.first, l.n, l.ids, l.offs = first, n, ids, offs
	}
	if l.offs == nil {
		return l.ids[k : k+1], nil
	}
	return l.ids[l.offs[k]:l.offs[k+1]], nil
}
