package columns

import (
	"bytes"
	"io"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/internal/segwrite"
	"github.com/writeout/writeout/medium"
)

// roaringBytes is what the roaring library writes for vals after RunOptimize.
func roaringBytes(t testing.TB, vals []uint32) []byte {
	bm := roaring.BitmapOf(vals...)
	bm.RunOptimize()
	b, err := bm.ToBytes()
	require.NoError(t, err)
	return b
}

// randomRows returns a strictly increasing set mixing the shapes that pick each container kind:
// sparse values (arrays), long runs (run containers), dense random bits (bitmap containers),
// spread over a few containers or many.
func randomRows(r *rand.Rand) []uint32 {
	var vals []uint32
	keys := 1 + r.IntN(6)
	if r.IntN(4) == 0 {
		keys = 1 + r.IntN(40)
	}
	for k := 0; k < keys; k++ {
		base := uint32(r.IntN(1<<15)) << 16
		switch r.IntN(5) {
		case 0: // a few sparse values
			for range 1 + r.IntN(20) {
				vals = append(vals, base|uint32(r.IntN(1<<16)))
			}
		case 1: // runs
			for range 1 + r.IntN(30) {
				s := r.IntN(1 << 16)
				for v := s; v < min(s+1+r.IntN(3000), 1<<16); v++ {
					vals = append(vals, base|uint32(v))
				}
			}
		case 2: // dense random: bitmap container
			p := 0.1 + 0.8*r.Float64()
			for v := 0; v < 1<<16; v++ {
				if r.Float64() < p {
					vals = append(vals, base|uint32(v))
				}
			}
		case 3: // around the array/bitmap boundary
			n := roaringArrayMax - 3 + r.IntN(7)
			for _, v := range r.Perm(1 << 16)[:n] {
				vals = append(vals, base|uint32(v))
			}
		default: // a full container, or every other value
			step := 1 + r.IntN(2)
			for v := 0; v < 1<<16; v += step {
				vals = append(vals, base|uint32(v))
			}
		}
	}
	slices.Sort(vals)
	return slices.Compact(vals)
}

func TestRoaringEncoderMatchesRoaring(t *testing.T) {
	var e roaringEncoder
	fixed := [][]uint32{
		nil,
		{0},
		{1<<32 - 1},
		{0, 1, 2, 3},
		{5, 1 << 16, 2 << 16, 3 << 16, 4 << 16}, // 5 containers: offsets with runs or not
		{0, 1, 2, 1 << 16, 1<<16 + 1, 2 << 16, 3 << 16},
	}
	for _, vals := range fixed {
		require.Equal(t, roaringBytes(t, vals), e.appendRows(nil, vals), "%v", vals)
	}
	seed := uint64(rand.Int64())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 7))
	for i := 0; i < 200; i++ {
		vals := randomRows(r)
		got := e.appendRows([]byte("prefix"), vals)
		require.Equal(t, []byte("prefix"), got[:6])
		want := roaringBytes(t, vals)
		if !bytes.Equal(want, got[6:]) {
			t.Fatalf("seed %d case %d: %d values: encoding differs from roaring's (%d vs %d bytes)", seed, i, len(vals), len(got)-6, len(want))
		}
		back := roaring.New()
		_, err := back.ReadFrom(bytes.NewReader(got[6:]))
		require.NoError(t, err)
		require.Equal(t, vals, back.ToArray())
	}
}

// wordsOf returns vals as a bitset, with extra zero words at the end.
func wordsOf(vals []uint32, extra int) []uint64 {
	n := 0
	if len(vals) > 0 {
		n = int(vals[len(vals)-1])/64 + 1
	}
	ws := make([]uint64, n+extra)
	for _, v := range vals {
		ws[v/64] |= 1 << (v % 64)
	}
	return ws
}

