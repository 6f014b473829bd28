package merger

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/writeout/writeout/internal/colwrite"
	"github.com/writeout/writeout/internal/slicesx"
	"github.com/writeout/writeout/medium"
	"github.com/writeout/writeout/merger/internal/scratch"
)

// The bitmap index of a single-value dimension is built from the merged ids the rows phase
// wrote, not from the inputs' bitmaps: the dimension's task keeps every output row's id in an
// id log (a byte an id up to 256 values, two up to 65,536, else four), and the bitmaps phase
// sorts the rows by id (a counting sort) and writes each id's rows. That costs no decoding of
// the inputs' bitmaps, no row maps and no sort of runs, and the bitmaps agree with the ids by
// construction. Multi-value dimensions (several ids a row) keep rebuilding from the inputs'
// bitmaps (core.dimBitmaps).
//
// A merge's memory does not grow with its rows. A log keeps up to logMemIDs ids in memory;
// past them it sorts what it holds into runs of at most logRunIDs consecutive rows, each the
// rows of every id in id order, written to the merge's medium, and goes on with a smaller
// buffer. Its bitmaps are then written a range of ids at a time (ids whose rows fit
// logSortRows): every run is read on, sequentially, for the range's ids, and an id's rows from
// the runs laid one after the other. The runs hold consecutive rows, in order, so an id's rows
// come out in order, and the bytes written do not depend on the bounds.

// idLog holds a dimension's merged id per output row.
type idLog interface {
	// reserve, given first, sizes the log for rows ids (at most its memory bound).
	reserve(rows int)
	// populate faults the reserve's pages in on a goroutine of its own (scratch.Array.Populate),
	// for a merge that will fill the whole reserve: the column writer adding ids then takes no
	// page faults. free waits for it.
	populate()
	// add appends ids.
	add(ids []uint32) error
	// writeBitmaps writes the bitmap of every id below card to dw, in id order, with the
	// scratch memory of sc (kept for the next dimension).
	// cs, if not nil, may lend idle cores to the encoding (encodeIDs).
	writeBitmaps(ctx context.Context, dw colwrite.DimWriter, card int, cs *cores, done *atomic.Int64, sc *sortScratch) error
	// free releases the log's memory (a mapping, when it is large); a second call does
	// nothing. What it wrote to the medium goes with the medium.
	free() error
}

// newIDLog returns the id log for ids below card, writing its runs to the medium med returns,
// within the bounds b (zero fields: the package's), sorting them in memory sorts lends.
func newIDLog(card int, med func() (medium.Medium, error), b bounds, sorts *runSorts) idLog {
	mem, run := min(orDefault(b.logIDs, logMemIDs), logMemIDs), min(orDefault(b.logIDs, logRunIDs), logRunIDs)
	sort := min(orDefault(b.sortRows, logSortRows), logSortRows)
	switch {
	case card <= 1<<8:
		return &typedLog[uint8]{med: med, card: card, memIDs: mem, runMax: run, sortRows: sort, sorts: sorts}
	case card <= 1<<16:
		return &typedLog[uint16]{med: med, card: card, memIDs: mem, runMax: run, sortRows: sort, sorts: sorts}
	}
	return &typedLog[uint32]{med: med, card: card, memIDs: mem, runMax: run, sortRows: sort, sorts: sorts}
}

// sortScratch is a counting sort's memory, passed from one dimension to the next: a merge
// writes many dimensions' bitmaps, and each would otherwise allocate its own. rows is a
// scratch.Array: free it.
type sortScratch struct {
	counts, pos []uint32
	rows        scratch.Array[uint32]
	// sorts, when set, is where rows comes from and goes back to: the merge's runSorts, whose
	// arrays the logs' last runs have just given back (a merge of 30 M rows held 8 MiB more
	// at its end when the bitmaps' sorts took new memory beside them).
	sorts *runSorts
}

