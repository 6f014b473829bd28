package columns

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/columns/agg"
	"github.com/writeout/writeout/medium"
	"github.com/writeout/writeout/tmpfile"
)

// media are the media the round trips stage parts on.
func media(t *testing.T) map[string]func() medium.Medium {
	return map[string]func() medium.Medium{
		"heap": func() medium.Medium { return medium.NewHeap() },
		"tmpfile": func() medium.Medium {
			m, err := tmpfile.New(tmpfile.Options{Dir: t.TempDir(), MinBufferSize: 64, BufferSize: 4096})
			require.NoError(t, err)
			return m
		},
	}
}

// writeRows writes rows through a rowsWriter and returns the segment bytes.
func writeRows(t testing.TB, s Schema, rows []Row, opts writerOptions) []byte {
	t.Helper()
	w, err := newRowsWriter(s, opts)
	require.NoError(t, err)
	for _, r := range rows {
		require.NoError(t, w.AddRow(r))
	}
	var buf bytes.Buffer
	info, err := w.FinishTo(&buf)
	require.NoError(t, err)
	checkInfo(t, info, buf.Len())
	return buf.Bytes()
}

// checkInfo checks the parts the writer announced add up to the bytes it wrote.
func checkInfo(t testing.TB, info Info, size int) {
	t.Helper()
	require.Equal(t, int64(size), info.Size)
	off := int64(headerSize)
	for _, p := range info.Parts {
		require.Equal(t, off, p.Offset, "part %s/%s", p.Column, p.Kind)
		off += p.Length
	}
	require.Less(t, off, info.Size)
}

// writeColumns writes rows column by column, each column in its own goroutine, as the merger
// does, and returns the segment bytes.
func writeColumns(t testing.TB, s Schema, rows []Row, opts writerOptions) []byte {
	t.Helper()
	return writeColumnsWith(t, s, rows, expectDims(s, rows), opts)
}

// writeColumnsWith is writeColumns from dictionaries, ids and bitmaps computed beforehand (it
// run-optimizes the bitmaps in place).
func writeColumnsWith(t testing.TB, s Schema, rows []Row, exp []*expectedDim, opts writerOptions) []byte {
	w, err := newWriter(s, opts)
	require.NoError(t, err)
	feedColumns(t, w, s, rows, exp)
	var buf bytes.Buffer
	info, err := w.FinishTo(&buf)
	require.NoError(t, err)
	checkInfo(t, info, buf.Len())
	return buf.Bytes()
}

