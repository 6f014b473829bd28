package merger

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/columns/agg"
	"github.com/writeout/writeout/medium"
	"github.com/writeout/writeout/merger/internal/source"
)

// fakeIDs is an IDChunker of single-value ids in chunks of size rows, or of lists (one id a
// row) when lists; err, when set, is returned for rows from errAt.
type fakeIDs struct {
	ids   []uint32
	size  int
	lists bool
	err   error
	errAt int
}

func (f *fakeIDs) Chunk(row int) (int, []uint32, []uint32, error) {
	if f.err != nil && row >= f.errAt {
		return 0, nil, nil, f.err
	}
	first := row / f.size * f.size
	ids := f.ids[first:min(first+f.size, len(f.ids))]
	if !f.lists {
		return first, ids, nil, nil
	}
	offs := make([]uint32, len(ids)+1)
	for i := range offs {
		offs[i] = uint32(i)
	}
	return first, ids, offs, nil
}

// TestKeyReader: a group's keys read again are the packed merged ids of its rows, across
// chunks, a list of one id a row or a missing dimension (null, id 0) alike; an id past the
// map is ErrCorrupt naming the input and the dimension, and a reader's error is returned.
func TestKeyReader(t *testing.T) {
	rng := rand.New(rand.NewPCG(34, 1))
	const rows = 1000
	a, b := make([]uint32, rows), make([]uint32, rows)
	mapA, mapB := []uint32{3, 0, 2, 1}, []uint32{6, 5, 4, 3, 2, 1, 0}
	for i := range rows {
		a[i], b[i] = uint32(rng.IntN(len(mapA))), uint32(rng.IntN(len(mapB)))
	}
	bits := []uint8{2, 3, 1}
	kr := &keyReader{name: "in.seg", dimNames: []string{"a", "b", "c"}, bits: bits,
		ids:  []source.IDChunker{&fakeIDs{ids: a, size: 7}, &fakeIDs{ids: b, size: 64, lists: true}, nil},
		maps: [][]uint32{mapA, mapB, nil}}
	for _, rg := range [][2]int{{0, rows}, {5, 9}, {63, 130}, {999, 1}} {
		keys, err := kr.keysAt(rg[0], rg[1])
		require.NoError(t, err)
		require.Len(t, keys, rg[1])
		for i, k := range keys {
			r := rg[0] + i
			require.Equal(t, (uint64(mapA[a[r]])<<3|uint64(mapB[b[r]]))<<1, k, "row %d", r)
		}
	}

	a[500] = uint32(len(mapA))
	_, err := kr.keysAt(490, 20)
	require.ErrorIs(t, err, columns.ErrCorrupt)
	require.ErrorContains(t, err, `in.seg: dimension "a": id 4 not below the cardinality 4`)
	a[500] = 0
	b[700] = uint32(len(mapB))
	_, err = kr.keysAt(690, 20)
	require.ErrorIs(t, err, columns.ErrCorrupt)
	require.ErrorContains(t, err, `dimension "b"`)
	b[700] = 0

	boom := errors.New("boom")
	kr.ids[1].(*fakeIDs).err, kr.ids[1].(*fakeIDs).errAt = boom, 800
	_, err = kr.keysAt(790, 60) // the chunk at 768, then the one at 832 fails
	require.ErrorIs(t, err, boom)
	require.ErrorContains(t, err, `in.seg: dimension "b"`)
}