// grow makes rows hold at least n rows (their values unspecified).
func (sc *sortScratch) grow(n int) error {
	if len(sc.rows.S) >= n {
		return nil
	}
	if sc.sorts == nil {
		err := sc.rows.Free()
		sc.rows = scratch.New[uint32](n)
		return err
	}
	if len(sc.rows.S) > 0 {
		sc.sorts.put(sc.rows)
	}
	var err error
	sc.rows, err = sc.sorts.get(n)
	return err
}

// release gives rows back to sorts, or frees them.
func (sc *sortScratch) release() error {
	rows := sc.rows
	sc.rows = scratch.Array[uint32]{}
	if sc.sorts == nil || len(rows.S) == 0 {
		return rows.Free()
	}
	sc.sorts.put(rows)
	return nil
}

// typedLog keeps its last n ids in a scratch.Array (see merger/internal/scratch), and the ones
// before them in runs.
type typedLog[T uint8 | uint16 | uint32] struct {
	arr  scratch.Array[T]
	n    int
	med  func() (medium.Medium, error) // the runs'
	card int

	runs     []logRun
	runBytes logRun    // every run's rows and ids, back to back
	sealed   int       // the rows in runs
	counts   []uint32  // with runs: every id's rows in them
	runCount []uint32  // a run's sort: its ids' rows, then where each goes
	sorts    *runSorts // a run's sort: its rows by id
	ownSorts bool      // sorts is the log's own (none was given), freed with it
	runIDs   []byte    // a run's sort: its ids part
	// blockEnds is a run's sort, of a run of several blocks: where each id's rows end after
	// each block (appendRunIDs).
	blockEnds []uint32

	sortRows int // logSortRows, or less (the merge's bounds, or a test's)
	memIDs   int // logMemIDs, or less
	runMax   int // logRunIDs, or less
}

// logRun is a run of a log: the rows of every id present, by id, then by row. Its rows lie
// in [first, first+n); rows holds each one's low 16 bits (uint16: half the bytes of whole
// rows), and ids each id present (uvarints: the id's distance from the one before, the first's
// from 0, then its rows' count; then, in a run of more than 65,536 rows, which blocks of 65,536
// rows from first the id's rows lie in: appendRunIDs). A log's runs lie back to back in two
// Bytes of its own (a Bytes a run would cost the medium a buffer each: 300 runs a dimension at
// 300 M rows), each at [off, end) of them.
type logRun struct {
	rows, ids        medium.Bytes
	rowsOff, rowsEnd int64
	idsOff, idsEnd   int64
	first, n         uint32
}

// blockRows is the rows of a run's block: the rows whose offset from the run's first row has
// the same high bits above the 16 low bits a run keeps.
const blockRows = 1 << 16

// maxRunBlocks bounds a run's blocks: a run's ids say which of them hold an id's rows in a
// uvarint of one bit each.
const maxRunBlocks = 64

// blocks returns how many blocks of blockRows rows the run spans.
func (r *logRun) blocks() int { return int((int64(r.n) + blockRows - 1) / blockRows) }

// The bounds (variables for tests).
var (
	// logMemIDs bounds the ids a log keeps in memory before its first run (1 MiB to 4 MiB):
	// a merge of up to 1 Mi rows keeps its logs in memory, as it would without the bound.
	logMemIDs = 1 << 20
	// logRunIDs bounds a run's rows (the run's sort takes 2 MiB, or 4 MiB for a large
	// cardinality: sealRun) and the ids a log keeps in memory once it has runs (see runLen).
	logRunIDs = 1 << 20
	// logSortRows bounds the rows the bitmaps phase places at a time (2 MiB of rows a
	// goroutine), unless a single id holds more. A merge of up to 512 Ki rows sorts each log
	// in one pass. At 1 Mi rows (4 MiB) the 30 M-row contiguous hour rollup peaked at 67.2
	// MiB of RSS against 63.3 at 512 Ki, and the 3 M- and 30 M-row merges 3.5-4.4 MiB higher,
	// with walls the same (the 300 M merges' bitmaps steps too: bench/RESULTS.md).
	logSortRows = 1 << 19
)

