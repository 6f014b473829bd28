package export_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
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
	"github.com/writeout/writeout/internal/colwrite"
	"github.com/writeout/writeout/medium"
	"github.com/writeout/writeout/merger"
	"github.com/writeout/writeout/merger/export"
	"github.com/writeout/writeout/merger/ingest"
	"github.com/writeout/writeout/merger/internal/fixture"
	"github.com/writeout/writeout/merger/query"
)

// The quantiles aggregator end to end: ingestion (CSV, NDJSON, Parquet), the Builder, merges
// with and without rollup and in phases, queries, Parquet export and re-ingestion.

var noSync = medium.Durability{Sync: medium.SyncNone}

const qSpec = `{
  "timestamp": {"field": "ts", "format": "millis"},
  "dimensions": [{"name": "svc"}],
  "metrics": [{"name": "n", "aggregator": "count"},
              {"name": "delay_q", "aggregator": "quantiles", "fieldName": "delay"},
              {"name": "dd_q", "aggregator": "quantiles", "fieldName": "dd", "accuracy": 0.02}]%s}`

type qRow struct {
	ts    int64
	svc   string
	delay int64   // always set
	dd    float64 // NaN: missing
}

func qRows(seed uint64, n int) []qRow {
	rng := rand.New(rand.NewPCG(seed, 1))
	out := make([]qRow, n)
	for i := range out {
		r := qRow{ts: 1_700_000_000_000 + rng.Int64N(3*3_600_000), svc: fmt.Sprintf("s%d", rng.IntN(4))}
		r.delay = int64(math.Exp(3 + 1.4*rng.NormFloat64()))
		r.dd = math.NaN()
		if rng.IntN(5) > 0 {
			r.dd = math.Exp(rng.NormFloat64()) - 0.2
		}
		out[i] = r
	}
	return out
}

func qCSV(rows []qRow) string {
	var b strings.Builder
	b.WriteString("ts,svc,delay,dd\n")
	for _, r := range rows {
		dd := ""
		if !math.IsNaN(r.dd) {
			dd = strconv.FormatFloat(r.dd, 'g', -1, 64)
		}
		fmt.Fprintf(&b, "%d,%s,%d,%s\n", r.ts, r.svc, r.delay, dd)
	}
	return b.String()
}

func qNDJSON(rows []qRow) string {
	var b strings.Builder
	for _, r := range rows {
		m := map[string]any{"ts": r.ts, "svc": r.svc, "delay": r.delay}
		if !math.IsNaN(r.dd) {
			m["dd"] = r.dd
		}
		j, _ := json.Marshal(m)
		b.Write(j)
		b.WriteByte('\n')
	}
	return b.String()
}

func qIngest(t *testing.T, spec, out string, inputs ...ingest.Input) *columns.Segment {
	t.Helper()
	sp, err := ingest.ParseSpec([]byte(spec))
	require.NoError(t, err)
	return qIngestSpec(t, sp, out, inputs...)
}

func qIngestSpec(t *testing.T, sp *ingest.Spec, out string, inputs ...ingest.Input) *columns.Segment {
	t.Helper()
	_, err := ingest.Run(context.Background(), sp, inputs, ingest.Options{Out: out, Durability: noSync})
	require.NoError(t, err)
	return qOpen(t, out)
}

func qOpen(t *testing.T, path string) *columns.Segment {
	t.Helper()
	seg, err := columns.Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { seg.Close() })
	require.NoError(t, seg.Verify())
	return seg
}

func fileBytes(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return b
}

