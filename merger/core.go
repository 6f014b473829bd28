package merger

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/internal/slicesx"
	"github.com/writeout/writeout/medium"
	"github.com/writeout/writeout/merger/internal/parallel"
	"github.com/writeout/writeout/merger/internal/source"
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

// phaseStats is what one merge of sources into one segment reports.
type phaseStats struct {
	rowsIn, rowsOut                      int64
	dictionaries, rows, bitmaps, publish time.Duration
	info                                 columns.Info
}

// core merges sources into one segment published at dst. It is the one write path of Merge
// (every phase) and of Builder.Persist.
type core struct {
	ctx     context.Context
	srcs    []source.Source
	names   []string
	out     columns.Schema
	opts    *Options
	phase   int
	phases  int
	kinds   []dimKind
	dims    [][]source.DimSource // [output dim][source]
	maps    [][][]uint32         // [output dim][source] source id -> merged id
	card    []int                // [output dim] merged cardinality (dictionary dims)
	dws     []*columns.DimWriter
	rowMaps [][]uint32 // [source][source row] -> output row
	rowsIn  int64
	rowsOut int64
	// The check that the bitmap index written agrees with the ids written (see pairHash):
	// seed keys the hashes; dimTasks[d] sums them over the rows' ids of dimension d.
	seed     uint64
	dimTasks []*dimTask
}

func runCore(ctx context.Context, srcs []source.Source, names []string, out columns.Schema, dst target, med medium.Medium,
	pub columns.PublishOptions, opts *Options, phase, phases int) (st phaseStats, err error) {
	c := &core{ctx: ctx, srcs: srcs, names: names, out: out, opts: opts, phase: phase, phases: phases,
		seed: rand.Uint64()}
	for _, s := range srcs {
		st.rowsIn += int64(s.Rows())
	}
	c.rowsIn = st.rowsIn
	if st.rowsIn > math.MaxUint32 {
		return st, fmt.Errorf("%w: %d rows, a segment holds at most %d", ErrInvalid, st.rowsIn, uint32(math.MaxUint32))
	}
	w, err := columns.NewWriter(out, columns.WriterOptions{
		Medium:      med,
		Compression: opts.Compression,
		ChunkRows:   opts.ChunkRows,
	})
	if err != nil {
		return st, fmt.Errorf("merger: %w", err)
	}
	defer func() {
		if err != nil {
			_ = w.Abort()
		}
	}()
	defer func() {
		for _, t := range c.dimTasks {
			if t != nil && t.log != nil {
				err = errors.Join(err, t.log.free()) // freed already, unless the merge failed
			}
		}
	}()
	t0 := time.Now()
	if err := c.dictionaries(w); err != nil {
		return st, err
	}
	t1 := time.Now()
	if err := releaseInputs(c.srcs, c.names); err != nil {
		return st, err
	}
	if err := c.mergeRows(w); err != nil {
		return st, err
	}
	t2 := time.Now()
	if err := releaseInputs(c.srcs, c.names); err != nil {
		return st, err
	}
	if err := c.bitmaps(); err != nil {
		return st, err
	}
	if err := releaseInputs(c.srcs, c.names); err != nil {
		return st, err
	}
	t3 := time.Now()
	if phase == phases && opts.verifyInputs != nil {
		// The inputs' parts the merge did not read (Options.SkipChecksums), before anything is
		// published (its time counts as the publication's).
		if err := opts.verifyInputs(ctx); err != nil {
			return st, err
		}
	}
	if err := ctx.Err(); err != nil {
		return st, fmt.Errorf("merger: %w", err)
	}
	info, err := publish(ctx, w, dst, pub)
	if err != nil {
		return st, fmt.Errorf("merger: publish %s: %w", dst.name(), err)
	}
	t4 := time.Now()
	st.rowsOut = c.rowsOut
	st.dictionaries, st.rows, st.bitmaps, st.publish = t1.Sub(t0), t2.Sub(t1), t3.Sub(t2), t4.Sub(t3)
	st.info = info
	return st, nil
}

// publish finishes w into dst: a file published per pub, or dst.out, which receives the
// segment streamed out of the stages.
func publish(ctx context.Context, w *columns.Writer, dst target, pub columns.PublishOptions) (columns.Info, error) {
	if dst.out == nil {
		return w.FinishContext(ctx, dst.path, pub)
	}
	var info columns.Info
	err := dst.out.Publish(ctx, func(out io.Writer) error {
		var err error
		info, err = w.FinishTo(out)
		return err
	})
	if err != nil {
		return columns.Info{}, err
	}
	info.Path = dst.name()
	return info, nil
}

