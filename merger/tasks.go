package merger

import (
	"fmt"

	"github.com/writeout/writeout/internal/colwrite"
)

// A colTask appends one column's values for a batch of output rows.
type colTask interface {
	write(b *batch) error
}

// tasks returns the column writers' tasks: __time, every dimension's rows, every metric.
func (c *core) tasks(w colwrite.Writer) ([]colTask, error) {
	var tasks []colTask
	tw, err := w.Time()
	if err != nil {
		return nil, fmt.Errorf("merger: %w", err)
	}
	tasks = append(tasks, &timeTask{w: tw})
	for d, dim := range c.out.Dimensions {
		t := &dimTask{d: d, name: dim.Name, kind: c.kinds[d], dw: c.dws[d], seed: c.seed, hashed: !dim.NoBitmapIndex}
		if t.kind == kindSingle && t.hashed {
			t.log = newIDLog(c.card[d], c.scratch.get, c.bounds, &c.runSorts)
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

type timeTask struct{ w colwrite.NumWriter[int64] }

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
	dw   colwrite.DimWriter
	rw   colwrite.RawWriter
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
			err = t.log.add(k.ids)
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