// qCheck queries seg grouped by svc over all time and checks every quantile against the exact
// lower quantile of rows' values, within the metric's accuracy.
func qCheck(t *testing.T, seg *columns.Segment, rows []qRow) {
	t.Helper()
	res, err := query.Run(context.Background(), seg, query.Spec{All: true, GroupBy: []string{"svc"}})
	require.NoError(t, err)
	exact := map[string][2][]float64{}
	for _, r := range rows {
		e := exact[r.svc]
		e[0] = append(e[0], float64(r.delay))
		if !math.IsNaN(r.dd) {
			e[1] = append(e[1], r.dd)
		}
		exact[r.svc] = e
	}
	require.Len(t, res.Rows, len(exact))
	for _, g := range res.Rows {
		e := exact[g.Groups[0].Value]
		for k, name := range []string{"delay_q", "dd_q"} {
			m := slices.IndexFunc(res.Metrics, func(m columns.Metric) bool { return m.Name == name })
			v := g.Values[m]
			vals := e[k]
			slices.Sort(vals)
			require.Equal(t, int64(len(vals)), v.Long, "%s: the estimate is the count", name)
			qs, ok := v.Sketch.(agg.Quantiler)
			require.True(t, ok)
			acc := []float64{0.01, 0.02}[k]
			for _, q := range []float64{0, 0.5, 0.9, 0.99, 1} {
				r := q * float64(len(vals)-1)
				want := vals[int(r)] // the lower quantile; among negative values the upper
				if want < 0 {
					want = vals[int(math.Ceil(r))]
				}
				got, err := qs.Quantile(q)
				require.NoError(t, err)
				require.InDelta(t, want, got, acc*math.Abs(want)+1e-9, "%s %s q%v", g.Groups[0].Value, name, q)
			}
		}
	}
}

