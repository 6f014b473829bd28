package merger

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/internal/colwrite"
	"github.com/writeout/writeout/medium"
	"github.com/writeout/writeout/merger/internal/parallel"
	"github.com/writeout/writeout/merger/internal/source"
)

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
	dws     []colwrite.DimWriter
	rowMaps [][]uint32 // [source][source row] -> output row
	// bounds are what the merge keeps in memory of what grows with its rows (Options.MemoryLimit).
	bounds bounds
	// runSorts lends the id logs the memory of a run's sort.
	runSorts runSorts
	// scratch holds what the merge keeps per row and writes out of memory (the id logs' runs):
	// a child of the merge's medium, made when first needed and closed at the merge's end.
	scratch scratchMedium
	rowsIn  int64
	rowsOut int64
	// The check that the bitmap index written agrees with the ids written (see pairHash):
	// seed keys the hashes; dimTasks[d] sums them over the rows' ids of dimension d.
	seed     uint64
	dimTasks []*dimTask
	// judged is closed once the goroutine judgeStart started has judged the inputs' deferred
	// checks, judgeErr its verdict.
	judged   chan struct{}
	judgeErr error
}

func runCore(ctx context.Context, srcs []source.Source, names []string, out columns.Schema, dst target, med medium.Medium,
	pub columns.PublishOptions, opts *Options, phase, phases int) (st phaseStats, err error) {
	c := &core{ctx: ctx, srcs: srcs, names: names, out: out, opts: opts, phase: phase, phases: phases,
		seed: rand.Uint64()}
	for _, s := range srcs {
		st.rowsIn += int64(s.Rows())
	}
	c.rowsIn = st.rowsIn
	// The merge reads the inputs' times and ids whole: their structural checks are computed
	// from the chunks it decodes, and so are the CRCs of the numeric metrics' parts it reads,
	// all judged before it publishes (see judgeInputs).
	for _, s := range srcs {
		source.DeferChecks(s)
		source.ReadSequentially(s)
	}
	defer func() {
		if err != nil {
			err = c.judgeAfter(err)
		}
	}()
	logs := 0
	for _, d := range out.Dimensions {
		if !d.MultiValue && !d.Raw && !d.NoBitmapIndex {
			logs++
		}
	}
	c.bounds = boundsFor(opts.MemoryLimit, logs, opts.Parallelism, len(srcs))
	if st.rowsIn > math.MaxUint32 {
		return st, fmt.Errorf("%w: %d rows, a segment holds at most %d", ErrInvalid, st.rowsIn, uint32(math.MaxUint32))
	}
	w, err := colwrite.New(out, colwrite.Options{
		Medium:      med,
		Compression: opts.Compression,
		ChunkRows:   opts.ChunkRows,
		StoreIDs:    opts.StoreIDs,
	})
	if err != nil {
		return st, fmt.Errorf("merger: %w", err)
	}
	defer func() {
		if err != nil {
			_ = w.Abort()
		}
	}()
	if med == nil {
		med = medium.NewHeap()
	}
	c.scratch.parent = med
	if opts.scratch != nil {
		c.scratch.parent = opts.scratch
	}
	defer func() {
		if cerr := errors.Join(c.runSorts.close(), c.scratch.close()); cerr != nil && err == nil {
			err = fmt.Errorf("merger: scratch: %w", cerr)
		}
	}()
	defer func() {
		for _, t := range c.dimTasks {
			if t != nil && t.log != nil {
				err = errors.Join(err, t.log.free()) // freed already, unless the merge failed
			}
		}
	}()
	if v := opts.verifyInputs; v != nil && phase == phases {
		// The inputs' parts the merge never reads: checked beside the rows.
		v.start(ctx, out)
		defer v.stop()
	}
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
	// The rows phase read the inputs' times and ids: their deferred checks are judged while
	// the bitmaps are built. Whatever becomes of the merge, the judging ends before it
	// returns: its caller closes the inputs (a phase's, at once), which the judging reads.
	c.judgeStart()
	defer func() { <-c.judged }()
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
	if err := c.judgeWait(); err != nil {
		return st, err
	}
	if phase == phases && opts.verifyInputs != nil {
		// The inputs' parts the merge did not read (Options.SkipChecksums), before anything is
		// published (its time counts as the publication's).
		if err := opts.verifyInputs.run(ctx); err != nil {
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

// judgeInputs returns the verdict of the inputs' structural checks the merge put off
// (source.DeferChecks), judged an input a goroutine: the failure of the first input that
// fails, naming it, or nil.
func (c *core) judgeInputs() error {
	errs := make([]error, len(c.srcs))
	_ = parallel.Run(len(c.srcs), c.opts.Parallelism, func(i int) error {
		if err := source.JudgeChecks(c.srcs[i]); err != nil {
			errs[i] = fmt.Errorf("merger: %s: %w", c.names[i], err)
		}
		return nil
	})
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// judgeStart starts judgeInputs on a goroutine of its own; judgeWait returns its verdict.
func (c *core) judgeStart() {
	done := make(chan struct{})
	c.judged = done
	judgesRunning.Add(1)
	go func() {
		defer close(done)
		defer judgesRunning.Add(-1)
		c.judgeErr = c.judgeInputs()
	}()
}

// For tests: judgesRunning counts the judgeStart goroutines not done.
var judgesRunning atomic.Int32

// judgeWait returns the verdict of the judgeInputs judgeStart started, once it is done, or
// judges the inputs now when none was started.
func (c *core) judgeWait() error {
	if c.judged == nil {
		return c.judgeInputs()
	}
	<-c.judged
	return c.judgeErr
}

// judgeAfter returns the error of a merge that failed with err. A damaged input part that
// agrees with its CRC, whose structural check the merge put off, can make a merge fail on
// what it read (a writer's check: ErrInvalid, or ErrCorrupt not naming the part): when err is
// such an error and an input fails its check, that failure comes first, err joined behind
// it. Other errors (a full disk, a cancelled merge) do not make it read the inputs again.
func (c *core) judgeAfter(err error) error {
	if c.ctx.Err() != nil || !errors.Is(err, columns.ErrCorrupt) && !errors.Is(err, columns.ErrInvalid) && !errors.Is(err, ErrInvalid) {
		return err
	}
	jerr := c.judgeWait()
	if jerr == nil || !errors.Is(jerr, columns.ErrCorrupt) || strings.Contains(err.Error(), strings.TrimPrefix(jerr.Error(), "merger: ")) {
		return err
	}
	return errors.Join(jerr, err)
}

// publish finishes w into dst: a file published per pub, or dst.out, which receives the
// segment streamed out of the stages.
func publish(ctx context.Context, w colwrite.Writer, dst target, pub columns.PublishOptions) (columns.Info, error) {
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
func (c *core) dictionaries(w colwrite.Writer) error {
	n := len(c.out.Dimensions)
	c.kinds = make([]dimKind, n)
	c.dims = make([][]source.DimSource, n)
	c.maps = make([][][]uint32, n)
	c.card = make([]int, n)
	c.dws = make([]colwrite.DimWriter, n)
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

// mergeRows merges the sources' rows k-way and writes every column but the bitmaps: the
// cursors (one a source) go into a heap (cursorHeap), the emit step (emitter) takes rows off
// it into batches, and the pipeline hands the batches to the column tasks.
func (c *core) mergeRows(w colwrite.Writer) (err error) {
	// The row maps serve the bitmaps rebuilt from the inputs': multi-value dimensions'.
	c.rowMaps = make([][]uint32, len(c.srcs))
	withMaps := false
	for d, dim := range c.out.Dimensions {
		withMaps = withMaps || c.kinds[d] == kindMulti && !dim.NoBitmapIndex
	}
	pre := c.preAgg()
	if pre != nil {
		// The preloads read the sources and the scratch medium, and every slot table is freed.
		defer func() { err = errors.Join(err, pre.loads.close()) }()
	}
	cursors, total, err := c.cursors(pre, withMaps)
	if err != nil {
		return err
	}
	h := newCursorHeap(slices.Clone(cursors))
	if err := h.loadLazyTops(c.ctx); err != nil {
		return err
	}
	tasks, err := c.tasks(w)
	if err != nil {
		return err
	}
	if pre != nil {
		c.addPreloads(pre, tasks)
		pre.loads.setReady()
	}
	rawPerRow := make([]int, len(c.kinds)) // a raw dimension's bytes a row, as the windows hold them
	for _, cur := range cursors {
		for j, d := range cur.w.dims {
			if d.kind == kindRaw && cur.w.n > 0 {
				rawPerRow[j] = max(rawPerRow[j], len(d.data)/cur.w.n+1)
			}
		}
	}
	rows := rawBatchRows(rawPerRow)
	most := pipelineBatches
	if slices.ContainsFunc(rawPerRow, func(n int) bool { return n > 0 }) {
		most = rawPipelineBatches
	}
	if pre != nil {
		most = preAggPipelineBatches
	}
	pl := newPipeline(tasks, c.opts.Parallelism, most, c.kinds, rows, rawPerRow)
	c.rowsOut, err = newEmitter(c, h, cursors, pl, rows, withMaps, total).run()
	return err
}

// addPreloads lets the long metric tasks among tasks combine streamed groups ahead, each
// preload through readers of its own.
func (c *core) addPreloads(pre *preAgg, tasks []colTask) {
	for _, t := range tasks {
		nt, ok := t.(*numTask[int64])
		if !ok {
			continue
		}
		lt, ok := nt.rows.(*longTask)
		if !ok {
			continue
		}
		name, timed := lt.name, lt.times != nil
		pre.loads.addTask(lt, len(c.srcs), func(in int) slotSrc {
			var src slotSrc
			if ch := c.srcs[in].Long(name); ch != nil {
				src.vals = &source.ChunkCache[int64]{C: ch}
			}
			if timed {
				if ch := c.srcs[in].MetricTimes(name); ch != nil {
					src.times = &source.ChunkCache[int64]{C: ch}
				}
			}
			return src
		})
	}
}

// preAgg returns the pre-aggregation state of a merge that can pre-aggregate (rollup, every
// dimension single-value, every metric a long), or nil.
func (c *core) preAgg() *preAgg {
	if !c.out.Rollup {
		return nil
	}
	for _, k := range c.kinds {
		if k != kindSingle {
			return nil
		}
	}
	packBits, _ := packing(c.kinds, c.card)
	pre := &preAgg{pool: make(chan []int32, 8), pool16: make(chan []uint16, 8), memGroupRows: c.bounds.memGroupRows,
		openKeys: func(in int32) *keyReader { return c.openKeys(in, packBits) },
		release:  func(in int32) error { return releaseInputs(c.srcs[in:in+1], c.names[in:in+1]) }}
	pre.tables.budget, pre.tables.ahead = int64(c.bounds.tableBytes), int64(c.bounds.aheadBytes)
	pre.loads.par = c.opts.Parallelism
	for _, m := range c.out.Metrics {
		if m.Type != columns.MetricLong {
			return nil
		}
		pre.users++
	}
	return pre
}

// cursors returns a cursor over every source of rows, each waiting on its stand-in row, and
// the sources' rows; it makes the row maps when withMaps.
func (c *core) cursors(pre *preAgg, withMaps bool) ([]*cursor, int64, error) {
	var total int64
	cursors := make([]*cursor, 0, len(c.srcs))
	names := c.dimNames()
	for i, s := range c.srcs {
		n := s.Rows()
		total += int64(n)
		if withMaps {
			c.rowMaps[i] = make([]uint32, n)
		}
		if n == 0 {
			continue
		}
		cur := &cursor{in: i, name: c.names[i],
			sourceReader: sourceReader{n: n, order: s.TimeOrder(), gran: c.out.Granularity, fresh: true,
				times: source.LongCache{C: s.Times()}, ids: make([]*source.IDCache, len(c.kinds)),
				maps: make([][]uint32, len(c.kinds)), raws: make([]source.RawReader, len(c.kinds)), dimNames: names},
			window:      window{w: newKeys(c.kinds), rollup: c.out.Rollup},
			preAggState: preAggState{pre: pre}}
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
			return nil, 0, err
		}
		cursors = append(cursors, cur)
	}
	return cursors, total, nil
}

func (c *core) dimNames() []string {
	names := make([]string, len(c.out.Dimensions))
	for i, d := range c.out.Dimensions {
		names[i] = d.Name
	}
	return names
}

// scratchMedium is a child of a merge's medium made on the first call of get, from any
// goroutine.
type scratchMedium struct {
	parent medium.Medium
	once   sync.Once
	med    medium.Medium
	err    error
}

func (s *scratchMedium) get() (medium.Medium, error) {
	s.once.Do(func() { s.med, s.err = s.parent.NewChild() })
	return s.med, s.err
}

func (s *scratchMedium) close() error {
	if s.med == nil {
		return nil
	}
	return s.med.Close()
}