// TestMergeKeyedAgainFaults: a rollup whose groups' keys are read again (windows of a few
// rows, no key kept) of an input with a structural fault fails with ErrCorrupt naming the
// input, or writes an output that verifies; from an input that Verify refuses, that output
// is the rollup of the input before the fault.
func TestMergeKeyedAgainFaults(t *testing.T) {
	savedW, savedM := maxWindowRows, maxMemGroupRows
	t.Cleanup(func() { maxWindowRows, maxMemGroupRows = savedW, savedM })
	maxWindowRows, maxMemGroupRows = 8, 0
	ms := []columns.Metric{{Name: "rows", Aggregator: agg.Count}, {Name: "sum", Aggregator: agg.LongSum},
		{Name: "min", Aggregator: agg.LongMin}, {Name: "max", Aggregator: agg.LongMax}}
	for i := range ms {
		ms[i].Type, ms[i].Field = columns.MetricLong, ms[i].Name
	}
	s := columns.Schema{Granularity: columns.GranularityNone, Dimensions: []columns.Dimension{{Name: "a"}, {Name: "b"}}, Metrics: ms}
	rng := rand.New(rand.NewPCG(testSeed(t), 34))
	dir, outDir := t.TempDir(), t.TempDir()
	makeRows := func() []columns.Row {
		rs := make([]columns.Row, 100+rng.IntN(200))
		for r := range rs {
			rs[r] = columns.Row{Time: 1_700_000_000_000 + int64(r)*7_200_000/int64(len(rs)),
				Dims:    [][]string{{fmt.Sprintf("a%d", rng.IntN(9))}, {fmt.Sprintf("b%d", rng.IntN(30))}},
				Metrics: []columns.Value{{Long: 1}, {Long: rng.Int64N(1000)}, {Long: rng.Int64N(1000)}, {Long: rng.Int64N(1000)}}}
			if rng.IntN(10) == 0 {
				rs[r].Dims[rng.IntN(2)] = nil
			}
		}
		return rs
	}
	opts := Options{Rollup: true, Granularity: columns.GranularityHour, Durability: medium.Durability{Sync: medium.SyncNone}}
	rekeyed := rekeyedGroups.Load()
	outcomes := map[string]int{}
	for made, tries := 0, 0; made < 2*len(structuralFaults) && tries < 40*len(structuralFaults); tries++ {
		fault := structuralFaults[tries%len(structuralFaults)]
		base := writeSegment(t, dir, fmt.Sprintf("base-%d.seg", tries), s, makeRows())
		m := readModel(t, base)
		if !fault.apply(rng, m, m.file) {
			continue
		}
		made++
		path := filepath.Join(dir, fmt.Sprintf("fault-%d.seg", tries))
		require.NoError(t, os.WriteFile(path, m.file.assemble(), 0o644))
		clean := writeSegment(t, dir, fmt.Sprintf("clean-%d.seg", tries), s, makeRows())
		bad, err := columns.Open(path)
		if err != nil {
			require.ErrorIs(t, err, columns.ErrCorrupt, fault.name)
			outcomes["open fails"]++
			continue
		}
		vs, err := columns.Open(path)
		require.NoError(t, err)
		corrupt := vs.Verify() != nil
		require.NoError(t, vs.Close())
		dst := filepath.Join(outDir, "out.seg")
		_, err = Merge(t.Context(), []*columns.Segment{bad, clean}, dst, opts)
		if err != nil {
			require.ErrorIs(t, err, columns.ErrCorrupt, fault.name)
			require.ErrorContains(t, err, path, fault.name)
			outcomes["merge fails"]++
		} else {
			out, err := columns.Open(dst)
			require.NoError(t, err)
			require.NoError(t, out.Verify(), fault.name)
			require.NoError(t, out.Close())
			if corrupt {
				want := filepath.Join(outDir, "clean.seg")
				_, err := Merge(t.Context(), []*columns.Segment{base, clean}, want, opts)
				require.NoError(t, err)
				requireSameFiles(t, want, dst, fault.name+": an output from a faulty input that verifies")
				require.NoError(t, os.Remove(want))
			}
			require.NoError(t, os.Remove(dst))
			outcomes["merge verifies"]++
		}
		require.NoError(t, bad.Close())
		require.Empty(t, dirNames(t, outDir), fault.name)
	}
	require.Positive(t, outcomes["merge fails"], "%v", outcomes)
	require.Greater(t, rekeyedGroups.Load(), rekeyed, "no group keyed again")
	t.Logf("outcomes: %s", strings.ReplaceAll(fmt.Sprint(outcomes), "map", ""))
}