// runReadBytes bounds the buffers a log's bitmaps phase reads its runs through (16 KiB a run
// at most, 4 KiB at least, and 1 KiB for a run's ids).
const runReadBytes = 2 << 20

// For tests: logRunsWritten counts the runs the logs wrote.
var logRunsWritten atomic.Int64

// orDefault returns v when it is positive (a test's bound), else def.
func orDefault(v, def int) int {
	if v > 0 {
		return v
	}
	return def
}

func (l *typedLog[T]) reserve(rows int) {
	_ = l.arr.Free() // on the Go heap or mapped, a log that is replaced is not in use
	l.arr, l.n = scratch.New[T](min(rows, orDefault(l.memIDs, logMemIDs))), 0
}

func (l *typedLog[T]) populate() { l.arr.Populate() }

func (l *typedLog[T]) add(ids []uint32) error {
	for len(ids) > 0 {
		if l.n == len(l.arr.S) {
			if l.runs == nil && l.n < orDefault(l.memIDs, logMemIDs) {
				// Past the reserve (reserve is given the rows in, which no merge exceeds): grow.
				_ = l.arr.Grow(min(l.n+len(ids), orDefault(l.memIDs, logMemIDs)), l.n) // munmap of a mapping of ours fails only on a bug
			} else if err := l.seal(); err != nil {
				return err
			}
		}
		k := min(len(ids), len(l.arr.S)-l.n)
		dst := l.arr.S[l.n : l.n+k]
		for i, id := range ids[:k] {
			dst[i] = T(id)
		}
		l.n += k
		ids = ids[k:]
	}
	return nil
}

// seal writes the ids in memory as runs and empties the memory, which becomes a run's rows
// (runLen) after the first.
func (l *typedLog[T]) seal() error {
	if l.counts == nil {
		l.counts = make([]uint32, l.card)
		l.runCount = make([]uint32, l.card)
	}
	for lo := 0; lo < l.n; {
		hi := min(lo+l.runLen(), l.n)
		if err := l.sealRun(l.arr.S[lo:hi]); err != nil {
			return err
		}
		lo = hi
	}
	l.n = 0
	if n := l.runLen(); len(l.arr.S) != n {
		// The array of the ids before the first run (logMemIDs) goes back to the system: no
		// later array of the merge takes a mapping of its size from the pool, where it would
		// stay resident (4 MiB of two logs, at 30 M rows).
		if err := l.arr.FreeToSystem(); err != nil {
			return err
		}
		l.arr = scratch.New[T](n)
	}
	return nil
}

// runLen returns the rows of the log's next run: a quarter of the bound (runMax) for its
// first 32 bounds of rows, a half for the next 32, then the bound. A run's sort takes 2 or 4
// bytes a row of it (up to 4 MiB at the bound), and the bitmaps step reads a log's runs at once,
// through a buffer each (4 KiB at least): runs of a quarter kept the hour rollup of 30 M rows
// 4-8 MiB smaller, and runs of the bound kept the 1,144 buffers of a 300 M-row merge's runs
// from adding 16 MiB to its peak.
func (l *typedLog[T]) runLen() int {
	runMax := orDefault(l.runMax, logRunIDs)
	switch {
	case l.sealed < 32*runMax:
		return max(runMax/4, 1)
	case l.sealed < 64*runMax:
		return max(runMax/2, 1)
	}
	return runMax
}

