package merger

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/columns/agg"
	"github.com/writeout/writeout/internal/colwrite"
	"github.com/writeout/writeout/medium"
	"github.com/writeout/writeout/merger/internal/fixture"
	"github.com/writeout/writeout/merger/internal/scratch"
	"github.com/writeout/writeout/tmpfile"
)

// TestIDLogBitmaps writes a single-value dimension's bitmaps from an id log, with the
// counting sort's buffer smaller than the rows (several buckets of ids, an id holding more rows
// than the buffer, ids holding none), for each width of the log, with the log in memory or
// mostly written to the medium, with no idle core and with one or three (the ids handed to
// other goroutines, in parts of a few rows): every bitmap holds exactly the rows of its id.
// With mem 1<<16, 600,000 rows go to runs of up to 262,144 rows.
func TestIDLogBitmaps(t *testing.T) {
	defer func(n int) { splitRows = n }(splitRows)
	splitRows = 5
	for _, card := range []int{3, 200, 300, 70_000} {
		for _, bound := range []int{1, 7, 64, 0} {
			for _, idle := range []int{0, 1, 3} {
				for _, mem := range []int{0, 1, 37, 1 << 16} {
					rows, runMax := 500, (mem+1)/2
					if mem == 1<<16 {
						if raceEnabled || testing.Short() || idle == 1 || bound == 1 && card == 70_000 {
							continue
						}
						rows, runMax = 600_000, 1<<20
					}
					if raceEnabled && card == 70_000 && (idle != 1 || mem != 37) {
						// Under the race detector the 70,000-value dictionaries cost most of the
						// test (43 s of CI's race step): one combination of idle and mem is
						// enough to look for races there; the run without the detector has all.
						continue
					}
					t.Run(fmt.Sprintf("card=%d/bound=%d/idle=%d/mem=%d", card, bound, idle, mem), func(t *testing.T) {
						rng := rand.New(rand.NewPCG(uint64(card), uint64(bound)))
						ids := make([]uint32, rows)
						for r := range ids {
							switch r % 3 {
							case 0:
								ids[r] = 1 // one id holds a third of the rows
							case 1:
								ids[r] = uint32(rng.IntN(min(card, 40)))
							default:
								ids[r] = uint32(rng.IntN(card)) // of a large cardinality, many ids hold none
							}
						}
						s := columns.Schema{Dimensions: []columns.Dimension{{Name: "d"}}}
						w, err := colwrite.New(s, colwrite.Options{ChunkRows: 64})
						require.NoError(t, err)
						tw, err := w.Time()
						require.NoError(t, err)
						dw, err := w.Dim("d")
						require.NoError(t, err)
						require.NoError(t, dw.AddNull())
						for v := 1; v < card; v++ {
							_, err := dw.AddValue(fmt.Sprintf("v%06d", v))
							require.NoError(t, err)
						}
						for r := range rows {
							require.NoError(t, tw.Append(int64(r)))
						}
						med := medium.NewHeap()
						defer med.Close()
						log := newIDLog(card, func() (medium.Medium, error) { return med, nil }, bounds{}, nil)
						switch l := log.(type) {
						case *typedLog[uint8]:
							l.sortRows, l.memIDs, l.runMax = bound, mem, runMax
						case *typedLog[uint16]:
							l.sortRows, l.memIDs, l.runMax = bound, mem, runMax
						case *typedLog[uint32]:
							l.sortRows, l.memIDs, l.runMax = bound, mem, runMax
						}
						log.reserve(rows / (1 + bound%3)) // half the rows for some: the log grows past its reserve
						for lo := 0; lo < rows; lo += 100 {
							require.NoError(t, dw.AppendSingleIDs(ids[lo:lo+100]))
							require.NoError(t, log.add(ids[lo:lo+100]))
						}
						if mem == 1<<16 {
							require.Greater(t, logRuns(log), 2, "runs of many rows")
						}
						var done atomic.Int64
						sc := &sortScratch{counts: []uint32{9, 9}, rows: scratch.New[uint32](3)}
						var cs *cores
						if idle > 0 {
							cs = &cores{par: int32(1 + idle)}
							cs.busy.Store(1) // this goroutine
						}
						require.NoError(t, log.writeBitmaps(context.Background(), dw, card, cs, &done, sc))
						if cs != nil {
							require.Equal(t, int32(1), cs.busy.Load(), "every helper done")
						}
						require.NoError(t, log.free())
						require.NoError(t, log.free(), "a second free")
						require.NoError(t, sc.rows.Free())
						require.Equal(t, int64(card), done.Load())
						path := filepath.Join(t.TempDir(), "seg")
						_, err = w.Finish(path, columns.PublishOptions{})
						require.NoError(t, err)
						seg, err := columns.Open(path)
						require.NoError(t, err)
						defer seg.Close()
						require.NoError(t, seg.Verify())
						col, err := seg.Dim("d")
						require.NoError(t, err)
						wants := make([][]uint32, card)
						for r, id := range ids {
							wants[id] = append(wants[id], uint32(r))
						}
						for v := range card {
							bm, err := col.Bitmap(uint32(v))
							require.NoError(t, err)
							want := wants[v]
							got := bm.ToArray()
							if len(want) == 0 {
								require.Empty(t, got, "id %d", v)
							} else {
								require.Equal(t, want, got, "id %d", v)
							}
						}
					})
				}
			}
		}
	}
}