func TestQuantilesEndToEnd(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	p := func(name string) string { return filepath.Join(dir, name) }
	rows := qRows(7, 3000)
	parts := [][]qRow{rows[:1000], rows[1000:1700], rows[1700:2400], rows[2400:]}
	plain, rolled := fmt.Sprintf(qSpec, ""), fmt.Sprintf(qSpec, `, "rollup": true, "granularity": "hour"`)

	// Ingestion: CSV and NDJSON give the same segment.
	csvSeg := qIngest(t, plain, p("csv.seg"), ingest.Input{Name: "a.csv", Reader: strings.NewReader(qCSV(rows))})
	qIngest(t, plain, p("nd.seg"), ingest.Input{Name: "a.ndjson", Reader: strings.NewReader(qNDJSON(rows))})
	require.Equal(t, fileBytes(t, p("csv.seg")), fileBytes(t, p("nd.seg")))
	qCheck(t, csvSeg, rows)

	// Rolled up at ingestion, by a merge with rollup in one phase or in phases of 2, by a
	// Builder: the same bytes.
	rolledSeg := qIngest(t, rolled, p("rolled.seg"), ingest.Input{Name: "a.csv", Reader: strings.NewReader(qCSV(rows))})
	require.Less(t, rolledSeg.Rows(), len(rows))
	qCheck(t, rolledSeg, rows)
	var segs []*columns.Segment
	for i, part := range parts {
		segs = append(segs, qIngest(t, plain, p(fmt.Sprintf("part%d.seg", i)), ingest.Input{Name: "p.csv", Reader: strings.NewReader(qCSV(part))}))
	}
	mopts := merger.Options{Rollup: true, Granularity: columns.GranularityHour, Durability: noSync}
	_, err := merger.Merge(ctx, segs, p("m1.seg"), mopts)
	require.NoError(t, err)
	mopts.MaxFanIn = 2
	_, err = merger.Merge(ctx, segs, p("m2.seg"), mopts)
	require.NoError(t, err)
	require.Equal(t, fileBytes(t, p("rolled.seg")), fileBytes(t, p("m1.seg")), "ingest rollup = merge rollup")
	require.Equal(t, fileBytes(t, p("m1.seg")), fileBytes(t, p("m2.seg")), "one phase = phases of 2")
	// Rolled-up segments merged again, in another order of inputs.
	_, err = merger.Merge(ctx, []*columns.Segment{qOpen(t, p("m2.seg")), rolledSeg}, p("m3.seg"), merger.Options{Rollup: true, Granularity: columns.GranularityHour, Durability: noSync})
	require.NoError(t, err)
	qCheck(t, qOpen(t, p("m3.seg")), append(slices.Clone(rows), rows...))

	// Without rollup: every row's sketch kept; the same rows as the one ingestion.
	_, err = merger.Merge(ctx, segs, p("plain.seg"), merger.Options{Durability: noSync})
	require.NoError(t, err)
	require.Equal(t, fileBytes(t, p("csv.seg")), fileBytes(t, p("plain.seg")))

	// A Builder persisting the same rows.
	sp, err := ingest.ParseSpec([]byte(rolled))
	require.NoError(t, err)
	b, err := merger.NewBuilder(sp.Schema, merger.BuilderOptions{})
	require.NoError(t, err)
	sks := make([]agg.Sketches, len(sp.Schema.Metrics))
	for i, m := range sp.Schema.Metrics {
		sks[i], err = m.Sketches()
		require.NoError(t, err)
	}
	for _, r := range rows {
		row := columns.Row{Time: r.ts, Dims: [][]string{{r.svc}}, Metrics: make([]columns.Value, 3)}
		row.Metrics[0].Long = 1
		d := sks[1].New()
		require.NoError(t, d.Insert([]byte(strconv.FormatInt(r.delay, 10))))
		row.Metrics[1].Sketch = d
		if !math.IsNaN(r.dd) {
			dd := sks[2].New()
			require.NoError(t, dd.Insert([]byte(strconv.FormatFloat(r.dd, 'g', -1, 64))))
			row.Metrics[2].Sketch = dd
		}
		require.NoError(t, b.Add(row))
	}
	_, err = b.Persist(ctx, p("built.seg"), merger.PersistOptions{Durability: noSync})
	require.NoError(t, err)
	require.Equal(t, fileBytes(t, p("rolled.seg")), fileBytes(t, p("built.seg")), "builder = ingestion")

	// Export to Parquet and back: the spec reads the sketches' bytes (isInputSketch).
	info, err := export.ParquetFile(ctx, p("r.parquet"), rolledSeg, export.Options{}, columns.PublishOptions{Durability: noSync})
	require.NoError(t, err)
	back, err := info.IngestSpec()
	require.NoError(t, err)
	require.True(t, back.Schema.Metrics[1].InputSketch)
	require.JSONEq(t, `0.02`, string(back.Schema.Metrics[2].Params["accuracy"]))
	js, err := json.Marshal(back)
	require.NoError(t, err)
	require.Contains(t, string(js), `"isInputSketch":true`)
	again, err := ingest.ParseSpec(js)
	require.NoError(t, err)
	reSeg := qIngestSpec(t, again, p("back.seg"), ingest.Input{Name: "r.parquet", Path: p("r.parquet")})
	require.Equal(t, rolledSeg.Rows(), reSeg.Rows())
	for i := range rolledSeg.Rows() {
		a, err := rolledSeg.ReadRow(i)
		require.NoError(t, err)
		c, err := reSeg.ReadRow(i)
		require.NoError(t, err)
		for m := 1; m < 3; m++ {
			ab, err := a.Metrics[m].Sketch.AppendBinary(nil)
			require.NoError(t, err)
			cb, err := c.Metrics[m].Sketch.AppendBinary(nil)
			require.NoError(t, err)
			require.Equal(t, ab, cb, "row %d metric %d", i, m)
		}
	}
	qCheck(t, reSeg, rows)
}

// badSketch writes bytes that are no quantile sketch.
type badSketch struct{ agg.Sketch }

func (badSketch) AppendBinary(dst []byte) ([]byte, error) {
	return append(dst, 1, 0x7b, 0x14, 0xae, 0x47, 0xe1, 0x7a, 0x84, 0x3f, 0, 1, 2), nil
}

