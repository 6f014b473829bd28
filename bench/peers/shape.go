package peers

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/columns/agg"
)

// Shapes: the generated tables, each with its own columns, value tables and generator. Events
// is the table of Generate; Minutes the one issue 34 adds.

// MaxDims and MaxMetrics bound the dimensions and the metrics of a Shape.
const (
	MaxDims    = 3
	MaxMetrics = 3
)

// Row is one generated row in compact form: Dims[d] is the id of the row's value of dimension
// d in the shape's value table (Shape.Values, sorted), so rows compare as their strings do.
// Entries past the shape's dimensions and metrics are zero.
type Row struct {
	Time int64
	Dims [MaxDims]uint32
	Mets [MaxMetrics]int64
	// seq is the row's place in the order it was drawn in, within its batch: the sort's last
	// key, which makes an unstable sort give what a stable one would.
	seq uint32
}

// Shape is one generated table: a time column, string dimensions of Zipf-distributed values
// and long metrics (longSum), sorted by (time, dimensions in order), split into Inputs inputs
// in one of the layouts. Every shape's columns are named time, d1, d2, ... and m1, m2, ...
type Shape struct {
	Name string
	// Doc says in a line what the table is.
	Doc string
	// Dims and Metrics are the column names; Dims after time is the sort order.
	Dims, Metrics []string
	// RollupDims are the dimensions the rollup-hour job keeps (the others are dropped).
	RollupDims []string
	// Start and Span: every row's time is in [Start, Start+Span), epoch milliseconds.
	Start, Span int64

	newGen     func() *generator
	parquet    parquetCodec
	ingestSpec string
	values     func() [][]string
}

// generator draws rows in generation order; values are the sorted value tables its rows'
// Dims index.
type generator struct {
	values [][]string
	next   func(r *Row)
}

// Values returns each dimension's values in string order: a Row's Dims index them. The
// tables are shared: do not modify them.
func (s *Shape) Values() [][]string { return s.values() }

// String returns the shape's name.
func (s *Shape) String() string { return s.Name }

// Schema is the writeout schema of the shape's table: dictionary dimensions with bitmap
// indexes (the default), longSum metrics, rollup off.
func (s *Shape) Schema() columns.Schema {
	sc := columns.Schema{Granularity: columns.GranularityNone}
	for _, d := range s.Dims {
		sc.Dimensions = append(sc.Dimensions, columns.Dimension{Name: d})
	}
	for _, m := range s.Metrics {
		sc.Metrics = append(sc.Metrics, columns.Metric{Name: m, Type: columns.MetricLong, Aggregator: agg.LongSum, Field: m})
	}
	return sc
}

// Events is the table of Generate: time over one day, d1, d2, d3 of cardinalities 200, 1000
// and 5000, m1..m3.
var Events = &Shape{
	Name:       "events",
	Doc:        "time over one day (ms), d1 d2 d3 of 200, 1000, 5000 Zipf values, m1..m3 (the peers' events)",
	Dims:       []string{"d1", "d2", "d3"},
	Metrics:    []string{"m1", "m2", "m3"},
	RollupDims: []string{"d1", "d2"},
	Start:      Day,
	Span:       DayMillis,
	newGen:     newEventsGen,
	parquet:    parquetOf[Event]{fill: fillEvent},
	ingestSpec: IngestSpec,
}

// Minutes is issue 34's second shape: two ~300-value dimensions and two skewed integer
// metrics over six months of minutes. It also serves as the shape of "two low-cardinality
// dimensions" of issue 34's bar 3 (300 and 310 values against millions of rows).
//
// time is a whole minute drawn uniformly from MinutesSpan (181 days from Day); d1 and d2 have
// MinutesCardinalities values, Zipf-distributed (s 1.1 and 1.3) with the most frequent values
// not first in string order; m1 is a count with a Zipf tail (1 + Zipf s 1.5 up to 100,000) and m2
// a log-normal size (exp(N(8, 1.5²)), median ~3,000, tail in the millions).
var Minutes = &Shape{
	Name:       "minutes",
	Doc:        "time in minutes over 181 days, d1 d2 of 300 and 310 Zipf values, m1 m2 skewed integers",
	Dims:       []string{"d1", "d2"},
	Metrics:    []string{"m1", "m2"},
	RollupDims: []string{"d1", "d2"},
	Start:      Day,
	Span:       MinutesSpan,
	newGen:     newMinutesGen,
	parquet:    parquetOf[Minute]{fill: fillMinute},
	ingestSpec: MinutesIngestSpec,
}

// Minutes' constants: the time range (181 days, 2026-01-01 to 2026-07-01), the cardinalities
// of d1 and d2, the seed.
const (
	MinutesSpan    int64  = 181 * DayMillis
	MinutesSeed    uint64 = 34
	minuteMillis   int64  = 60_000
	minutesM1Max   uint64 = 100_000
	minutesM2Mu           = 8.0 // m2 = exp(N(minutesM2Mu, minutesM2Sigma²))
	minutesM2Sigma        = 1.5
)

// MinutesCardinalities are the cardinalities of Minutes' d1 and d2.
var MinutesCardinalities = [2]int{300, 310}

// Minute is one row of Minutes, and the Go shape of its Parquet files.
type Minute struct {
	Time int64  `parquet:"time"`
	D1   string `parquet:"d1,dict"`
	D2   string `parquet:"d2,dict"`
	M1   int64  `parquet:"m1"`
	M2   int64  `parquet:"m2"`
}

