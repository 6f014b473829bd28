package columns

import (
	"bytes"
	"cmp"
	"fmt"
	"hash/crc32"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/axiomhq/hyperloglog"

	"github.com/stretchr/testify/require"
	"github.com/writeout/writeout/columns/agg"

	"github.com/writeout/writeout/internal/sys"
	"github.com/writeout/writeout/medium"
)

// seedFor returns a seed for a test: WRITEOUT_SEED when set, else a fixed one; it is logged.
func seedFor(t testing.TB, fixed uint64) uint64 {
	t.Helper()
	seed := fixed
	if s := os.Getenv("WRITEOUT_SEED"); s != "" {
		_, err := fmt.Sscan(s, &seed)
		require.NoError(t, err)
	}
	t.Logf("seed %d (set WRITEOUT_SEED to repeat)", seed)
	return seed
}

var valuePool = []string{
	"", "a", "ab", "abc", "abd", "b", "page", "page/1", "page/2", "Zürich", "日本語", "日本", "emoji 🙂",
	"\x00", "\x00\x01", "\xff\xfe", "tab\tsep", "long-" + string(bytes.Repeat([]byte("x"), 300)),
	"Hello", "World", "Foo", "Bar", "Baz",
}

// randValue returns a dimension value: mostly from a pool with common prefixes, sometimes random
// bytes or unicode.
func randValue(rng *rand.Rand, card int) string {
	switch rng.IntN(10) {
	case 0:
		return valuePool[rng.IntN(len(valuePool))]
	case 1:
		b := make([]byte, rng.IntN(12))
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		return string(b)
	case 2:
		r := make([]rune, rng.IntN(5))
		for i := range r {
			r[i] = rune(0x400 + rng.IntN(0x3000))
		}
		return string(r)
	}
	return "value-" + strconv.Itoa(rng.IntN(max(card, 1)))
}

func randSchema(rng *rand.Rand) Schema {
	var s Schema
	nd := rng.IntN(6)
	for i := 0; i < nd; i++ {
		d := Dimension{Name: fmt.Sprintf("dim%d", i)}
		if i%3 == 2 {
			d.Name = fmt.Sprintf("dïm-%d 🙂", i)
		}
		switch rng.IntN(6) {
		case 1:
			d.MultiValue = true
		case 2:
			d.Raw = true
		case 3:
			d.NoBitmapIndex = true
		case 4:
			d.MultiValue, d.NoBitmapIndex = true, true
		}
		if rng.IntN(2) == 0 {
			d.Type = DimString
		}
		s.Dimensions = append(s.Dimensions, d)
	}
	for i, a := range testAggregators() {
		if rng.IntN(2) == 0 {
			m := Metric{Name: fmt.Sprintf("met%d", i), Aggregator: a}
			if rng.IntN(2) == 0 {
				m.Type = a.valueType()
			}
			s.Metrics = append(s.Metrics, m)
		}
	}
	s.Rollup = rng.IntN(2) == 0
	s.Granularity = Granularity(rng.IntN(5))
	return s
}

// testAggregators lists the aggregators the generic tests here generate values for: every one
// but the sketch kinds other than hyperUnique, whose values they make as HyperLogLog sketches
// (quantiles has its tests in columns/agg and merger/export).
func testAggregators() []Aggregator {
	var out []Aggregator
	for _, a := range aggregators {
		if s, _ := a.Spec(); s.Type != agg.SketchType || a == agg.HyperUnique {
			out = append(out, a)
		}
	}
	return out
}

// allSchema has every kind of column and every aggregator, and an hour granularity; rollup is
// off, so that the test row writer (rowsWriter) writes it (TestRoundTrip writes rollup schemas
// through rollupRows).
func allSchema() Schema {
	s := Schema{
		Dimensions: []Dimension{
			{Name: "page", Type: DimString},
			{Name: "tags", MultiValue: true},
			{Name: "body", Raw: true},
			{Name: "country", NoBitmapIndex: true},
			{Name: "flags", MultiValue: true, NoBitmapIndex: true},
		},
		Granularity: GranularityHour,
	}
	for _, a := range testAggregators() {
		s.Metrics = append(s.Metrics, Metric{Name: string(a) + "_m", Aggregator: a, Field: "f_" + string(a)})
	}
	return s
}

// rowGen generates rows deterministically from a seed, their times truncated to the schema's
// granularity.
type rowGen struct {
	rng      *rand.Rand
	s        Schema
	t        int64
	card     []int
	nullP    []float64
	step     int64
	row      int
	sketches bool
}

