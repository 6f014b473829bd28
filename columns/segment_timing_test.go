package columns

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/axiomhq/hyperloglog"

	"github.com/writeout/writeout/internal/gen"
	"github.com/writeout/writeout/medium"
)

// Segment benchmarks: writing and reading whole segments of the Druid basic schema and the
// Pinot-shaped wide table from internal/gen, per compression. The segment size is reported as
// "bytes" and "bytes/row"; throughput is over the segment's bytes.
//
//	go test -run '^$' -bench 'Segment' -benchtime 3x ./columns/

// genTable maps a internal/gen table to a schema and rows: string columns become dimensions
// (raw, multi-value and bitmap-indexed as the generator says), aggregator columns become metrics
// computed per row (count 1, the source value, a sketch of the source dimension's values). Null
// elements inside multi-value rows, which the format has no place for, are dropped (a row left
// empty is null).
type genTable struct {
	g      gen.Generator
	schema Schema
	dimOf  []int // schema dimension -> gen string slot
	aggs   []gen.Column
	slots  map[string]gen.Column
}

func newGenTable(g gen.Generator) *genTable {
	t := &genTable{g: g, aggs: g.Aggregators(), slots: map[string]gen.Column{}}
	for _, c := range g.Schema() {
		t.slots[c.Name] = c
		if c.Kind != gen.String {
			continue
		}
		t.schema.Dimensions = append(t.schema.Dimensions, Dimension{
			Name: c.Name, MultiValue: c.MultiValue, Raw: c.Raw, NoBitmapIndex: !c.Raw && !c.Bitmap,
		})
		t.dimOf = append(t.dimOf, c.Slot)
	}
	for _, a := range t.aggs {
		t.schema.Metrics = append(t.schema.Metrics, Metric{Name: a.Name, Aggregator: Aggregator(a.Aggregator), Field: a.Source})
	}
	return t
}

// next fills r with the next row; false at the end.
func (t *genTable) next(gr *gen.Row, r *Row) bool {
	if !t.g.Next(gr) {
		return false
	}
	r.Time = gr.Time
	r.Dims = grow(r.Dims[:0], len(t.dimOf))
	for i, slot := range t.dimOf {
		v := &gr.Strings[slot]
		r.Dims[i] = r.Dims[i][:0]
		if v.Null {
			continue
		}
		for k, s := range v.Values {
			if !v.IsNullAt(k) {
				r.Dims[i] = append(r.Dims[i], s)
			}
		}
	}
	r.Metrics = grow(r.Metrics[:0], len(t.aggs))
	for i, a := range t.aggs {
		src := t.slots[a.Source]
		var v Value
		switch a.Aggregator {
		case gen.AggCount:
			v.Long = 1
		case gen.AggLongSum, gen.AggLongMax:
			v.Long = gr.Longs[src.Slot]
		case gen.AggDoubleSum, gen.AggDoubleMin:
			v.Double = gr.Doubles[src.Slot]
		case gen.AggHyperUnique:
			h := hyperloglog.New()
			for _, s := range gr.Strings[src.Slot].Values {
				h.Insert([]byte(s))
			}
			v.Sketch = hllOf(h)
		}
		r.Metrics[i] = v
	}
	return true
}

// countWriter counts the bytes written to it.
type countWriter struct{ n int64 }