// sealRun sorts ids, the next rows of the log, into a run.
func (l *typedLog[T]) sealRun(ids []T) error {
	if len(ids) > maxRunBlocks*blockRows {
		return fmt.Errorf("merger: internal error: a run of %d rows (at most %d)", len(ids), maxRunBlocks*blockRows)
	}
	cnt := l.runCount
	clear(cnt)
	for r, id := range ids {
		if int(id) >= l.card {
			return fmt.Errorf("merger: internal error: row %d holds id %d, the cardinality is %d", l.sealed+r, id, l.card)
		}
		cnt[id]++
	}
	off := uint32(0)
	for v, c := range cnt {
		l.counts[v] += c
		cnt[v] = off
		off += c
	}
	if l.sorts == nil {
		l.sorts, l.ownSorts = new(runSorts), true
	}
	nb := (len(ids) + blockRows - 1) / blockRows
	// With blocks, the rows' blocks come from where each id's rows end after each block's
	// rows are placed (nb*card ends, kept by the log: at most an eighth of the run's rows, 512
	// KiB at 1 Mi rows); else from a scan of the rows placed whole (packRun). Against runs
	// of whole rows (4 bytes), a 10 M-row log's bitmaps took 10% less CPU at 200 values and
	// 10% more at 5,000 (BenchmarkIDLogBitmaps: the reader takes an id's rows a block at a
	// time), and 300 M-row merges 20% less time (bench/RESULTS.md).
	snap := nb > 1 && nb*l.card <= len(ids)/8
	var lows []uint16
	if nb == 1 || snap {
		sort, err := l.sorts.get((len(ids) + 1) / 2)
		if err != nil {
			return err
		}
		defer l.sorts.put(sort)
		lows = asUint16s(sort.S)[:len(ids)]
		if nb == 1 {
			placeLows(ids, lows, cnt)
			l.runIDs = appendRunIDs(l.runIDs[:0], cnt, 1, l.card)
		} else {
			l.blockEnds = slices.Grow(l.blockEnds[:0], nb*l.card)[:nb*l.card]
			for b := range nb {
				placeLows(ids[b*blockRows:min((b+1)*blockRows, len(ids))], lows, cnt)
				copy(l.blockEnds[b*l.card:(b+1)*l.card], cnt)
			}
			l.runIDs = appendRunIDs(l.runIDs[:0], l.blockEnds, nb, l.card)
		}
	} else {
		sort, err := l.sorts.get(len(ids))
		if err != nil {
			return err
		}
		defer l.sorts.put(sort)
		rows := sort.S[:len(ids)]
		for r, id := range ids {
			rows[cnt[id]] = uint32(r) // from the run's first row
			cnt[id]++
		}
		l.runIDs, lows = packRun(l.runIDs[:0], rows, cnt)
	}
	var err error
	rb := &l.runBytes
	if rb.rows == nil {
		var med medium.Medium
		if med, err = l.med(); err == nil {
			if rb.rows, err = med.NewBytes(); err == nil {
				rb.ids, err = med.NewBytes()
			}
		}
	}
	run := logRun{rows: rb.rows, ids: rb.ids, first: uint32(l.sealed), n: uint32(len(ids))}
	if err == nil {
		run.rowsOff, run.idsOff = rb.rows.Size(), rb.ids.Size()
		if _, err = rb.rows.Write(slicesx.AsBytes(lows)); err == nil {
			_, err = rb.ids.Write(l.runIDs)
		}
		run.rowsEnd, run.idsEnd = rb.rows.Size(), rb.ids.Size()
	}
	if err != nil {
		return fmt.Errorf("id log: run: %w", err)
	}
	l.runs = append(l.runs, run)
	l.sealed += len(ids)
	logRunsWritten.Add(1)
	return nil
}

// packRun writes a run of more than blockRows rows as it goes to the medium. rows holds the
// run's rows (offsets from its first row) by id, then by row, those of id v ending at ends[v].
// It appends each id present to ids (see appendRunIDs) and returns the rows' low 16 bits,
// written over rows' memory.
func packRun(ids []byte, rows, ends []uint32) ([]byte, []uint16) {
	// lows[i] takes bytes [2i, 2i+2) of rows' memory, which no row not read yet (rows[j],
	// bytes [4j, 4j+4), j >= i) shares.
	lows := asUint16s(rows)[:len(rows)]
	var counts [maxRunBlocks]uint32
	prev, lo := 0, uint32(0)
	for v, hi := range ends {
		if hi == lo {
			continue
		}
		ids, prev = appendID(ids, v, prev, hi-lo), v
		mask, k := narrowBlocks(rows[lo:hi], lows[lo:hi], &counts)
		ids = appendBlocks(ids, mask, counts[:k])
		lo = hi
	}
	return ids, lows
}

