package ingest_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/columns/agg"
	"github.com/writeout/writeout/medium"
	"github.com/writeout/writeout/merger"
	"github.com/writeout/writeout/merger/ingest"
	"github.com/writeout/writeout/merger/query"
)

// The differential test: one semantics whatever path rows take to a segment. Seeded random
// schemas (every aggregator, single-, multi-value and raw dimensions, every granularity, rollup
// on and off) and row sets (nulls, empty strings, duplicates in multi-value rows, doubleSum
// cancellation such as 1e16, 1, -1e16 under one key, ties of event times) go
//
//	(a) through package ingest from CSV and from NDJSON,
//	(b) through a merger.Builder and Persist,
//	(c) through ingest with so few rows in memory that it spills runs and merges them,
//	(d) through Builders persisted in pieces and merged by merger.Merge, in one phase and
//	    with MaxFanIn 2,
//
// and must give byte-identical segment files, whose every row, metric value and stored
// first/last time equals an oracle computed here from the input rows alone.
//
// Every long and double metric has null values, at a rate drawn per case and metric (1/15,
// 1/4, 1/2, or all null), written as an empty CSV field, the CSV null text, a column missing
// from the header (a metric null in every row), an NDJSON null, "" or missing key; some cases
// list metrics in input.nullAsZero, whose nulls read as 0. The oracle drops nulls and combines
// the rest: a group with no value left is null (0 for count), min, max, first and last ignore
// nulls, and a null row stores the value 0 and the time 0. Queries of the
// builder (with and without live bitmaps), of the segment and of the pieces equal the
// oracle's aggregation of the input rows.

const diffCases = 320

func TestDifferential(t *testing.T) {
	seed := uint64(20261201)
	if s := os.Getenv("WRITEOUT_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		require.NoError(t, err)
		seed = v
	}
	t.Logf("seed %d (set WRITEOUT_SEED to repeat with another)", seed)
	n := diffCases
	if testing.Short() {
		n = 60
	}
	var inNulls, inValues, outNulls, outRows int
	for i := 0; i < n; i++ {
		c := newDiffCase(seed, uint64(i))
		for _, r := range c.rows {
			for _, name := range c.metricFields() {
				if r.absent[name] {
					inNulls++
				} else {
					inValues++
				}
			}
		}
		t.Run(fmt.Sprintf("case=%d", i), func(t *testing.T) {
			seg := c.run(t)
			for _, r := range seg.rows {
				outRows++
				for _, v := range r.Metrics {
					if v.Null {
						outNulls++
					}
				}
			}
		})
	}
	// The cases must exercise nulls: many input nulls, and null values in the segments.
	t.Logf("metric values in: %d null, %d not; segment rows %d with %d null metric values", inNulls, inValues, outRows, outNulls)
	require.Greater(t, inNulls, n*10)
	require.Greater(t, outNulls, n)
}