func (c *countWriter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

// writeGen writes a generated table into a segment, returning its bytes (or just its size when
// out is nil).
func writeGen(b testing.TB, newGen func() gen.Generator, opts writerOptions, out io.Writer) Info {
	t := newGenTable(newGen())
	w, err := newRowsWriter(t.schema, opts)
	if err != nil {
		b.Fatal(err)
	}
	var gr gen.Row
	var r Row
	for t.next(&gr, &r) {
		if err := w.AddRow(r); err != nil {
			b.Fatal(err)
		}
	}
	if out == nil {
		out = &countWriter{}
	}
	info, err := w.FinishTo(out)
	if err != nil {
		b.Fatal(err)
	}
	return info
}

func BenchmarkSegmentWrite(b *testing.B) {
	tables := []struct {
		name string
		rows int
		gen  func() gen.Generator
	}{
		{"basic", 75000, func() gen.Generator { g, _ := gen.Basic(gen.BasicSeed, 75000); return g }},
		{"wide-payload64", 500000, func() gen.Generator {
			g, _ := gen.Wide(gen.BasicSeed, 500000, gen.WideOptions{PayloadLen: 64})
			return g
		}},
	}
	for _, tb := range tables {
		for _, c := range []Compression{CompressionNone, CompressionS2, CompressionZstd} {
			b.Run(fmt.Sprintf("table=%s/rows=%d/compression=%s", tb.name, tb.rows, c), func(b *testing.B) {
				b.ReportAllocs()
				var info Info
				for b.Loop() {
					info = writeGen(b, tb.gen, writerOptions{Compression: c, Medium: medium.NewHeap()}, nil)
				}
				b.SetBytes(info.Size)
				b.ReportMetric(float64(info.Size), "bytes")
				b.ReportMetric(float64(info.Size)/float64(tb.rows), "bytes/row")
			})
		}
	}
}

// BenchmarkSegmentRead reads every value of every column of the basic segment through column
// cursors, chunk at a time, as the merger does.
func BenchmarkSegmentRead(b *testing.B) {
	for _, c := range []Compression{CompressionNone, CompressionS2, CompressionZstd} {
		var buf bytesBuffer
		writeGen(b, func() gen.Generator { g, _ := gen.Basic(gen.BasicSeed, 75000); return g }, writerOptions{Compression: c}, &buf)
		seg, err := newSegmentBytes(buf.b)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("table=basic/rows=75000/compression=%s/op=cursors", c), func(b *testing.B) {
			b.SetBytes(int64(len(buf.b)))
			b.ReportAllocs()
			for b.Loop() {
				if err := readColumns(seg); err != nil {
					b.Fatal(err)
				}
			}
		})
		// A segment opened for each read: with checks=on every part's CRC is computed once, as
		// in any first read of an open segment; checks=off opens it trusted.
		for _, checks := range []string{"on", "off"} {
			b.Run(fmt.Sprintf("table=basic/rows=75000/compression=%s/op=open-cursors/checks=%s", c, checks), func(b *testing.B) {
				b.SetBytes(int64(len(buf.b)))
				b.ReportAllocs()
				for b.Loop() {
					seg, err := newSegment(source{data: buf.b, size: int64(len(buf.b))}, "", nil, OpenOptions{TrustChecksums: checks == "off"})
					if err != nil {
						b.Fatal(err)
					}
					if err := readColumns(seg); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
		b.Run(fmt.Sprintf("table=basic/rows=75000/compression=%s/op=verify", c), func(b *testing.B) {
			b.SetBytes(int64(len(buf.b)))
			b.ReportAllocs()
			for b.Loop() {
				if err := seg.Verify(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// readColumns reads every row of every column through cursors: ids for dictionary dimensions,
// bytes for raw ones and sketches, numbers for the rest.
func readColumns(seg *Segment) error {
	n := seg.Rows()
	s := seg.Schema()
	tc := seg.Time().Cursor()
	for r := 0; r < n; {
		first, vals, err := tc.Chunk(r)
		if err != nil {
			return err
		}
		r = first + len(vals)
	}
	for _, d := range s.Dimensions {
		if d.Raw {
			c, _ := seg.Raw(d.Name)
			cur := c.Cursor()
			for r := 0; r < n; r++ {
				if _, _, err := cur.Bytes(r); err != nil {
					return err
				}
			}
			continue
		}
		c, _ := seg.Dim(d.Name)
		cur := c.Cursor()
		for r := 0; r < n; {
			first, ids, offs, err := cur.Chunk(r)
			if err != nil {
				return err
			}
			if offs != nil {
				r = first + len(offs) - 1
			} else {
				r = first + len(ids)
			}
		}
	}
	for _, m := range s.Metrics {
		switch m.ValueType() {
		case MetricLong:
			c, _ := seg.Long(m.Name)
			cur := c.Cursor()
			for r := 0; r < n; {
				first, vals, err := cur.Chunk(r)
				if err != nil {
					return err
				}
				r = first + len(vals)
			}
		case MetricDouble:
			c, _ := seg.Double(m.Name)
			cur := c.Cursor()
			for r := 0; r < n; {
				first, vals, err := cur.Chunk(r)
				if err != nil {
					return err
				}
				r = first + len(vals)
			}
		case MetricHyperUnique:
			c, _ := seg.Sketch(m.Name)
			cur := c.Cursor()
			for r := 0; r < n; r++ {
				if _, err := cur.Bytes(r); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

type bytesBuffer struct{ b []byte }

func (w *bytesBuffer) Write(p []byte) (int, error) { w.b = append(w.b, p...); return len(p), nil }

// TestGenTables writes the internal/gen tables into segments and checks them (a small number of
// rows, so that it runs in CI).
func TestGenTables(t *testing.T) {
	for name, g := range map[string]func() gen.Generator{
		"basic": func() gen.Generator { g, _ := gen.Basic(gen.BasicSeed, 3000); return g },
		"wide":  func() gen.Generator { g, _ := gen.Wide(gen.BasicSeed, 3000, gen.WideOptions{}); return g },
	} {
		var buf bytesBuffer
		info := writeGen(t, g, writerOptions{}, &buf)
		seg, err := newSegmentBytes(buf.b)
		if err != nil {
			t.Fatal(err)
		}
		if err := seg.Verify(); err != nil {
			t.Fatal(err)
		}
		tab := newGenTable(g())
		var gr gen.Row
		var want, got Row
		rr := seg.RowReader()
		for i := 0; tab.next(&gr, &want); i++ {
			if err := rr.Read(i, &got); err != nil {
				t.Fatal(err)
			}
			requireRowEqual(t, tab.schema, i, want, got)
		}
		t.Logf("%s: %d rows, %d bytes (%.1f bytes/row)", name, info.Rows, info.Size, float64(info.Size)/float64(info.Rows))
	}
}

// BenchmarkSegmentWriteColumns writes the basic table through the column writers, each column
// in its own goroutine, from dictionaries, ids and bitmaps computed beforehand: the writer's
// share of a merge.
func BenchmarkSegmentWriteColumns(b *testing.B) {
	g, _ := gen.Basic(gen.BasicSeed, 75000)
	t := newGenTable(g)
	var rows []Row
	var gr gen.Row
	for {
		var r Row
		if !t.next(&gr, &r) {
			break
		}
		rows = append(rows, r)
	}
	exp := expectDims(t.schema, rows)
	for _, c := range []Compression{CompressionNone, CompressionS2, CompressionZstd} {
		b.Run(fmt.Sprintf("table=basic/rows=75000/compression=%s", c), func(b *testing.B) {
			b.ReportAllocs()
			var n int
			for b.Loop() {
				n = len(writeColumnsWith(b, t.schema, rows, exp, writerOptions{Compression: c}))
			}
			b.SetBytes(int64(n))
		})
	}
}

// BenchmarkTimeAppendValues appends 1,000,000 increasing times to __time in batches of 4096
// (a merge's time task): the bulk path's checks against value by value.
func BenchmarkTimeAppendValues(b *testing.B) {
	times := make([]int64, 1_000_000)
	for i := range times {
		times[i] = 1_767_225_600_000 + int64(i)*29
	}
	b.ReportAllocs()
	for b.Loop() {
		w, err := newWriter(Schema{}, writerOptions{})
		if err != nil {
			b.Fatal(err)
		}
		tw, err := w.Time()
		if err != nil {
			b.Fatal(err)
		}
		for lo := 0; lo < len(times); lo += 4096 {
			if err := tw.AppendValues(times[lo:min(len(times), lo+4096)]); err != nil {
				b.Fatal(err)
			}
		}
		if err := w.Abort(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCursorSeek reads a long column of 1,000,000 rows in chunks of 64 at random rows
// through one cursor: every read finds its chunk by a binary search of the chunk index (15,625
// entries) and decodes it; mapped is over the segment's bytes, readat through an io.ReaderAt.
func BenchmarkCursorSeek(b *testing.B) {
	const rows = 1_000_000
	data, err := os.ReadFile(writeLongSegment(b, rows, 64))
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	seek := make([]int, 1<<12)
	for i := range seek {
		seek[i] = rng.IntN(rows)
	}
	for _, src := range []string{"mapped", "readat"} {
		b.Run("source="+src, func(b *testing.B) {
			seg, err := newSegmentBytes(data)
			if src == "readat" {
				seg, err = NewSegment(bytes.NewReader(data), int64(len(data)))
			}
			if err != nil {
				b.Fatal(err)
			}
			c, err := seg.Long("n")
			if err != nil {
				b.Fatal(err)
			}
			cur := c.Cursor()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, err := cur.At(seek[i%len(seek)]); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}