// dictionaries merges every dictionary dimension's dictionaries into its writer.
func (c *core) dictionaries(w *columns.Writer) error {
	n := len(c.out.Dimensions)
	c.kinds = make([]dimKind, n)
	c.dims = make([][]source.DimSource, n)
	c.maps = make([][][]uint32, n)
	c.card = make([]int, n)
	c.dws = make([]*columns.DimWriter, n)
	var todo []int
	for d, dim := range c.out.Dimensions {
		switch {
		case dim.Raw:
			c.kinds[d] = kindRaw
			continue
		case dim.MultiValue:
			c.kinds[d] = kindMulti
		default:
			c.kinds[d] = kindSingle
		}
		dw, err := w.Dim(dim.Name)
		if err != nil {
			return fmt.Errorf("merger: %w", err)
		}
		c.dws[d] = dw
		c.dims[d] = make([]source.DimSource, len(c.srcs))
		for i, s := range c.srcs {
			if c.dims[d][i], err = s.Dim(dim.Name); err != nil {
				return fmt.Errorf("merger: %s: %w", c.names[i], err)
			}
		}
		todo = append(todo, d)
	}
	return parallel.Run(len(todo), c.opts.Parallelism, func(k int) error {
		d := todo[k]
		withNull := false
		for i, ds := range c.dims[d] {
			if ds == nil && c.srcs[i].Rows() > 0 || ds != nil && ds.HasNull() {
				withNull = true
			}
		}
		maps, card, err := mergeDictionaries(c.ctx, c.dims[d], c.names, withNull, c.dws[d])
		if err != nil {
			return fmt.Errorf("merger: dimension %q: dictionary: %w", c.out.Dimensions[d].Name, err)
		}
		c.maps[d], c.card[d] = maps, card
		return nil
	})
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
	aggs    []*groupAgg
	pending atomic.Int32
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
	clear(b.aggs)
	b.aggs = b.aggs[:0]
}

// A colTask appends one column's values for a batch of output rows.
type colTask interface {
	write(b *batch) error
}

