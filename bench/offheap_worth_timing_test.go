package bench

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"testing"
	"time"

	"github.com/writeout/writeout/bench/internal/meminfo"
	"github.com/writeout/writeout/medium"
)

// The runtime/metrics samples BenchmarkOffheapWorth reads around each merge.
const (
	metricGCCPU    = "/cpu/classes/gc/total:cpu-seconds"
	metricAssist   = "/cpu/classes/gc/mark/assist:cpu-seconds"
	metricGCCycles = "/gc/cycles/total:gc-cycles"
	metricGCPauses = "/sched/pauses/total/gc:seconds"
	metricHeapObjs = "/memory/classes/heap/objects:bytes"
	metricGoTotal  = "/memory/classes/total:bytes"
	metricReleased = "/memory/classes/heap/released:bytes"
)

// liveHeap is the pointer-rich heap BenchmarkOffheapWorth keeps reachable while it merges: the
// service the merge runs in. It is nil outside the benchmark.
var liveHeap *liveGraph

// liveNode is one 64-byte object of the live heap: three pointers and some payload, so the
// collector has pointers to follow in every object it marks.
type liveNode struct {
	next, cross, back *liveNode
	payload           [5]uint64
}

// liveGraph holds the live heap: chains of liveNodes, each also pointing to a random node made
// before it (cross) and to the head of its chain (back), and a map from ids to every 64th node.
type liveGraph struct {
	chains [][]*liveNode // the head of each chain, in one small slice per 1024 chains
	index  map[uint64]*liveNode
	nodes  int
}

// buildLiveHeap allocates about bytes of liveNodes, one at a time, in chains of 1,024. The
// collector is off while it builds (so the build does not mark a growing 4 GiB over and over)
// and one full collection runs at the end.
func buildLiveHeap(bytes int64) (g *liveGraph, alloc, collect time.Duration) {
	const chainLen, chainsPerSlab = 1024, 1024
	start := time.Now()
	prev := debug.SetGCPercent(-1)
	n := int(bytes / 64)
	g = &liveGraph{index: make(map[uint64]*liveNode, n/64+1), nodes: n}
	rng := rand.New(rand.NewPCG(1, 2))
	made := make([]*liveNode, 0, 1<<16) // a reservoir of earlier nodes for cross pointers
	var head, last *liveNode
	var slab []*liveNode
	for i := range n {
		nd := &liveNode{back: head}
		nd.payload[0] = uint64(i)
		if len(made) > 0 {
			nd.cross = made[rng.IntN(len(made))]
		}
		if len(made) < cap(made) {
			made = append(made, nd)
		} else {
			made[rng.IntN(len(made))] = nd
		}
		if i%64 == 0 {
			g.index[uint64(i)] = nd
		}
		if i%chainLen == 0 {
			head = nd
			nd.back = nil
			if len(slab) == chainsPerSlab {
				g.chains = append(g.chains, slab)
				slab = nil
			}
			if slab == nil {
				slab = make([]*liveNode, 0, chainsPerSlab)
			}
			slab = append(slab, nd)
		} else {
			last.next = nd
		}
		last = nd
	}
	if slab != nil {
		g.chains = append(g.chains, slab)
	}
	debug.SetGCPercent(prev)
	alloc = time.Since(start)
	runtime.GC()
	return g, alloc, time.Since(start) - alloc
}

// liveHeapBytes is the live heap BenchmarkOffheapWorth builds: WRITEOUT_BENCH_LIVE_HEAP_GIB
// GiB (fractions allowed), 4 GiB if unset.
func liveHeapBytes(b *testing.B) int64 {
	gib := 4.0
	if s := os.Getenv("WRITEOUT_BENCH_LIVE_HEAP_GIB"); s != "" {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || v < 0 {
			b.Fatalf("WRITEOUT_BENCH_LIVE_HEAP_GIB=%q: want a number of GiB", s)
		}
		gib = v
	}
	return int64(gib * (1 << 30))
}

