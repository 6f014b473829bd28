package merger

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/writeout/writeout/internal/colwrite"
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
	// populate faults the reserve's pages in on a goroutine of its own (scratch.Array.Populate),
	// for a merge that will fill the whole reserve: the column writer adding ids then takes no
	// page faults. free waits for it.
	populate()
	add(ids []uint32)
	// writeBitmaps writes the bitmap of every id below card to dw, in id order, with the
	// scratch memory of sc (kept for the next dimension).
	// cs, if not nil, may lend idle cores to the encoding (encodeIDs).
	writeBitmaps(ctx context.Context, dw colwrite.DimWriter, card int, cs *cores, done *atomic.Int64, sc *sortScratch) error
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

func (l *typedLog[T]) populate() { l.arr.Populate() }

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

func (l *typedLog[T]) writeBitmaps(ctx context.Context, dw colwrite.DimWriter, card int, cs *cores, done *atomic.Int64, sc *sortScratch) error {
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
		if err := encodeIDs(dw, rows, counts, lo, hi, cs, done); err != nil {
			return err
		}
		lo = hi
	}
	return nil
}

// cores tracks the goroutines writing a merge's bitmaps, so that the encoding of a dimension's
// bitmaps can hand ids to a core that fell idle (encodeIDs). The bitmaps of a merge's
// dimensions are written one dimension a goroutine: without it, the goroutine of the last one
// works alone while the others wait.
type cores struct {
	par     int32
	busy    atomic.Int32 // goroutines writing bitmaps
	pending atomic.Int32 // dimensions not started
}

// idle returns how many cores no goroutine writes bitmaps on, once every dimension has started.
func (c *cores) idle() int {
	if c == nil || c.pending.Load() > 0 {
		return 0
	}
	return max(0, int(c.par-c.busy.Load()))
}

// splitRows is the fewest rows of bitmaps encodeIDs hands to another goroutine.
var splitRows = 1 << 16

// encodeIDs writes the bitmaps of ids [lo, hi), whose rows (counts[v] of id v) lie back to
// back in rows, sorted by id. Every 64 ids it asks cs whether cores fell idle; if k did, it
// cuts the ids left into k+1 parts of about as many rows, keeps the first and starts a
// goroutine for each other, which encodes its bitmaps apart (colwrite.BitmapRun); the parts
// are written in id order when this goroutine is done with its own.
func encodeIDs(dw colwrite.DimWriter, rows, counts []uint32, lo, hi int, cs *cores, done *atomic.Int64) (err error) {
	var helpers []split
	defer func() {
		// Every helper reads rows: wait for them all, on every path.
		slices.SortFunc(helpers, func(a, b split) int { return a.first - b.first })
		for _, h := range helpers {
			herr := <-h.err
			if err == nil {
				err = herr
			}
			if err == nil {
				err = dw.WriteBitmapRun(h.run)
			}
		}
	}()
	off, end := uint32(0), hi
	for v := lo; v < end; v++ {
		if (v-lo)&63 == 63 {
			if k := cs.idle(); k > 0 {
				hs, err := splitIDs(dw, rows, counts, v, end, off, k, cs, done)
				helpers = append(helpers, hs...)
				if err != nil {
					return err
				}
				if len(hs) > 0 {
					end = hs[0].first
				}
			}
		}
		n := counts[v]
		if err := dw.WriteBitmapRows(uint32(v), rows[off:off+n]); err != nil {
			return err
		}
		off += n
		if (v-lo)&255 == 255 {
			done.Add(256)
		}
	}
	done.Add(int64((end - lo) & 255))
	return nil
}

// split is a part of the ids encodeIDs handed to a goroutine.
type split struct {
	first int
	run   colwrite.BitmapRun
	err   chan error
}

// splitIDs cuts ids [v, end), whose rows start at off in rows, into up to k+1 parts of about
// as many rows and starts a goroutine encoding each part but the first. It returns them in id
// order; none when the ids are too few for it to pay.
func splitIDs(dw colwrite.DimWriter, rows, counts []uint32, v, end int, off uint32, k int, cs *cores, done *atomic.Int64) ([]split, error) {
	left := 0
	for u := v; u < end; u++ {
		left += int(counts[u])
	}
	k = min(k, end-v-1, left/splitRows)
	if k <= 0 {
		return nil, nil
	}
	var parts []split
	var starts []uint32
	sum, at := 0, off
	for u, j := v, 1; u < end && j <= k; u++ {
		if sum >= j*left/(k+1) && u > v {
			parts, starts = append(parts, split{first: u}), append(starts, at)
			j++
		}
		sum += int(counts[u])
		at += counts[u]
	}
	for i := range parts {
		last := end
		if i+1 < len(parts) {
			last = parts[i+1].first
		}
		r, err := dw.NewBitmapRun(uint32(parts[i].first))
		if err != nil {
			return parts[:i], err
		}
		parts[i].run, parts[i].err = r, make(chan error, 1)
		cs.busy.Add(1)
		go func(p split, a, e int, at uint32) {
			var err error
			for u := a; u < e && err == nil; u++ {
				n := counts[u]
				err = p.run.AddRows(rows[at : at+n])
				at += n
			}
			if err == nil {
				done.Add(int64(e - a))
			}
			// Not busy once the result is handed over: the owner may return at once.
			cs.busy.Add(-1)
			p.err <- err
		}(parts[i], parts[i].first, last, starts[i])
	}
	return parts, nil
}
