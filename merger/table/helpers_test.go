package table

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/columns/agg"
	"github.com/writeout/writeout/medium"
	"github.com/writeout/writeout/merger"
)

// testSchema is the schema of the test segments; with extra, a second metric (another schema).
func testSchema(extra bool) columns.Schema {
	s := columns.Schema{
		Dimensions: []columns.Dimension{{Name: "page"}},
		Metrics:    []columns.Metric{{Name: "added", Aggregator: agg.LongSum}},
	}
	if extra {
		s.Metrics = append(s.Metrics, columns.Metric{Name: "delta", Aggregator: agg.DoubleSum})
	}
	return s
}

// segCache holds the bytes of the segments made by segBytes, by their arguments.
var segCache sync.Map

// segBytes returns a segment of n rows (seeded), times from start ms, one a second.
func segBytes(t testing.TB, seed uint64, n int, start int64, extra bool) []byte {
	t.Helper()
	return segBytesStep(t, seed, n, start, 1000, extra)
}

// segBytesStep is segBytes with rows step ms apart.
func segBytesStep(t testing.TB, seed uint64, n int, start, step int64, extra bool) []byte {
	t.Helper()
	key := fmt.Sprint(seed, n, start, step, extra)
	if b, ok := segCache.Load(key); ok {
		return b.([]byte)
	}
	b, err := merger.NewBuilder(testSchema(extra), merger.BuilderOptions{})
	require.NoError(t, err)
	defer func() { _ = b.Close() }()
	rng := rand.New(rand.NewPCG(seed, 7))
	for i := range n {
		row := columns.Row{Time: start + int64(i)*step, Dims: [][]string{{fmt.Sprintf("p%d", rng.IntN(50))}},
			Metrics: []columns.Value{{Long: rng.Int64N(1000)}}}
		if extra {
			row.Metrics = append(row.Metrics, columns.Value{Double: 1.5})
		}
		require.NoError(t, b.Add(row))
	}
	dst := filepath.Join(t.TempDir(), "seg.seg")
	_, err = b.Persist(context.Background(), dst, merger.PersistOptions{Durability: medium.Durability{Sync: medium.SyncNone}})
	require.NoError(t, err)
	data, err := os.ReadFile(dst)
	require.NoError(t, err)
	segCache.Store(key, data)
	return data
}

// day is 2024-05-01T00:00:00Z in ms.
const day = int64(1714521600000)

// writeSegs writes segments of rows[i] rows each (seeds from seed) into dir of fsys and returns
// their paths.
func writeSegs(t testing.TB, fsys afero.Fs, dir string, seed uint64, rows ...int) []string {
	t.Helper()
	require.NoError(t, fsys.MkdirAll(dir, 0o755))
	var paths []string
	for i, n := range rows {
		p := filepath.Join(dir, fmt.Sprintf("in-%d-%d.seg", seed, i))
		require.NoError(t, afero.WriteFile(fsys, p, segBytes(t, seed+uint64(i), n, day+int64(i)*3600_000, false), 0o644))
		paths = append(paths, p)
	}
	return paths
}

// liveRows opens every live segment of version v and returns the rows they hold, checking
// each against the log (footer, rows, interval).
func liveRows(t testing.TB, tb *Table, v int) int64 {
	t.Helper()
	ctx := context.Background()
	e, err := tb.Snapshot(ctx, v)
	require.NoError(t, err)
	var rows int64
	for _, s := range e.Segments {
		seg, closeSeg, err := tb.OpenSegment(ctx, s)
		require.NoError(t, err, s.Name)
		require.NoError(t, seg.Verify(), s.Name)
		require.Equal(t, s.Rows, int64(seg.Rows()))
		require.Equal(t, s.Interval, seg.Interval().String())
		rows += int64(seg.Rows())
		require.NoError(t, closeSeg())
	}
	require.Equal(t, e.Rows(), rows)
	return rows
}