// appendRunIDs appends a run's ids (see logRun) to ids, from where each id's rows end after
// each of the run's nb blocks: ends[b*card+v] for id v after block b. With one block there
// are no blocks to say. The blocks of an id are a uvarint whose bit b is set when rows of the
// id lie in block b, then for each such block but the last, in order, a uvarint of its rows
// (the last holds the rest).
//
// A 300 M-row merge of three dimensions wrote 3.6 GB of runs with whole rows, as much as its
// output, all through the page cache; the low bits halve that, and the blocks cost a few bytes
// an id (a 5,000-value dimension's 1 Mi-row run: 18 bytes an id against 420 of its rows).
func appendRunIDs(ids []byte, ends []uint32, nb, card int) []byte {
	var counts [maxRunBlocks]uint32
	last := ends[(nb-1)*card : nb*card]
	prev, lo := 0, uint32(0)
	for v, hi := range last {
		if hi == lo {
			continue
		}
		ids, prev = appendID(ids, v, prev, hi-lo), v
		if nb > 1 {
			mask, k, e0 := uint64(0), 0, lo
			for b := range nb {
				if e := ends[b*card+v]; e > e0 {
					mask |= 1 << b
					counts[k], k, e0 = e-e0, k+1, e
				}
			}
			ids = appendBlocks(ids, mask, counts[:k-1])
		}
		lo = hi
	}
	return ids
}

// appendID appends id v, present in a run with n rows, after prev, the id before (0 for the
// first): see logRun.
func appendID(ids []byte, v, prev int, n uint32) []byte {
	ids = binary.AppendUvarint(ids, uint64(v-prev))
	return binary.AppendUvarint(ids, uint64(n))
}

// appendBlocks appends an id's blocks (see appendRunIDs): mask, then counts, every block's
// rows but the last's.
func appendBlocks(ids []byte, mask uint64, counts []uint32) []byte {
	ids = binary.AppendUvarint(ids, mask)
	for _, c := range counts {
		ids = binary.AppendUvarint(ids, uint64(c))
	}
	return ids
}

// placeLows puts the low 16 bits of each row of ids (a block's, or a whole run of one block)
// at cnt[id] of lows, advancing cnt. (Not inlined: see narrowBlocks.)
//
//go:noinline
func placeLows[T uint8 | uint16 | uint32](ids []T, lows []uint16, cnt []uint32) {
	for r, id := range ids {
		lows[cnt[id]] = uint16(r)
		cnt[id]++
	}
}

// narrowBlocks sets ls[i] to the low 16 bits of rs[i], rows in order (ls may share rs'
// memory as packRun's lows do), and returns the blocks they lie in (bit b: block b) and the
// rows of each block but the last, in counts[:k]. (Not inlined: in packRun its loop's values
// lived on the stack.)
//
//go:noinline
func narrowBlocks(rs []uint32, ls []uint16, counts *[maxRunBlocks]uint32) (mask uint64, k int) {
	ls = ls[:len(rs)]
	b, start := rs[0]/blockRows, 0
	for j, r := range rs {
		ls[j] = uint16(r)
		if r/blockRows != b {
			mask |= 1 << b
			counts[k], k = uint32(j-start), k+1
			b, start = r/blockRows, j
		}
	}
	return mask | 1<<b, k
}

func (l *typedLog[T]) free() error {
	for _, b := range []medium.Bytes{l.runBytes.rows, l.runBytes.ids} {
		if d, ok := b.(medium.Discarder); ok {
			_ = d.Discard() // a failed discard leaves the bytes to the medium's Close
		}
	}
	l.n, l.sealed, l.runs, l.counts, l.runCount, l.runIDs, l.blockEnds, l.runBytes = 0, 0, nil, nil, nil, nil, nil, logRun{}
	err := l.arr.Free()
	if l.ownSorts {
		err = errors.Join(err, l.sorts.close())
	}
	return err
}