func TestRoaringEncoderWordsMatchesRoaring(t *testing.T) {
	var e roaringEncoder
	for _, vals := range [][]uint32{nil, {0}, {63, 64}, {65535, 65536}, {0, 1, 2, 3, 1 << 16, 2 << 16, 3 << 16, 4<<16 + 9}} {
		require.Equal(t, roaringBytes(t, vals), e.appendWords(nil, wordsOf(vals, 3)), "%v", vals)
	}
	seed := uint64(rand.Int64())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 8))
	for i := 0; i < 60; i++ {
		vals := randomRows(r)
		if len(vals) > 0 && vals[len(vals)-1] > 64<<20 {
			for k := range vals { // keep the bitset small: fold the keys down
				vals[k] = vals[k]&0xffff | (vals[k]>>16%512)<<16
			}
			slices.Sort(vals)
			vals = slices.Compact(vals)
		}
		got := e.appendWords(nil, wordsOf(vals, r.IntN(2000)))
		if want := roaringBytes(t, vals); !bytes.Equal(want, got) {
			t.Fatalf("seed %d case %d: %d values: encoding differs from roaring's (%d vs %d bytes)", seed, i, len(vals), len(got), len(want))
		}
	}
}

func TestWriteBitmapRowsSameFileAsWriteBitmap(t *testing.T) {
	s := Schema{Dimensions: []Dimension{{Name: "d", MultiValue: true}}}
	r := rand.New(rand.NewPCG(3, 4))
	const rows = 200_000
	ids := make([][]uint32, rows)
	for i := range ids {
		switch {
		case i%7 == 0:
			ids[i] = nil // null
		case i < 70_000:
			ids[i] = []uint32{1 + uint32(i/1000)} // runs
		default:
			ids[i] = []uint32{1 + uint32(r.IntN(200)), 201 + uint32(r.IntN(3))}
		}
	}
	const (
		viaBitmap = iota
		viaRows
		viaWords
		viaRuns
		viaRunsOnly
	)
	build := func(form int) []byte {
		w, err := newWriter(s, writerOptions{Medium: medium.NewHeap()})
		require.NoError(t, err)
		tw, err := w.Time()
		require.NoError(t, err)
		d, err := w.Dim("d")
		require.NoError(t, err)
		require.NoError(t, d.AddNull())
		for v := 1; v <= 203; v++ {
			_, err := d.AddValue(string(rune('a'+v/26)) + string(rune('a'+v%26)))
			require.NoError(t, err)
		}
		bms := make([][]uint32, 204)
		for i, row := range ids {
			require.NoError(t, tw.Append(int64(i)))
			require.NoError(t, d.AppendIDs(row))
			if len(row) == 0 {
				bms[0] = append(bms[0], uint32(i))
			}
			for _, id := range row {
				bms[id] = append(bms[id], uint32(i))
			}
		}
		if form == viaRuns || form == viaRunsOnly {
			// Ids [0, 60) in a run (the null id's check), [60, 60) empty, [60, 100) directly
			// (viaRuns) or in a run, [100, 150) and [150, 204) in runs, each run encoded on a
			// goroutine of its own.
			cuts := []int{0, 60, 60, 100, 150, 204}
			runs := make([]segwrite.BitmapRun, len(cuts)-1)
			for k := range runs {
				if k != 2 || form == viaRunsOnly {
					runs[k], err = d.NewBitmapRun(uint32(cuts[k]))
					require.NoError(t, err)
				}
			}
			var wg sync.WaitGroup
			for k, r := range runs {
				if r == nil {
					continue
				}
				wg.Go(func() {
					for _, rs := range bms[cuts[k]:cuts[k+1]] {
						assert.NoError(t, r.AddRows(rs))
					}
				})
			}
			wg.Wait()
			for k, r := range runs {
				if r != nil {
					require.NoError(t, d.WriteBitmapRun(r))
					continue
				}
				for id := cuts[k]; id < cuts[k+1]; id++ {
					require.NoError(t, d.WriteBitmapRows(uint32(id), bms[id]))
				}
			}
			bms = nil
		}
		for id, rs := range bms {
			switch form {
			case viaRows:
				require.NoError(t, d.WriteBitmapRows(uint32(id), rs))
			case viaWords:
				require.NoError(t, d.WriteBitmapWords(uint32(id), wordsOf(rs, id%3)))
			default:
				bm := roaring.BitmapOf(rs...)
				bm.RunOptimize()
				require.NoError(t, d.WriteBitmap(uint32(id), bm))
			}
		}
		var buf bytes.Buffer
		_, err = w.FinishTo(&buf)
		require.NoError(t, err)
		return buf.Bytes()
	}
	a, b, c, e, f := build(viaBitmap), build(viaRows), build(viaWords), build(viaRuns), build(viaRunsOnly)
	require.True(t, bytes.Equal(a, b), "WriteBitmapRows and WriteBitmap give different files")
	require.True(t, bytes.Equal(a, c), "WriteBitmapWords and WriteBitmap give different files")
	require.True(t, bytes.Equal(a, e), "bitmapRun and WriteBitmap give different files")
	require.True(t, bytes.Equal(a, f), "bitmapRun alone and WriteBitmap give different files")
	seg, err := newSegmentBytes(b)
	require.NoError(t, err)
	defer seg.Close()
	require.NoError(t, seg.Verify())
}

