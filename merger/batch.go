package merger

import (
	"slices"
	"sync/atomic"

	"github.com/writeout/writeout/internal/slicesx"
)

// batchRows is the number of output rows handed to the column writers at a time. Each batch
// wakes every writer goroutine, which then sleeps again when it is done before the next: on a
// virtual machine of two cores, batches of 4,096 rows spent a fifth of a 3,000,000-row merge in
// the scheduler (goroutines runnable with no core free). At 16,384 or 32,768 rows the peers'
// merges take 13-22% less time (the two alike); 16,384 costs about 2 MiB more memory than
// 4,096 (three batches of some 40 bytes a row, and the writers' buffers), 32,768 about 4.
var batchRows = defaultBatchRows

// defaultBatchRows is batchRows but in tests, which lower it to cross batches often.
const defaultBatchRows = 16384

// rawBatchBytes bounds the raw dimensions' bytes of a batch (rawBatchRows): the batches'
// memory is on the Go heap, and a merge of rows of many raw bytes (the wide table's payloads,
// some 700 bytes a row) allocated 37 MiB at 4,096 rows a batch, 70 at 16,384.
const rawBatchBytes = 2 << 20

// rawBatchRows returns the rows of a batch whose rows hold about rawPerRow[j] bytes of raw
// dimension j: batchRows, fewer where those bytes pass rawBatchBytes, but never fewer than
// 4,096 (tests' smaller batchRows excepted).
func rawBatchRows(rawPerRow []int) int {
	bytes := 0
	for _, n := range rawPerRow {
		bytes += n
	}
	if bytes == 0 {
		return batchRows
	}
	return min(batchRows, max(4096, rawBatchBytes/bytes))
}

// batch is a run of output rows on its way to the column writers: their keys, and for each
// the source rows it combines (one without rollup).
type batch struct {
	keys   keys
	first  int64 // the output row of the batch's first row
	refIn  []int32
	refRow []uint32
	refLo  []uint32 // the source rows of the ref's re-sorted group, [refLo, refHi); refHi 0: none
	refHi  []uint32
	refEnd []int32 // refEnd[r]: end of output row r's refs
	// run[r] > 0: output rows r..r+run[r]-1 each come from one source row, outside re-sorted
	// groups, and those rows are consecutive rows of one source (a copy, for the columns that
	// can take it in bulk); 0: row r combines several refs or lies in a re-sorted group.
	run []int32
	// runsSet: run was set as the rows were appended (appendRun, appendItems), which do not
	// join runs across their calls; else findRuns sets it when the batch is sent.
	runsSet bool
	// retired: inputs whose cursors were done when the batch was sent (those done by the
	// batch before it excepted): no later batch refers to them, so a column task may reuse the
	// memory it holds for them once it has written this batch.
	retired []int32
	// aggs: the pre-aggregated groups the batch's refs name (see preagg.go); a ref into one
	// has the group's rows as refLo, refHi and its slot as refRow.
	aggs []*groupAgg
	// steps: runs of rows that interleaving steps appended (see appendItems), one ref a row
	// (outside re-sorted groups), each taking its source rows from the ranges
	// stepRanges[lo:hi], one a source: a task may read each range in bulk, then pick.
	steps      []ilStep
	stepRanges []ilRange
	pending    atomic.Int32
}

// ilStep is rows [row, row+n) of a batch, from an interleaving step (see batch.steps), whose
// refs are [k, k+n).
type ilStep struct{ row, k, n, lo, hi int32 }

// ilRange is the n consecutive rows of input in from source row row.
type ilRange struct {
	in     int32
	row, n uint32
}

// appendRun appends rows [a, e) of cur's window (in key order, no re-sorted group) as output
// rows first.., one source row each, and maps their source rows through rm.
func (b *batch) appendRun(cur *cursor, a, e int, rm []uint32, first int64) {
	b.keys.appendRange(&cur.w, a, e)
	in := int32(cur.in)
	srcs := cur.w.src[a:e]
	k0 := len(b.refIn)
	n := len(srcs)
	// Grown once, then filled: one ref a row.
	refIn, refLo, refHi, refEnd := slicesx.Extend(&b.refIn, n), slicesx.Extend(&b.refLo, n), slicesx.Extend(&b.refHi, n), slicesx.Extend(&b.refEnd, n)
	for i := range srcs {
		refIn[i], refLo[i], refHi[i], refEnd[i] = in, 0, 0, int32(k0+i+1)
	}
	b.refRow = append(b.refRow, srcs...)
	if rm != nil {
		for i, src := range srcs {
			rm[src] = uint32(first) + uint32(i)
		}
	}
	if b.runsSet {
		run := slicesx.Extend(&b.run, n)
		if cur.order == nil { // a window of consecutive source rows
			for i := range run {
				run[i] = int32(n - i)
			}
			return
		}
		for i := n - 1; i >= 0; i-- {
			run[i] = 1
			if i+1 < n && srcs[i+1] == srcs[i]+1 {
				run[i] += run[i+1]
			}
		}
	}
}

// findRuns sets b.run (see batch) from the refs.
func (b *batch) findRuns() {
	n := b.keys.n
	b.run = slices.Grow(b.run[:0], n)[:n]
	for r := n - 1; r >= 0; r-- {
		k := int32(0)
		if r > 0 {
			k = b.refEnd[r-1]
		}
		if b.refEnd[r]-k != 1 || b.refHi[k] != 0 {
			b.run[r] = 0
			continue
		}
		b.run[r] = 1
		// Row r+1, when a run starts there, has the one ref k+1.
		if r+1 < n && b.run[r+1] > 0 && b.refIn[k+1] == b.refIn[k] && b.refRow[k+1] == b.refRow[k]+1 {
			b.run[r] += b.run[r+1]
		}
	}
}

func (b *batch) reset() {
	b.run, b.runsSet = b.run[:0], true
	b.keys.reset()
	b.refIn, b.refRow, b.refEnd = b.refIn[:0], b.refRow[:0], b.refEnd[:0]
	b.refLo, b.refHi = b.refLo[:0], b.refHi[:0]
	b.steps, b.stepRanges = b.steps[:0], b.stepRanges[:0]
	clear(b.aggs)
	b.aggs = b.aggs[:0]
}
