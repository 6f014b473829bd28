package merger

import (
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/internal/gen"
)

// heapSampler samples the Go heap's object bytes every millisecond in a goroutine and keeps
// the peak.
type heapSampler struct {
	stop chan struct{}
	done sync.WaitGroup
	peak uint64
}

const heapMetric = "/memory/classes/heap/objects:bytes"

func heapObjects() uint64 {
	s := []metrics.Sample{{Name: heapMetric}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

func startHeapSampler() *heapSampler {
	h := &heapSampler{stop: make(chan struct{})}
	h.done.Add(1)
	go func() {
		defer h.done.Done()
		s := []metrics.Sample{{Name: heapMetric}}
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(s)
			h.peak = max(h.peak, s[0].Value.Uint64())
			select {
			case <-h.stop:
				return
			case <-t.C:
			}
		}
	}()
	return h
}

func (h *heapSampler) finish() uint64 {
	close(h.stop)
	h.done.Wait()
	return max(h.peak, heapObjects())
}

// TestMergeHeapPerRow (bar 4): the peak Go heap during a merge of 5 basic segments grows by at
// most 16 bytes per input row, at fixed cardinality: 5 x 75,000, 300,000 and 1,200,000 rows
// through the tmpfile medium. WRITEOUT_LARGE=1 runs it (it generates 7.9 million rows).
func TestMergeHeapPerRow(t *testing.T) {
	if os.Getenv("WRITEOUT_LARGE") == "" {
		t.Skip("set WRITEOUT_LARGE=1 to run (generates 5 x 1.2 million rows)")
	}
	sizes := []int{75_000, 300_000, 1_200_000}
	type point struct {
		rows int64
		peak int64
	}
	var pts []point
	for _, n := range sizes {
		dir := t.TempDir()
		var segs []*columns.Segment
		for i := 0; i < 5; i++ {
			segs = append(segs, genSegment(t, dir, gen.BasicSeed+int64(i), n))
		}
		runtime.GC()
		runtime.GC()
		base := heapObjects()
		h := startHeapSampler()
		// The default staging medium: tmpfile in the output's directory.
		res, err := Merge(t.Context(), segs, filepath.Join(dir, "out.seg"), Options{})
		peak := h.finish()
		require.NoError(t, err)
		growth := int64(peak) - int64(base)
		pts = append(pts, point{res.RowsIn, growth})
		t.Logf("rows in %9d: heap before %6.1f MiB, peak %6.1f MiB, growth %6.1f MiB = %5.2f B/row; merge %v",
			res.RowsIn, float64(base)/(1<<20), float64(peak)/(1<<20), float64(growth)/(1<<20), float64(growth)/float64(res.RowsIn), res.Total)
		for _, s := range segs {
			require.NoError(t, s.Close())
		}
	}
	for i := 1; i < len(pts); i++ {
		slope := float64(pts[i].peak-pts[i-1].peak) / float64(pts[i].rows-pts[i-1].rows)
		t.Logf("slope %d -> %d rows: %.2f bytes per input row", pts[i-1].rows, pts[i].rows, slope)
		require.LessOrEqual(t, slope, 16.0)
	}
	all := float64(pts[len(pts)-1].peak-pts[0].peak) / float64(pts[len(pts)-1].rows-pts[0].rows)
	t.Logf("slope over the whole range: %.2f bytes per input row", all)
	require.LessOrEqual(t, all, 16.0)
}