// BenchmarkOffheapWorth is issue 14's bar 6: what staging off the Go heap buys a merge that
// runs in a process already holding a large live, pointer-rich heap (default 4 GiB of 64-byte
// objects with three pointers each; WRITEOUT_BENCH_LIVE_HEAP_GIB overrides). The inputs are
// BenchmarkDurabilityMerge's (the wide schema, 5 segments of 100,000 rows, made once outside
// the timer), merged with SyncNone into b.TempDir(), staged on the heap medium or on offheap.
//
// It runs under two GC settings: limit=none (GOGC as the process has it, no memory limit) and
// limit=live+512MiB (debug.SetMemoryLimit of the runtime's footprint with the live heap built,
// collected and its free pages returned, plus 512 MiB; the previous limit is restored
// after). Media are the innermost level, so benchstat -col /medium compares them side by side;
// heap runs first unless WRITEOUT_BENCH_OFFHEAP_FIRST is set, so that alternating processes
// can cancel out an order effect.
//
// Per op: ns/op is the merge's wall time. After the timer stops, any collection still running
// is waited for (debug.SetGCPercent(-1), which returns once no mark is in progress, then the
// old value again), so a cycle the merge started is counted in full in that op; settle-ms is
// how long that wait took. gc-cpu-ms and gc-assist-ms are the deltas of
// /cpu/classes/gc/total and /cpu/classes/gc/mark/assist, gc-cycles of /gc/cycles/total;
// pause-p50/p99/max-us are percentiles of the GC stop-the-world pauses of all the ops (the
// delta of /sched/pauses/total/gc, read at the upper bound of the runtime's bucket);
// peak-heap-MiB is the highest /memory/classes/heap/objects sample (every 5 ms) in any op,
// live-heap-MiB that metric after the live heap was built and collected, footprint-MiB the
// runtime's memory then (/memory/classes/total minus heap/released, what a limit counts).
func BenchmarkOffheapWorth(b *testing.B) {
	dir := b.TempDir()
	paths, inBytes := writeWideInputs(b, dir)

	var alloc, collect time.Duration
	liveHeap, alloc, collect = buildLiveHeap(liveHeapBytes(b))
	defer func() {
		runtime.KeepAlive(liveHeap)
		liveHeap = nil
	}()
	debug.FreeOSMemory() // return the build's free pages, so the footprint is what the live heap needs
	base := readMetrics()
	live := int64(base.heapObjects)
	footprint := int64(base.goMemory)
	b.Logf("live heap: %d nodes, %.0f MiB of heap objects, %.0f MiB of Go memory (total - released); allocated in %v, first collection %v",
		liveHeap.nodes, float64(live)/(1<<20), float64(base.goMemory)/(1<<20), alloc.Round(time.Millisecond), collect.Round(time.Millisecond))

	limits := []struct {
		name  string
		limit int64 // 0: none
	}{
		{"none", 0},
		// The memory limit counts all the runtime's memory, not only objects: with 4 GiB of
		// 64-byte objects the runtime's own overhead (span metadata, heap bits) is hundreds
		// of MiB, so the limit is the footprint with the live heap in it plus 512 MiB.
		{"live+512MiB", footprint + 512<<20},
	}
	media := []int{0, 1} // mergeMedia's heap and offheap
	if os.Getenv("WRITEOUT_BENCH_OFFHEAP_FIRST") != "" {
		media = []int{1, 0}
	}
	for _, l := range limits {
		for _, mi := range media {
			m := mergeMedia[mi]
			b.Run(fmt.Sprintf("limit=%s/medium=%s", l.name, m.name), func(b *testing.B) {
				if l.limit > 0 {
					prev := debug.SetMemoryLimit(l.limit)
					defer debug.SetMemoryLimit(prev)
				}
				b.SetBytes(inBytes)
				b.ReportAllocs()
				dst := filepath.Join(dir, "merged.seg")
				var gcCPU, assist, cycles, settle float64
				var pauses []uint64
				var pauseBuckets []float64
				var peak int64
				d := medium.Durability{Sync: medium.SyncNone}
				for b.Loop() {
					before := readMetrics()
					s := meminfo.StartFunc(5*time.Millisecond, heapObjects())
					durabilityMerge(b, dir, paths, dst, m.new, d)
					b.StopTimer()
					p, err := s.Stop()
					if err != nil {
						b.Fatal(err)
					}
					peak = max(peak, p)
					t := time.Now()
					debug.SetGCPercent(debug.SetGCPercent(-1))
					settle += float64(time.Since(t).Microseconds()) / 1000
					after := readMetrics()
					gcCPU += (after.gcCPU - before.gcCPU) * 1000
					assist += (after.assist - before.assist) * 1000
					cycles += float64(after.cycles - before.cycles)
					if pauses == nil {
						pauses = make([]uint64, len(after.pauses.Counts))
						pauseBuckets = after.pauses.Buckets
					}
					for i := range pauses {
						pauses[i] += after.pauses.Counts[i] - before.pauses.Counts[i]
					}
					if err := os.Remove(dst); err != nil {
						b.Fatal(err)
					}
					syncAll()
					b.StartTimer()
				}
				n := float64(b.N)
				b.ReportMetric(gcCPU/n, "gc-cpu-ms")
				b.ReportMetric(assist/n, "gc-assist-ms")
				b.ReportMetric(cycles/n, "gc-cycles")
				b.ReportMetric(settle/n, "settle-ms")
				b.ReportMetric(histPercentile(pauses, pauseBuckets, 0.50)*1e6, "pause-p50-us")
				b.ReportMetric(histPercentile(pauses, pauseBuckets, 0.99)*1e6, "pause-p99-us")
				b.ReportMetric(histPercentile(pauses, pauseBuckets, 1)*1e6, "pause-max-us")
				b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
				b.ReportMetric(float64(live)/(1<<20), "live-heap-MiB")
				b.ReportMetric(float64(footprint)/(1<<20), "footprint-MiB")
			})
		}
	}
}