func TestWriteBitmapRowsRejects(t *testing.T) {
	s := Schema{Dimensions: []Dimension{{Name: "d"}}}
	start := func() (*writer, segwrite.DimWriter) {
		w, err := newWriter(s, writerOptions{})
		require.NoError(t, err)
		tw, _ := w.Time()
		d, _ := w.Dim("d")
		require.NoError(t, d.AddNull())
		_, _ = d.AddValue("a")
		for i, id := range []uint32{0, 1, 1, 0} {
			require.NoError(t, tw.Append(int64(i)))
			require.NoError(t, d.AppendID(id))
		}
		return w, d
	}
	w, d := start()
	require.ErrorIs(t, d.WriteBitmapRows(0, []uint32{3, 0}), medium.ErrInvalid, "not increasing")
	require.ErrorContains(t, d.WriteBitmapRows(0, []uint32{0, 3}), "not strictly increasing", "the first error sticks")
	w.Abort()
	w, d = start()
	require.ErrorIs(t, d.WriteBitmapRows(0, []uint32{0, 0, 3}), medium.ErrInvalid, "duplicate")
	w.Abort()
	w, d = start()
	require.ErrorIs(t, d.WriteBitmapRows(0, []uint32{0}), medium.ErrInvalid, "null bitmap differs from the null rows")
	w.Abort()
	w, d = start()
	require.ErrorIs(t, d.WriteBitmapRows(1, []uint32{1, 2}), ErrState, "out of order")
	w.Abort()
	w, d = start()
	require.NoError(t, d.WriteBitmapRows(0, []uint32{0, 3}))
	require.ErrorIs(t, d.WriteBitmapRows(1, []uint32{1, 4}), medium.ErrInvalid, "row past the end")
	w.Abort()
	w, d = start()
	require.ErrorIs(t, d.WriteBitmapWords(0, []uint64{1}), medium.ErrInvalid, "null bitmap (words) differs from the null rows")
	w.Abort()
	w, d = start()
	require.NoError(t, d.WriteBitmapWords(0, []uint64{0b1001, 0}))
	require.ErrorIs(t, d.WriteBitmapWords(1, []uint64{0b10110}), medium.ErrInvalid, "row past the end (words)")
	w.Abort()
	w, d = start()
	require.NoError(t, d.WriteBitmapWords(0, []uint64{0b1001}))
	require.NoError(t, d.WriteBitmapWords(1, []uint64{0b0110, 0, 0}))
	_, err := w.FinishTo(io.Discard)
	require.NoError(t, err)
	w, d = start()
	require.NoError(t, d.WriteBitmapRows(0, []uint32{0, 3}))
	require.NoError(t, d.WriteBitmapRows(1, []uint32{1}))
	_, err = w.FinishTo(io.Discard)
	require.ErrorIs(t, err, medium.ErrInvalid, "bitmaps hold fewer rows than the rows do")
	w, d = start()
	require.NoError(t, d.WriteBitmapRows(0, []uint32{0, 3}))
	require.NoError(t, d.WriteBitmapRows(1, []uint32{1, 2}))
	_, err = w.FinishTo(io.Discard)
	require.NoError(t, err)

	// bitmapRun checks what WriteBitmapRows checks, and the order of the runs.
	run := func(first uint32, rows ...[]uint32) (*writer, segwrite.DimWriter, segwrite.BitmapRun, error) {
		w, d := start()
		r, err := d.NewBitmapRun(first)
		require.NoError(t, err)
		for _, rs := range rows {
			if err := r.AddRows(rs); err != nil {
				return w, d, r, err
			}
		}
		return w, d, r, nil
	}
	for _, c := range []struct {
		name  string
		first uint32
		rows  [][]uint32
	}{
		{"not increasing", 1, [][]uint32{{2, 1}}},
		{"duplicate", 1, [][]uint32{{1, 1, 2}}},
		{"row past the end", 1, [][]uint32{{1, 4}}},
		{"null bitmap differs from the null rows", 0, [][]uint32{{0}}},
		{"id not below the cardinality", 1, [][]uint32{{1, 2}, {}}},
	} {
		w, d, r, err := run(c.first, c.rows...)
		require.ErrorIs(t, err, medium.ErrInvalid, c.name)
		require.ErrorIs(t, d.WriteBitmapRun(r), medium.ErrInvalid, c.name+": WriteBitmapRun")
		w.Abort()
	}
	w, d, r, err := run(1, []uint32{1, 2})
	require.NoError(t, err)
	require.ErrorIs(t, d.WriteBitmapRun(r), ErrState, "a run before the ids ahead of it")
	w.Abort()
	w, d = start()
	require.NoError(t, d.WriteBitmapRows(0, []uint32{0, 3}))
	_, err = d.NewBitmapRun(0)
	require.ErrorIs(t, err, ErrState, "a run of ids written already")
	w.Abort()
	w, d, r, err = run(0, []uint32{0, 3}, []uint32{1, 2})
	require.NoError(t, err)
	require.NoError(t, d.WriteBitmapRun(r))
	_, err = w.FinishTo(io.Discard)
	require.NoError(t, err)
	nb, err := newWriter(Schema{Dimensions: []Dimension{{Name: "d", NoBitmapIndex: true}}}, writerOptions{})
	require.NoError(t, err)
	nd, err := nb.Dim("d")
	require.NoError(t, err)
	_, err = nd.NewBitmapRun(0)
	require.ErrorIs(t, err, ErrState, "a dimension without a bitmap index")
	nb.Abort()
}

