package merger

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/columns/agg"
)

// TestInternCache: values that fall in the same cache slot (the same last 8 bytes and length,
// or short values) keep their own ids; the cache holds the dictionary's copies, not the
// caller's strings (overwritten here after each Add); a Builder reset and refilled (ResetKeep,
// as ingestion does between runs) finds no value of the rows before.
func TestInternCache(t *testing.T) {
	schema := columns.Schema{Dimensions: []columns.Dimension{{Name: "d"}, {Name: "m", MultiValue: true}},
		Metrics: []columns.Metric{{Name: "n", Aggregator: agg.LongSum}}}
	// Same last 8 bytes and length: one slot for all of them.
	vals := []string{"aaaa-12345678", "bbbb-12345678", "cccc-12345678", "x", "y", "", "xy", "d3-00875", "d3-00876"}
	c := internCache{bits: internCacheBits}
	require.Equal(t, c.slot(vals[0]), c.slot(vals[1]))
	require.Equal(t, c.slot(vals[0]), c.slot(vals[2]))
	b, err := NewBuilder(schema, BuilderOptions{})
	require.NoError(t, err)
	defer func() { require.NoError(t, b.Close()) }()
	for round := range 2 {
		var want []columns.Row
		buf := make([]byte, 0, 64)
		for i := range 3000 {
			v := vals[(i*7+i/13+round)%len(vals)]
			w := vals[(i*3+round)%len(vals)]
			// The caller's strings live in a buffer that the next row overwrites.
			buf = append(buf[:0], v...)
			buf = append(buf, w...)
			cv, cw := unsafe.String(unsafe.SliceData(buf), len(v)), unsafe.String(unsafe.SliceData(buf[len(v):]), len(w))
			r := columns.Row{Time: int64(i), Dims: [][]string{{cv}, {cw, cv}}, Metrics: []columns.Value{{Long: int64(i)}}}
			require.NoError(t, b.Add(r))
			want = append(want, columns.Row{Time: int64(i), Dims: [][]string{{v}, {w, v}}, Metrics: []columns.Value{{Long: int64(i)}}})
			for k := range buf {
				buf[k] = '#'
			}
		}
		path := filepath.Join(t.TempDir(), fmt.Sprintf("r%d.seg", round))
		_, err := b.Persist(context.Background(), path, PersistOptions{})
		require.NoError(t, err)
		seg, err := columns.Open(path)
		require.NoError(t, err)
		got := readRows(t, seg)
		require.NoError(t, seg.Close())
		require.Len(t, got, len(want))
		for i := range want {
			require.Equal(t, want[i].Dims[0], got[i].Dims[0], "round %d row %d", round, i)
			require.ElementsMatch(t, want[i].Dims[1], got[i].Dims[1], "round %d row %d", round, i)
		}
		b.ResetKeep(1 << 30)
	}
}
