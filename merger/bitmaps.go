package merger

import (
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/internal/colwrite"
	"github.com/writeout/writeout/merger/internal/parallel"
)

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
				_ = sc.release() // munmap of a mapping of ours fails only on a bug
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
				sc = &sortScratch{sorts: &c.runSorts}
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

func (g *valueRows) reset() {
	g.list, g.starts, g.isDense = g.list[:0], g.starts[:0], false
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
func (g *valueRows) write(dw colwrite.DimWriter, id uint32) error {
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