// TestDifferentialRegressions pins the three disagreements the paths used to have.
func TestDifferentialRegressions(t *testing.T) {
	dims := []diffDim{{name: "page"}}
	rollupHour := columns.Schema{Rollup: true, Granularity: columns.GranularityHour}
	t.Run("doubleSum 1e16 1 -1e16 under one key", func(t *testing.T) {
		c := &diffCase{dims: dims, schema: rollupHour, rows: []diffRow{
			{time: 0, dims: [][]string{{"a"}}, doubles: map[string]float64{"m_doubleSum": 1e16}},
			{time: 1, dims: [][]string{{"a"}}, doubles: map[string]float64{"m_doubleSum": 1}},
			{time: 2, dims: [][]string{{"a"}}, doubles: map[string]float64{"m_doubleSum": -1e16}},
		}}
		c.finish()
		seg := c.run(t)
		v, err := seg.doubles("m_doubleSum")
		require.NoError(t, err)
		require.Equal(t, []float64{1}, v)
	})
	t.Run("one row at 10:17 hour granularity interval 10:00/11:00", func(t *testing.T) {
		at := int64(1714558620000) // 2024-05-01T10:17:00Z
		c := &diffCase{dims: dims, schema: rollupHour, rows: []diffRow{{time: at, dims: [][]string{{"a"}}}}}
		c.finish()
		seg := c.run(t)
		require.Equal(t, "2024-05-01T10:00:00.000Z/2024-05-01T11:00:00.000Z", seg.interval)
	})
	t.Run("nulls: longMin over missing values, all-null doubleSum", func(t *testing.T) {
		c := &diffCase{dims: dims, schema: rollupHour, rows: []diffRow{
			{time: 0, dims: [][]string{{"a"}}, longs: map[string]int64{"m_longMin": 7}},
			{time: 1, dims: [][]string{{"a"}}},
			{time: 2, dims: [][]string{{"a"}}, longs: map[string]int64{"m_longMin": 3}},
		}}
		c.finish()
		seg := c.run(t)
		require.Len(t, seg.rows, 1)
		k := c.schema.Metric("m_longMin")
		require.Equal(t, columns.Value{Long: 3}, seg.rows[0].Metrics[k], "a missing value is not 0")
		k = c.schema.Metric("m_doubleSum")
		require.Equal(t, columns.Value{Null: true}, seg.rows[0].Metrics[k], "a sum of nulls is null, not 0")
		k = c.schema.Metric("m_count")
		require.Equal(t, columns.Value{Long: 3}, seg.rows[0].Metrics[k], "count counts every row")
	})
	t.Run("rollup rows are rolled up and truncated", func(t *testing.T) {
		c := &diffCase{dims: dims, schema: rollupHour, rows: []diffRow{
			{time: 3_600_000 + 5, dims: [][]string{{"a"}}},
			{time: 3_600_000 + 9, dims: [][]string{{"a"}}},
		}}
		c.finish()
		seg := c.run(t)
		require.Len(t, seg.rows, 1)
		require.Equal(t, int64(3_600_000), seg.rows[0].Time)
	})
}

type diffDim struct {
	name        string
	multi, raw  bool
	noBitmapIdx bool
}

type diffRow struct {
	time    int64
	dims    [][]string // nil: null
	longs   map[string]int64
	doubles map[string]float64
	absent  map[string]bool // metric fields missing: null (0 for a metric of nullAsZero)
	user    string          // "" : null (hyperUnique adds nothing)
}

type diffCase struct {
	seed   uint64
	dims   []diffDim
	schema columns.Schema
	rows   []diffRow
	// uniqueTimes: no two rows share an event time, so first/last of queries over rows of
	// different keys have no ties to break.
	uniqueTimes bool
	spec        *ingest.Spec
	nullAsZero  map[string]bool // metrics of input.nullAsZero
	dropColumns map[string]bool // CSV: metric columns left out of the header (null in every row)
}

var vocab = []string{"", "a", "b", "c", "Zürich", "x,y", `q"uote`, "日本"}