func (l *typedLog[T]) writeBitmaps(ctx context.Context, dw colwrite.DimWriter, card int, cs *cores, done *atomic.Int64, sc *sortScratch) (err error) {
	var counts []uint32
	if l.runs != nil {
		if err := l.seal(); err != nil {
			return err
		}
		counts = l.counts
	} else {
		sc.counts = slices.Grow(sc.counts[:0], card)[:card]
		counts = sc.counts
		clear(counts)
		for r, id := range l.arr.S[:l.n] {
			if int(id) >= card {
				return fmt.Errorf("merger: internal error: row %d holds id %d, the cardinality is %d", r, id, card)
			}
			counts[id]++
		}
	}
	sc.pos = slices.Grow(sc.pos[:0], card)[:card]
	pos := sc.pos
	bound := orDefault(l.sortRows, logSortRows)
	total, most := 0, 0
	var ranges [][2]int // ids [lo, hi) whose rows fit the bound, or one id (a large one)
	for lo := 0; lo < card; {
		hi, rows := lo+1, int(counts[lo])
		for hi < card && rows+int(counts[hi]) <= bound {
			rows += int(counts[hi])
			hi++
		}
		ranges = append(ranges, [2]int{lo, hi})
		total += rows
		if rows <= bound || l.runs == nil {
			most = max(most, rows)
		}
		lo = hi
	}
	if err := sc.grow(max(min(total, bound), most)); err != nil {
		return err
	}
	var readers []runReader
	buf := runReadBytes / max(len(l.runs), 1) &^ (4<<10 - 1)
	buf = min(max(buf, 4<<10), 16<<10)
	// The runs' buffers, in one array outside the Go heap where it is large: on the heap, the
	// 1.5 MB of the 300 runs of a 300 M-row merge's dimension (two dimensions at once) let the
	// collector's goal grow by as much again.
	bufs := scratch.New[uint8](len(l.runs) * (buf + runIDsBuf))
	defer func() { err = errors.Join(err, bufs.Free()) }()
	for i, run := range l.runs {
		b := bufs.S[i*(buf+runIDsBuf) : (i+1)*(buf+runIDsBuf)]
		readers = append(readers, runReader{run: run, rowsBuf: b[:0:buf], idsBuf: b[buf : buf : buf+runIDsBuf]})
	}
	for _, rg := range ranges {
		lo, hi := rg[0], rg[1]
		if readers != nil && int(counts[lo]) > bound {
			// One id with more rows than the bound: its bitmap is written from the runs a
			// piece at a time (the runs hold its rows in order, one stretch each).
			if err := writeLargeID(dw, lo, readers, sc.rows.S); err != nil {
				return err
			}
			done.Add(1)
			continue
		}
		off := uint32(0)
		for v := lo; v < hi; v++ {
			pos[v] = off
			off += counts[v]
		}
		rows := sc.rows.S[:off]
		if readers != nil {
			for i := range readers {
				if err := readers[i].gather(hi, rows, pos); err != nil {
					return fmt.Errorf("id log: run %d: %w", i, err)
				}
			}
		} else {
			l.place(lo, hi, len(ranges) == 1, rows, pos)
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("merger: %w", err)
		}
		if err := encodeIDs(dw, rows, counts, lo, hi, cs, done); err != nil {
			return err
		}
	}
	return nil
}

// place puts the rows of the ids in memory that lie in [lo, hi) (all: every one) at pos[id].
func (l *typedLog[T]) place(lo, hi int, all bool, rows, pos []uint32) {
	log := l.arr.S[:l.n]
	if all {
		for r, id := range log {
			rows[pos[id]] = uint32(r)
			pos[id]++
		}
		return
	}
	for r, id := range log {
		if v := int(id); v >= lo && v < hi {
			rows[pos[v]] = uint32(r)
			pos[v]++
		}
	}
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
