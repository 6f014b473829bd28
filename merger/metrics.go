package merger

import (
	"fmt"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/columns/agg"
	"github.com/writeout/writeout/internal/colwrite"
	"github.com/writeout/writeout/merger/internal/source"
)

// The metric column tasks of a merge: each combines, for every output row, the values of the
// source rows it stands for (one without rollup) through the metric's kernel in columns/agg,
// in input order (sources in order, each in its row order), and appends the result.

// metricTask returns the task that writes metric m.
func (c *core) metricTask(w colwrite.Writer, m columns.Metric) (colTask, error) {
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
	case agg.SketchType:
		return c.sketchTask(w, m)
	}
	return nil, fmt.Errorf("metric %q: aggregator %s of no known type: %w", m.Name, m.Aggregator, ErrInvalid)
}