// logRuns returns the runs log wrote so far.
func logRuns(log idLog) int {
	switch l := log.(type) {
	case *typedLog[uint8]:
		return len(l.runs)
	case *typedLog[uint16]:
		return len(l.runs)
	case *typedLog[uint32]:
		return len(l.runs)
	}
	return 0
}

// TestMergePopulatesLogs: a merge without rollup, whose id logs fill to the rows in, has their
// pages faulted in ahead (scratch.Array.Populate); a rollup, whose logs may stay part empty,
// does not. The two inputs hold the same rows, which a rollup combines; the logs are large
// enough to be mapped (four bytes an id: a dimension of more than 65,536 values).
func TestMergePopulatesLogs(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("scratch arrays are mapped on Linux only")
	}
	dir := t.TempDir()
	s := columns.Schema{Dimensions: []columns.Dimension{{Name: "u"}},
		Metrics: []columns.Metric{{Name: "n", Aggregator: agg.LongSum}}}
	const rows = 160_000 // an input: two make a log of 1.25 MiB
	var segs []*columns.Segment
	for i := range 2 {
		rs := make([]columns.Row, rows)
		for r := range rs {
			rs[r] = columns.Row{Time: int64(r), Dims: [][]string{{fmt.Sprintf("u%06d", r*7%rows)}},
				Metrics: []columns.Value{{Long: 1}}}
		}
		segs = append(segs, writeSegment(t, dir, fmt.Sprintf("in%d.seg", i), s, rs))
	}
	for _, rollup := range []bool{false, true} {
		before := scratch.PopulatedBytes()
		res, err := Merge(t.Context(), segs, filepath.Join(dir, fmt.Sprintf("out-%v.seg", rollup)),
			Options{Rollup: rollup, Durability: medium.Durability{Sync: medium.SyncNone}})
		require.NoError(t, err)
		populated := scratch.PopulatedBytes() - before
		if rollup {
			require.Less(t, res.RowsOut, res.RowsIn)
			require.Zero(t, populated, "a rollup populated its logs")
		} else {
			require.Equal(t, int64(2*rows), res.RowsOut)
			require.GreaterOrEqual(t, populated, int64(4*2*rows), "the merge's log was not populated")
		}
	}
}

