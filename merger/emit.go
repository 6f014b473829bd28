package merger

import (
	"context"
	"fmt"
)

// emitter is the emit step of the k-way merge: it takes rows off the cursor heap in key
// order and appends them to batches of output rows (with rollup, a row of an equal key
// combines into the output row before it), which the pipeline hands to the column tasks.
//
// Every method that returns a bool returns false once the merge failed or was cancelled (the
// error is the pipeline's): the caller stops.
type emitter struct {
	ctx  context.Context
	c    *core
	h    *cursorHeap
	pl   *pipeline
	b    *batch // the batch being filled
	rows int    // a batch's rows
	// rollup: rows of equal keys combine; withMaps: the row maps (core.rowMaps) are kept.
	rollup, withMaps bool

	outRow   int64 // the output row last started (-1: none)
	done     int64 // source rows emitted
	total    int64 // source rows in all
	batchSeq int64 // b's number, for cursor.aggSeq

	// Each input's mapped pages are released once its cursor has read releaseRows more rows
	// (released[i]: where it stood at the last release): inputs that interleave row by row
	// are then released once per releaseRows of their own rows, not once each per
	// releaseRows of the merge's (a release is a madvise and a TLB flush).
	all          []*cursor // every cursor (the heap reorders and drops them)
	released     []int
	nextCheck    int64 // done at which checks next looks
	nextProgress int64 // done at which progress is next reported

	il interleave
}

// newEmitter returns the emit step over the heap of cursors all, writing batches of rows rows
// through pl.
func newEmitter(c *core, h *cursorHeap, all []*cursor, pl *pipeline, rows int, withMaps bool, total int64) *emitter {
	e := &emitter{ctx: c.ctx, c: c, h: h, pl: pl, rows: rows, rollup: c.out.Rollup, withMaps: withMaps,
		outRow: -1, total: total, batchSeq: 1, all: all, released: make([]int, len(c.srcs)),
		nextCheck: 4096, nextProgress: int64(c.opts.ProgressRows)}
	e.b = pl.take()
	e.b.first = 0
	return e
}

// run emits every row, sends the last batch and stops the pipeline; it returns the rows
// written.
func (e *emitter) run() (int64, error) {
	for e.h.len() > 0 && e.step() {
	}
	if e.pl.err() == nil && e.b.keys.n > 0 {
		e.pl.send(e.b)
	} else {
		e.pl.put(e.b)
	}
	if err := e.pl.stop(); err != nil {
		return 0, err
	}
	if err := e.ctx.Err(); err != nil {
		return 0, fmt.Errorf("merger: %w", err)
	}
	e.progress()
	return e.outRow + 1, nil
}

// step emits rows of the heap's cursors: a step of interleaving windows, or rows of the top
// cursor, or it loads the top cursor when it is lazy.
func (e *emitter) step() bool {
	// Inputs that interleave go a step of windows at a time (see interleave.go), and so do
	// the pages of slots of streamed groups that a rollup interleaves.
	if !e.withMaps && !interleaveOff {
		if !e.rollup && interleaves(e.h.cs) {
			if stepped, ok := e.interleaved(); !ok || stepped {
				return ok
			}
		} else if e.rollup && slotsInterleave(e.h.cs) {
			if stepped, ok := e.interleavedSlots(); !ok || stepped {
				return ok
			}
		}
	}
	cur := e.h.top()
	if cur.lazy {
		if err := e.h.loadTop(e.ctx); err != nil {
			e.pl.fail(err)
			return false
		}
		return true
	}
	return e.fromTop(cur)
}

// interleaved emits a step of the interleaving windows (see interleave.step); stepped: the
// step took rows.
func (e *emitter) interleaved() (stepped, ok bool) {
	items := e.il.step(e.h.cs)
	if len(items) == 0 {
		return false, true
	}
	for len(items) > 0 {
		if e.b.keys.n >= e.rows && !e.nextBatch() {
			return true, false
		}
		n := min(len(items), e.rows-e.b.keys.n)
		e.b.appendItems(&e.il, items[:n])
		items = items[n:]
		e.outRow += int64(n)
		e.done += int64(n)
	}
	return true, e.stepped()
}