func newDiffCase(seed, i uint64) *diffCase {
	rng := rand.New(rand.NewPCG(seed, i))
	c := &diffCase{seed: i}
	nd := 1 + rng.IntN(3)
	for d := 0; d < nd; d++ {
		dd := diffDim{name: fmt.Sprintf("d%d", d)}
		switch rng.IntN(4) {
		case 1:
			dd.multi = true
		case 2:
			dd.raw = true
		case 3:
			dd.noBitmapIdx = true
		}
		c.dims = append(c.dims, dd)
	}
	c.schema.Rollup = rng.IntN(2) == 0
	c.schema.Granularity = columns.Granularity(rng.IntN(5))
	c.uniqueTimes = rng.IntN(2) == 0
	n := rng.IntN(70)
	card := 1 + rng.IntN(len(vocab))
	base := int64(1714521600000) + int64(rng.IntN(1000))*3_600_000
	span := []int64{10, 5_000, 600_000, 7_200_000, 2 * 86_400_000}[rng.IntN(5)]
	if c.uniqueTimes {
		span = max(span, int64(4*n)) // room for n distinct times
	}
	used := map[int64]bool{}
	// Every long and double metric has nulls, at its own rate; some read nulls as 0.
	nullRate := map[string]float64{}
	c.nullAsZero, c.dropColumns = map[string]bool{}, map[string]bool{}
	zeroSome := rng.IntN(4) == 0
	for _, a := range agg.All() {
		if !a.Nullable() {
			continue
		}
		name := "m_" + a.Name
		nullRate[name] = []float64{1.0 / 15, 0.25, 0.5, 1}[rng.IntN(4)]
		if zeroSome && rng.IntN(3) == 0 {
			c.nullAsZero[name] = true
		}
		if nullRate[name] == 1 && rng.IntN(2) == 0 {
			c.dropColumns[name] = true
		}
	}
	for r := 0; r < n; r++ {
		row := diffRow{longs: map[string]int64{}, doubles: map[string]float64{}, absent: map[string]bool{}}
		for {
			row.time = base + rng.Int64N(span)
			if !c.uniqueTimes || !used[row.time] {
				break
			}
		}
		used[row.time] = true
		for _, d := range c.dims {
			var vals []string
			switch {
			case rng.IntN(6) == 0:
				vals = nil
			case d.multi:
				for k := rng.IntN(4); k > 0; k-- {
					vals = append(vals, vocab[rng.IntN(card)])
				}
			default:
				vals = []string{vocab[rng.IntN(card)]}
			}
			row.dims = append(row.dims, vals)
		}
		for _, a := range agg.All() {
			name := "m_" + a.Name
			if a.CountsRows || a.Type == agg.SketchType {
				continue
			}
			if rng.Float64() < nullRate[name] {
				row.absent[name] = true
				continue
			}
			switch a.Type {
			case agg.Long:
				v := rng.Int64N(200) - 100
				if rng.IntN(20) == 0 {
					// Large, but summed within int64 by every path: a sum that does not fit
					// is an error (agg.ErrOverflow), tested on its own in overflow_test.go.
					v = math.MaxInt64>>12 - rng.Int64N(3)
				}
				row.longs[name] = v
			case agg.Double:
				v := []float64{1e16, 1, -1e16, 0.1, 0.2, 2.5, -7, 1e-300, 3e300}[rng.IntN(9)]
				if rng.IntN(3) == 0 {
					v = math.Round(rng.NormFloat64()*1e6) / 64
				}
				row.doubles[name] = v
			case agg.SketchType:
			}
		}
		if rng.IntN(5) > 0 {
			row.user = fmt.Sprintf("u%d", rng.IntN(12))
		}
		c.rows = append(c.rows, row)
	}
	c.finish()
	return c
}

// finish builds the schema and the ingestion spec from the dimensions; every aggregator has a
// metric m_<aggregator>, reading the input field of its name (hyperUnique: the field user).
func (c *diffCase) finish() {
	c.schema.Dimensions = nil
	c.schema.Metrics = nil
	for _, d := range c.dims {
		c.schema.Dimensions = append(c.schema.Dimensions, columns.Dimension{Name: d.name, MultiValue: d.multi, Raw: d.raw, NoBitmapIndex: d.noBitmapIdx})
	}
	for _, e := range agg.All() {
		a := columns.Aggregator(e.Name)
		m := columns.Metric{Name: "m_" + string(a), Aggregator: a}
		if a == agg.HyperUnique {
			m.Field = "user"
		}
		c.schema.Metrics = append(c.schema.Metrics, m)
	}
	// hyperUnique over the first dimension: the sketch of each row derives from its values.
	c.schema.Metrics = append(c.schema.Metrics, columns.Metric{Name: "m_uniqueDim", Aggregator: agg.HyperUnique, Field: c.dims[0].name})
	for i := range c.rows {
		r := &c.rows[i]
		if r.longs == nil {
			r.longs = map[string]int64{}
		}
		if r.doubles == nil {
			r.doubles = map[string]float64{}
		}
		for len(r.dims) < len(c.dims) {
			r.dims = append(r.dims, nil)
		}
		if r.absent == nil {
			r.absent = map[string]bool{}
		}
		for _, name := range c.metricFields() {
			_, l := r.longs[name]
			_, d := r.doubles[name]
			if !l && !d {
				r.absent[name] = true // no value given: missing
			}
		}
	}
	// The spec as users write it: the schema's JSON plus the "input" key.
	var top map[string]any
	schema, err := json.Marshal(c.schema)
	if err == nil {
		err = json.Unmarshal(schema, &top)
	}
	if err != nil {
		panic(err)
	}
	input := map[string]any{"nullValue": "NULL"}
	var zero []string
	for _, name := range c.metricFields() {
		if c.nullAsZero[name] {
			zero = append(zero, name)
		}
	}
	if len(zero) > 0 {
		input["nullAsZero"] = zero
	}
	top["input"] = input
	data, err := json.Marshal(top)
	if err == nil {
		c.spec, err = ingest.ParseSpec(data)
	}
	if err != nil {
		panic(err)
	}
}

