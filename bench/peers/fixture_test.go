package peers

import (
	"context"
	"os"
	"runtime/metrics"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/writeout/writeout/columns"
)

// makeFixtures generates rows events and writes them, split by each layout, under dir.
func makeFixtures(tb testing.TB, dir string, rows int) (map[Layout]*Fixture, []Event) {
	tb.Helper()
	ev := Generate(rows)
	out := map[Layout]*Fixture{}
	for _, layout := range []Layout{Contiguous, Overlapping} {
		parts, err := Split(ev, layout)
		if err != nil {
			tb.Fatal(err)
		}
		fx, err := WriteFixture(dir, layout, parts)
		if err != nil {
			tb.Fatal(err)
		}
		out[layout] = &fx
	}
	return out, ev
}

// benchRows is the rows of BenchmarkPeers: WRITEOUT_PEERS_ROWS, else 3,000,000.
func benchRows(tb testing.TB) int {
	s := os.Getenv("WRITEOUT_PEERS_ROWS")
	if s == "" {
		return 3_000_000
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < Inputs {
		tb.Fatalf("WRITEOUT_PEERS_ROWS=%q: want a number of rows >= %d", s, Inputs)
	}
	return n
}

// readSegment reads every row of the segment at path as events (dimensions it lacks are "").
func readSegment(tb testing.TB, path string) []Event {
	tb.Helper()
	seg, err := columns.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer seg.Close()
	s := seg.Schema()
	rr := seg.RowReader()
	out := make([]Event, seg.Rows())
	var r columns.Row
	for i := range out {
		if err := rr.Read(i, &r); err != nil {
			tb.Fatal(err)
		}
		e := &out[i]
		e.Time = r.Time
		for k, d := range s.Dimensions {
			v := ""
			if len(r.Dims[k]) > 0 {
				v = r.Dims[k][0]
			}
			switch d.Name {
			case "d1":
				e.D1 = v
			case "d2":
				e.D2 = v
			case "d3":
				e.D3 = v
			}
		}
		e.M1, e.M2, e.M3 = r.Metrics[0].Long, r.Metrics[1].Long, r.Metrics[2].Long
	}
	return out
}

// heapPeak samples the Go heap's live object bytes every millisecond until stopped, and
// returns the largest sample. DuckDB's memory (C++) is not in it.
type heapPeak struct {
	stop chan struct{}
	done sync.WaitGroup
	peak uint64
}

func heapObjects() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

func startHeapPeak() *heapPeak {
	h := &heapPeak{stop: make(chan struct{}), peak: heapObjects()}
	h.done.Add(1)
	go func() {
		defer h.done.Done()
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-h.stop:
				return
			case <-t.C:
				h.peak = max(h.peak, heapObjects())
			}
		}
	}()
	return h
}

func (h *heapPeak) Stop() uint64 {
	close(h.stop)
	h.done.Wait()
	return max(h.peak, heapObjects())
}

var bg = context.Background()