// mergeRows merges the sources' rows k-way and writes every column but the bitmaps.
func (c *core) mergeRows(w *columns.Writer) error {
	ctx := c.ctx
	// The row maps serve the bitmaps rebuilt from the inputs': multi-value dimensions'.
	c.rowMaps = make([][]uint32, len(c.srcs))
	withMaps := false
	for d, dim := range c.out.Dimensions {
		withMaps = withMaps || c.kinds[d] == kindMulti && !dim.NoBitmapIndex
	}
	var pre *preAgg
	if c.out.Rollup {
		pre = &preAgg{pool: make(chan []int32, 8)}
		for _, k := range c.kinds {
			if k != kindSingle {
				pre = nil
				break
			}
		}
		for _, m := range c.out.Metrics {
			if pre == nil {
				break
			}
			if m.Type != columns.MetricLong {
				pre = nil
				break
			}
			pre.users++
		}
	}
	var total int64
	cursors := make([]*cursor, 0, len(c.srcs))
	for i, s := range c.srcs {
		n := s.Rows()
		total += int64(n)
		if withMaps {
			c.rowMaps[i] = make([]uint32, n)
		}
		if n == 0 {
			continue
		}
		cur := &cursor{in: i, name: c.names[i], n: n, order: s.TimeOrder(), gran: c.out.Granularity,
			times: source.LongCache{C: s.Times()}, ids: make([]*source.IDCache, len(c.kinds)), maps: make([][]uint32, len(c.kinds)),
			raws: make([]source.RawReader, len(c.kinds)), w: newKeys(c.kinds), fresh: true, dimNames: c.dimNames(),
			rollup: c.out.Rollup, pre: pre}
		for d, dim := range c.out.Dimensions {
			if c.kinds[d] == kindRaw {
				cur.raws[d] = s.Raw(dim.Name)
			} else if ds := c.dims[d][i]; ds != nil {
				cur.ids[d] = &source.IDCache{C: ds.Cursor()}
				cur.maps[d] = c.maps[d][i]
			}
		}
		cur.setPacking(c.kinds, c.card)
		cur.checkTimes(source.SegmentOf(s))
		if err := cur.wait(); err != nil {
			return err
		}
		cursors = append(cursors, cur)
	}
	// The k-way merge: a binary heap of cursors by (key, input). A lazy cursor's key is its
	// stand-in row's (see cursor.wait): it loads when it comes to the top.
	h := cursors
	less := func(a, b *cursor) bool {
		if x := a.cmpHeads(a.head(), b, b.head()); x != 0 {
			return x < 0
		}
		return a.in < b.in
	}
	down := func(i int) {
		n := len(h)
		for {
			l := 2*i + 1
			if l >= n {
				return
			}
			m := l
			if r := l + 1; r < n && less(h[r], h[l]) {
				m = r
			}
			if !less(h[m], h[i]) {
				return
			}
			h[i], h[m] = h[m], h[i]
			i = m
		}
	}
	for i := len(h)/2 - 1; i >= 0; i-- {
		down(i)
	}
	var spare []*cursor // done cursors whose window memory the next lazy one takes
	// load fills the lazy cursor at the top of the heap, in a done cursor's memory if any.
	loadTop := func() error {
		cur := h[0]
		if k := len(spare) - 1; k >= 0 {
			cur.inherit(spare[k])
			spare = spare[:k]
		}
		if err := cur.fill(ctx); err != nil {
			return err
		}
		down(0)
		return nil
	}
	for len(h) > 0 && h[0].lazy {
		if err := loadTop(); err != nil {
			return err
		}
	}
	tasks, err := c.tasks(w)
	if err != nil {
		return err
	}

	// Column writers: workers each own some tasks and take every batch.
	p := max(1, min(c.opts.Parallelism, len(tasks)))
	var errs parallel.FirstError
	free := make(chan *batch, 3)
	rawPerRow := make([]int, len(c.kinds)) // a raw dimension's bytes a row, as the windows hold them
	for _, cur := range cursors {
		for j, d := range cur.w.dims {
			if d.kind == kindRaw && cur.w.n > 0 {
				rawPerRow[j] = max(rawPerRow[j], len(d.data)/cur.w.n+1)
			}
		}
	}
	batchRows := rawBatchRows(rawPerRow)
	for range 3 {
		b := &batch{keys: newKeys(c.kinds)}
		b.keys.reserve(batchRows, rawPerRow)
		free <- b
	}
	work := make([]chan *batch, p)
	var wg sync.WaitGroup
	// Each task stays with one worker (a column writer takes batches in order); tasks are
	// dealt out by estimated cost, the dearest first, each to the least loaded worker.
	owned := make([][]colTask, p)
	load := make([]int, p)
	order := make([]int, len(tasks))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return taskCost(tasks[b]) - taskCost(tasks[a]) })
	for _, t := range order {
		g := slices.Index(load, slices.Min(load))
		owned[g] = append(owned[g], tasks[t])
		load[g] += taskCost(tasks[t])
	}
	for g := range p {
		work[g] = make(chan *batch, 3)
		mine := owned[g]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range work[g] {
				for _, t := range mine {
					if errs.Get() != nil {
						break // the merge failed or was cancelled: skip the rest
					}
					if err := t.write(b); err != nil {
						errs.Report(err)
					}
				}
				if b.pending.Add(-1) == 0 {
					free <- b
				}
			}
		}()
	}
	var retired []int32 // inputs done since the last batch was sent
	send := func(b *batch) {
		if !b.runsSet {
			b.findRuns()
		}
		b.retired = append(b.retired[:0], retired...)
		retired = retired[:0]
		b.pending.Store(int32(p))
		for g := range p {
			work[g] <- b
		}
	}
	stop := func() error {
		for g := range p {
			close(work[g])
		}
		wg.Wait()
		return errs.Get()
	}

	progress := func(done int64) {
		if c.opts.Progress != nil {
			c.opts.Progress(Progress{Phase: c.phase, Phases: c.phases, Step: StepRows, RowsDone: done, RowsTotal: total})
		}
	}
	rollup := c.out.Rollup
	b := <-free
	b.reset()
	var outRow int64 = -1
	b.first = outRow + 1
	var done int64
	batchSeq := int64(1) // b's number, for cursor.aggSeq
	// Each input's mapped pages are released once its cursor has read releaseRows more rows
	// (released[i]: where it stood at the last release): inputs that interleave row by row
	// are then released once per releaseRows of their own rows, not once each per
	// releaseRows of the merge's (a release is a madvise and a TLB flush).
	all := slices.Clone(cursors) // the heap (h) reorders and drops cursors
	released := make([]int, len(c.srcs))
	nextProgress := int64(c.opts.ProgressRows)
	nextCheck := int64(4096)
	// nextBatch sends the batch, which is full, and takes the next; false: the merge failed
	// or was cancelled.
	nextBatch := func() bool {
		if err := errs.Get(); err != nil {
			return false
		}
		if err := ctx.Err(); err != nil {
			errs.Report(fmt.Errorf("merger: %w", err))
			return false
		}
		send(b)
		b = <-free
		b.reset()
		b.first = outRow + 1
		batchSeq++
		return true
	}
	// newRow starts output row outRow+1 with window row i of cur, after sending the batch
	// when it is full; false: the merge failed or was cancelled.
	newRow := func(cur *cursor, i int) bool {
		if b.keys.n >= batchRows && !nextBatch() {
			return false
		}
		b.keys.appendRow(&cur.w, i)
		b.refEnd = append(b.refEnd, 0)
		b.runsSet = false // refs come one by one: findRuns
		outRow++
		return true
	}
	// addRef adds window row i of cur to the last output row.
	addRef := func(cur *cursor, i int) {
		src := cur.w.src[i]
		lo, hi := cur.groupRange(i)
		if hi > 0 && len(cur.aggs) > 0 {
			if g := cur.aggAt(i); g != nil {
				src = uint32(cur.slot[i])
				if cur.aggSeq != batchSeq || cur.aggLast != g {
					b.aggs = append(b.aggs, g)
					cur.aggSeq, cur.aggLast = batchSeq, g
				}
				done += int64(cur.weight[i]) - 1 // the ref stands for weight rows
			}
		}
		b.refIn = append(b.refIn, int32(cur.in))
		b.refRow = append(b.refRow, src)
		b.refLo = append(b.refLo, lo)
		b.refHi = append(b.refHi, hi)
		b.refEnd[b.keys.n-1] = int32(len(b.refIn))
		if withMaps {
			c.rowMaps[cur.in][src] = uint32(outRow)
		}
	}
	// checks, every 4,096 rows or so, looks for cancellation and releases the pages of the
	// inputs read since their last release; and reports progress. False: the merge failed or
	// was cancelled.
	checks := func() bool {
		if done >= nextCheck {
			nextCheck = done + 4096
			if err := ctx.Err(); err != nil {
				errs.Report(fmt.Errorf("merger: %w", err))
				return false
			}
			for _, cu := range all {
				if cu.next-released[cu.in] >= releaseRows {
					released[cu.in] = cu.next
					if err := releaseInputs(c.srcs[cu.in:cu.in+1], c.names[cu.in:cu.in+1]); err != nil {
						errs.Report(err)
						return false
					}
				}
			}
		}
		if done >= nextProgress {
			progress(done)
			nextProgress += int64(c.opts.ProgressRows)
		}
		return true
	}
	// retire takes cur, which is done, out of the heap at h[at].
	retire := func(cur *cursor, at int) bool {
		h[at] = h[len(h)-1]
		h = h[:len(h)-1]
		spare = append(spare, cur)
		retired = append(retired, int32(cur.in))
		// Its pages are not read again before the bitmaps.
		if err := releaseInputs(c.srcs[cur.in:cur.in+1], c.names[cur.in:cur.in+1]); err != nil {
			errs.Report(err)
			return false
		}
		return true
	}
	var il interleave