// feedColumns feeds rows to w column by column, each column in its own goroutine, from
// dictionaries, ids and bitmaps computed beforehand (it run-optimizes the bitmaps in place).
func feedColumns(t testing.TB, w *writer, s Schema, rows []Row, exp []*expectedDim) {
	var wg sync.WaitGroup
	errs := make(chan error, 1+len(s.Dimensions)+len(s.Metrics))
	run := func(fn func() error) {
		wg.Add(1)
		go func() { defer wg.Done(); errs <- fn() }()
	}
	tw, err := w.Time()
	require.NoError(t, err)
	run(func() error {
		for _, r := range rows {
			if err := tw.Append(r.Time); err != nil {
				return err
			}
		}
		return nil
	})
	for i, d := range s.Dimensions {
		if d.Raw {
			rw, err := w.Raw(d.Name)
			require.NoError(t, err)
			run(func() error {
				for _, r := range rows {
					var err error
					if len(r.Dims[i]) == 0 {
						err = rw.AppendNull()
					} else {
						err = rw.Append(r.Dims[i][0])
					}
					if err != nil {
						return err
					}
				}
				return nil
			})
			continue
		}
		dw, err := w.Dim(d.Name)
		require.NoError(t, err)
		e := exp[i]
		run(func() error {
			if e.hasNull {
				if err := dw.AddNull(); err != nil {
					return err
				}
			}
			for k, v := range e.values {
				id, err := dw.AddValue(v)
				if err != nil {
					return err
				}
				want := uint32(k)
				if e.hasNull {
					want++
				}
				if id != want {
					return fmt.Errorf("AddValue(%q) = %d, want %d", v, id, want)
				}
			}
			for _, ids := range e.ids {
				var err error
				if len(ids) == 1 && rand.IntN(2) == 0 {
					err = dw.AppendID(ids[0])
				} else {
					err = dw.AppendIDs(ids)
				}
				if err != nil {
					return err
				}
			}
			if d.NoBitmapIndex {
				return nil
			}
			for id, bm := range e.bitmaps {
				bm.RunOptimize()
				if err := dw.WriteBitmap(uint32(id), bm); err != nil {
					return err
				}
			}
			return nil
		})
	}
	for i, m := range s.Metrics {
		switch m.ValueType() {
		case MetricLong:
			lw, err := w.Long(m.Name)
			require.NoError(t, err)
			run(func() error {
				for _, r := range rows {
					var err error
					switch {
					case r.Metrics[i].Null:
						err = lw.AppendNull()
					case m.Agg().Timed():
						err = lw.AppendTimed(r.Metrics[i].Long, r.Time)
					default:
						err = lw.Append(r.Metrics[i].Long)
					}
					if err != nil {
						return err
					}
				}
				return nil
			})
		case MetricDouble:
			dw, err := w.Double(m.Name)
			require.NoError(t, err)
			run(func() error {
				for _, r := range rows {
					var err error
					switch {
					case r.Metrics[i].Null:
						err = dw.AppendNull()
					case m.Agg().Timed():
						err = dw.AppendTimed(r.Metrics[i].Double, r.Time)
					default:
						err = dw.Append(r.Metrics[i].Double)
					}
					if err != nil {
						return err
					}
				}
				return nil
			})
		case MetricHyperUnique:
			sw, err := w.Sketch(m.Name)
			require.NoError(t, err)
			run(func() error {
				for k, r := range rows {
					var err error
					if k%2 == 0 {
						err = sw.Append(r.Metrics[i].Sketch)
					} else {
						err = sw.AppendBytes(sketchBytes(t, r.Metrics[i].Sketch))
					}
					if err != nil {
						return err
					}
				}
				return nil
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

// checkSegment reads everything back and compares it with rows.
func checkSegment(t testing.TB, seg *Segment, s Schema, rows []Row, sketches [][][]byte) {
	t.Helper()
	require.NoError(t, seg.Verify())
	require.True(t, s.Equal(seg.Schema()), "schema %+v, want %+v", seg.Schema(), s)
	require.Equal(t, len(rows), seg.Rows())
	if len(rows) > 0 {
		g := s.Granularity
		require.Equal(t, Interval{g.Truncate(rows[0].Time), g.Truncate(rows[len(rows)-1].Time) + g.Millis()}, seg.Interval())
	} else {
		require.Equal(t, Interval{}, seg.Interval())
	}
	rr := seg.RowReader()
	var got Row
	for i, want := range rows {
		require.NoError(t, rr.Read(i, &got))
		requireRowEqual(t, s, i, want, got)
	}
	checkMetricTimes(t, seg, s, rows)
	exp := expectDims(s, rows)
	for i, d := range s.Dimensions {
		nulls, err := seg.nulls(d.Name)
		require.NoError(t, err)
		if d.Raw {
			want := expNulls(rows, i)
			require.True(t, want.Equals(nulls), "dimension %q nulls", d.Name)
			continue
		}
		e := exp[i]
		require.True(t, e.nulls.Equals(nulls), "dimension %q nulls", d.Name)
		col, err := seg.Dim(d.Name)
		require.NoError(t, err)
		require.Equal(t, e.hasNull, col.HasNull())
		off := 0
		if e.hasNull {
			off = 1
		}
		require.Equal(t, len(e.values)+off, col.Cardinality())
		it := col.Dictionary()
		var dict []string
		for it.Next() {
			require.Equal(t, e.hasNull && it.ID() == 0, it.IsNull())
			if !it.IsNull() {
				dict = append(dict, it.Value())
			}
		}
		require.NoError(t, it.Err())
		require.Equal(t, len(e.values), len(dict))
		for k, v := range e.values {
			require.Equal(t, v, dict[k])
			id, ok, err := col.Lookup(v)
			require.NoError(t, err)
			require.True(t, ok, "lookup %q", v)
			require.Equal(t, uint32(k+off), id)
			got, err := col.Value(id)
			require.NoError(t, err)
			require.Equal(t, v, got)
		}
		for _, missing := range []string{"\xff\xff\xff", "", "value-", "zzzz-missing"} {
			_, ok, err := col.Lookup(missing)
			require.NoError(t, err)
			require.Equal(t, containsString(e.values, missing), ok, "lookup %q", missing)
		}
		cur := col.Cursor()
		for r, ids := range e.ids {
			got, err := cur.IDs(r)
			require.NoError(t, err)
			require.Equal(t, ids, got, "dimension %q row %d", d.Name, r)
		}
		require.Equal(t, !d.NoBitmapIndex, col.HasBitmaps())
		if col.HasBitmaps() {
			for id, want := range e.bitmaps {
				got, err := seg.bitmap(d.Name, uint32(id))
				require.NoError(t, err)
				require.True(t, want.Equals(got), "dimension %q bitmap %d: %v, want %v", d.Name, id, got, want)
			}
		}
	}
	// Random access in random order, through one cursor per column.
	if len(rows) > 0 {
		tc := seg.Time().Cursor()
		for k := 0; k < 200; k++ {
			r := rand.IntN(len(rows))
			v, err := tc.At(r)
			require.NoError(t, err)
			require.Equal(t, rows[r].Time, v)
		}
		_, err := tc.At(len(rows))
		require.Error(t, err)
		_, err = tc.At(-1)
		require.Error(t, err)
	}
	for i, m := range s.Metrics {
		if m.ValueType() != MetricHyperUnique {
			continue
		}
		col, err := seg.Sketch(m.Name)
		require.NoError(t, err)
		cur := col.Cursor()
		for r := range rows {
			b, err := cur.Bytes(r)
			require.NoError(t, err)
			require.Equal(t, sketches[i][r], b, "metric %q row %d", m.Name, r)
			sk, err := cur.sketch(r)
			require.NoError(t, err)
			if rows[r].Metrics[i].Sketch != nil {
				require.Equal(t, rows[r].Metrics[i].Sketch.Clone().Estimate(), sk.Estimate())
			}
		}
	}
}

func expNulls(rows []Row, dim int) *roaring.Bitmap {
	e := expectDims(Schema{Dimensions: []Dimension{{Name: "x", MultiValue: true}}}, projectDim(rows, dim))
	return e[0].nulls
}

func projectDim(rows []Row, dim int) []Row {
	out := make([]Row, len(rows))
	for i, r := range rows {
		out[i] = Row{Time: r.Time, Dims: [][]string{r.Dims[dim]}}
	}
	return out
}

func containsString(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// marshalSketches records the bytes of every sketch before anything compacts them.
func marshalSketches(t testing.TB, s Schema, rows []Row) [][][]byte {
	out := make([][][]byte, len(s.Metrics))
	for i, m := range s.Metrics {
		if m.ValueType() != MetricHyperUnique {
			continue
		}
		for _, r := range rows {
			out[i] = append(out[i], sketchBytes(t, r.Metrics[i].Sketch))
		}
	}
	return out
}

// TestRoundTrip writes random schemas and rows through both ways of feeding a writer, every
// compression, on two media, publishes them, and reads them back through a mapping and through
// ReadAt: everything read equals what was written, and both ways give the same bytes. A rollup
// schema's rows are rolled up first (rollupRows) and go through the column writers only, as the
// merger writes them.
func TestRoundTrip(t *testing.T) {
	seed := seedFor(t, 20240611)
	rng := rand.New(rand.NewPCG(seed, 1))
	cases := 40
	if testing.Short() || raceEnabled {
		cases = 10
	}
	dir := t.TempDir()
	for c := 0; c < cases; c++ {
		s := randSchema(rng)
		if c == 0 {
			s = allSchema()
		}
		n := []int{0, 1, 2, 3, 17, 100, 1000, 5000}[rng.IntN(8)]
		if c < 3 {
			n = []int{0, 1, 2000}[c]
		}
		gen := newRowGen(rng.Uint64(), s)
		rows := make([]Row, n)
		for i := range rows {
			rows[i] = gen.next()
		}
		if s.Rollup {
			rows = rollupRows(s, rows)
			n = len(rows)
		}
		sketches := marshalSketches(t, s, rows)
		chunkRows := []int{1, 7, 100, 4096, 0}[rng.IntN(5)]
		comp := Compression(rng.IntN(4))
		for name, newMedium := range media(t) {
			t.Run(fmt.Sprintf("case=%d/rows=%d/chunk=%d/comp=%s/medium=%s", c, n, chunkRows, comp, name), func(t *testing.T) {
				m := newMedium()
				defer func() { require.NoError(t, m.Close()) }()
				opts := writerOptions{Medium: m, Compression: comp, ChunkRows: chunkRows}
				byCols := writeColumns(t, s, rows, opts)
				byRows := byCols
				if !s.Rollup {
					byRows = writeRows(t, s, rows, opts)
					require.True(t, bytes.Equal(byRows, byCols), "rows and column writers differ")
				}

				// Publish through Finish and open with a mapping and with ReadAt.
				w, err := newRowsWriter(s, opts)
				require.NoError(t, err)
				if s.Rollup {
					feedColumns(t, w.writer, s, rows, expectDims(s, rows))
				} else {
					for _, r := range rows {
						require.NoError(t, w.AddRow(r))
					}
				}
				path := filepath.Join(dir, fmt.Sprintf("seg-%d-%s", c, name))
				info, err := w.Finish(path, PublishOptions{Durability: medium.Durability{Sync: medium.SyncNone}})
				require.NoError(t, err)
				require.Equal(t, path, info.Path)
				file, err := os.ReadFile(path)
				require.NoError(t, err)
				require.True(t, bytes.Equal(byRows, file), "published file differs")

				seg, err := Open(path)
				require.NoError(t, err)
				checkSegment(t, seg, s, rows, sketches)
				require.NoError(t, seg.Close())
				require.NoError(t, seg.Close())
				_, err = seg.Time().Get(0)
				require.Error(t, err)

				f, err := os.Open(path)
				require.NoError(t, err)
				defer f.Close()
				seg2, err := NewSegment(f, info.Size)
				require.NoError(t, err)
				checkSegment(t, seg2, s, rows, sketches)
				require.NoError(t, seg2.Close())
			})
		}
	}
}

// millionGen makes the rows of the million-row round trip cheaply: values come from tables
// (with "", unicode and shared prefixes in them), so that the test measures the columns, not
// the generator.
type millionGen struct {
	rng    *rand.Rand
	t      int64
	tables [][]string
	row    int
}

func newMillionGen(seed uint64) *millionGen {
	g := &millionGen{rng: rand.New(rand.NewPCG(seed, 2)), t: 946684800000}
	for _, n := range []int{1000, 50, 5000, 200, 8} {
		tab := make([]string, n)
		for i := range tab {
			tab[i] = "v" + strconv.Itoa(i)
		}
		copy(tab, []string{"", "日本語", "Zürich", "\x00", "🙂"})
		g.tables = append(g.tables, tab)
	}
	return g
}

// millionSchema is allSchema without the hyperUnique metric (a sketch per row costs more than
// all other columns together, and sketches round-trip in TestRoundTrip) and at granularity
// none: millionGen's times step by milliseconds.
func millionSchema() Schema {
	s := allSchema()
	s.Granularity = GranularityNone
	s.Metrics = slices.DeleteFunc(s.Metrics, func(m Metric) bool { return m.Aggregator == agg.HyperUnique || m.Agg().Timed() })
	return s
}

func (g *millionGen) next(r *Row) {
	rng := g.rng
	g.t += int64(rng.IntN(3))
	r.Time = g.t
	r.Dims = grow(r.Dims[:0], 5)
	pick := func(d int) string { tab := g.tables[d]; return tab[rng.IntN(len(tab))] }
	r.Dims[0] = []string{pick(0)}
	r.Dims[1] = nil
	for k := rng.IntN(4); k > 0; k-- {
		r.Dims[1] = append(r.Dims[1], pick(1))
	}
	r.Dims[2] = nil
	if rng.IntN(10) > 0 {
		r.Dims[2] = []string{pick(2)}
	}
	r.Dims[3] = []string{pick(3)}
	if rng.IntN(5) == 0 {
		r.Dims[3] = nil
	}
	r.Dims[4] = []string{pick(4), pick(4)}
	r.Metrics = grow(r.Metrics[:0], 7)
	for i := range r.Metrics {
		r.Metrics[i] = Value{}
	}
	r.Metrics[0].Long = 1
	r.Metrics[1].Long = int64(g.row)
	r.Metrics[2].Long = rng.Int64()
	r.Metrics[3].Long = rng.Int64N(500)
	r.Metrics[4].Double = float64(rng.IntN(10000))
	r.Metrics[5].Double = rng.NormFloat64()
	r.Metrics[6].Double = float64(5000 + rng.IntN(3))
	g.row++
}

// TestRoundTripMillion writes a million rows of a schema with every kind of column, reads them
// all back in order and verifies the segment, on every medium.
func TestRoundTripMillion(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("a million rows take minutes under the race detector and in -short")
	}
	seed := seedFor(t, 77)
	s := millionSchema()
	const n = 1_000_000
	for name, newMedium := range media(t) {
		t.Run("medium="+name, func(t *testing.T) {
			m := newMedium()
			defer m.Close()
			start := time.Now()
			gen := newMillionGen(seed)
			w, err := newRowsWriter(s, writerOptions{Medium: m})
			require.NoError(t, err)
			var r Row
			for i := 0; i < n; i++ {
				gen.next(&r)
				if err := w.AddRow(r); err != nil {
					require.NoError(t, err)
				}
			}
			path := filepath.Join(t.TempDir(), "million")
			info, err := w.Finish(path, PublishOptions{})
			require.NoError(t, err)
			require.Equal(t, n, info.Rows)
			require.Equal(t, 2, info.Syncs)
			written := time.Since(start)

			start = time.Now()
			seg, err := Open(path)
			require.NoError(t, err)
			defer seg.Close()
			require.NoError(t, seg.Verify())
			verified := time.Since(start)

			start = time.Now()
			gen = newMillionGen(seed)
			rr := seg.RowReader()
			var got Row
			for i := 0; i < n; i++ {
				gen.next(&r)
				if err := rr.Read(i, &got); err != nil {
					require.NoError(t, err)
				}
				requireRowEqual(t, s, i, r, got)
			}
			t.Logf("%d rows, %d bytes (%.1f bytes/row); write+publish %v, open+verify %v, read+compare %v",
				n, info.Size, float64(info.Size)/n, written.Round(time.Millisecond), verified.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
		})
	}
}

// checkMetricTimes checks that first/last metrics stored each row's time with its value, and
// that no other metric has times; doubleSum metrics have tails, empty for values written exact.
func checkMetricTimes(t testing.TB, seg *Segment, s Schema, rows []Row) {
	t.Helper()
	for _, m := range s.Metrics {
		var times *Column[int64]
		switch m.ValueType() {
		case MetricLong:
			c, err := seg.Long(m.Name)
			require.NoError(t, err)
			times = c.Times()
		case MetricDouble:
			c, err := seg.Double(m.Name)
			require.NoError(t, err)
			times = c.Times()
			require.Equal(t, m.Agg().Exact(), c.Tails() != nil, "metric %q tails", m.Name)
			if tc := c.Tails(); tc != nil {
				cur := tc.Cursor()
				for i := range rows {
					tail, err := cur.Tail(i, nil)
					require.NoError(t, err)
					require.Empty(t, tail, "row %d metric %q", i, m.Name)
				}
			}
		case MetricHyperUnique:
			continue
		}
		require.Equal(t, m.Agg().Timed(), times != nil, "metric %q times", m.Name)
		if times == nil {
			continue
		}
		cur := times.Cursor()
		for i, r := range rows {
			v, err := cur.At(i)
			require.NoError(t, err)
			require.Equal(t, r.Time, v, "row %d metric %q time", i, m.Name)
		}
	}
}
