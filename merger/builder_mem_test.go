package merger

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/internal/gen"
	"github.com/writeout/writeout/merger/internal/fixture"
)

// MemBytes follows the heap the rows take, within a factor of two, for the basic schema with
// and without rollup (rollup keys, exact sums), with sketches given, and with live bitmaps.
func TestBuilderMemBytes(t *testing.T) {
	rows := 100_000
	if raceEnabled {
		rows = 20_000
	}
	for _, tc := range []struct {
		rollup, sketches, live bool
	}{
		{false, false, false},
		{true, false, false},
		{false, true, false},
		{false, false, true},
	} {
		t.Run(fmt.Sprintf("rollup=%v/sketches=%v/live=%v", tc.rollup, tc.sketches, tc.live), func(t *testing.T) {
			g, err := gen.Basic(gen.BasicSeed, rows)
			require.NoError(t, err)
			conv := fixture.NewGenConv(g)
			schema := conv.Schema
			schema.Rollup = tc.rollup
			if tc.rollup {
				schema.Granularity = columns.GranularityHour
			}
			heap := func() uint64 {
				runtime.GC()
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				return ms.HeapAlloc
			}
			before := heap()
			b, err := NewBuilder(schema, BuilderOptions{LiveBitmaps: tc.live})
			require.NoError(t, err)
			empty := b.MemBytes()
			var src gen.Row
			var r columns.Row
			for g.Next(&src) {
				conv.Row(&src, &r, tc.sketches)
				// The generator's strings are slices of shared tables: clone them, as a reader
				// of text gives strings of their own.
				for _, vals := range r.Dims {
					for i, v := range vals {
						vals[i] = string([]byte(v))
					}
				}
				require.NoError(t, b.Add(r))
			}
			src, r = gen.Row{}, columns.Row{}
			used := int64(heap() - before)
			est := b.MemBytes()
			t.Logf("%d rows held: MemBytes %d (%d a row), heap %d (%d a row)", b.Rows(), est, est/int64(rows), used, used/int64(rows))
			require.Less(t, empty, est)
			require.Greater(t, est, used/2)
			require.Less(t, est, used*2)
			runtime.KeepAlive(b)
		})
	}
}
