package merger

import (
	"fmt"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/columns/agg"
	"github.com/writeout/writeout/internal/colwrite"
	"github.com/writeout/writeout/merger/internal/source"
)

// sketchTask writes a sketch metric: a row of one source row copies its bytes (checked to
// decode), a row combined from several merges their sketches and writes the result compacted
// (agg.Sketch.Compact), so that the same rows give the same bytes whatever the merge tree.
type sketchTask struct {
	name  string
	sks   agg.Sketches
	w     colwrite.SketchWriter
	r     []source.SketchReader
	names []string
	win   []blobRange
}

// sketchTask returns the task that writes sketch metric m.
func (c *core) sketchTask(w colwrite.Writer, m columns.Metric) (colTask, error) {
	sw, err := w.Sketch(m.Name)
	if err != nil {
		return nil, err
	}
	sks, err := m.Sketches()
	if err != nil {
		return nil, fmt.Errorf("metric %q: %w: %w", m.Name, ErrInvalid, err)
	}
	t := &sketchTask{name: m.Name, sks: sks, w: sw, r: make([]source.SketchReader, len(c.srcs)), names: c.names}
	for i, s := range c.srcs {
		t.r[i] = s.Sketch(m.Name)
	}
	return t, nil
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
				if err := t.sks.Check(raw); err != nil {
					return fmt.Errorf("merger: %s: metric %q: row %d: %w: %w", t.names[b.refIn[start]], t.name, b.refRow[start], columns.ErrCorrupt, err)
				}
				err = t.w.AppendBytes(raw)
			}
		} else {
			var acc agg.Sketch // nil: every source lacked the metric; written empty
			for k := start; k < end; k++ {
				if t.r[b.refIn[k]] == nil {
					continue
				}
				raw, err := t.read(b, k)
				if err != nil {
					return err
				}
				sk, err := t.sks.Decode(raw)
				if err != nil {
					return fmt.Errorf("merger: %s: metric %q: row %d: %w: %w", t.names[b.refIn[k]], t.name, b.refRow[k], columns.ErrCorrupt, err)
				}
				if acc == nil {
					acc = sk // as a merge into an empty sketch takes it
					continue
				}
				if err := acc.Merge(sk); err != nil {
					return fmt.Errorf("merger: %s: metric %q: %w", t.names[b.refIn[k]], t.name, err)
				}
			}
			if acc != nil {
				acc.Compact() // combined from several rows: the one form of its contents
			}
			err = t.w.Append(acc)
		}
		if err != nil {
			return fmt.Errorf("merger: metric %q: %w", t.name, err)
		}
		start = end
	}
	return nil
}
