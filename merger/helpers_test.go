package merger

import (
	"cmp"
	"context"
	"math"
	"math/big"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/columns/agg"
	"github.com/writeout/writeout/merger/internal/fixture"
)

// Shared with merger/query's tests (package fixture).
var (
	writeSegment = fixture.WriteSegment
	openSeg      = fixture.OpenSegment
	genSegment   = fixture.GenSegment
	testSeed     = fixture.Seed
	newRandCase  = fixture.NewCase
)

// raceEnabled: the race detector slows everything about tenfold; tests shrink and skip
// their timing bounds.
const raceEnabled = fixture.Race

// readRows reads every row of a segment.
func readRows(t testing.TB, seg *columns.Segment) []columns.Row {
	t.Helper()
	rr := seg.RowReader()
	out := make([]columns.Row, seg.Rows())
	for i := range out {
		require.NoError(t, rr.Read(i, &out[i]))
		out[i] = cloneRow(out[i])
	}
	return out
}

func cloneRow(r columns.Row) columns.Row {
	c := columns.Row{Time: r.Time, Dims: make([][]string, len(r.Dims)), Metrics: slices.Clone(r.Metrics)}
	for i, d := range r.Dims {
		if len(d) > 0 {
			c.Dims[i] = slices.Clone(d)
		}
	}
	return c
}

// oracleMerge is the naive merge: every row of every input, projected on the output schema
// (missing dimensions null, missing metrics null), times truncated, stably sorted by
// (time, dimensions), and with rollup equal keys combined: nulls dropped, then the rest
// combined; nothing left is null (0 for count).
func oracleMerge(inputs []columns.Schema, rows [][]columns.Row, out columns.Schema) []columns.Row {
	var all []columns.Row
	for i, s := range inputs {
		for _, r := range rows[i] {
			o := columns.Row{Time: out.Granularity.Truncate(r.Time), Dims: make([][]string, len(out.Dimensions)), Metrics: make([]columns.Value, len(out.Metrics))}
			for d, dim := range out.Dimensions {
				if k := s.Dimension(dim.Name); k >= 0 && len(r.Dims[k]) > 0 {
					o.Dims[d] = r.Dims[k]
				}
			}
			for m, met := range out.Metrics {
				if k := s.Metric(met.Name); k >= 0 {
					o.Metrics[m] = r.Metrics[k]
				} else {
					o.Metrics[m] = columns.Value{Null: met.Agg().Nullable()} // count: 0
				}
			}
			all = append(all, o)
		}
	}
	sort.SliceStable(all, func(i, j int) bool { return cmpOracle(all[i], all[j]) < 0 })
	if !out.Rollup {
		return all
	}
	var res []columns.Row
	for i := 0; i < len(all); {
		j := i + 1
		for j < len(all) && cmpOracle(all[i], all[j]) == 0 {
			j++
		}
		r := all[i]
		r.Metrics = slices.Clone(r.Metrics)
		for m, met := range out.Metrics {
			a := met.Agg()
			var group []columns.Row // the rows whose value is not null
			for _, g := range all[i:j] {
				if !g.Metrics[m].Null {
					group = append(group, g)
				}
			}
			if len(group) == 0 {
				r.Metrics[m] = columns.Value{Null: a.Nullable()}
				continue
			}
			r.Metrics[m] = group[0].Metrics[m]
			switch a.Kind {
			case agg.Sum:
				if a.Type == agg.Long {
					var v int64
					for _, g := range group {
						v += g.Metrics[m].Long
					}
					r.Metrics[m].Long = v
				} else if len(group) > 1 {
					acc := new(big.Float).SetPrec(2200)
					for _, g := range group {
						acc.Add(acc, new(big.Float).SetPrec(2200).SetFloat64(g.Metrics[m].Double))
					}
					r.Metrics[m].Double, _ = acc.Float64()
				}
			case agg.Min, agg.Max:
				lv, dv := group[0].Metrics[m].Long, group[0].Metrics[m].Double
				for _, g := range group[1:] {
					x := g.Metrics[m]
					if a.Kind == agg.Min {
						lv, dv = min(lv, x.Long), math.Min(dv, x.Double)
					} else {
						lv, dv = max(lv, x.Long), math.Max(dv, x.Double)
					}
				}
				if a.Type == agg.Long {
					r.Metrics[m].Long = lv
				} else {
					r.Metrics[m].Double = dv
				}
			case agg.Union:
				var acc agg.Sketch
				for _, g := range group {
					if sk := g.Metrics[m].Sketch; sk != nil {
						if acc == nil {
							acc = sk.Clone()
						} else {
							_ = acc.Merge(sk)
						}
					}
				}
				r.Metrics[m].Sketch = acc
			case agg.First, agg.Last:
				// Rows here carry no stored times; merger/ingest's differential test checks these.
				panic("oracleMerge: first and last are not modelled (fixture.PoolMetrics has none)")
			}
		}
		res = append(res, r)
		i = j
	}
	return res
}

