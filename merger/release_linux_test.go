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
	"testing"

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
	f, err := os.Open("/proc/self/smaps")
	require.NoError(t, err)
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
			require.NoError(t, err)
			total += kb << 10
		}
	}
	require.NoError(t, sc.Err())
	return total
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
