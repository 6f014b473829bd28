package merger

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/columns/agg"
	"github.com/writeout/writeout/internal/colwrite"
	"github.com/writeout/writeout/medium"
	"github.com/writeout/writeout/merger/internal/scratch"
)

// TestIDLogBitmaps writes a single-value dimension's bitmaps from an id log, with the
// counting sort's buffer smaller than the rows (several ranges of ids, an id holding more rows
// than the buffer, ids holding none), for each width of the log, with no idle core and with
// one or three (the ids handed to other goroutines, in parts of a few rows): every bitmap
// holds exactly the rows of its id.
func TestIDLogBitmaps(t *testing.T) {
	defer func(n int) { splitRows = n }(splitRows)
	splitRows = 5
	for _, card := range []int{3, 200, 300, 70_000} {
		for _, bound := range []int{1, 7, 64, 0} {
			for _, idle := range []int{0, 1, 3} {
				t.Run(fmt.Sprintf("card=%d/bound=%d/idle=%d", card, bound, idle), func(t *testing.T) {
					rng := rand.New(rand.NewPCG(uint64(card), uint64(bound)))
					rows := 500
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
					log := newIDLog(card)
					log.reserve(rows / (1 + bound%3)) // half the rows for some: the log grows past its reserve
					switch l := log.(type) {
					case *typedLog[uint8]:
						l.sortRows = bound
					case *typedLog[uint16]:
						l.sortRows = bound
					case *typedLog[uint32]:
						l.sortRows = bound
					}
					for lo := 0; lo < rows; lo += 100 {
						require.NoError(t, dw.AppendSingleIDs(ids[lo:lo+100]))
						log.add(ids[lo : lo+100])
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
					for v := range card {
						bm, err := col.Bitmap(uint32(v))
						require.NoError(t, err)
						var want []uint32
						for r, id := range ids {
							if id == uint32(v) {
								want = append(want, uint32(r))
							}
						}
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