rows:
	for len(h) > 0 {
		// Inputs that interleave go a step of windows at a time (see interleave.go).
		if !rollup && !withMaps && !interleaveOff && interleaves(h) {
			if items := il.step(h); len(items) > 0 {
				for len(items) > 0 {
					if b.keys.n >= batchRows && !nextBatch() {
						break rows
					}
					n := min(len(items), batchRows-b.keys.n)
					b.appendItems(&il, items[:n])
					items = items[n:]
					outRow += int64(n)
					done += int64(n)
				}
				for x, cu := range il.cs {
					if n := il.take[x]; n > 0 {
						cu.cur += n - 1
						if err := cu.advance(ctx); err != nil {
							errs.Report(err)
							break rows
						}
					}
				}
				for i := 0; i < len(h); {
					if cu := h[i]; cu.done() {
						if !retire(cu, i) {
							break rows
						}
						continue
					}
					i++
				}
				for i := len(h)/2 - 1; i >= 0; i-- {
					down(i)
				}
				if !checks() {
					break rows
				}
				continue
			}
		}
		cur := h[0]
		if cur.lazy {
			if err := loadTop(); err != nil {
				errs.Report(err)
				break rows
			}
			continue
		}
		// The rival is the least of the other cursors: cur emits rows, without touching the
		// heap, while its head stays below the rival's (inputs whose times do not overlap
		// then cost one comparison a row, not a sift through the heap).
		var rival *cursor
		ri := 0 // rival's place in h
		if len(h) > 1 {
			rival, ri = h[1], 1
			if len(h) > 2 && less(h[2], rival) {
				rival, ri = h[2], 2
			}
		}
		passed := false // cur's head no longer comes before the rival's
		for {
			// stopped: the run that cur emitted ended at a row that does not come before the
			// rival's head (no comparison needed for it).
			stopped := false
			if !rollup && cur.perm == nil && len(cur.ghi) == 0 {
				// Without rollup, the head row and the rows of the window after it that
				// come before the rival's head go over in bulk, as far as the batch has room.
				if b.keys.n >= batchRows && !nextBatch() {
					break rows
				}
				e := cur.runEnd(rival, min(cur.npos, cur.cur+batchRows-b.keys.n))
				b.appendRun(cur, cur.cur, e, c.rowMaps[cur.in], outRow+1)
				outRow += int64(e - cur.cur)
				done += int64(e - cur.cur)
				cur.cur = e - 1
				stopped = e < cur.npos && b.keys.n < batchRows // not the batch's room or the window's end
			} else {
				i := cur.head()
				if !(rollup && b.keys.n > 0 && cmpRows(&cur.w, i, &b.keys, b.keys.n-1) == 0) {
					if !newRow(cur, i) {
						break rows
					}
				}
				addRef(cur, i)
				done++
				// With rollup, the rows of the window that come before the rival's head each
				// combine into the row before them or start an output row, as cursor.same says:
				// no comparison with the rival or the batch a row.
				if rollup && cur.same != nil && cur.cur+1 < cur.npos {
					e := cur.runEnd(rival, min(cur.npos, cur.cur+1+batchRows))
					for p := cur.cur + 1; p < e; p++ {
						// A pre-aggregated group's slots, each an output row, go over in bulk.
						if g, n := cur.slotSpan(p, e); n > 0 && !withMaps && b.keys.n < batchRows {
							n = min(n, batchRows-b.keys.n)
							done += b.appendSlots(cur, g, p, n, batchSeq) - int64(n) // as addRef counts
							outRow += int64(n)
							p += n - 1
							continue
						}
						i := cur.rowAt(p)
						if !cur.same[p] && !newRow(cur, i) {
							break rows
						}
						addRef(cur, i)
					}
					done += int64(e - cur.cur - 1)
					cur.cur = e - 1
				}
			}
			if !checks() {
				break rows
			}
			if cur.cur+1 < cur.npos { // the next row of the window
				cur.cur++
				if !stopped && (rival == nil || less(cur, rival)) {
					continue
				}
				passed = true
				break
			}
			if err := cur.advance(ctx); err != nil {
				errs.Report(err)
				break rows
			}
			break
		}
		if cur.done() && !retire(cur, 0) {
			break rows
		}
		if passed {
			// The rival is the least of cur's children and comes first: the sift's first
			// step is known (inputs that interleave row by row take this path every row).
			h[0], h[ri] = h[ri], h[0]
			down(ri)
		} else if len(h) > 1 {
			down(0)
		}
	}
	if errs.Get() == nil && b.keys.n > 0 {
		send(b)
	} else {
		free <- b
	}
	if err := stop(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("merger: %w", err)
	}
	progress(done)
	c.rowsOut = outRow + 1
	return nil
}