// TestMergeRegroupOrder merges inputs whose rows are in time order only, with two and three
// single-value dimensions, into hour (and day) buckets with and without rollup: every bucket
// re-sorts by the dimensions, most significant first (sortPacked's keys), exactly as the
// oracle orders them.
func TestMergeRegroupOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 8))
	dir := t.TempDir()
	for c := range 12 {
		nd := 2 + c%2
		s := columns.Schema{Metrics: []columns.Metric{{Name: "n", Aggregator: agg.LongSum}}}
		for j := range nd {
			s.Dimensions = append(s.Dimensions, columns.Dimension{Name: fmt.Sprintf("d%d", j)})
		}
		var schemas []columns.Schema
		var rows [][]columns.Row
		var segs []*columns.Segment
		for i := range 3 {
			var rs []columns.Row
			tm := int64(0)
			for range 300 + rng.IntN(300) {
				tm += int64(rng.IntN(90_000))
				r := columns.Row{Time: tm, Metrics: []columns.Value{{Long: int64(rng.IntN(100))}}}
				for j := range nd {
					card := []int{3, 40, 700}[(j+c)%3]
					r.Dims = append(r.Dims, []string{fmt.Sprintf("v%04d", rng.IntN(card))})
				}
				rs = append(rs, r)
			}
			schemas, rows = append(schemas, s), append(rows, rs)
			segs = append(segs, writeSegment(t, dir, fmt.Sprintf("c%d-%d.seg", c, i), s, rs))
		}
		opts := Options{Rollup: c%4 < 2, Granularity: []columns.Granularity{columns.GranularityHour, columns.GranularityDay}[c%2],
			Durability: medium.Durability{Sync: medium.SyncNone}}
		out, err := outputSchema(schemas, opts.inputName, nil, opts.Rollup, opts.Granularity)
		require.NoError(t, err)
		dst := filepath.Join(dir, fmt.Sprintf("out%d.seg", c))
		_, err = Merge(t.Context(), segs, dst, opts)
		require.NoError(t, err)
		requireRowsEqual(t, oracleMerge(schemas, rows, out), readRows(t, openSeg(t, dst)), false, fmt.Sprintf("case %d", c))
	}
}

// TestRadixSort sorts random keys of every width from 1 to 64 bits, short and long, as
// slices.Sort does.
func TestRadixSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for width := 1; width <= 64; width++ {
		for _, n := range []int{0, 1, 255, 256, 3000} {
			keys := make([]uint64, n)
			for i := range keys {
				keys[i] = rng.Uint64()
				if width < 64 {
					keys[i] &= 1<<width - 1
				}
			}
			want := slices.Clone(keys)
			slices.Sort(want)
			radixSort(keys, make([]uint64, n), width)
			require.Equal(t, want, keys, "width %d, %d keys", width, n)
		}
	}
}

// BenchmarkIDLogBitmaps writes the bitmaps of 10 M rows of a single-value dimension from an id
// log kept in memory whole (mem=all: one pass over the log a range of ids, as before logs had
// a bound) and from one past its bound (mem=bounded: the ids past 4 Mi and the sort's buckets
// in a tmpfile medium). Rows take ids of a skewed distribution. cpu-ns/op is the process's CPU
// time, steadier than the wall time on a shared machine.
func BenchmarkIDLogBitmaps(b *testing.B) {
	const rows = 10_000_000
	for _, card := range []int{200, 5000} {
		ids := make([]uint32, rows)
		rng := rand.New(rand.NewPCG(1, uint64(card)))
		z := rand.NewZipf(rand.New(rand.NewPCG(2, uint64(card))), 1.1, 1, uint64(card-1))
		for r := range ids {
			if r%2 == 0 {
				ids[r] = uint32(z.Uint64())
			} else {
				ids[r] = uint32(rng.IntN(card))
			}
		}
		for _, mem := range []string{"all", "bounded"} {
			b.Run(fmt.Sprintf("card=%d/mem=%s", card, mem), func(b *testing.B) {
				med, err := tmpfile.New(tmpfile.Options{Dir: b.TempDir()})
				require.NoError(b, err)
				defer med.Close()
				var cpu time.Duration
				for b.Loop() {
					b.StopTimer()
					s := columns.Schema{Dimensions: []columns.Dimension{{Name: "d"}}}
					w, err := colwrite.New(s, colwrite.Options{Medium: med})
					require.NoError(b, err)
					tw, err := w.Time()
					require.NoError(b, err)
					dw, err := w.Dim("d")
					require.NoError(b, err)
					for v := range card {
						_, err := dw.AddValue(fmt.Sprintf("v%06d", v))
						require.NoError(b, err)
					}
					require.NoError(b, tw.AppendValues(make([]int64, rows)))
					require.NoError(b, dw.AppendSingleIDs(ids))
					scr, err := med.NewChild()
					require.NoError(b, err)
					log := newIDLog(card, func() (medium.Medium, error) { return scr, nil }, bounds{}, nil)
					if mem == "all" {
						switch l := log.(type) {
						case *typedLog[uint8]:
							l.memIDs = rows
						case *typedLog[uint16]:
							l.memIDs = rows
						}
					}
					log.reserve(rows)
					b.StartTimer()
					cpu0 := cpuTime(b)
					for lo := 0; lo < rows; lo += 4096 {
						require.NoError(b, log.add(ids[lo:min(lo+4096, rows)]))
					}
					var done atomic.Int64
					sc := &sortScratch{}
					require.NoError(b, log.writeBitmaps(context.Background(), dw, card, nil, &done, sc))
					cpu += cpuTime(b) - cpu0
					b.StopTimer()
					require.NoError(b, log.free())
					require.NoError(b, sc.rows.Free())
					require.NoError(b, w.Abort())
					require.NoError(b, scr.Close())
					b.StartTimer()
				}
				b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
			})
		}
	}
}