// stepped moves the cursors of an interleaving step past the rows it took, retires those
// that are done and restores the heap.
func (e *emitter) stepped() bool {
	for x, cu := range e.il.cs {
		if n := e.il.take[x]; n > 0 {
			cu.cur += n - 1
			if err := cu.advance(e.ctx); err != nil {
				e.pl.fail(err)
				return false
			}
		}
	}
	for i := 0; i < e.h.len(); {
		if cu := e.h.cs[i]; cu.done() {
			if !e.retire(i) {
				return false
			}
			continue
		}
		i++
	}
	e.h.init()
	return e.checks()
}

// fromTop emits rows of cur, the loaded top cursor, without touching the heap while its head
// stays below the rival's (the least of the other cursors: inputs whose times do not overlap
// then cost one comparison a row, not a sift through the heap); then it restores the heap.
func (e *emitter) fromTop(cur *cursor) bool {
	rival, ri := e.h.rival()
	passed := false // cur's head no longer comes before the rival's
	for {
		// stopped: the run that cur emitted ended at a row that does not come before the
		// rival's head (no comparison needed for it).
		stopped := false
		if !e.rollup && cur.perm == nil && len(cur.ghi) == 0 {
			var ok bool
			if stopped, ok = e.emitRun(cur, rival); !ok {
				return false
			}
		} else if !e.emitHead(cur, rival) {
			return false
		}
		if !e.checks() {
			return false
		}
		if cur.cur+1 < cur.npos { // the next row of the window
			cur.cur++
			if !stopped && (rival == nil || cursorLess(cur, rival)) {
				continue
			}
			passed = true
			break
		}
		if err := cur.advance(e.ctx); err != nil {
			e.pl.fail(err)
			return false
		}
		break
	}
	if cur.done() && !e.retire(0) {
		return false
	}
	if passed {
		e.h.passed(ri)
	} else {
		e.h.fix()
	}
	return true
}

// emitRun emits, without rollup, cur's head row and the rows of the window after it that
// come before the rival's head, in bulk, as far as the batch has room; cur's head is left at
// the last row emitted. stopped: the run ended at a row that does not come before the rival.
func (e *emitter) emitRun(cur *cursor, rival *cursor) (stopped, ok bool) {
	if e.b.keys.n >= e.rows && !e.nextBatch() {
		return false, false
	}
	b := e.b
	end := cur.runEnd(rival, min(cur.npos, cur.cur+e.rows-b.keys.n))
	b.appendRun(cur, cur.cur, end, e.c.rowMaps[cur.in], e.outRow+1)
	e.outRow += int64(end - cur.cur)
	e.done += int64(end - cur.cur)
	cur.cur = end - 1
	return end < cur.npos && b.keys.n < e.rows, true // not the batch's room or the window's end
}

// emitHead emits cur's head row: it starts an output row or, with rollup, combines into the
// last one. With rollup it goes on with the rows after it that come before the rival's head;
// cur's head is left at the last row emitted.
func (e *emitter) emitHead(cur *cursor, rival *cursor) bool {
	i := cur.head()
	if !(e.rollup && e.b.keys.n > 0 && cmpRows(&cur.w, i, &e.b.keys, e.b.keys.n-1) == 0) {
		if !e.newRow(cur, i) {
			return false
		}
	}
	e.addRef(cur, i)
	e.done++
	if e.rollup && cur.same != nil && cur.cur+1 < cur.npos {
		return e.emitSame(cur, rival)
	}
	return true
}

// emitSame emits, with rollup, the rows of cur's window after its head that come before the
// rival's head: each combines into the row before it or starts an output row, as cursor.same
// says (no comparison with the rival or the batch a row).
func (e *emitter) emitSame(cur *cursor, rival *cursor) bool {
	end := cur.runEnd(rival, min(cur.npos, cur.cur+1+e.rows))
	for p := cur.cur + 1; p < end; p++ {
		// A pre-aggregated group's slots, each an output row, go over in bulk.
		if g, n := cur.slotSpan(p, end); n > 0 && !e.withMaps && !e.full() {
			n = min(n, e.rows-e.b.keys.n)
			e.done += e.b.appendSlots(cur, g, p, n, e.batchSeq) - int64(n) // as addRef counts
			e.outRow += int64(n)
			p += n - 1
			continue
		}
		i := cur.rowAt(p)
		if !cur.same[p] && !e.newRow(cur, i) {
			return false
		}
		e.addRef(cur, i)
	}
	e.done += int64(end - cur.cur - 1)
	cur.cur = end - 1
	return true
}