func (c *core) dimNames() []string {
	names := make([]string, len(c.out.Dimensions))
	for i, d := range c.out.Dimensions {
		names[i] = d.Name
	}
	return names
}

// tasks returns the column writers' tasks: __time, every dimension's rows, every metric.
func (c *core) tasks(w *columns.Writer) ([]colTask, error) {
	var tasks []colTask
	tw, err := w.Time()
	if err != nil {
		return nil, fmt.Errorf("merger: %w", err)
	}
	tasks = append(tasks, &timeTask{w: tw})
	for d, dim := range c.out.Dimensions {
		t := &dimTask{d: d, name: dim.Name, kind: c.kinds[d], dw: c.dws[d], seed: c.seed, hashed: !dim.NoBitmapIndex}
		if t.kind == kindSingle && t.hashed {
			t.log = newIDLog(c.card[d])
			t.log.reserve(int(c.rowsIn)) // as many output rows at most
			if !c.out.Rollup {
				// Exactly as many: fault the log's pages in now, on a core the merge's start
				// leaves idle (its first windows load on one goroutine), rather than in the
				// column writer, a fault each 4 KiB (peers' contiguous merge: 3,700 faults).
				t.log.populate()
			}
		}
		if c.dimTasks == nil {
			c.dimTasks = make([]*dimTask, len(c.out.Dimensions))
		}
		c.dimTasks[d] = t
		if t.kind == kindRaw {
			if t.rw, err = w.Raw(dim.Name); err != nil {
				return nil, fmt.Errorf("merger: %w", err)
			}
		}
		tasks = append(tasks, t)
	}
	for _, m := range c.out.Metrics {
		t, err := c.metricTask(w, m)
		if err != nil {
			return nil, fmt.Errorf("merger: %w", err)
		}
		tasks = append(tasks, t)
	}
	return tasks, nil
}