// TestQuantilesCorrupt: a segment holding bytes that are no quantile sketch fails its reader,
// Verify, merges with and without rollup, and queries, with errors wrapping columns.ErrCorrupt.
func TestQuantilesCorrupt(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	sp, err := ingest.ParseSpec([]byte(fmt.Sprintf(qSpec, "")))
	require.NoError(t, err)
	w, err := fixture.NewRowWriter(sp.Schema, colwrite.Options{Medium: medium.NewHeap()})
	require.NoError(t, err)
	require.NoError(t, w.AddRow(columns.Row{Time: 1, Dims: [][]string{{"a"}}, Metrics: make([]columns.Value, 3)}))
	require.NoError(t, w.AddRow(columns.Row{Time: 2, Dims: [][]string{{"a"}}, Metrics: []columns.Value{{Long: 1}, {Sketch: badSketch{}}, {}}}))
	path := filepath.Join(dir, "bad.seg")
	_, err = w.Finish(path, columns.PublishOptions{Durability: noSync})
	require.NoError(t, err)
	seg, err := columns.Open(path)
	require.NoError(t, err)
	defer seg.Close()
	require.ErrorIs(t, seg.Verify(), columns.ErrCorrupt)
	_, err = seg.ReadRow(1)
	require.ErrorIs(t, err, columns.ErrCorrupt)
	_, err = merger.Merge(ctx, []*columns.Segment{seg}, filepath.Join(dir, "o1.seg"), merger.Options{Durability: noSync})
	require.ErrorIs(t, err, columns.ErrCorrupt)
	_, err = merger.Merge(ctx, []*columns.Segment{seg}, filepath.Join(dir, "o2.seg"), merger.Options{Rollup: true, Granularity: columns.GranularityHour, Durability: noSync})
	require.ErrorIs(t, err, columns.ErrCorrupt)
	_, err = query.Run(ctx, seg, query.Spec{All: true})
	require.ErrorIs(t, err, columns.ErrCorrupt)
}

// TestQuantilesInputSketchText: CSV and NDJSON carry input sketches in base64; ingested, the
// rows hold those sketches, and rollup merges them.
func TestQuantilesInputSketchText(t *testing.T) {
	dir := t.TempDir()
	spec := `{"timestamp": {"field": "ts", "format": "millis"}, "dimensions": [{"name": "svc"}],
	  "metrics": [{"name": "q", "aggregator": "quantiles", "fieldName": "s", "isInputSketch": true}],
	  "rollup": true, "granularity": "hour"}`
	sp, err := ingest.ParseSpec([]byte(spec))
	require.NoError(t, err)
	sks, err := sp.Schema.Metrics[0].Sketches()
	require.NoError(t, err)
	enc := func(vals ...string) (string, agg.Sketch) {
		sk := sks.New()
		for _, v := range vals {
			require.NoError(t, sk.Insert([]byte(v)))
		}
		b, err := sk.AppendBinary(nil)
		require.NoError(t, err)
		return base64.StdEncoding.EncodeToString(b), sk
	}
	a, want := enc("1", "2", "300")
	b, other := enc("7", "2")
	require.NoError(t, want.Merge(other))
	wantBytes, err := want.AppendBinary(nil)
	require.NoError(t, err)
	csv := "ts,svc,s\n1000,x," + a + "\n2000,x," + b + "\n"
	nd := `{"ts": 1000, "svc": "x", "s": "` + a + `"}` + "\n" + `{"ts": 2000, "svc": "x", "s": "` + b + `"}` + "\n"
	for _, in := range []ingest.Input{{Name: "s.csv", Reader: strings.NewReader(csv)}, {Name: "s.ndjson", Reader: strings.NewReader(nd)}} {
		seg := qIngestSpec(t, sp, filepath.Join(dir, in.Name+".seg"), in)
		require.Equal(t, 1, seg.Rows())
		r, err := seg.ReadRow(0)
		require.NoError(t, err)
		got, err := r.Metrics[0].Sketch.AppendBinary(nil)
		require.NoError(t, err)
		require.Equal(t, wantBytes, got, in.Name)
	}
	_, err = ingest.Run(context.Background(), sp, []ingest.Input{{Name: "bad.csv", Reader: strings.NewReader("ts,svc,s\n1000,x,AAAA\n")}},
		ingest.Options{Out: filepath.Join(dir, "bad.seg"), Durability: noSync})
	require.ErrorContains(t, err, "quantiles: bad header")
}