// failingChildren is a medium whose children past the first cannot be made.
type failingChildren struct {
	medium.Medium
	made int
}

func (m *failingChildren) NewChild() (medium.Medium, error) {
	if m.made++; m.made > 1 {
		return nil, errors.New("no child for you")
	}
	return m.Medium.NewChild()
}

// TestMergeLogRunsFail: a merge whose logs must write runs and whose medium cannot give them
// one fails with the medium's error, and publishes nothing; with the logs in memory, the same
// medium serves the merge (the runs' medium is made only when a log needs it).
func TestMergeLogRunsFail(t *testing.T) {
	defer func(m int) { logMemIDs = m }(logMemIDs)
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(5, 33))
	rc := fixture.NewCase(rng, 3, 300)
	var inputs []*columns.Segment
	for i := range rc.Schemas {
		inputs = append(inputs, fixture.WriteSegment(t, dir, fmt.Sprintf("in%d.seg", i), rc.Schemas[i], rc.Rows[i]))
	}
	dst := filepath.Join(dir, "out.seg")
	logMemIDs = 7
	heap := medium.NewHeap()
	defer heap.Close()
	_, err := Merge(context.Background(), inputs, dst, Options{Medium: &failingChildren{Medium: heap}})
	require.ErrorContains(t, err, "no child for you")
	require.NoFileExists(t, dst)

	logMemIDs = 1 << 22
	_, err = Merge(context.Background(), inputs, dst, Options{Medium: &failingChildren{Medium: heap}})
	require.NoError(t, err)
}

// TestIDLogSealFreesToSystem: a log whose ids outgrow its memory writes them as runs, and the
// mapped array they were in goes back to the system, not to the scratch pool (where no later
// array of the merge takes it, and it stays resident).
func TestIDLogSealFreesToSystem(t *testing.T) {
	med := medium.NewHeap()
	defer med.Close()
	const mem = scratch.MinMapped // ids of 4 bytes: a mapped array of 4 MiB
	log := newIDLog(1<<20, func() (medium.Medium, error) { return med, nil }, bounds{}, nil)
	l, ok := log.(*typedLog[uint32])
	require.True(t, ok)
	l.memIDs, l.runMax = mem, mem/8
	log.reserve(2 * mem)
	if l.arr.Bytes() < mem || len(l.arr.S) != mem {
		t.Skip("the log's array is not mapped here")
	}
	before := scratch.PoolBytes()
	ids := make([]uint32, mem+10)
	for i := range ids {
		ids[i] = uint32(i * 7 % (1 << 20))
	}
	require.NoError(t, log.add(ids))
	require.Positive(t, logRuns(log), "runs written")
	require.Equal(t, before, scratch.PoolBytes(), "the array before the runs went to the pool")
	require.NoError(t, log.free())
}

