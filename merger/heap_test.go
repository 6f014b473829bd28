package merger

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/merger/internal/source"
)

// memRow is a row of a memCursor's window: its key (time, ids) and where it comes from.
type memRow struct {
	time int64
	ids  []uint32
	in   int
	row  int
}

// cmpMemRows orders rows as the merge must emit them: by key, then input, then row.
func cmpMemRows(a, b memRow) int {
	if c := cmp.Compare(a.time, b.time); c != 0 {
		return c
	}
	if c := slices.Compare(a.ids, b.ids); c != 0 {
		return c
	}
	if c := cmp.Compare(a.in, b.in); c != 0 {
		return c
	}
	return cmp.Compare(a.row, b.row)
}

// randMemRows returns rows of input in, in key order, single-value dimensions of cards' sizes:
// few distinct times and ids, so that keys tie within and across inputs.
func randMemRows(rng *rand.Rand, in, n int, cards []int) []memRow {
	rows := make([]memRow, n)
	t := int64(rng.IntN(4))
	for r := range rows {
		t += int64(rng.IntN(3) / 2) // a time of several rows
		ids := make([]uint32, len(cards))
		for j, c := range cards {
			ids[j] = uint32(rng.IntN(c))
		}
		rows[r] = memRow{time: t, ids: ids, in: in}
	}
	slices.SortStableFunc(rows, cmpMemRows)
	for r := range rows {
		rows[r].row = r
	}
	return rows
}

// memCursor returns a loaded cursor of input in whose window holds all of rows (in key order,
// single-value dimensions of cards' sizes) as source rows 0...; past them the cursor is done.
func memCursor(in int, rows []memRow, cards []int, rollup bool) *cursor {
	kinds := make([]dimKind, len(cards))
	c := &cursor{in: in, name: fmt.Sprint("input ", in),
		window:       window{w: newKeys(kinds), rollup: rollup},
		sourceReader: sourceReader{n: len(rows), next: len(rows), ids: make([]*source.IDCache, len(cards))}}
	w := &c.w
	for _, r := range rows {
		w.n++
		w.time = append(w.time, r.time)
		w.src = append(w.src, uint32(r.row))
		for j, id := range r.ids {
			w.dims[j].ids = append(w.dims[j].ids, id)
		}
	}
	c.setPacking(kinds, cards)
	c.checkTimes(nil)
	c.npos = w.n
	if w.n > 1 {
		c.sortGroups()
	}
	return c
}

// memChunks serves a column of a memory source in chunks of memChunkRows rows (source.Chunker,
// source.IDChunker).
type memChunks struct{ times []int64 }

const memChunkRows = 100

func (m memChunks) Chunk(row int) (int, []int64, error) {
	first := row / memChunkRows * memChunkRows
	return first, m.times[first:min(first+memChunkRows, len(m.times))], nil
}

type memIDChunks struct{ ids []uint32 }

func (m memIDChunks) Chunk(row int) (int, []uint32, []uint32, error) {
	first := row / memChunkRows * memChunkRows
	return first, m.ids[first:min(first+memChunkRows, len(m.ids))], nil, nil
}

// srcCursor returns a cursor of input in that reads rows (in time order, source rows 0...)
// from memory sources a window at a time, as a merge's cursors read segments; it waits on its
// stand-in row (lazy).
func srcCursor(t *testing.T, in int, rows []memRow, cards []int, rollup bool) *cursor {
	kinds := make([]dimKind, len(cards))
	c := &cursor{in: in, name: fmt.Sprint("input ", in),
		window: window{w: newKeys(kinds), rollup: rollup},
		sourceReader: sourceReader{n: len(rows), fresh: true, ids: make([]*source.IDCache, len(cards)),
			maps: make([][]uint32, len(cards))}}
	times := make([]int64, len(rows))
	for r, row := range rows {
		times[r] = row.time
	}
	c.times = source.LongCache{C: memChunks{times: times}}
	for j, card := range cards {
		ids := make([]uint32, len(rows))
		for r, row := range rows {
			ids[r] = row.ids[j]
		}
		c.ids[j] = &source.IDCache{C: memIDChunks{ids: ids}}
		c.maps[j] = make([]uint32, card)
		for id := range c.maps[j] {
			c.maps[j][id] = uint32(id)
		}
	}
	c.setPacking(kinds, cards)
	c.checkTimes(nil)
	require.NoError(t, c.wait())
	return c
}