// taskCost estimates a task's work a row, in units of one value appended.
func taskCost(t colTask) int {
	switch t := t.(type) {
	case *dimTask:
		if t.kind == kindMulti {
			return 6
		}
		return 2
	case *sketchTask:
		return 3
	}
	return 1
}

type timeTask struct{ w *columns.NumWriter[int64] }

func (t *timeTask) write(b *batch) error {
	if err := t.w.AppendValues(b.keys.time); err != nil {
		return fmt.Errorf("merger: __time: %w", err)
	}
	return nil
}

type dimTask struct {
	d    int
	name string
	kind dimKind
	dw   *columns.DimWriter
	rw   *columns.RawWriter
	// The sum of pairHash over the distinct (output row, id) pairs of the rows written, which
	// the bitmaps written must match (core.dimBitmaps); only with a bitmap index (hashed).
	hashed  bool
	seed    uint64
	hash    uint64
	scratch []uint32
	// A single-value dimension with a bitmap index logs its ids instead (see idLog): its
	// bitmaps are built from them.
	log idLog
}

func (t *dimTask) write(b *batch) error {
	k := &b.keys.dims[t.d]
	var err error
	switch t.kind {
	case kindSingle:
		if err = t.dw.AppendSingleIDs(k.ids); err != nil {
			break
		}
		if t.log != nil {
			t.log.add(k.ids)
			break
		}
		if !t.hashed {
			break
		}
		h, seed, row := t.hash, t.seed, uint32(b.first)
		for r, id := range k.ids {
			h += pairHash(seed, row+uint32(r), id)
		}
		t.hash = h
	case kindMulti:
		row := uint32(b.first)
		for r := 0; r < b.keys.n; r++ {
			ids := k.ids[k.offs[r]:k.offs[r+1]]
			if err = t.dw.AppendIDs(ids); err != nil {
				break
			}
			if t.hashed {
				t.hash, t.scratch = addDistinctPairs(t.hash, t.seed, row+uint32(r), ids, t.scratch)
			}
		}
	case kindRaw:
		for r := 0; r < b.keys.n; r++ {
			if k.null[r] {
				err = t.rw.AppendNull()
			} else {
				err = t.rw.AppendBytes(k.data[k.offs[r]:k.offs[r+1]])
			}
			if err != nil {
				break
			}
		}
	}
	if err != nil {
		return fmt.Errorf("merger: dimension %q: %w", t.name, err)
	}
	return nil
}

// bitmaps rebuilds every bitmap index, one dimension per goroutine and, within a dimension,
// one merged value at a time: the rows holding a merged value are the rows the sources'
// bitmaps of that value map to through the row maps.
func (c *core) bitmaps() error {
	var todo []int
	cost := make([]int, len(c.out.Dimensions)) // bitmaps to read: the work, roughly
	for d, dim := range c.out.Dimensions {
		if c.kinds[d] != kindRaw && !dim.NoBitmapIndex {
			todo = append(todo, d)
			for _, m := range c.maps[d] {
				cost[d] += len(m)
			}
		}
	}
	// The most expensive first, so that the goroutines finish together.
	slices.SortStableFunc(todo, func(a, b int) int { return cost[b] - cost[a] })
	var total int64
	for _, d := range todo {
		total += int64(c.card[d])
	}
	var done atomic.Int64
	cs := &cores{par: int32(c.opts.Parallelism)}
	cs.pending.Store(int32(len(todo)))
	scratch := make(chan *sortScratch, len(todo)) // at most one a goroutine is ever made
	defer func() {
		for {
			select {
			case sc := <-scratch:
				_ = sc.rows.Free() // munmap of a mapping of ours fails only on a bug
			default:
				return
			}
		}
	}()
	run := func() error {
		return parallel.Run(len(todo), c.opts.Parallelism, func(k int) error {
			d := todo[k]
			cs.busy.Add(1)
			cs.pending.Add(-1)
			defer cs.busy.Add(-1)
			var sc *sortScratch
			select {
			case sc = <-scratch:
			default:
				sc = new(sortScratch)
			}
			defer func() { scratch <- sc }()
			if err := c.dimBitmaps(d, cs, &done, sc); err != nil {
				return fmt.Errorf("merger: dimension %q: bitmaps: %w", c.out.Dimensions[d].Name, err)
			}
			return nil
		})
	}
	if c.opts.Progress == nil {
		return run()
	}
	// Progress is called from this goroutine while the bitmaps are rebuilt in others.
	report := func() {
		c.opts.Progress(Progress{Phase: c.phase, Phases: c.phases, Step: StepBitmaps, RowsDone: c.rowsIn, RowsTotal: c.rowsIn,
			BitmapsDone: done.Load(), BitmapsTotal: total})
	}
	report()
	errc := make(chan error, 1)
	go func() { errc <- run() }()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-errc:
			if err == nil {
				report()
			}
			return err
		case <-tick.C:
			report()
		}
	}
}