// TestLogRunsRoundTrip writes runs of several lengths (one block of 65,536 rows or less, one
// past it, many blocks) with ids of every kind (one of few values, of many, ids with a row or
// two in blocks far apart, ids absent) through both ways a run finds its rows' blocks (the
// placed ends of a small cardinality, the scan of a large one), and reads them back as the
// bitmaps phase does: every id gets exactly its rows, in order.
func TestLogRunsRoundTrip(t *testing.T) {
	for _, card := range []int{1, 3, 4000, 70_000} {
		for _, runLen := range []int{1, 1000, 65_536, 65_537, 200_000, 1 << 20} {
			t.Run(fmt.Sprintf("card=%d/run=%d", card, runLen), func(t *testing.T) {
				if runLen == 1<<20 && (testing.Short() || raceEnabled) {
					t.Skip("a run of 1 Mi rows: not in short or race runs")
				}
				rng := rand.New(rand.NewPCG(uint64(card), uint64(runLen)))
				rows := 2*runLen + runLen/3 // two whole runs and a part
				ids := make([]uint32, rows)
				for r := range ids {
					switch k := rng.IntN(10); {
					case k < 4:
						ids[r] = uint32(card - 1) // a large id
					case k < 9:
						ids[r] = uint32(rng.IntN(min(card, 8)))
					default:
						ids[r] = uint32(rng.IntN(card)) // rare, with rows in blocks apart
					}
				}
				log := newIDLog(card, func() (medium.Medium, error) { return medium.NewHeap(), nil }, bounds{}, nil)
				var runs func() ([]runReader, []uint32)
				switch l := log.(type) {
				case *typedLog[uint8]:
					l.memIDs, l.runMax = runLen, 4*runLen // runs of a quarter of runMax first (runLen)
					runs = func() ([]runReader, []uint32) { require.NoError(t, l.seal()); return readersOf(l.runs), l.counts }
				case *typedLog[uint16]:
					l.memIDs, l.runMax = runLen, 4*runLen // runs of a quarter of runMax first (runLen)
					runs = func() ([]runReader, []uint32) { require.NoError(t, l.seal()); return readersOf(l.runs), l.counts }
				case *typedLog[uint32]:
					l.memIDs, l.runMax = runLen, 4*runLen // runs of a quarter of runMax first (runLen)
					runs = func() ([]runReader, []uint32) { require.NoError(t, l.seal()); return readersOf(l.runs), l.counts }
				}
				log.reserve(rows)
				require.NoError(t, log.add(ids))
				readers, counts := runs()
				require.GreaterOrEqual(t, len(readers), 2)
				wants := make([][]uint32, card)
				for r, id := range ids {
					wants[id] = append(wants[id], uint32(r))
				}
				// Gather the ids a few ranges at a time.
				got := make([]uint32, rows)
				pos := make([]uint32, card)
				for lo := 0; lo < card; {
					hi := min(card, lo+1+rng.IntN(card))
					off := uint32(0)
					for v := lo; v < hi; v++ {
						pos[v] = off
						off += counts[v]
					}
					for i := range readers {
						require.NoError(t, readers[i].gather(hi, got, pos))
					}
					off = 0
					for v := lo; v < hi; v++ {
						require.Equal(t, len(wants[v]), int(counts[v]), "id %d", v)
						if counts[v] > 0 {
							require.Equal(t, wants[v], got[off:off+counts[v]], "id %d", v)
						}
						off += counts[v]
					}
					lo = hi
				}
				require.NoError(t, log.free())
			})
		}
	}
}

// readersOf returns a runReader of each run, with buffers of 4 KiB.
func readersOf(runs []logRun) []runReader {
	var rs []runReader
	for _, run := range runs {
		rs = append(rs, runReader{run: run, rowsBuf: make([]byte, 0, 4<<10), idsBuf: make([]byte, 0, runIDsBuf)})
	}
	return rs
}