func newRowGen(seed uint64, s Schema) *rowGen {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	g := &rowGen{rng: rng, s: s, sketches: true}
	g.t = rng.Int64N(1<<41) - 1<<40
	g.step = []int64{0, 1, 1000, 3_600_000}[rng.IntN(4)]
	for range s.Dimensions {
		g.card = append(g.card, []int{1, 2, 10, 1000}[rng.IntN(4)])
		g.nullP = append(g.nullP, []float64{0, 0, 0.2, 1}[rng.IntN(4)])
	}
	return g
}

func (g *rowGen) next() Row {
	rng := g.rng
	if g.step > 0 && rng.IntN(3) > 0 {
		g.t += rng.Int64N(g.step + 1)
	}
	r := Row{Time: g.s.Granularity.Truncate(g.t), Dims: make([][]string, len(g.s.Dimensions)), Metrics: make([]Value, len(g.s.Metrics))}
	for i, d := range g.s.Dimensions {
		if rng.Float64() < g.nullP[i] {
			if rng.IntN(2) == 0 {
				r.Dims[i] = []string{} // empty is null too
			}
			continue
		}
		n := 1
		if d.MultiValue {
			n = rng.IntN(5)
		}
		if n == 0 {
			continue
		}
		vals := make([]string, n)
		for k := range vals {
			vals[k] = randValue(rng, g.card[i])
		}
		if d.MultiValue && n > 1 && rng.IntN(4) == 0 {
			vals[n-1] = vals[0] // duplicates stay
		}
		r.Dims[i] = vals
	}
	for i, m := range g.s.Metrics {
		switch m.ValueType() {
		case MetricLong:
			r.Metrics[i].Long = randLong(rng, g.row)
		case MetricDouble:
			r.Metrics[i].Double = randDouble(rng)
		case MetricHyperUnique:
			if g.sketches {
				sk := hyperloglog.New()
				for k := rng.IntN(4); k > 0; k-- {
					sk.Insert([]byte(randValue(rng, 1000)))
				}
				if rng.IntN(50) == 0 {
					for k := 0; k < 3000; k++ {
						sk.Insert(fmt.Appendf(nil, "u%d", k))
					}
				}
				r.Metrics[i].Sketch = hllOf(sk)
			}
		}
	}
	g.row++
	return r
}

func randLong(rng *rand.Rand, row int) int64 {
	switch rng.IntN(8) {
	case 0:
		return math.MinInt64
	case 1:
		return math.MaxInt64
	case 2:
		return 0
	case 3:
		return rng.Int64()
	case 4:
		return int64(row)
	}
	return rng.Int64N(1000) - 10
}

func randDouble(rng *rand.Rand) float64 {
	switch rng.IntN(10) {
	case 0:
		return math.NaN()
	case 1:
		return math.Inf(1 - 2*rng.IntN(2))
	case 2:
		return math.Copysign(0, -1)
	case 3:
		return rng.NormFloat64() * 1e300
	case 4:
		return math.SmallestNonzeroFloat64
	case 5, 6:
		return float64(rng.IntN(1000))
	}
	return rng.Float64() * 1000
}

// sketchBytes marshals a sketch as the writer does (nil is an empty sketch).
func sketchBytes(t testing.TB, sk agg.Sketch) []byte {
	if sk == nil {
		sk = hllOf(hyperloglog.New())
	}
	b, err := sk.AppendBinary(nil)
	require.NoError(t, err)
	return b
}

// hllOf returns the hyperUnique sketch of the library's sketch h, as it is represented.
func hllOf(h *hyperloglog.Sketch) agg.Sketch {
	b, err := h.MarshalBinary()
	if err != nil {
		panic(err)
	}
	a, _ := agg.Lookup("hyperUnique")
	sks, err := a.SketchesOf(nil)
	if err != nil {
		panic(err)
	}
	sk, err := sks.Decode(b)
	if err != nil {
		panic(err)
	}
	return sk
}