func cmpOracle(a, b columns.Row) int {
	if c := cmp.Compare(a.Time, b.Time); c != 0 {
		return c
	}
	for d := range a.Dims {
		if c := cmpValues(a.Dims[d], b.Dims[d]); c != 0 {
			return c
		}
	}
	return 0
}

// cmpValues orders a dimension's values: null (nil) first, then lists lexicographically.
func cmpValues(a, b []string) int {
	if (a == nil) != (b == nil) {
		if a == nil {
			return -1
		}
		return 1
	}
	for i := 0; i < len(a) && i < len(b); i++ {
		if c := strings.Compare(a[i], b[i]); c != 0 {
			return c
		}
	}
	return cmp.Compare(len(a), len(b))
}

// requireRowsEqual compares rows, sketches by their estimates. With approx, doubles may differ
// in their last bits (sums rounded at different points, as a merge in phases with rollup does).
func requireRowsEqual(t testing.TB, want, got []columns.Row, approx bool, msg string) {
	t.Helper()
	require.Equal(t, len(want), len(got), "%s: row count", msg)
	for i := range want {
		w, g := want[i], got[i]
		require.Equal(t, w.Time, g.Time, "%s: row %d time", msg, i)
		require.Equal(t, w.Dims, g.Dims, "%s: row %d dims", msg, i)
		require.Equal(t, len(w.Metrics), len(g.Metrics), msg)
		for m := range w.Metrics {
			a, b := w.Metrics[m], g.Metrics[m]
			require.Equal(t, a.Null, b.Null, "%s: row %d metric %d null", msg, i, m)
			require.Equal(t, a.Long, b.Long, "%s: row %d metric %d", msg, i, m)
			if approx && a.Double != b.Double {
				require.InEpsilon(t, a.Double, b.Double, 1e-12, "%s: row %d metric %d", msg, i, m)
			} else {
				require.Equal(t, math.Float64bits(a.Double), math.Float64bits(b.Double), "%s: row %d metric %d: %v != %v", msg, i, m, a.Double, b.Double)
			}
			require.Equal(t, sketchEstimate(a.Sketch), sketchEstimate(b.Sketch), "%s: row %d metric %d sketch", msg, i, m)
		}
	}
}

func sketchEstimate(sk agg.Sketch) float64 {
	if sk == nil {
		return 0
	}
	return sk.Clone().Estimate()
}

// checkBitmaps checks that every value's bitmap holds exactly the rows holding the value, and
// runs Verify.
func checkBitmaps(t testing.TB, seg *columns.Segment) {
	t.Helper()
	require.NoError(t, seg.Verify())
	s := seg.Schema()
	for _, dim := range s.Dimensions {
		if dim.Raw || dim.NoBitmapIndex {
			continue
		}
		dc, err := seg.Dim(dim.Name)
		require.NoError(t, err)
		want := make([][]uint32, dc.Cardinality())
		cur := dc.Cursor()
		for r := 0; r < seg.Rows(); r++ {
			ids, err := cur.IDs(r)
			require.NoError(t, err)
			for _, id := range ids {
				if n := len(want[id]); n == 0 || want[id][n-1] != uint32(r) {
					want[id] = append(want[id], uint32(r))
				}
			}
		}
		for id := range want {
			bm, err := dc.Bitmap(uint32(id))
			require.NoError(t, err)
			got := bm.ToArray()
			if len(want[id]) == 0 {
				want[id] = []uint32{}
			}
			require.Equal(t, want[id], got, "dimension %q id %d", dim.Name, id)
		}
	}
}

// dirNames lists a directory's entries.
func dirNames(t testing.TB, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	require.NoError(t, err)
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}

func mustMerge(t testing.TB, inputs []*columns.Segment, dst string, opts Options) Result {
	t.Helper()
	res, err := Merge(context.Background(), inputs, dst, opts)
	require.NoError(t, err)
	return res
}

// mergeWithout merges inputs into dst with *off set (a path of the merge turned off, as
// interleaveOff or preAggOff), and unsets it after.
func mergeWithout(t testing.TB, off *bool, inputs []*columns.Segment, dst string, opts Options) error {
	t.Helper()
	*off = true
	defer func() { *off = false }()
	_, err := Merge(t.Context(), inputs, dst, opts)
	return err
}

// requireSameFiles requires the files want and got to hold the same bytes (msg names the case).
func requireSameFiles(t testing.TB, want, got, msg string) {
	t.Helper()
	wb, err := os.ReadFile(want)
	require.NoError(t, err)
	gb, err := os.ReadFile(got)
	require.NoError(t, err)
	require.Equal(t, wb, gb, "%s: the files differ", msg)
}