// dimBitmaps writes dimension d's bitmaps, adding to done as they are written.
func (c *core) dimBitmaps(d int, cs *cores, done *atomic.Int64, sc *sortScratch) error {
	if t := c.dimTasks[d]; t.log != nil {
		err := t.log.writeBitmaps(c.ctx, c.dws[d], c.card[d], cs, done, sc)
		// The memory goes as soon as the dimension is done.
		return errors.Join(err, t.log.free())
	}
	srcs := c.dims[d]
	maps := c.maps[d]
	next := make([]int, len(srcs)) // per source: the next source id to place
	g := newValueRows(int(c.rowsOut))
	g.seed = c.seed
	scratch := make([]uint32, 4096)
	counted := 0 // of the bitmaps written, those added to done
	for v := 0; v < c.card[d]; v++ {
		if v&255 == 0 {
			if err := c.ctx.Err(); err != nil {
				return fmt.Errorf("merger: %w", err)
			}
			if v > 0 {
				done.Add(256)
				counted += 256
			}
		}
		g.reset()
		for i, ds := range srcs {
			rm := c.rowMaps[i]
			if ds == nil {
				if v == 0 && len(rm) > 0 {
					g.add(rm) // a source without the dimension is null in every row
				}
				continue
			}
			m := maps[i]
			for next[i] < len(m) && int(m[next[i]]) == v {
				g.rowMap = rm
				if err := ds.EachRows(uint32(next[i]), scratch, g); err != nil {
					return fmt.Errorf("%s: %w", c.names[i], err)
				}
				next[i]++
			}
		}
		if g.placed >= releaseBitmapRows {
			g.placed = 0
			if err := releaseInputs(c.srcs, c.names); err != nil {
				return err
			}
		}
		if err := g.write(c.dws[d], uint32(v)); err != nil {
			// The writer's own checks (the null id's bitmap equal to the null rows...) may
			// see an input's fault first: name the input when it is one.
			if errors.Is(err, columns.ErrInvalid) {
				if ierr := c.checkInputBitmaps(d); ierr != nil {
					return ierr
				}
			}
			return err
		}
	}
	done.Add(int64(c.card[d] - counted))
	if g.hash != c.dimTasks[d].hash {
		// The bitmaps written do not hold exactly the (row, id) pairs of the rows written: an
		// input's bitmap index disagrees with its ids (the output would fail Verify).
		if err := c.checkInputBitmaps(d); err != nil {
			return err
		}
		return fmt.Errorf("the bitmaps rebuilt from the inputs' (%s) disagree with the rows' ids: %w",
			strings.Join(c.namesWith(d), ", "), columns.ErrCorrupt)
	}
	return nil
}

// valueRows gathers the output rows of one value, then writes its bitmap. Rows gather in a
// list, sorted (their runs merged) before they are added to a bitmap; past denseMin rows they
// go to a dense bitset of the output rows instead: no sort, and bounded memory.
type valueRows struct {
	outRows  int
	denseMin int
	seed     uint64   // keys hash
	hash     uint64   // the sum of pairHash over the (row, id) pairs of the bitmaps written
	rowMap   []uint32 // of the source whose rows come next
	placed   int      // source rows read from bitmaps since the inputs' pages were released
	list     []uint32
	starts   []int
	tmp      []uint32
	dense    []uint64
	isDense  bool
	lo, hi   int // words of dense in use
}

func newValueRows(outRows int) *valueRows {
	return &valueRows{outRows: outRows, denseMin: max(1024, outRows/256)}
}

func (g *valueRows) reset() {
	g.list, g.starts, g.isDense = g.list[:0], g.starts[:0], false
}