// requireRowEqual compares a row read back with the one written (sketch bytes given apart).
// It calls into testing only on a mismatch: it runs for every row of a million-row test.
func requireRowEqual(t testing.TB, s Schema, row int, want, got Row) {
	if want.Time != got.Time {
		require.Equal(t, want.Time, got.Time, "row %d time", row)
	}
	for i := range want.Dims {
		w := want.Dims[i]
		if len(w) == 0 {
			w = nil
		}
		if !slices.Equal(w, got.Dims[i]) || (w == nil) != (got.Dims[i] == nil) {
			require.Equal(t, w, got.Dims[i], "row %d dimension %q", row, s.Dimensions[i].Name)
		}
	}
	for i, m := range s.Metrics {
		w, g := want.Metrics[i], got.Metrics[i]
		if w.Null != g.Null {
			require.Equal(t, w.Null, g.Null, "row %d metric %q null", row, m.Name)
		}
		switch m.ValueType() {
		case MetricLong:
			if w.Long != g.Long {
				require.Equal(t, w.Long, g.Long, "row %d metric %q", row, m.Name)
			}
		case MetricDouble:
			if math.Float64bits(w.Double) != math.Float64bits(g.Double) {
				require.Equal(t, w.Double, g.Double, "row %d metric %q", row, m.Name)
			}
		case MetricHyperUnique:
			if g.Sketch == nil {
				require.NotNil(t, g.Sketch, "row %d metric %q", row, m.Name)
			}
		}
	}
}

// expectedDims computes, from rows, each dictionary dimension's sorted dictionary (with null
// first when present), ids per row and bitmaps per id: what the column-at-a-time writer is fed.
type expectedDim struct {
	hasNull bool
	values  []string // non-null, sorted
	ids     [][]uint32
	bitmaps []*roaring.Bitmap
	nulls   *roaring.Bitmap
}

func expectDims(s Schema, rows []Row) []*expectedDim {
	out := make([]*expectedDim, len(s.Dimensions))
	for i, d := range s.Dimensions {
		if d.Raw {
			continue
		}
		e := &expectedDim{nulls: roaring.New()}
		set := map[string]bool{}
		for r, row := range rows {
			if len(row.Dims[i]) == 0 {
				e.hasNull = true
				e.nulls.Add(uint32(r))
			}
			for _, v := range row.Dims[i] {
				set[v] = true
			}
		}
		for v := range set {
			e.values = append(e.values, v)
		}
		sort.Strings(e.values)
		off := uint32(0)
		if e.hasNull {
			off = 1
		}
		card := len(e.values) + int(off)
		for k := 0; k < card; k++ {
			e.bitmaps = append(e.bitmaps, roaring.New())
		}
		for r, row := range rows {
			var ids []uint32
			if len(row.Dims[i]) == 0 {
				ids = []uint32{0}
			}
			for _, v := range row.Dims[i] {
				ids = append(ids, uint32(sort.SearchStrings(e.values, v))+off)
			}
			for _, id := range ids {
				e.bitmaps[id].Add(uint32(r))
			}
			e.ids = append(e.ids, ids)
		}
		out[i] = e
	}
	return out
}

// rollupRows returns rows as a rolled-up segment holds them: sorted by (time, dimensions) in
// the merger's order (dictionary dimensions by id, ids in value order with null first;
// multi-value id lists element by element, a proper prefix first; raw values bytewise with
// null first), one row per key: the first (metrics are not combined).
func rollupRows(s Schema, rows []Row) []Row {
	exp := expectDims(s, rows)
	key := func(a, b int) int {
		if c := cmp.Compare(rows[a].Time, rows[b].Time); c != 0 {
			return c
		}
		for i, d := range s.Dimensions {
			c := 0
			if d.Raw {
				x, y := rows[a].Dims[i], rows[b].Dims[i]
				switch {
				case len(x) == 0 && len(y) == 0:
				case len(x) == 0:
					c = -1
				case len(y) == 0:
					c = 1
				default:
					c = strings.Compare(x[0], y[0])
				}
			} else {
				c = slices.Compare(exp[i].ids[a], exp[i].ids[b])
			}
			if c != 0 {
				return c
			}
		}
		return 0
	}
	idx := make([]int, len(rows))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, key)
	var out []Row
	for k, i := range idx {
		if k == 0 || key(idx[k-1], i) != 0 {
			out = append(out, rows[i])
		}
	}
	return out
}

func newTestBytes(t testing.TB) medium.Bytes {
	m := medium.NewHeap()
	t.Cleanup(func() { _ = m.Close() })
	b, err := m.NewBytes()
	require.NoError(t, err)
	return b
}

func slicesSortStrings(s []string) { sort.Strings(s) }

func itoa(i int) string { return strconv.Itoa(i) }

func crc(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

func sysDefaultCopy() *sys.Calls { c := sys.Default; return &c }

func errUnsupportedForTest() error { return fmt.Errorf("test: %w", sys.ErrUnsupported) }

func bitmapOf(rows ...uint32) *roaring.Bitmap { return roaring.BitmapOf(rows...) }
