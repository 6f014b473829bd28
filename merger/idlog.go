package merger

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/merger/internal/scratch"
)

// The bitmap index of a single-value dimension is built from the merged ids the rows phase
// wrote, not from the inputs' bitmaps: the dimension's task keeps every output row's id in an
// id log (a byte an id up to 256 values, two up to 65,536, else four), and the bitmaps phase
// sorts the rows by id (a counting sort, in ranges of ids whose rows fit a bounded buffer) and
// writes each id's rows. That costs no decoding of the inputs' bitmaps, no row maps and no
// sort of runs, and the bitmaps agree with the ids by construction. Multi-value dimensions
// (several ids a row) keep rebuilding from the inputs' bitmaps (core.dimBitmaps).

// idLog holds a dimension's merged id per output row.
type idLog interface {
	// add appends ids; reserve, given first, sizes the log for rows ids.
	reserve(rows int)
	add(ids []uint32)
	// writeBitmaps writes the bitmap of every id below card to dw, in id order, with the
	// scratch memory of sc (kept for the next dimension).
	writeBitmaps(ctx context.Context, dw *columns.DimWriter, card int, done *atomic.Int64, sc *sortScratch) error
	// free releases the log's memory (a mapping, when it is large); a second call does nothing.
	free() error
}

// newIDLog returns the id log for ids below card.
func newIDLog(card int) idLog {
	switch {
	case card <= 1<<8:
		return &typedLog[uint8]{}
	case card <= 1<<16:
		return &typedLog[uint16]{}
	}
	return &typedLog[uint32]{}
}

// sortScratch is a counting sort's memory, passed from one dimension to the next: a merge
// writes many dimensions' bitmaps, and each would otherwise allocate its own. rows is a
// scratch.Array: free it.
type sortScratch struct {
	counts, pos []uint32
	rows        scratch.Array[uint32]
}

// typedLog keeps its ids in a scratch.Array (see merger/internal/scratch): n of them so far.
type typedLog[T uint8 | uint16 | uint32] struct {
	arr      scratch.Array[T]
	n        int
	sortRows int // logSortRows, but for tests
}

func (l *typedLog[T]) reserve(rows int) {
	_ = l.arr.Free() // on the Go heap or mapped, a log that is replaced is not in use
	l.arr, l.n = scratch.New[T](rows), 0
}

func (l *typedLog[T]) add(ids []uint32) {
	// Past the reserve (reserve is given the rows in, which no merge exceeds): grow.
	_ = l.arr.Grow(l.n+len(ids), l.n) // munmap of a mapping of ours fails only on a bug
	dst := l.arr.S[l.n : l.n+len(ids)]
	for i, id := range ids {
		dst[i] = T(id)
	}
	l.n += len(ids)
}

func (l *typedLog[T]) free() error {
	l.n = 0
	return l.arr.Free()
}

// logSortRows bounds the rows a counting-sort pass places at a time (16 MiB of rows), unless
// a single id holds more: past it, each pass reads the whole log for the ids of its range. A
// merge of up to 4 Mi rows sorts each log in one pass (at 1 Mi, the peers' 3,000,000-row
// merge read each log three times: 40% of its bitmaps phase).
const logSortRows = 1 << 22

func (l *typedLog[T]) writeBitmaps(ctx context.Context, dw *columns.DimWriter, card int, done *atomic.Int64, sc *sortScratch) error {
	log := l.arr.S[:l.n]
	sc.counts = slices.Grow(sc.counts[:0], card)[:card]
	counts := sc.counts
	clear(counts)
	for r, id := range log {
		if int(id) >= card {
			return fmt.Errorf("merger: internal error: row %d holds id %d, the cardinality is %d", r, id, card)
		}
		counts[id]++
	}
	sc.pos = slices.Grow(sc.pos[:0], card)[:card]
	pos := sc.pos
	bound := l.sortRows
	if bound <= 0 {
		bound = logSortRows
	}
	if len(sc.rows.S) < min(len(log), bound) {
		if err := sc.rows.Free(); err != nil {
			return err
		}
		sc.rows = scratch.New[uint32](min(len(log), bound))
	}
	rows := sc.rows.S[:min(len(log), bound)]
	for lo := 0; lo < card; {
		// Ids [lo, hi): as many as fit rows, at least one.
		hi, total := lo+1, int(counts[lo])
		for hi < card && total+int(counts[hi]) <= len(rows) {
			total += int(counts[hi])
			hi++
		}
		if total > len(rows) {
			if err := sc.rows.Free(); err != nil {
				return err
			}
			sc.rows = scratch.New[uint32](total)
			rows = sc.rows.S
		}
		off := uint32(0)
		for v := lo; v < hi; v++ {
			pos[v] = off
			off += counts[v]
		}
		if lo == 0 && hi == card {
			for r, id := range log {
				rows[pos[id]] = uint32(r)
				pos[id]++
			}
		} else {
			for r, id := range log {
				if v := int(id); v >= lo && v < hi {
					rows[pos[v]] = uint32(r)
					pos[v]++
				}
			}
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("merger: %w", err)
		}
		off = 0
		for v := lo; v < hi; v++ {
			n := counts[v]
			if err := dw.WriteBitmapRows(uint32(v), rows[off:off+n]); err != nil {
				return err
			}
			off += n
		}
		done.Add(int64(hi - lo))
		lo = hi
	}
	return nil
}
