package peers

import (
	"bytes"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// streamAll collects what Stream hands out, without seq, and the batches' sizes.
func streamAll(t *testing.T, s *Shape, rows int, o StreamOptions) ([]Row, []int) {
	t.Helper()
	out := []Row{}
	var sizes []int
	require.NoError(t, Stream(s, rows, o, func(b []Row) error {
		sizes = append(sizes, len(b))
		for _, r := range b {
			r.seq = 0
			out = append(out, r)
		}
		return nil
	}))
	return out, sizes
}

func withoutSeq(rows []Row) []Row {
	out := slices.Clone(rows)
	for i := range out {
		out[i].seq = 0
	}
	return out
}

// TestStreamEqualsGenerate: Stream hands out GenerateRows' rows in its order whatever the
// batch, and for Events those are Generate's events.
func TestStreamEqualsGenerate(t *testing.T) {
	f := func(s *Shape, rows, batch int) {
		t.Helper()
		want := withoutSeq(GenerateRows(s, rows))
		got, sizes := streamAll(t, s, rows, StreamOptions{BatchRows: batch, TempDir: t.TempDir()})
		require.Equal(t, want, got, "%s: %d rows, batch %d", s.Name, rows, batch)
		o := StreamOptions{BatchRows: batch}
		if eff := o.batch(rows); rows > eff {
			require.Len(t, sizes, (rows+eff-1)/eff, "one batch a bucket")
			require.LessOrEqual(t, len(sizes), maxBuckets)
			for _, n := range sizes {
				require.Less(t, n, 2*eff, "a bucket is about a batch")
			}
		} else if rows > 0 {
			require.Equal(t, []int{rows}, sizes)
		}
		if s == Events {
			ev := Generate(rows)
			require.Len(t, got, len(ev))
			for i := range ev {
				require.Equal(t, ev[i], EventOf(&got[i]), "row %d", i)
			}
		}
	}
	for _, s := range Shapes {
		f(s, 0, 10)
		f(s, 5, 2)
		f(s, 1000, 1000)
		f(s, 1000, 999)
		f(s, 20_000, 3000)
		f(s, 20_000, 1)   // the batch grows to rows/1024
		f(s, 30_000, 300) // 100 buckets
	}
}

// TestStreamFnError: an error of fn stops Stream, which returns it and leaves no bucket.
func TestStreamFnError(t *testing.T) {
	dir := t.TempDir()
	boom := fmt.Errorf("boom")
	calls := 0
	err := Stream(Events, 10_000, StreamOptions{BatchRows: 1000, TempDir: dir}, func([]Row) error {
		calls++
		if calls == 3 {
			return boom
		}
		return nil
	})
	require.ErrorIs(t, err, boom)
	require.Equal(t, 3, calls)
	left, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, left)
}

func TestDecodeRowsCorrupt(t *testing.T) {
	var r Row
	r.Time, r.Dims, r.Mets = Events.Start+5, [3]uint32{1, 2, 3}, [3]int64{-4, 5, 1 << 40}
	b := appendRow(nil, Events, &r)
	got, err := decodeRows(nil, Events, b)
	require.NoError(t, err)
	require.Equal(t, []Row{r}, got)
	for n := 1; n < len(b); n++ {
		_, err := decodeRows(nil, Events, b[:n])
		require.ErrorIs(t, err, errBucket, "cut at %d", n)
	}
}

// filesUnder returns every regular file under dir, by path relative to dir.
func filesUnder(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		b, err := os.ReadFile(p)
		out[rel] = b
		return err
	}))
	return out
}

// requireSameFiles requires dir a and dir b to hold the same files with the same bytes,
// but for the names in skip.
func requireSameFiles(t *testing.T, a, b string, skip ...string) {
	t.Helper()
	fa, fb := filesUnder(t, a), filesUnder(t, b)
	for _, s := range skip {
		delete(fa, s)
		delete(fb, s)
	}
	require.Equal(t, slices.Sorted(mapsKeys(fa)), slices.Sorted(mapsKeys(fb)))
	for name, want := range fa {
		require.True(t, bytes.Equal(want, fb[name]), "%s: %d bytes against %d, not the same", name, len(fb[name]), len(want))
	}
}

func mapsKeys(m map[string][]byte) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// writeInMemory writes what peerjob prepare wrote before Prepare streamed: Generate's events
// split by each layout through WriteFixture, and WriteCSVInputs' CSV files with the spec.
func writeInMemory(t *testing.T, dir string, rows int) {
	t.Helper()
	ev := Generate(rows)
	for _, l := range []Layout{Contiguous, Overlapping} {
		parts, err := Split(ev, l)
		require.NoError(t, err)
		_, err = WriteFixture(dir, l, parts)
		require.NoError(t, err)
	}
	csvDir := filepath.Join(dir, "csv")
	require.NoError(t, os.MkdirAll(csvDir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(csvDir, "spec.json"), []byte(IngestSpec), 0o644))
	_, _, err := WriteCSVInputs(csvDir, ev)
	require.NoError(t, err)
}