func BenchmarkRoaringEncode(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{5, 1000, 100_000} {
		vals := make([]uint32, 0, n)
		for v := uint32(0); len(vals) < n; v += 1 + uint32(r.IntN(8)) {
			vals = append(vals, v)
		}
		b.Run("rows="+itoa(n)+"/enc=writeout", func(b *testing.B) {
			var e roaringEncoder
			var buf []byte
			b.ReportAllocs()
			for b.Loop() {
				buf = e.appendRows(buf[:0], vals)
			}
		})
		b.Run("rows="+itoa(n)+"/enc=roaring", func(b *testing.B) {
			var buf bytes.Buffer
			bm := roaring.New()
			b.ReportAllocs()
			for b.Loop() {
				buf.Reset()
				bm.Clear()
				bm.AddMany(vals)
				bm.RunOptimize()
				_, _ = bm.WriteTo(&buf)
			}
		})
	}
}

// FuzzRoaringEncoder: for any set (built from the input as gaps between values, a zero byte
// pair jumping to the next container), both encodings equal roaring's RunOptimize+WriteTo bytes.
func FuzzRoaringEncoder(f *testing.F) {
	f.Add([]byte{1, 0, 1, 0, 1, 0})
	f.Add([]byte{0, 0, 5, 0, 0, 0, 1, 1})
	f.Add(bytes.Repeat([]byte{1, 0}, 5000))
	f.Fuzz(func(t *testing.T, in []byte) {
		var vals []uint32
		v := int64(-1)
		for i := 0; i+1 < len(in); i += 2 {
			gap := int64(in[i]) | int64(in[i+1])<<8
			if gap == 0 {
				gap = 1 << 16
			}
			v += gap
			if v >= 1<<26 {
				break
			}
			vals = append(vals, uint32(v))
		}
		var e roaringEncoder
		want := roaringBytes(t, vals)
		if got := e.appendRows(nil, vals); !bytes.Equal(want, got) {
			t.Fatalf("appendRows of %d values differs from roaring", len(vals))
		}
		if got := e.appendWords(nil, wordsOf(vals, 1)); !bytes.Equal(want, got) {
			t.Fatalf("appendWords of %d values differs from roaring", len(vals))
		}
	})
}