// nullAt returns how row r writes a missing value of metric name: 0, 1 or 2 (CSV: empty field,
// the null text, the empty field again; NDJSON: missing key, null, ""), a function of the row
// and name, so that every form turns up.
func nullAt(r int, name string) int {
	h := uint32(r)*2654435761 + uint32(len(name))*40503
	for _, ch := range name {
		h = h*31 + uint32(ch)
	}
	return int(h>>7) % 3
}

// columnsRow is row r as a Builder takes it.
func (c *diffCase) columnsRow(r diffRow) columns.Row {
	out := columns.Row{Time: r.time, Dims: r.dims, Metrics: make([]columns.Value, len(c.schema.Metrics))}
	for i, m := range c.schema.Metrics {
		name := m.Name
		if r.absent[name] && m.Agg().Nullable() && !c.nullAsZero[name] {
			out.Metrics[i].Null = true
			continue
		}
		switch m.ValueType() {
		case columns.MetricLong:
			out.Metrics[i].Long = r.longs[name]
		case columns.MetricDouble:
			out.Metrics[i].Double = r.doubles[name]
		case columns.MetricHyperUnique:
			if r.user != "" && m.Field == "user" { // over a dimension: the Builder derives it
				sks, _ := m.Sketches()
				sk := sks.New()
				_ = sk.Insert([]byte(r.user))
				out.Metrics[i].Sketch = sk
			}
		}
	}
	return out
}

func (c *diffCase) metricFields() []string {
	var f []string
	for _, m := range c.schema.Metrics {
		if m.Aggregator != agg.Count && m.Aggregator != agg.HyperUnique {
			f = append(f, m.Name)
		}
	}
	return f
}

// csvMetricFields are the metric columns of the CSV header: all but the dropped ones.
func (c *diffCase) csvMetricFields() []string {
	var f []string
	for _, name := range c.metricFields() {
		if !c.dropColumns[name] {
			f = append(f, name)
		}
	}
	return f
}

func (c *diffCase) csvText(t *testing.T) string {
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	header := []string{"__time"}
	for _, d := range c.dims {
		header = append(header, d.name)
	}
	header = append(header, c.csvMetricFields()...)
	header = append(header, "user")
	require.NoError(t, w.Write(header))
	for ri, r := range c.rows {
		rec := []string{strconv.FormatInt(r.time, 10)}
		for _, vals := range r.dims {
			if vals == nil {
				rec = append(rec, "NULL")
			} else {
				rec = append(rec, strings.Join(vals, "|"))
			}
		}
		for _, name := range c.csvMetricFields() {
			if r.absent[name] && nullAt(ri, name) == 1 {
				rec = append(rec, "NULL")
				continue
			}
			rec = append(rec, c.fieldText(r, name))
		}
		rec = append(rec, cmp.Or(r.user, "NULL"))
		require.NoError(t, w.Write(rec))
	}
	w.Flush()
	require.NoError(t, w.Error())
	return b.String()
}

func (c *diffCase) fieldText(r diffRow, name string) string {
	if r.absent[name] {
		return ""
	}
	if v, ok := r.longs[name]; ok {
		return strconv.FormatInt(v, 10)
	}
	if v, ok := r.doubles[name]; ok {
		return strconv.FormatFloat(v, 'g', -1, 64)
	}
	return ""
}

func (c *diffCase) ndjsonText(t *testing.T) string {
	var b bytes.Buffer
	for ri, r := range c.rows {
		obj := map[string]any{"__time": r.time}
		for k, vals := range r.dims {
			switch {
			case vals == nil:
				obj[c.dims[k].name] = nil
			case c.dims[k].multi:
				obj[c.dims[k].name] = vals
			default:
				obj[c.dims[k].name] = vals[0]
			}
		}
		for _, name := range c.metricFields() {
			if r.absent[name] {
				switch nullAt(ri, name) {
				case 1:
					obj[name] = nil
				case 2:
					obj[name] = ""
				}
				continue // or the key left out
			}
			if v, ok := r.longs[name]; ok {
				obj[name] = v
			} else if v, ok := r.doubles[name]; ok {
				obj[name] = json.Number(strconv.FormatFloat(v, 'g', -1, 64))
			}
		}
		if r.user != "" {
			obj["user"] = r.user
		}
		line, err := json.Marshal(obj)
		require.NoError(t, err)
		b.Write(line)
		b.WriteByte('\n')
	}
	return b.String()
}