// TestPrepareEqualsInMemory: the inputs Prepare streams (in buckets of a few rows, segments in
// many runs merged a few at a time) are, byte for byte, those the in-memory path writes.
func TestPrepareEqualsInMemory(t *testing.T) {
	f := func(rows, batch, runRows, maxRuns int, runs, merges bool) {
		t.Helper()
		ref, got := t.TempDir(), t.TempDir()
		writeInMemory(t, ref, rows)
		runs0, merges0 := prepareRuns.Load(), prepareRunMerges.Load()
		m, err := Prepare(got, PrepareOptions{Rows: rows, BatchRows: batch, RunRows: runRows, MaxRuns: maxRuns})
		require.NoError(t, err)
		require.Equal(t, runs, prepareRuns.Load() > runs0, "runs written")
		require.Equal(t, merges, prepareRunMerges.Load() > merges0, "runs merged")
		requireSameFiles(t, ref, got, ManifestName)
		for _, l := range []Layout{Contiguous, Overlapping} {
			fx, err := StatFixture(ref, l)
			require.NoError(t, err)
			assert.Equal(t, fx.SegBytes, m.SegBytes[l], "%s", l)
			assert.Equal(t, fx.ParquetBytes, m.ParquetBytes[l], "%s", l)
		}
		_, csvBytes, err := WriteCSVInputs(t.TempDir(), Generate(rows))
		require.NoError(t, err)
		assert.Equal(t, csvBytes, m.CSVBytes)
		got2, err := ReadManifest(got)
		require.NoError(t, err)
		require.Equal(t, m, got2)
		require.Equal(t, Manifest{Shape: "events", Rows: rows, Layouts: []Layout{Contiguous, Overlapping},
			SegBytes: m.SegBytes, ParquetBytes: m.ParquetBytes, CSVBytes: m.CSVBytes}, m)
	}
	f(20_000, 1000, 1000, 3, true, true)      // 20 buckets; runs of 1000 and 200 rows, merged 3 at a time
	f(20_000, 1<<20, 1<<20, 0, false, false)  // one batch, no run
	f(20_000, 0, 0, 0, false, false)          // the defaults
	f(7, 2, 2, 2, true, false)                // inputs with no row
	f(60_000, 20_000, 20_000, 0, true, false) // pages of the Parquet files across batches
	f(66_000, 64*257, 5000, 4, true, true)    // Parquet writes that are not the batch
}

// TestPrepareBatchFree: for every shape, what Prepare writes does not depend on the batch.
func TestPrepareBatchFree(t *testing.T) {
	for _, s := range Shapes {
		a, b := t.TempDir(), t.TempDir()
		_, err := Prepare(a, PrepareOptions{Shape: s, Rows: 30_000})
		require.NoError(t, err)
		m, err := Prepare(b, PrepareOptions{Shape: s, Rows: 30_000, BatchRows: 700, RunRows: 900, MaxRuns: 5})
		require.NoError(t, err)
		requireSameFiles(t, a, b)
		require.Equal(t, s.Name, m.Shape)
		spec, err := os.ReadFile(filepath.Join(b, "csv", "spec.json"))
		require.NoError(t, err)
		require.Equal(t, s.IngestSpec(), string(spec))
	}
}

// TestPrepareErrors: bad options, and a failure mid-way leaves no manifest and no temp files.
func TestPrepareErrors(t *testing.T) {
	dir := t.TempDir()
	_, err := Prepare(dir, PrepareOptions{Rows: 4})
	require.ErrorContains(t, err, "4 rows: want at least 5")
	_, err = Prepare(dir, PrepareOptions{Rows: 10, Layouts: []Layout{"diagonal"}})
	require.ErrorContains(t, err, `unknown layout "diagonal"`)
	_, err = Prepare(dir, PrepareOptions{Rows: 10, Layouts: []Layout{Overlapping, Overlapping}})
	require.ErrorContains(t, err, `layout "overlapping" given twice`)
	_, err = Prepare(dir, PrepareOptions{Rows: 10, MaxRuns: 1})
	require.ErrorContains(t, err, "MaxRuns 1")

	// A directory where a Parquet file must go: its creation fails.
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "overlapping-3.parquet"), 0o755))
	_, err = Prepare(dir, PrepareOptions{Rows: 5000, BatchRows: 1000})
	require.ErrorContains(t, err, "overlapping parquet")
	_, err = ReadManifest(dir)
	require.ErrorIs(t, err, os.ErrNotExist)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range entries {
		require.NotContains(t, e.Name(), ".peers-prepare-", "temp dir left behind")
	}
}