// nextBatch sends the batch, which is full, and takes the next.
func (e *emitter) nextBatch() bool {
	if e.pl.err() != nil {
		return false
	}
	if err := e.ctx.Err(); err != nil {
		e.pl.fail(fmt.Errorf("merger: %w", err))
		return false
	}
	e.pl.send(e.b)
	e.b = e.pl.take()
	e.b.first = e.outRow + 1
	e.batchSeq++
	return true
}

// newRow starts output row outRow+1 with window row i of cur, after sending the batch when it
// is full.
func (e *emitter) newRow(cur *cursor, i int) bool {
	if e.full() && !e.nextBatch() {
		return false
	}
	b := e.b
	b.keys.appendRow(&cur.w, i)
	b.refEnd = append(b.refEnd, 0)
	b.runsSet = false // refs come one by one: findRuns
	e.outRow++
	return true
}

// full reports whether the batch has its rows, or, with rollup, twice as many refs: output
// rows that combine many inputs' rows would otherwise make the batches in flight hold many
// times their rows' refs (20 bytes each; 8.6 MiB of them in a 300 M-row hour rollup of five
// overlapping inputs, of 46 MiB of Go heap).
func (e *emitter) full() bool {
	return e.b.keys.n >= e.rows || len(e.b.refIn) >= 2*e.rows
}

// addRef adds window row i of cur to the last output row.
func (e *emitter) addRef(cur *cursor, i int) {
	b := e.b
	src := cur.w.src[i]
	lo, hi := cur.groupRange(i)
	if hi > 0 && len(cur.aggs) > 0 {
		if g := cur.aggAt(i); g != nil {
			src = uint32(cur.slot[i])
			if cur.aggSeq != e.batchSeq || cur.aggLast != g {
				b.aggs = append(b.aggs, g)
				cur.aggSeq, cur.aggLast = e.batchSeq, g
			}
			e.done += int64(cur.weight[i]) - 1 // the ref stands for weight rows
		}
	}
	b.refIn = append(b.refIn, int32(cur.in))
	b.refRow = append(b.refRow, src)
	b.refLo = append(b.refLo, lo)
	b.refHi = append(b.refHi, hi)
	b.refEnd[b.keys.n-1] = int32(len(b.refIn))
	if e.withMaps {
		e.c.rowMaps[cur.in][src] = uint32(e.outRow)
	}
}

// checks, every 4,096 rows or so, looks for cancellation and releases the pages of the
// inputs read since their last release; and reports progress.
func (e *emitter) checks() bool {
	if e.done >= e.nextCheck {
		e.nextCheck = e.done + 4096
		if err := e.ctx.Err(); err != nil {
			e.pl.fail(fmt.Errorf("merger: %w", err))
			return false
		}
		c := e.c
		for _, cu := range e.all {
			if cu.next-e.released[cu.in] >= releaseRows {
				e.released[cu.in] = cu.next
				if err := releaseInputs(c.srcs[cu.in:cu.in+1], c.names[cu.in:cu.in+1]); err != nil {
					e.pl.fail(err)
					return false
				}
			}
		}
	}
	if e.done >= e.nextProgress {
		e.progress()
		e.nextProgress += int64(e.c.opts.ProgressRows)
	}
	return true
}

// retire takes the cursor at i of the heap, which is done, out of it, and releases its
// input's pages (not read again before the bitmaps).
func (e *emitter) retire(i int) bool {
	cur := e.h.remove(i)
	e.pl.retire(cur.in)
	c := e.c
	if err := releaseInputs(c.srcs[cur.in:cur.in+1], c.names[cur.in:cur.in+1]); err != nil {
		e.pl.fail(err)
		return false
	}
	return true
}

// progress reports the rows emitted so far.
func (e *emitter) progress() {
	c := e.c
	if c.opts.Progress != nil {
		c.opts.Progress(Progress{Phase: c.phase, Phases: c.phases, Step: StepRows, RowsDone: e.done, RowsTotal: e.total})
	}
}