// MinutesIngestSpec is the ingestion spec of Minutes' CSV files (see IngestSpec).
const MinutesIngestSpec = `{"timestamp": {"field": "time", "format": "millis"},
 "dimensions": [{"name": "d1"}, {"name": "d2"}],
 "metrics": [{"name": "m1", "aggregator": "longSum"}, {"name": "m2", "aggregator": "longSum"}],
 "rollup": false, "granularity": "none"}
`

// Shapes lists every shape, Events first (the default).
var Shapes = []*Shape{Events, Minutes}

// ShapeNamed returns the shape called name.
func ShapeNamed(name string) (*Shape, error) {
	var names []string
	for _, s := range Shapes {
		if s.Name == name {
			return s, nil
		}
		names = append(names, s.Name)
	}
	return nil, fmt.Errorf("peers: unknown shape %q (%s)", name, strings.Join(names, ", "))
}

func init() {
	for _, s := range Shapes {
		s.values = sync.OnceValue(func() [][]string { return s.newGen().values })
	}
}

// sortedIDs sorts names and returns them with, for each name's original index, its id (its
// index in the sorted table).
func sortedIDs(names []string) ([]string, []uint32) {
	order := make([]int, len(names))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool { return names[order[a]] < names[order[b]] })
	sorted := make([]string, len(names))
	ids := make([]uint32, len(names))
	for id, k := range order {
		sorted[id] = names[k]
		ids[k] = uint32(id)
	}
	return sorted, ids
}

// newEventsGen draws what Generate draws, in the same order from the same seed: the value
// names, then per row the time, d1, d2, d3, m1, m2, m3.
func newEventsGen() *generator {
	r := rand.New(rand.NewPCG(Seed, Seed^0x9e3779b97f4a7c15))
	g := &generator{values: make([][]string, len(Cardinalities))}
	var zipf [3]*rand.Zipf
	var ids [3][]uint32
	for d, n := range Cardinalities {
		perm := r.Perm(n)
		names := make([]string, n)
		for k := range n {
			names[k] = fmt.Sprintf("d%d-%05d", d+1, perm[k])
		}
		g.values[d], ids[d] = sortedIDs(names)
		zipf[d] = rand.NewZipf(r, 1.1, 2, uint64(n-1))
	}
	g.next = func(e *Row) {
		e.Time = Day + r.Int64N(DayMillis)
		e.Dims[0] = ids[0][zipf[0].Uint64()]
		e.Dims[1] = ids[1][zipf[1].Uint64()]
		e.Dims[2] = ids[2][zipf[2].Uint64()]
		e.Mets[0] = 1 + r.Int64N(10)
		e.Mets[1] = r.Int64N(1_000_000)
		e.Mets[2] = int64(r.ExpFloat64() * 250)
	}
	return g
}

func newMinutesGen() *generator {
	r := rand.New(rand.NewPCG(MinutesSeed, MinutesSeed^0x9e3779b97f4a7c15))
	g := &generator{values: make([][]string, len(MinutesCardinalities))}
	var zipf [2]*rand.Zipf
	var ids [2][]uint32
	for d, n := range MinutesCardinalities {
		perm := r.Perm(n)
		names := make([]string, n)
		for k := range n {
			names[k] = fmt.Sprintf("d%d-%03d", d+1, perm[k])
		}
		g.values[d], ids[d] = sortedIDs(names)
		zipf[d] = rand.NewZipf(r, 1.1+0.2*float64(d), 2, uint64(n-1))
	}
	m1 := rand.NewZipf(r, 1.5, 1, minutesM1Max-1)
	minutes := MinutesSpan / minuteMillis
	g.next = func(e *Row) {
		e.Time = Day + r.Int64N(minutes)*minuteMillis
		e.Dims[0] = ids[0][zipf[0].Uint64()]
		e.Dims[1] = ids[1][zipf[1].Uint64()]
		e.Mets[0] = 1 + int64(m1.Uint64())
		e.Mets[1] = int64(math.Exp(minutesM2Mu + minutesM2Sigma*r.NormFloat64()))
	}
	return g
}

// compareRows orders rows by (time, dimensions), then by seq.
func compareRows(a, b Row) int {
	if c := cmp.Compare(a.Time, b.Time); c != 0 {
		return c
	}
	for d := range MaxDims {
		if c := cmp.Compare(a.Dims[d], b.Dims[d]); c != 0 {
			return c
		}
	}
	return cmp.Compare(a.seq, b.seq)
}

// sortRows sorts rows by (time, dimensions), ties in seq order (generation order).
func sortRows(rows []Row) { slices.SortFunc(rows, compareRows) }

// GenerateRows returns rows rows of shape s in (time, dimensions) order, all in memory: the
// reference Stream must equal. For Events, its rows are Generate's.
func GenerateRows(s *Shape, rows int) []Row {
	g := s.newGen()
	out := make([]Row, rows)
	for i := range out {
		g.next(&out[i])
		out[i].seq = uint32(i)
	}
	sortRows(out)
	return out
}

// EventOf returns the Event of a row of Events.
func EventOf(r *Row) Event {
	var e Event
	fillEvent(Events.Values(), r, &e)
	return e
}

func fillEvent(v [][]string, r *Row, e *Event) {
	e.Time = r.Time
	e.D1, e.D2, e.D3 = v[0][r.Dims[0]], v[1][r.Dims[1]], v[2][r.Dims[2]]
	e.M1, e.M2, e.M3 = r.Mets[0], r.Mets[1], r.Mets[2]
}

func fillMinute(v [][]string, r *Row, m *Minute) {
	m.Time = r.Time
	m.D1, m.D2 = v[0][r.Dims[0]], v[1][r.Dims[1]]
	m.M1, m.M2 = r.Mets[0], r.Mets[1]
}
