package merger

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/columns/agg"
	"github.com/writeout/writeout/internal/segfmt"
	"github.com/writeout/writeout/medium"
)

// mappedRss returns the resident bytes of every mapping of each file in paths, from
// /proc/self/smaps (the Rss lines of the VMAs whose path it is).
func mappedRss(t *testing.T, paths []string) int64 {
	t.Helper()
	n, err := readMappedRss(paths)
	require.NoError(t, err)
	return n
}

// readMappedRss is mappedRss for any goroutine.
func readMappedRss(paths []string) (int64, error) {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	want := map[string]bool{}
	for _, p := range paths {
		want[p] = true
	}
	var total int64
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) == 0 {
			continue
		}
		if !strings.HasSuffix(fs[0], ":") { // a VMA's header: range perms offset dev inode [path]
			in = len(fs) >= 6 && want[fs[5]]
			continue
		}
		if in && fs[0] == "Rss:" {
			kb, err := strconv.ParseInt(fs[1], 10, 64)
			if err != nil {
				return 0, err
			}
			total += kb << 10
		}
	}
	return total, sc.Err()
}

// TestMergeReleasesMappedInputs checks that a merge of mapped segments does not hold its
// inputs resident: checked, read and released as it goes, they count in its RSS by what it
// read since the last release (columns.Segment.ReleasePages), not by their size.
func TestMergeReleasesMappedInputs(t *testing.T) {
	if raceEnabled {
		t.Skip("resident pages, not goroutines: nothing for the race detector (runs in go test ./...)")
	}
	const inputs, rows = 3, 300_000
	s := columns.Schema{Granularity: columns.GranularityNone,
		Dimensions: []columns.Dimension{{Name: "d"}},
		Metrics:    []columns.Metric{{Name: "m", Type: columns.MetricLong, Aggregator: agg.LongSum, Field: "m"}}}
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(14, 3))
	var paths []string
	var size int64
	for i := range inputs {
		b, err := NewBuilder(s, BuilderOptions{})
		require.NoError(t, err)
		r := columns.Row{Dims: [][]string{{""}}, Metrics: make([]columns.Value, 1)}
		for k := range rows {
			r.Time = int64(i*rows+k) * 10 // contiguous inputs
			r.Dims[0][0] = fmt.Sprintf("v%03d", rng.IntN(300))
			r.Metrics[0].Long = rng.Int64N(1 << 40)
			require.NoError(t, b.Add(r))
		}
		p := filepath.Join(dir, fmt.Sprintf("in-%d.seg", i))
		res, err := b.Persist(context.Background(), p, PersistOptions{Durability: medium.Durability{Sync: medium.SyncNone}})
		require.NoError(t, err)
		paths, size = append(paths, p), size+res.Bytes
	}
	segs := make([]*columns.Segment, inputs)
	var rowBytes int64 // the parts the row merge reads: values and ids
	for i, p := range paths {
		var err error
		segs[i], err = columns.Open(p)
		require.NoError(t, err)
		defer func() { require.NoError(t, segs[i].Close()) }()
		for _, part := range segs[i].Info().Parts {
			if part.Kind == segfmt.PartValues || part.Kind == segfmt.PartIDs {
				rowBytes += part.Length
			}
		}
	}
	var peak int64
	calls := 0
	res := mustMerge(t, segs, filepath.Join(dir, "out.seg"), Options{
		Durability:   medium.Durability{Sync: medium.SyncNone},
		ProgressRows: 8192,
		Progress: func(p Progress) {
			if p.Step == StepRows { // called from the merging goroutine: the row merge's state
				calls++
				peak = max(peak, mappedRss(t, paths))
			}
		},
	})
	require.Equal(t, int64(inputs*rows), res.RowsOut)
	require.Greater(t, calls, 100)
	t.Logf("inputs %d bytes, %d of them values and ids; resident during the row merge at most %d; after %d", size, rowBytes, peak, mappedRss(t, paths))
	// Without the releases the values and ids would all be resident by the end of the row
	// merge (with the dictionaries and the checksum pass's pages), and the whole inputs after
	// the merge.
	// The bound has room for the kernel's fault-around (a fault maps up to 64 KiB of cached
	// pages around it, more with large folios) on each input: measured 2,756,608 bytes of a
	// rowBytes/2 of 2,764,237, and once 2,887,680.
	require.Less(t, peak, rowBytes/2+inputs*256<<10, "the inputs' resident bytes during the row merge")
	require.Less(t, mappedRss(t, paths), int64(inputs*256<<10), "the inputs' resident bytes after the merge")
}