// readSeg is a segment read back whole.
type readSeg struct {
	bytes    []byte
	interval string
	rows     []columns.Row
	times    map[string][]int64 // first/last metrics' stored times
	seg      *columns.Segment
}

func (s *readSeg) doubles(name string) ([]float64, error) {
	k := s.seg.Schema().Metric(name)
	var out []float64
	for _, r := range s.rows {
		out = append(out, r.Metrics[k].Double)
	}
	return out, nil
}

func readSegment(t *testing.T, path string) *readSeg {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	seg, err := columns.Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { _ = seg.Close() })
	require.NoError(t, seg.Verify(), "%s", path)
	out := &readSeg{bytes: b, interval: seg.Interval().String(), times: map[string][]int64{}, seg: seg}
	if seg.Rows() == 0 {
		out.interval = ""
	}
	rr := seg.RowReader()
	for i := 0; i < seg.Rows(); i++ {
		var r columns.Row
		require.NoError(t, rr.Read(i, &r))
		out.rows = append(out.rows, r)
	}
	for _, m := range seg.Schema().Metrics {
		var tc *columns.Column[int64]
		switch m.ValueType() {
		case columns.MetricLong:
			c, err := seg.Long(m.Name)
			require.NoError(t, err)
			tc = c.Times()
		case columns.MetricDouble:
			c, err := seg.Double(m.Name)
			require.NoError(t, err)
			tc = c.Times()
		case columns.MetricHyperUnique:
		}
		if tc == nil {
			continue
		}
		cur := tc.Cursor()
		for i := 0; i < seg.Rows(); i++ {
			v, err := cur.At(i)
			require.NoError(t, err)
			out.times[m.Name] = append(out.times[m.Name], v)
		}
	}
	return out
}

// run writes the case through every path, requires byte-identical files, checks them and the
// queries against the oracle, and returns the segment.
func (c *diffCase) run(t *testing.T) *readSeg {
	ctx := context.Background()
	dir := t.TempDir()
	paths := map[string]string{}
	ingestTo := func(name, text string, format ingest.Format, maxRows int) {
		out := filepath.Join(dir, name+".seg")
		_, err := ingest.Run(ctx, c.spec, []ingest.Input{{Name: name, Format: format, Reader: strings.NewReader(text)}},
			ingest.Options{Out: out, MaxRowsInMemory: maxRows, TmpDir: dir, Durability: noSync})
		require.NoError(t, err, "ingest %s", name)
		paths[name] = out
	}
	csvText, ndText := c.csvText(t), c.ndjsonText(t)
	ingestTo("ingest-csv", csvText, ingest.CSV, 0)
	ingestTo("ingest-ndjson", ndText, ingest.NDJSON, 0)
	ingestTo("ingest-spill", csvText, ingest.CSV, 1+int(c.seed%4))

	// (b) one Builder, persisted.
	b := c.builder(t, c.rows, merger.BuilderOptions{})
	paths["builder"] = filepath.Join(dir, "builder.seg")
	_, err := b.Persist(ctx, paths["builder"], merger.PersistOptions{Durability: noSync})
	require.NoError(t, err)

	// (d) Builders of consecutive pieces, persisted and merged.
	pieces := c.pieces(t, dir)
	var segs []*columns.Segment
	for _, p := range pieces {
		seg, err := columns.Open(p)
		require.NoError(t, err)
		t.Cleanup(func() { _ = seg.Close() })
		segs = append(segs, seg)
	}
	for name, fanIn := range map[string]int{"merge-1phase": 0, "merge-fanin2": 2} {
		out := filepath.Join(dir, name+".seg")
		_, err := merger.Merge(ctx, segs, out, merger.Options{Rollup: c.schema.Rollup, Granularity: c.schema.Granularity,
			MaxFanIn: fanIn, Durability: noSync})
		require.NoError(t, err, name)
		paths[name] = out
	}

	ref := readSegment(t, paths["builder"])
	for name, p := range paths {
		got, err := os.ReadFile(p)
		require.NoError(t, err)
		if !bytes.Equal(ref.bytes, got) {
			other := readSegment(t, p)
			require.Equal(t, ref.rows, other.rows, "%s: rows differ from the builder's", name)
			require.Equal(t, ref.times, other.times, "%s: first/last times differ from the builder's", name)
			require.Equal(t, ref.seg.Schema(), other.seg.Schema(), "%s: schema", name)
			require.Failf(t, "files differ", "%s: %d bytes, the builder's %d; rows equal", name, len(got), len(ref.bytes))
		}
	}
	c.checkOracle(t, ref)
	c.checkQueries(t, b, ref.seg, segs)
	return ref
}

