package merger

import (
	"fmt"

	"github.com/axiomhq/hyperloglog"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/columns/agg"
	"github.com/writeout/writeout/merger/internal/source"
)

// The metric column tasks of a merge: each combines, for every output row, the values of the
// source rows it stands for (one without rollup) through the metric's kernel in columns/agg,
// in input order (sources in order, each in its row order), and appends the result.

// metricTask returns the task that writes metric m.
func (c *core) metricTask(w *columns.Writer, m columns.Metric) (colTask, error) {
	a := m.Agg()
	var times *valReader[int64] // first/last: the times stored with the values
	if a.Timed() {
		times = &valReader[int64]{}
		times.init(len(c.srcs), func(i int) source.LongChunker { return c.srcs[i].MetricTimes(m.Name) })
	}
	switch a.Type {
	case agg.Long:
		lw, err := w.Long(m.Name)
		if err != nil {
			return nil, err
		}
		t := &longTask{numTask: numTask[int64]{name: m.Name, agg: a, w: lw, names: c.names, times: times}}
		t.rows = t
		t.vals.init(len(c.srcs), func(i int) source.LongChunker { return c.srcs[i].Long(m.Name) })
		t.asIs = make([]bool, len(c.srcs))
		for i := range t.asIs {
			t.asIs[i] = true
		}
		if err := t.nulls.init(c, m.Name); err != nil {
			return nil, err
		}
		return &t.numTask, nil
	case agg.Double:
		dw, err := w.Double(m.Name)
		if err != nil {
			return nil, err
		}
		t := &doubleTask{numTask: numTask[float64]{name: m.Name, agg: a, w: dw, names: c.names, times: times}}
		t.rows = t
		t.vals.init(len(c.srcs), func(i int) source.DoubleChunker { return c.srcs[i].Double(m.Name) })
		if err := t.nulls.init(c, m.Name); err != nil {
			return nil, err
		}
		if a.Exact() {
			t.tails = make([]source.TailReader, len(c.srcs))
			for i, s := range c.srcs {
				t.tails[i] = s.Tails(m.Name)
			}
		}
		// One value is stored as it came only by a doubleSum, and then only without a tail.
		t.asIs = make([]bool, len(c.srcs))
		for i := range t.asIs {
			t.asIs[i] = a.Kind == agg.Sum && (t.tails == nil || t.tails[i] == nil)
		}
		return &t.numTask, nil
	case agg.Sketch:
		sw, err := w.Sketch(m.Name)
		if err != nil {
			return nil, err
		}
		t := &sketchTask{name: m.Name, w: sw, r: make([]source.SketchReader, len(c.srcs)), names: c.names}
		for i, s := range c.srcs {
			t.r[i] = s.Sketch(m.Name)
		}
		return t, nil
	}
	return nil, fmt.Errorf("metric %q: aggregator %s of no known type: %w", m.Name, m.Aggregator, ErrInvalid)
}

type sketchTask struct {
	name    string
	w       *columns.SketchWriter
	r       []source.SketchReader
	names   []string
	scratch hyperloglog.Sketch
	win     []blobRange
}

// blobRange holds a sketch column's bytes of source rows [lo, hi).
type blobRange struct {
	lo, hi uint32
	offs   []uint32
	data   []byte
}

// read returns the serialized sketch of ref k of b (nil when its source lacks the metric),
// valid until the next read.
func (t *sketchTask) read(b *batch, k int32) ([]byte, error) {
	in, row := b.refIn[k], b.refRow[k]
	sr := t.r[in]
	if sr == nil {
		return nil, nil
	}
	if hi := b.refHi[k]; hi > 0 {
		if t.win == nil {
			t.win = make([]blobRange, len(t.r))
		}
		w := &t.win[in]
		if lo := b.refLo[k]; w.lo != lo || w.hi != hi {
			w.offs, w.data = append(w.offs[:0], 0), w.data[:0]
			for r := lo; r < hi; r++ {
				raw, err := sr.Bytes(int(r))
				if err != nil {
					return nil, fmt.Errorf("merger: %s: metric %q: %w", t.names[in], t.name, err)
				}
				w.data = append(w.data, raw...)
				w.offs = append(w.offs, uint32(len(w.data)))
			}
			w.lo, w.hi = lo, hi
		}
		i := row - w.lo
		return w.data[w.offs[i]:w.offs[i+1]], nil
	}
	raw, err := sr.Bytes(int(row))
	if err != nil {
		return nil, fmt.Errorf("merger: %s: metric %q: %w", t.names[in], t.name, err)
	}
	return raw, nil
}

func (t *sketchTask) write(b *batch) error {
	start := int32(0)
	for _, end := range b.refEnd {
		var err error
		if end-start == 1 {
			var raw []byte
			if raw, err = t.read(b, start); err != nil {
				return err
			}
			if raw == nil && t.r[b.refIn[start]] == nil {
				err = t.w.Append(nil)
			} else {
				// Copied as it is: it must decode (Verify decodes every sketch).
				if err := source.CheckSketch(raw, &t.scratch); err != nil {
					return fmt.Errorf("merger: %s: metric %q: row %d: %w: %w", t.names[b.refIn[start]], t.name, b.refRow[start], columns.ErrCorrupt, err)
				}
				err = t.w.AppendBytes(raw)
			}
		} else {
			var acc *hyperloglog.Sketch // nil: every source lacked the metric; written empty
			for k := start; k < end; k++ {
				if t.r[b.refIn[k]] == nil {
					continue
				}
				raw, err := t.read(b, k)
				if err != nil {
					return err
				}
				if err := agg.UnmarshalSketch(&t.scratch, raw); err != nil {
					return fmt.Errorf("merger: %s: metric %q: row %d: %w: %w", t.names[b.refIn[k]], t.name, b.refRow[k], columns.ErrCorrupt, err)
				}
				if acc == nil {
					acc = &hyperloglog.Sketch{}
				}
				if err := agg.MergeSketch(acc, &t.scratch); err != nil {
					return fmt.Errorf("merger: %s: metric %q: %w", t.names[b.refIn[k]], t.name, err)
				}
			}
			agg.Canonicalize(acc) // combined from several rows: the one form of its set
			err = t.w.Append(acc)
		}
		if err != nil {
			return fmt.Errorf("merger: metric %q: %w", t.name, err)
		}
		start = end
	}
	return nil
}