// TestMinutesShape checks what issue 34 asks of the second shape: two ~300-value dimensions,
// two skewed integer metrics, six months of minutes.
func TestMinutesShape(t *testing.T) {
	const n = 200_000
	rows := GenerateRows(Minutes, n)
	v := Minutes.Values()
	require.Len(t, v, 2)
	require.Len(t, v[0], 300)
	require.Len(t, v[1], 310)
	require.True(t, slices.IsSorted(v[0]) && slices.IsSorted(v[1]))
	var seen [2]map[uint32]int
	seen[0], seen[1] = map[uint32]int{}, map[uint32]int{}
	m1 := make([]int64, 0, n)
	m2 := make([]int64, 0, n)
	minT, maxT := int64(math.MaxInt64), int64(math.MinInt64)
	for _, r := range rows {
		require.Zero(t, (r.Time-Day)%60_000, "whole minutes")
		minT, maxT = min(minT, r.Time), max(maxT, r.Time)
		seen[0][r.Dims[0]]++
		seen[1][r.Dims[1]]++
		require.Zero(t, r.Dims[2])
		require.Zero(t, r.Mets[2])
		require.GreaterOrEqual(t, r.Mets[0], int64(1))
		require.GreaterOrEqual(t, r.Mets[1], int64(0))
		m1, m2 = append(m1, r.Mets[0]), append(m2, r.Mets[1])
	}
	require.GreaterOrEqual(t, minT, Day)
	require.Less(t, maxT, Day+MinutesSpan)
	require.Greater(t, maxT-minT, MinutesSpan*99/100, "six months covered")
	for d := range 2 {
		require.Greater(t, len(seen[d]), 250, "d%d: most values occur", d+1)
		counts := make([]int, 0, len(seen[d]))
		for _, c := range seen[d] {
			counts = append(counts, c)
		}
		sort.Sort(sort.Reverse(sort.IntSlice(counts)))
		require.Greater(t, counts[0], 20*counts[len(counts)/2], "d%d: skewed", d+1)
	}
	for k, m := range [][]int64{m1, m2} {
		slices.Sort(m)
		med, p999 := m[len(m)/2], m[len(m)*999/1000]
		require.Greater(t, p999, 50*med, "m%d: skewed (median %d, p99.9 %d)", k+1, med, p999)
	}
	t.Logf("d1 %d values seen, d2 %d; m1 median %d max %d; m2 median %d max %d",
		len(seen[0]), len(seen[1]), m1[n/2], m1[n-1], m2[n/2], m2[n-1])
}

func TestShapeNamed(t *testing.T) {
	s, err := ShapeNamed("minutes")
	require.NoError(t, err)
	require.Same(t, Minutes, s)
	_, err = ShapeNamed("hours")
	require.ErrorContains(t, err, `unknown shape "hours" (events, minutes)`)
}

// TestEventsSQL: the shapes' statements for Events are the ones the peers always ran.
func TestEventsSQL(t *testing.T) {
	paths := []string{"/a/x.parquet", "/a/y'.parquet"}
	require.Equal(t, "COPY (SELECT * FROM read_parquet(['/a/x.parquet', '/a/y''.parquet']) ORDER BY time, d1, d2, d3) TO '/o' (FORMAT parquet, COMPRESSION zstd)",
		MergeSQL(paths, "/o"))
	require.Equal(t, "COPY (SELECT epoch_ms(date_trunc('hour', epoch_ms(time))) AS time, d1, d2, sum(m1)::BIGINT AS m1, sum(m2)::BIGINT AS m2, "+
		"sum(m3)::BIGINT AS m3 FROM read_parquet(['/a/x.parquet', '/a/y''.parquet']) GROUP BY ALL ORDER BY ALL) TO '/o' (FORMAT parquet, COMPRESSION zstd)",
		RollupSQL(paths, "/o"))
	require.Equal(t, "COPY (SELECT * FROM read_csv(['/a/x.parquet', '/a/y''.parquet'], header=true, columns={'time': 'BIGINT', 'd1': 'VARCHAR', "+
		"'d2': 'VARCHAR', 'd3': 'VARCHAR', 'm1': 'BIGINT', 'm2': 'BIGINT', 'm3': 'BIGINT'}) ORDER BY time, d1, d2, d3) "+
		"TO '/o' (FORMAT parquet, COMPRESSION zstd)", IngestCSVSQL(paths, "/o"))
	require.Equal(t, CSVHeader, Events.CSVHeader())
	require.Equal(t, "time,d1,d2,m1,m2", Minutes.CSVHeader())
	require.Equal(t, "COPY (SELECT epoch_ms(date_trunc('hour', epoch_ms(time))) AS time, d1, d2, sum(m1)::BIGINT AS m1, sum(m2)::BIGINT AS m2 "+
		"FROM read_parquet(['/p']) GROUP BY ALL ORDER BY ALL) TO '/o' (FORMAT parquet, COMPRESSION zstd)", Minutes.RollupSQL([]string{"/p"}, "/o"))
}