var noSync = medium.Durability{Sync: medium.SyncNone}

func (c *diffCase) builder(t *testing.T, rows []diffRow, opts merger.BuilderOptions) *merger.Builder {
	t.Helper()
	b, err := merger.NewBuilder(c.schema, opts)
	require.NoError(t, err)
	for _, r := range rows {
		require.NoError(t, b.Add(c.columnsRow(r)))
	}
	return b
}

// pieces persists the rows in 1 to 4 consecutive pieces, each through its own Builder.
func (c *diffCase) pieces(t *testing.T, dir string) []string {
	k := 1 + int(c.seed%4)
	var out []string
	for p := 0; p < k; p++ {
		lo, hi := p*len(c.rows)/k, (p+1)*len(c.rows)/k
		b := c.builder(t, c.rows[lo:hi], merger.BuilderOptions{})
		path := filepath.Join(dir, fmt.Sprintf("piece-%d.seg", p))
		_, err := b.Persist(context.Background(), path, merger.PersistOptions{Durability: noSync})
		require.NoError(t, err)
		out = append(out, path)
	}
	return out
}

// The oracle.

// oRow is an expected segment row: its key and its metrics' states.
type oRow struct {
	seen   bool
	bucket int64 // queries: the group's bucket (0 for granularity all)
	time   int64 // truncated
	dims   [][]string
	first  int // input index of its first row
	mets   []oMetric
}

type oMetric struct {
	long    int64
	dbl     float64
	sum     *big.Float
	at      int64 // first/last: the chosen row's event time
	set     bool  // a non-null value came
	users   map[string]bool
	present bool
}

func (c *diffCase) normDims(r diffRow) [][]string {
	out := make([][]string, len(r.dims))
	for k, vals := range r.dims {
		if len(vals) == 0 {
			continue // null (an empty list is null)
		}
		v := slices.Clone(vals)
		if c.dims[k].multi {
			slices.Sort(v) // a Builder keeps a multi-value row sorted, duplicates kept
		}
		out[k] = v
	}
	return out
}

// cmpKey orders rows as a segment does: time, then each dimension (null first, lists element
// by element with a proper prefix first, strings bytewise).
func cmpKey(at int64, ad [][]string, bt int64, bd [][]string) int {
	if c := cmp.Compare(at, bt); c != 0 {
		return c
	}
	for k := range ad {
		x, y := ad[k], bd[k]
		if (x == nil) != (y == nil) {
			if x == nil {
				return -1
			}
			return 1
		}
		if c := slices.Compare(x, y); c != 0 {
			return c
		}
	}
	return 0
}

// oracleRows computes the expected rows of the segment from the input rows.
func (c *diffCase) oracleRows() []*oRow {
	type keyed struct {
		i    int
		t    int64
		dims [][]string
	}
	ks := make([]keyed, len(c.rows))
	for i, r := range c.rows {
		ks[i] = keyed{i, c.schema.Granularity.Truncate(r.time), c.normDims(r)}
	}
	slices.SortStableFunc(ks, func(a, b keyed) int { return cmpKey(a.t, a.dims, b.t, b.dims) })
	var out []*oRow
	for _, k := range ks {
		if n := len(out); !(c.schema.Rollup && n > 0 && cmpKey(out[n-1].time, out[n-1].dims, k.t, k.dims) == 0) {
			out = append(out, &oRow{time: k.t, dims: k.dims, first: k.i, mets: c.newMetrics()})
		}
		c.addRow(out[len(out)-1].mets, k.i)
	}
	return out
}