// gcMetrics is one reading of the runtime/metrics BenchmarkOffheapWorth uses.
type gcMetrics struct {
	gcCPU, assist float64 // seconds
	cycles        uint64
	pauses        *metrics.Float64Histogram
	heapObjects   uint64
	goMemory      uint64 // total minus released: what a memory limit counts
}

func readMetrics() gcMetrics {
	s := []metrics.Sample{
		{Name: metricGCCPU}, {Name: metricAssist}, {Name: metricGCCycles}, {Name: metricGCPauses},
		{Name: metricHeapObjs}, {Name: metricGoTotal}, {Name: metricReleased},
	}
	metrics.Read(s)
	for _, x := range s {
		if x.Value.Kind() == metrics.KindBad {
			panic("bench: runtime/metrics has no " + x.Name) // a programmer's bug: the names are constants
		}
	}
	return gcMetrics{
		gcCPU:       s[0].Value.Float64(),
		assist:      s[1].Value.Float64(),
		cycles:      s[2].Value.Uint64(),
		pauses:      s[3].Value.Float64Histogram(),
		heapObjects: s[4].Value.Uint64(),
		goMemory:    s[5].Value.Uint64() - s[6].Value.Uint64(),
	}
}

// histPercentile returns the p-th quantile (0 < p <= 1) of a histogram given as counts and the
// runtime's bucket boundaries (len(buckets) == len(counts)+1), as the upper bound of the bucket
// it falls in (the lower bound if that is +Inf); 0 for an empty histogram.
func histPercentile(counts []uint64, buckets []float64, p float64) float64 {
	var total uint64
	for _, c := range counts {
		total += c
	}
	if total == 0 {
		return 0
	}
	target := uint64(math.Ceil(p * float64(total)))
	target = max(target, 1)
	var seen uint64
	for i, c := range counts {
		seen += c
		if seen >= target {
			if math.IsInf(buckets[i+1], 1) {
				return buckets[i]
			}
			return buckets[i+1]
		}
	}
	return buckets[len(buckets)-1]
}

// heapObjects reads /memory/classes/heap/objects, for a meminfo.StartFunc sampler.
func heapObjects() func() (int64, error) {
	sample := []metrics.Sample{{Name: metricHeapObjs}}
	return func() (int64, error) {
		metrics.Read(sample)
		return int64(sample[0].Value.Uint64()), nil
	}
}

func TestHistPercentile(t *testing.T) {
	buckets := []float64{math.Inf(-1), 1, 2, 4, math.Inf(1)}
	f := func(counts []uint64, p, want float64) {
		t.Helper()
		if got := histPercentile(counts, buckets, p); got != want {
			t.Errorf("histPercentile(%v, %v) = %v, want %v", counts, p, got, want)
		}
	}
	f([]uint64{0, 0, 0, 0}, 0.5, 0)
	f([]uint64{0, 3, 1, 0}, 0.5, 2)
	f([]uint64{0, 3, 1, 0}, 0.99, 4)
	f([]uint64{0, 3, 1, 0}, 1, 4)
	f([]uint64{0, 1, 0, 1}, 1, 4)
}
