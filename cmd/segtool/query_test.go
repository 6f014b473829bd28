package main

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/merger/query"
)

// cellRows writes rows through tableWriter's cells, as the query command did before its
// writer appended the lines itself: the reference queryWriter must match byte for byte.
func cellRows(tw *tableWriter, rows []query.Row) error {
	for _, r := range rows {
		cells := []cell{{kind: cellTime, i: r.Time}}
		for _, g := range r.Groups {
			cells = append(cells, cell{kind: cellString, s: g.Value, isNull: g.Null})
		}
		cells = append(cells, cell{kind: cellLong, i: r.Rows})
		for _, v := range r.Values {
			if v.Type == columns.MetricDouble {
				cells = append(cells, cell{kind: cellDouble, f: v.Double, isNull: v.Null})
			} else {
				cells = append(cells, cell{kind: cellLong, i: v.Long, isNull: v.Null})
			}
		}
		if err := tw.row(cells); err != nil {
			return err
		}
	}
	return nil
}

// TestQueryWriterMatchesCells: the query writer's CSV and NDJSON equal tableWriter's for the
// same groups, with every kind of value that writes differently (nulls, quoted and escaped
// strings, invalid UTF-8, doubles with NaN and infinities, negative and extreme longs, times
// before 1970), in every text option, over several parts and past the writer's flush size.
func TestQueryWriterMatchesCells(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 23))
	strs := []string{"", "a", "Main", " lead", "a,b", `say "hi"`, "line\nbreak", "cr\r", "tab\t", "ü", "\xff\xfe", "\x01", `back\slash`, "|"}
	dbls := []float64{0, -0.5, 1e21, 1.0 / 3, math.NaN(), math.Inf(1), math.Inf(-1), 123456789, 5e-324}
	longs := []int64{0, -1, 42, math.MaxInt64, math.MinInt64}
	metrics := []columns.Metric{
		{Name: "rows", Type: columns.MetricLong, Aggregator: "count"},
		{Name: "sum", Type: columns.MetricLong, Aggregator: "longSum"},
		{Name: "d \"x\"", Type: columns.MetricDouble, Aggregator: "doubleSum"},
		{Name: "u", Type: columns.MetricLong, Aggregator: "hyperUnique"},
	}
	randRows := func(n int) []query.Row {
		rows := make([]query.Row, n)
		t := rng.Int64N(4e12) - 1e12
		for i := range rows {
			if rng.IntN(4) == 0 {
				t += rng.Int64N(3_600_000)
			}
			r := query.Row{Time: t, Rows: longs[rng.IntN(len(longs))], Groups: make([]query.GroupValue, 2)}
			for k := range r.Groups {
				r.Groups[k] = query.GroupValue{Null: rng.IntN(5) == 0, Value: strs[rng.IntN(len(strs))]}
			}
			for _, m := range metrics {
				v := query.AggValue{Type: m.ValueType(), Null: rng.IntN(6) == 0}
				if !v.Null {
					v.Long = longs[rng.IntN(len(longs))]
					v.Double = dbls[rng.IntN(len(dbls))]
				}
				r.Values = append(r.Values, v)
			}
			rows[i] = r
		}
		return rows
	}
	f := func(o textOptions, parts int) {
		t.Helper()
		res := query.Result{GroupBy: []string{"page", "a,b"}, Metrics: metrics}
		var got, want bytes.Buffer
		var w *queryWriter
		var names []string
		var ref *tableWriter
		for p := 0; p < parts; p++ {
			rows := randRows(rng.IntN(3000))
			if w == nil {
				var err error
				w, err = newQueryWriter(&got, res, o, quantiles{})
				require.NoError(t, err)
				names = append([]string(nil), w.tw.names...)
				ref = newTableWriter(&want, o, names)
				require.NoError(t, ref.header())
			}
			require.NoError(t, w.rows(rows))
			require.NoError(t, cellRows(ref, rows))
		}
		require.NoError(t, w.flush())
		require.NoError(t, ref.flush())
		msg := fmt.Sprintf("%+v, %d parts", o, parts)
		require.Greater(t, want.Len(), 0, msg)
		if !bytes.Equal(want.Bytes(), got.Bytes()) {
			wl, gl := strings.Split(want.String(), "\n"), strings.Split(got.String(), "\n")
			for i := range min(len(wl), len(gl)) {
				require.Equal(t, wl[i], gl[i], "%s: line %d", msg, i)
			}
			require.Equal(t, len(wl), len(gl), "%s: lines", msg)
		}
	}
	for _, format := range []string{"csv", "ndjson"} {
		for _, tf := range []string{"millis", "rfc3339"} {
			for _, null := range []string{"", "NULL", "n,a"} {
				f(textOptions{format: format, timeFormat: tf, multiDelim: "|", null: null}, 1+rng.IntN(4))
			}
		}
	}
	// Enough lines to pass the flush size several times.
	f(textOptions{format: "ndjson", timeFormat: "millis", multiDelim: "|"}, 3*queryFlushBytes/(100*1500)+2)
}

// TestQueryNoMatch: a filter that matches no row prints the header, and says so on standard
// error (the header alone looked like a failure); exit 0. A filter that matches says nothing.
func TestQueryNoMatch(t *testing.T) {
	seg := genOne(t, t.TempDir())
	code, out, errs := runSegtool(t, "query", "--filter", "dimZipf = 'no such value'", seg)
	require.Equal(t, 0, code, errs)
	require.Equal(t, 1, strings.Count(out, "\n"), out)
	require.Equal(t, "segtool: query: no row matches the filter dimZipf = 'no such value'\n", errs)

	code, out, errs = runSegtool(t, "query", "--filter", "dimZipf is not null or dimZipf is null", seg)
	require.Equal(t, 0, code, errs)
	require.Greater(t, strings.Count(out, "\n"), 1, out)
	require.Empty(t, errs)
}