// TestRollupReleasesMappedInputs is TestMergeReleasesMappedInputs for streamed pre-aggregated
// groups: an hour of 800,000 rows is read whole by its cursor, then by each metric task, and
// the pages each read are released behind it every releaseRows rows, not at the group's end.
func TestRollupReleasesMappedInputs(t *testing.T) {
	if raceEnabled {
		t.Skip("resident pages, not goroutines: nothing for the race detector (runs in go test ./...)")
	}
	const groups, rows = 3, 800_000
	s := columns.Schema{Granularity: columns.GranularityNone,
		Dimensions: []columns.Dimension{{Name: "a"}, {Name: "b"}},
		Metrics: []columns.Metric{{Name: "m", Type: columns.MetricLong, Aggregator: agg.LongSum, Field: "m"},
			{Name: "n", Type: columns.MetricLong, Aggregator: agg.LongMax, Field: "n"}}}
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(34, 1))
	b, err := NewBuilder(s, BuilderOptions{})
	require.NoError(t, err)
	r := columns.Row{Dims: [][]string{{""}, {""}}, Metrics: make([]columns.Value, 2)}
	for k := range groups * rows {
		r.Time = int64(k/rows)*3_600_000 + int64(k%rows)*4
		r.Dims[0][0], r.Dims[1][0] = fmt.Sprintf("a%03d", rng.IntN(200)), fmt.Sprintf("b%03d", rng.IntN(300))
		r.Metrics[0].Long, r.Metrics[1].Long = rng.Int64N(1<<40), rng.Int64N(1<<40)
		require.NoError(t, b.Add(r))
	}
	path := filepath.Join(dir, "in.seg")
	_, err = b.Persist(context.Background(), path, PersistOptions{Durability: medium.Durability{Sync: medium.SyncNone}})
	require.NoError(t, err)
	require.NoError(t, b.Close())
	seg, err := columns.Open(path)
	require.NoError(t, err)
	defer func() { require.NoError(t, seg.Close()) }()
	var values int64
	for _, part := range seg.Info().Parts {
		if part.Kind == segfmt.PartValues {
			values += part.Length
		}
	}

	// Sample the input's resident bytes while rows merge (tasks read on goroutines of their own).
	var peak atomic.Int64
	sampling, stop, done := atomic.Bool{}, make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
			if sampling.Load() {
				if v, err := readMappedRss([]string{path}); err == nil && v > peak.Load() {
					peak.Store(v)
				}
			}
		}
	}()
	groups0 := rekeyedGroups.Load() + preAggGroups.Load()
	res := mustMerge(t, []*columns.Segment{seg}, filepath.Join(dir, "out.seg"), Options{
		Durability: medium.Durability{Sync: medium.SyncNone}, Rollup: true, Granularity: columns.GranularityHour,
		Progress: func(p Progress) { sampling.Store(p.Step == StepRows) },
	})
	close(stop)
	<-done
	require.Greater(t, rekeyedGroups.Load()+preAggGroups.Load(), groups0, "pre-aggregated")
	require.Equal(t, int64(groups*rows), res.RowsIn)
	t.Logf("values %d bytes (a group's %d); resident during the row merge at most %d", values, values/groups, peak.Load())
	// Without the releases within a group its values stay resident until the next group's
	// (each task reads its column's whole group at once): at least a group's values.
	require.Less(t, peak.Load(), values/groups/2, "the input's resident bytes during the row merge")
}