func (c *diffCase) newMetrics() []oMetric {
	ms := make([]oMetric, len(c.schema.Metrics))
	for i := range ms {
		ms[i].sum = new(big.Float).SetPrec(4200)
		ms[i].users = map[string]bool{}
		switch ag := c.schema.Metrics[i].Agg(); ag.Kind {
		case agg.Min:
			ms[i].long, ms[i].dbl = math.MaxInt64, math.Inf(1)
		case agg.Max:
			ms[i].long, ms[i].dbl = math.MinInt64, math.Inf(-1)
		case agg.Sum, agg.First, agg.Last, agg.Union: // from zero (First and Last from no row: set is false)
		}
	}
	return ms
}

// addRow adds input row i to metric states ms; rows come in input order within a group.
func (c *diffCase) addRow(ms []oMetric, i int) {
	r := c.rows[i]
	for k, m := range c.schema.Metrics {
		s := &ms[k]
		s.present = true
		lv, dv := r.longs[m.Name], r.doubles[m.Name]
		if r.absent[m.Name] && m.Agg().Nullable() {
			if !c.nullAsZero[m.Name] {
				continue // null: dropped
			}
			lv, dv = 0, 0
		}
		if m.Agg().Nullable() {
			if m.Agg().Kind == agg.Sum || m.Agg().Kind == agg.Min || m.Agg().Kind == agg.Max {
				s.set = true
			}
		}
		switch m.Aggregator {
		case agg.Count:
			s.long++
		case agg.LongSum:
			s.long += lv
		case agg.LongMin:
			s.long = min(s.long, lv)
		case agg.LongMax:
			s.long = max(s.long, lv)
		case agg.LongFirst:
			if !s.set || r.time < s.at {
				s.long, s.at, s.set = lv, r.time, true
			}
		case agg.LongLast:
			if !s.set || r.time >= s.at {
				s.long, s.at, s.set = lv, r.time, true
			}
		case agg.DoubleSum:
			s.sum.Add(s.sum, new(big.Float).SetPrec(4200).SetFloat64(dv))
		case agg.DoubleMin:
			s.dbl = math.Min(s.dbl, dv)
		case agg.DoubleMax:
			s.dbl = math.Max(s.dbl, dv)
		case agg.DoubleFirst:
			if !s.set || r.time < s.at {
				s.dbl, s.at, s.set = dv, r.time, true
			}
		case agg.DoubleLast:
			if !s.set || r.time >= s.at {
				s.dbl, s.at, s.set = dv, r.time, true
			}
		case agg.HyperUnique:
			if m.Field != "user" { // over the first dimension: each of the row's values
				for _, v := range r.dims[0] {
					s.users[v] = true
				}
			} else if r.user != "" {
				s.users[r.user] = true
			}
		}
	}
}

// null reports whether the state is null: no value came and the aggregator is nullable.
func (s *oMetric) null(m columns.Metric) bool { return !s.set && m.Agg().Nullable() }

func (s *oMetric) double(a columns.Aggregator) float64 {
	if !s.set {
		return 0 // null (a null stores +0)
	}
	if a == agg.DoubleSum {
		f, _ := s.sum.Float64()
		return f
	}
	return s.dbl
}

// checkMetric compares one metric state with a value read back.
func checkMetric(t *testing.T, what string, m columns.Metric, s *oMetric, long int64, dbl float64, null bool, sketchEstimate int64) {
	t.Helper()
	require.Equal(t, s.null(m), null, "%s: metric %s: null", what, m.Name)
	switch m.ValueType() {
	case columns.MetricLong:
		want := s.long
		if !s.set && m.Agg().Nullable() {
			want = 0 // null: stored as 0
		}
		require.Equal(t, want, long, "%s: metric %s", what, m.Name)
	case columns.MetricDouble:
		want := s.double(m.Aggregator)
		require.Truef(t, math.Float64bits(want) == math.Float64bits(dbl) || (want == dbl && want != 0), "%s: metric %s: got %v, want %v", what, m.Name, dbl, want)
	case columns.MetricHyperUnique:
		n := int64(len(s.users))
		require.InDeltaf(t, n, sketchEstimate, 1+0.02*float64(n), "%s: metric %s estimate", what, m.Name)
	}
}

