package merger

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/merger/internal/source"
)

// outRow is an output row as a batch holds it: its key and its refs (input, source row).
type outRow struct {
	time int64
	ids  []uint32
	refs [][2]int
}

// outTask records the output rows of the batches it writes, and their first rows.
type outTask struct {
	rows   []outRow
	firsts []int64
	sizes  [][3]int // per batch: its rows, its refs, and its refs before its last row's
}

func (t *outTask) write(b *batch) error {
	t.firsts = append(t.firsts, b.first)
	before := 0
	if b.keys.n > 1 {
		before = int(b.refEnd[b.keys.n-2])
	}
	t.sizes = append(t.sizes, [3]int{b.keys.n, len(b.refIn), before})
	k := int32(0)
	for r := range b.keys.n {
		o := outRow{time: b.keys.time[r]}
		for j := range b.keys.dims {
			o.ids = append(o.ids, b.keys.dims[j].ids[r])
		}
		for ; k < b.refEnd[r]; k++ {
			o.refs = append(o.refs, [2]int{int(b.refIn[k]), int(b.refRow[k])})
		}
		t.rows = append(t.rows, o)
	}
	return nil
}

// wantOutRows returns the output rows of the rows of every input: one a row in merge order,
// or with rollup one a key, whose refs are the key's rows in merge order.
func wantOutRows(rows [][]memRow, rollup bool) []outRow {
	var out []outRow
	for _, r := range sortedMemRows(rows) {
		ref := [2]int{r.in, r.row}
		if n := len(out); rollup && n > 0 && out[n-1].time == r.time && slices.Equal(out[n-1].ids, r.ids) {
			out[n-1].refs = append(out[n-1].refs, ref)
			continue
		}
		out = append(out, outRow{time: r.time, ids: r.ids, refs: [][2]int{ref}})
	}
	return out
}

// runEmitter merges the cursors through an emitter into batches of rows rows, and returns
// what a column task was handed.
func runEmitter(t *testing.T, cs []*cursor, inputs, rows int, rollup bool) (*outTask, int64) {
	t.Helper()
	c := &core{ctx: context.Background(), srcs: make([]source.Source, inputs), names: make([]string, inputs),
		opts: &Options{}, out: columns.Schema{Rollup: rollup}, rowMaps: make([][]uint32, inputs)}
	task := &outTask{}
	pl := newPipeline([]colTask{task}, 1, pipelineBatches, make([]dimKind, len(cs[0].w.dims)), rows, nil)
	h := newCursorHeap(slices.Clone(cs))
	require.NoError(t, h.loadLazyTops(c.ctx))
	n, err := newEmitter(c, h, cs, pl, rows, false, 0).run()
	require.NoError(t, err)
	return task, n
}

// TestEmitterOrder merges seeded random cursors, with and without rollup, in batches of a few
// rows to many: the output rows are the rows in (time, key, input) order (with rollup, one a
// key with the key's rows as refs), batches follow one another, each full (of rows, or, with
// rollup, of refs), and interleaving inputs take the interleave steps.
func TestEmitterOrder(t *testing.T) {
	seed := testSeed(t)
	steps := interleaveRuns.Load()
	cut := 0 // batches that ended at twice their rows' refs
	for trial := range 64 {
		rng := rand.New(rand.NewPCG(seed, uint64(trial)))
		rollup := trial%2 == 1
		cards := []int{1 + rng.IntN(6), 1 + rng.IntN(4)}
		k := 1 + rng.IntN(6)
		cs, rows := randCursors(rng, k, cards, rollup)
		if trial%4 >= 2 {
			// Cursors that read windows of whole groups from their sources, lazy at first,
			// some groups to re-sort; some inputs longer than a window.
			cs = cs[:0]
			for in := range rows {
				rows[in] = randMemRows(rng, in, rng.IntN(3*cursorBatch), cards)
				if trial%8 >= 6 {
					shuffleGroups(rng, rows[in]) // windows that re-sort do not interleave
				}
				// Inputs that start later wait lazy while others interleave.
				late := int64(rng.IntN(1500))
				for r := range rows[in] {
					rows[in][r].time += late
				}
				if len(rows[in]) > 0 {
					cs = append(cs, srcCursor(t, in, rows[in], cards, rollup))
				}
			}
		}
		if len(cs) == 0 {
			continue
		}
		batchRows := []int{3, 64, defaultBatchRows}[trial%3]
		task, n := runEmitter(t, cs, k, batchRows, rollup)
		want := wantOutRows(rows, rollup)
		name := fmt.Sprintf("trial %d: %d inputs, rollup %v, batches of %d", trial, k, rollup, batchRows)
		require.Equal(t, want, task.rows, name)
		require.Equal(t, int64(len(want)), n, name)
		// Batches follow one another, each full but the last: batchRows rows, or, with
		// rollup, at least twice as many refs. A batch's refs before its last row are fewer
		// than three times its rows (the slots of a pre-aggregated group go in at most one a
		// row past twice); the last row holds all of its key's.
		first := int64(0)
		for i, f := range task.firsts {
			require.Equal(t, first, f, "%s: batch %d", name, i)
			rows, refs := task.sizes[i][0], task.sizes[i][1]
			require.LessOrEqual(t, rows, batchRows, "%s: batch %d", name, i)
			require.Less(t, task.sizes[i][2], 3*batchRows, "%s: batch %d", name, i)
			if i < len(task.firsts)-1 {
				require.True(t, rows == batchRows || rollup && refs >= 2*batchRows, "%s: batch %d not full: %d rows, %d refs", name, i, rows, refs)
				cut += min(1, refs/(2*batchRows)) * min(1, batchRows-rows)
			}
			first += int64(rows)
		}
	}
	require.Greater(t, interleaveRuns.Load(), steps, "no interleave step ran")
	require.Positive(t, cut, "no batch ended at its refs")
}

// TestEmitterCancel cancels a merge's context: the emitter stops with the context's error and
// hands every batch back.
func TestEmitterCancel(t *testing.T) {
	rng := rand.New(rand.NewPCG(testSeed(t), 2))
	cs, _ := randCursors(rng, 4, []int{3, 3}, false)
	for len(cs) == 0 {
		cs, _ = randCursors(rng, 4, []int{3, 3}, false)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	c := &core{ctx: ctx, srcs: make([]source.Source, 4), names: make([]string, 4), opts: &Options{},
		rowMaps: make([][]uint32, 4)}
	pl := newPipeline([]colTask{&outTask{}}, 1, pipelineBatches, make([]dimKind, 2), 2, nil)
	_, err := newEmitter(c, newCursorHeap(slices.Clone(cs)), cs, pl, 2, false, 0).run()
	require.ErrorIs(t, err, context.Canceled)
	require.Len(t, pl.free, pl.made)
}