// Rows maps source rows through rowMap and adds them (a source.RowSink).
func (g *valueRows) Rows(rs []uint32) error {
	rm := g.rowMap
	for k, r := range rs {
		if int(r) >= len(rm) {
			return fmt.Errorf("bitmap row %d past the %d rows: %w", r, len(rm), columns.ErrCorrupt)
		}
		rs[k] = rm[r]
	}
	g.placed += len(rs)
	g.add(rs)
	return nil
}

// add adds output rows, increasing as a rule.
func (g *valueRows) add(rs []uint32) {
	if g.isDense {
		g.toDense(rs)
		return
	}
	g.starts = append(g.starts, len(g.list))
	g.list = append(g.list, rs...)
	if len(g.list) >= g.denseMin {
		g.toDense(g.list)
		g.list, g.starts = g.list[:0], g.starts[:0]
	}
}

func (g *valueRows) toDense(rs []uint32) {
	if g.dense == nil {
		g.dense = make([]uint64, (g.outRows+63)/64)
	}
	if !g.isDense {
		g.isDense, g.lo, g.hi = true, len(g.dense), -1
	}
	d := g.dense
	for _, r := range rs {
		w := int(r >> 6)
		d[w] |= 1 << (r & 63)
		g.lo, g.hi = min(g.lo, w), max(g.hi, w)
	}
}

// write writes the gathered rows as the bitmap of id. Rows can repeat (with rollup, several
// source rows become one output row): the list is sorted and compacted; the dense form merges
// them by itself.
func (g *valueRows) write(dw *columns.DimWriter, id uint32) error {
	h, seed := g.hash, g.seed
	if g.isDense {
		if g.hi < g.lo {
			return dw.WriteBitmapWords(id, nil)
		}
		for k, w := range g.dense[g.lo : g.hi+1] {
			base := uint32(g.lo+k) << 6
			for ; w != 0; w &= w - 1 {
				h += pairHash(seed, base+uint32(bits.TrailingZeros64(w)), id)
			}
		}
		g.hash = h
		err := dw.WriteBitmapWords(id, g.dense[:g.hi+1])
		clear(g.dense[g.lo : g.hi+1])
		return err
	}
	g.list, g.tmp = sortRuns(g.list, g.starts, g.tmp)
	g.list = slices.Compact(g.list)
	for _, r := range g.list {
		h += pairHash(seed, r, id)
	}
	g.hash = h
	return dw.WriteBitmapRows(id, g.list)
}

// sortRuns sorts a, made of runs starting at starts, each usually sorted already (a source's
// rows map to increasing output rows unless its groups were re-sorted): unsorted runs are
// sorted, then runs are merged pairwise. tmp is scratch; both slices are returned for reuse.
func sortRuns(a []uint32, starts []int, tmp []uint32) ([]uint32, []uint32) {
	if len(starts) <= 1 || len(a) <= 48 {
		if !slices.IsSorted(a) {
			slices.Sort(a)
		}
		return a, tmp
	}
	ordered := true
	for k, s := range starts {
		e := len(a)
		if k+1 < len(starts) {
			e = starts[k+1]
		}
		run := a[s:e]
		if !slices.IsSorted(run) {
			slices.Sort(run)
		}
		if k > 0 && s > 0 && s < len(a) && a[s-1] > a[s] {
			ordered = false
		}
	}
	if ordered {
		return a, tmp
	}
	bounds := append(starts, len(a)) //nolint:gocritic // starts is scratch
	for len(bounds) > 2 {
		tmp = slices.Grow(tmp[:0], len(a))[:len(a)]
		nb := bounds[:0] // overwrites bounds behind the reads: nb[j] is written after bounds[2j] is read
		k := 0
		for ; k+2 < len(bounds); k += 2 {
			lo, mid, hi := bounds[k], bounds[k+1], bounds[k+2]
			mergeInto(tmp[lo:hi], a[lo:mid], a[mid:hi])
			nb = append(nb, lo)
		}
		if k+1 < len(bounds) {
			copy(tmp[bounds[k]:bounds[k+1]], a[bounds[k]:bounds[k+1]])
			nb = append(nb, bounds[k])
		}
		nb = append(nb, len(a))
		a, tmp = tmp, a
		bounds = nb
	}
	return a, tmp
}

func mergeInto(dst, x, y []uint32) {
	i, j, k := 0, 0, 0
	for i < len(x) && j < len(y) {
		if y[j] < x[i] {
			dst[k] = y[j]
			j++
		} else {
			dst[k] = x[i]
			i++
		}
		k++
	}
	k += copy(dst[k:], x[i:])
	copy(dst[k:], y[j:])
}