func (c *diffCase) checkOracle(t *testing.T, seg *readSeg) {
	want := c.oracleRows()
	require.Len(t, seg.rows, len(want), "rows")
	for i, o := range want {
		got := seg.rows[i]
		require.Equal(t, o.time, got.Time, "row %d time", i)
		for k := range o.dims {
			require.Equal(t, o.dims[k], nilIfEmpty(got.Dims[k]), "row %d dimension %s", i, c.dims[k].name)
		}
		for k, m := range c.schema.Metrics {
			v := got.Metrics[k]
			var est int64
			if v.Sketch != nil {
				est = int64(v.Sketch.Estimate())
			}
			checkMetric(t, fmt.Sprintf("row %d", i), m, &o.mets[k], v.Long, v.Double, v.Null, est)
			if m.Agg().Timed() {
				require.Equal(t, o.mets[k].at, seg.times[m.Name][i], "row %d metric %s stored time", i, m.Name)
			}
		}
	}
	if len(want) > 0 {
		g := c.schema.Granularity
		iv, ok := g.Interval(want[0].time, want[len(want)-1].time)
		require.True(t, ok)
		require.Equal(t, iv.String(), seg.interval, "interval")
	}
}

func nilIfEmpty(v []string) []string {
	if len(v) == 0 {
		return nil
	}
	return v
}

// checkQueries runs an aggregation over every row (granularity all) and, when the first
// dimension is single-value, one grouped by it per granularity bucket, on the builder (with
// and without live bitmaps), the segment and the pieces, against the oracle's aggregation of
// the input rows.
func (c *diffCase) checkQueries(t *testing.T, b *merger.Builder, seg *columns.Segment, pieces []*columns.Segment) {
	ctx := context.Background()
	live := c.builder(t, c.rows, merger.BuilderOptions{LiveBitmaps: true})
	specs := []query.Spec{{All: true}}
	if !c.dims[0].multi {
		specs = append(specs, query.Spec{Granularity: c.schema.Granularity, GroupBy: []string{c.dims[0].name}})
	}
	inputs := map[string][]query.Queryable{
		"builder": {b}, "builder-live": {live}, "segment": {seg},
	}
	if c.uniqueTimes { // pieces split rows of one key: ties across inputs break by input order, as in the oracle
		ps := make([]query.Queryable, len(pieces))
		for i, p := range pieces {
			ps[i] = p
		}
		inputs["pieces"] = ps
	}
	for _, spec := range specs {
		want := c.oracleQuery(spec)
		for name, qs := range inputs {
			res, err := query.RunMany(ctx, qs, spec)
			require.NoError(t, err, name)
			require.Len(t, res.Rows, len(want), "%s %+v: groups", name, spec)
			for i, row := range res.Rows {
				o := want[i]
				require.Equal(t, o.time, row.Time, "%s group %d time", name, i)
				if len(spec.GroupBy) > 0 {
					require.Equal(t, o.dims[0], groupVals(row.Groups[0]), "%s group %d", name, i)
				}
				for k, m := range res.Metrics {
					if m.Agg().Timed() && !c.uniqueTimes {
						continue // ties of event times across keys break by segment order there
					}
					v := row.Values[k]
					checkMetric(t, fmt.Sprintf("%s group %d", name, i), m, &o.mets[k], v.Long, v.Double, v.Null, v.Long)
				}
			}
		}
	}
}

func groupVals(g query.GroupValue) []string {
	if g.Null {
		return nil
	}
	return []string{g.Value}
}

// oracleQuery aggregates the input rows as spec asks, groups ordered as query results are.
func (c *diffCase) oracleQuery(spec query.Spec) []*oRow {
	var groups []*oRow
	find := func(t int64, dims [][]string) *oRow {
		for _, g := range groups {
			if g.bucket == t && cmpKey(0, g.dims, 0, dims) == 0 {
				return g
			}
		}
		g := &oRow{bucket: t, time: t, dims: dims, mets: c.newMetrics()}
		groups = append(groups, g)
		return g
	}
	for i, r := range c.rows {
		var key [][]string
		t := int64(0)
		if !spec.All {
			t = spec.Granularity.Truncate(c.schema.Granularity.Truncate(r.time))
		}
		if len(spec.GroupBy) > 0 {
			key = [][]string{c.normDims(r)[0]}
		}
		g := find(t, key)
		if tr := c.schema.Granularity.Truncate(r.time); spec.All && (!g.seen || tr < g.time) {
			g.time = tr // the earliest stored time of the group
		}
		g.seen = true
		c.addRow(g.mets, i)
	}
	slices.SortFunc(groups, func(a, b *oRow) int { return cmpKey(a.time, a.dims, b.time, b.dims) })
	return groups
}
