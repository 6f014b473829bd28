package columns

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/writeout/writeout/columns/agg"
	"github.com/writeout/writeout/internal/segfmt"
)

// Sketch metrics. A metric whose aggregator is a sketch aggregator (columns/agg: hyperUnique,
// ...) stores one serialized sketch per row, in blob chunks (segfmt.EncBlobChunks). Its schema entry
// may carry parameters the sketch kind interprets (Metric.Params), and InputSketch.

// Sketches returns the sketches of the metric: its aggregator's sketch kind with the metric's
// parameters; nil for a long or double metric. Bad parameters are an error.
func (m Metric) Sketches() (agg.Sketches, error) { return m.Agg().SketchesOf(m.Params) }

// column returns how the metric is stored: MetricLong, MetricDouble, or, for every sketch
// aggregator, MetricHyperUnique (one serialized sketch per row).
func (m Metric) column() MetricType {
	t := m.ValueType()
	if t != MetricLong && t != MetricDouble && t != "" {
		return MetricHyperUnique
	}
	return t
}

// metricKeys are the keys of a metric's JSON that Metric defines; the others are Params.
var metricKeys = map[string]bool{"name": true, "type": true, "aggregator": true, "fieldName": true, "isInputSketch": true}

// metricJSON is Metric without its methods, for encoding/json.
type metricJSON struct {
	Name        string     `json:"name"`
	Type        MetricType `json:"type,omitempty"`
	Aggregator  Aggregator `json:"aggregator"`
	Field       string     `json:"fieldName,omitempty"`
	InputSketch bool       `json:"isInputSketch,omitempty"`
}

// MarshalJSON writes the metric's keys, then its parameters in key order. A metric without
// parameters and InputSketch writes what it did before sketch parameters existed.
func (m Metric) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(metricJSON{m.Name, m.Type, m.Aggregator, m.Field, m.InputSketch})
	if err != nil || len(m.Params) == 0 {
		return b, err
	}
	keys := make([]string, 0, len(m.Params))
	for k := range m.Params {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = b[:len(b)-1]
	for _, k := range keys {
		kb, _ := json.Marshal(k)
		var v bytes.Buffer
		if err := json.Compact(&v, m.Params[k]); err != nil {
			return nil, fmt.Errorf("metric %q: parameter %q: %w", m.Name, k, err)
		}
		b = append(append(append(append(b, ','), kb...), ':'), v.Bytes()...)
	}
	return append(b, '}'), nil
}

// UnmarshalJSON reads the metric's keys; every other key is a parameter (Params), which
// Schema.Validate has the aggregator check.
func (m *Metric) UnmarshalJSON(data []byte) error {
	var all map[string]json.RawMessage
	if err := json.Unmarshal(data, &all); err != nil {
		return err
	}
	var known metricJSON
	var params map[string]json.RawMessage
	for k, v := range all {
		if metricKeys[k] {
			continue
		}
		if params == nil {
			params = map[string]json.RawMessage{}
		}
		params[k] = v
		delete(all, k)
	}
	rest, err := json.Marshal(all)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(rest, &known); err != nil {
		return err
	}
	*m = Metric{Name: known.Name, Type: known.Type, Aggregator: known.Aggregator, Field: known.Field, InputSketch: known.InputSketch, Params: params}
	return nil
}

// equalParams reports whether two metrics have the same parameters (compared as compact JSON).
func equalParams(a, b map[string]json.RawMessage) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		w, ok := b[k]
		if !ok {
			return false
		}
		var cv, cw bytes.Buffer
		if json.Compact(&cv, v) != nil || json.Compact(&cw, w) != nil || !bytes.Equal(cv.Bytes(), cw.Bytes()) {
			return false
		}
	}
	return true
}

// sketchWriter appends the sketches of a sketch metric.
type sketchWriter struct {
	blobWriter
	sks agg.Sketches
	buf []byte
}

// Append implements segwrite.SketchWriter.
func (s *sketchWriter) Append(sk agg.Sketch) error {
	if sk == nil {
		sk = s.sks.New()
	}
	var err error
	s.buf, err = sk.AppendBinary(s.buf[:0])
	if err != nil {
		if s.err == nil {
			s.err = fmt.Errorf("columns: column %q: row %d: %w", s.cw.st.name, s.rows, err)
		}
		return s.err
	}
	return s.append(s.buf)
}

// AppendBytes implements segwrite.SketchWriter.
func (s *sketchWriter) AppendBytes(b []byte) error { return s.append(b) }

func (s *sketchWriter) finish() error { return s.finishBlobs() }

// SketchColumn is a sketch metric: one serialized sketch per row.
type SketchColumn struct {
	seg  *Segment
	name string
	ix   *chunkIndex
	sks  agg.Sketches
}

// Cursor returns a new cursor over the column.
func (c *SketchColumn) Cursor() *SketchCursor {
	return &SketchCursor{blobCursor: blobCursor{name: c.name, cr: newChunkReader(&c.seg.src, c.ix)}, sks: c.sks}
}

// SketchCursor reads a sketch column chunk by chunk; one goroutine at a time.
type SketchCursor struct {
	blobCursor
	sks agg.Sketches
}

// Bytes returns the serialized sketch of row (as the writer stores it), valid
// until the cursor's next call.
// Bytes that do not decode (agg.Sketches.Check) are an error wrapping ErrCorrupt.
func (c *SketchCursor) Bytes(row int) ([]byte, error) {
	b, err := c.at(row)
	if err != nil {
		return nil, err
	}
	if err := c.sks.Check(b); err != nil {
		return nil, partError(c.name, segfmt.PartValues, corruptf("row %d: sketch: %v", row, err))
	}
	return b, nil
}

// sketch returns the sketch of row, decoded.
func (c *SketchCursor) sketch(row int) (agg.Sketch, error) {
	b, err := c.at(row)
	if err != nil {
		return nil, err
	}
	sk, err := c.sks.Decode(b)
	if err != nil {
		return nil, partError(c.name, segfmt.PartValues, corruptf("row %d: sketch: %v", row, err))
	}
	return sk, nil
}

// Sketches returns the column's sketch kind with its metric's parameters: what decodes its
// bytes and makes its sketches.
func (c *SketchCursor) Sketches() agg.Sketches { return c.sks }