// shuffleGroups shuffles the rows of each time (which the cursor must then re-sort) and
// numbers them in their new order.
func shuffleGroups(rng *rand.Rand, rows []memRow) {
	for a := 0; a < len(rows); {
		e := a + 1
		for e < len(rows) && rows[e].time == rows[a].time {
			e++
		}
		if rng.IntN(2) == 0 {
			g := rows[a:e]
			rng.Shuffle(len(g), func(i, j int) { g[i], g[j] = g[j], g[i] })
		}
		a = e
	}
	for r := range rows {
		rows[r].row = r
	}
}

// randCursors returns k memCursors of random rows (some inputs empty, left out), and their rows.
func randCursors(rng *rand.Rand, k int, cards []int, rollup bool) ([]*cursor, [][]memRow) {
	var cs []*cursor
	rows := make([][]memRow, k)
	for in := range k {
		rows[in] = randMemRows(rng, in, rng.IntN(300), cards)
		if len(rows[in]) > 0 {
			cs = append(cs, memCursor(in, rows[in], cards, rollup))
		}
	}
	return cs, rows
}

// sortedMemRows returns every row of rows in merge order.
func sortedMemRows(rows [][]memRow) []memRow {
	var all []memRow
	for _, r := range rows {
		all = append(all, r...)
	}
	slices.SortFunc(all, cmpMemRows)
	return all
}

// headRow returns the row at cur's head.
func headRow(cur *cursor) memRow {
	i := cur.head()
	r := memRow{time: cur.w.time[i], in: cur.in, row: int(cur.w.src[i])}
	for j := range cur.w.dims {
		r.ids = append(r.ids, cur.w.dims[j].ids[i])
	}
	return r
}

// TestCursorHeapOrder pops every row of a seeded random set of cursors off the heap, a row at
// a time (fix after each) or, as the emit step does, while the top comes before the rival
// (passed once it does not): the rows come in (time, key, input) order, each once.
func TestCursorHeapOrder(t *testing.T) {
	seed := testSeed(t)
	for trial := range 40 {
		rng := rand.New(rand.NewPCG(seed, uint64(trial)))
		cards := []int{1 + rng.IntN(5), 1 + rng.IntN(3)}
		if trial%4 == 0 {
			cards = []int{1 + rng.IntN(70000), 1 + rng.IntN(70000)} // packed keys of 34 bits
		}
		k := 1 + rng.IntN(9)
		cs, rows := randCursors(rng, k, cards, false)
		want := sortedMemRows(rows)
		byRival := trial%2 == 1
		h := newCursorHeap(cs)
		var got []memRow
		for h.len() > 0 {
			cur := h.top()
			rival, ri := h.rival()
			passed := false
			for {
				got = append(got, headRow(cur))
				cur.cur++
				if cur.done() || !byRival {
					break
				}
				if rival != nil && !cursorLess(cur, rival) {
					passed = true
					break
				}
			}
			switch {
			case cur.done():
				require.Same(t, cur, h.remove(0))
				h.fix()
			case passed:
				h.passed(ri)
			default:
				h.fix()
			}
		}
		require.Equal(t, want, got, "trial %d: %d inputs, cards %v", trial, k, cards)
		require.Len(t, h.spare, len(cs), "every cursor done is kept as a spare")
	}
}

// TestCursorHeapRival checks that the rival is the least cursor but the top, and that init
// orders cursors given in any order.
func TestCursorHeapRival(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 1))
	for trial := range 200 {
		var cs []*cursor
		for in := range 1 + rng.IntN(8) {
			rows := randMemRows(rng, in, 1+rng.IntN(3), []int{3})
			cs = append(cs, memCursor(in, rows, []int{3}, false))
		}
		rng.Shuffle(len(cs), func(i, j int) { cs[i], cs[j] = cs[j], cs[i] })
		sorted := slices.Clone(cs)
		slices.SortFunc(sorted, func(a, b *cursor) int { return cmpMemRows(headRow(a), headRow(b)) })
		h := newCursorHeap(cs)
		require.Same(t, sorted[0], h.top(), "trial %d", trial)
		rival, ri := h.rival()
		if len(sorted) == 1 {
			require.Nil(t, rival)
			continue
		}
		require.Same(t, sorted[1], rival, "trial %d", trial)
		require.Same(t, rival, h.cs[ri])
	}
}
