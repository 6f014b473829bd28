package columns

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/internal/segfmt"
	"github.com/writeout/writeout/internal/segwrite"
	"github.com/writeout/writeout/medium"
)

// eachPieces returns an each handing out rows in the pieces that cuts (indexes into rows, not
// decreasing; a repeated one makes an empty piece) cut them into, and counting its calls in
// calls. Each piece goes through a buffer overwritten once fn returns, so that a writer keeping
// a piece gives wrong bytes.
func eachPieces(rows []uint32, cuts []int, calls *int) func(func([]uint32) error) error {
	bounds := append(append([]int{0}, cuts...), len(rows))
	longest := 0
	for k := 1; k < len(bounds); k++ {
		longest = max(longest, bounds[k]-bounds[k-1])
	}
	buf := make([]uint32, longest)
	return func(fn func([]uint32) error) error {
		*calls++
		for k := 1; k < len(bounds); k++ {
			p := buf[:copy(buf, rows[bounds[k-1]:bounds[k]])]
			err := fn(p)
			for i := range p {
				p[i] = 0xdeadbeef
			}
			if err != nil {
				return err
			}
		}
		return nil
	}
}

// randomCuts returns where to cut rows into pieces: not at all, into single rows, at random,
// every so many rows, at and next to container boundaries, or inside runs; with empty pieces
// now and then.
func randomCuts(r *rand.Rand, rows []uint32) []int {
	n := len(rows)
	var cuts []int
	switch r.IntN(6) {
	case 0:
	case 1:
		if n <= 20_000 {
			for i := 1; i < n; i++ {
				cuts = append(cuts, i)
			}
			break
		}
		fallthrough
	case 2:
		for range r.IntN(60) {
			cuts = append(cuts, r.IntN(n+1))
		}
	case 3:
		step := []int{1, 2, 3, 63, 64, 65, 1000, 4095, 4096, 4097, 65535, 65536, 65537}[r.IntN(13)]
		for i := step; i < n; i += step {
			cuts = append(cuts, i)
		}
	case 4:
		for i := 1; i < n; i++ {
			if rows[i]>>16 != rows[i-1]>>16 && r.IntN(3) > 0 {
				cuts = append(cuts, max(0, min(n, i+r.IntN(5)-2)))
			}
		}
	default:
		for i := 1; i < n; i++ {
			if rows[i] == rows[i-1]+1 && r.IntN(500) == 0 {
				cuts = append(cuts, i)
			}
		}
	}
	if r.IntN(4) == 0 {
		for range 1 + r.IntN(3) {
			cuts = append(cuts, []int{0, n, r.IntN(n + 1)}[r.IntN(3)])
		}
	}
	slices.Sort(cuts)
	return cuts
}

// piecesShape returns a random bitmap of a shape that picks one of the forms: roaring's
// containers of every kind, Elias-Fano with no, few or many low bits, empty, or one of
// efShapes.
func piecesShape(r *rand.Rand) []uint32 {
	var vals []uint32
	switch r.IntN(9) {
	case 0, 1:
		return randomRows(r)
	case 2: // sparse over the whole range: Elias-Fano of many low bits
		for range 1 + r.IntN(5000) {
			vals = append(vals, r.Uint32())
		}
	case 3: // dense from about 0: Elias-Fano of no or few low bits
		base, span, p := r.Uint32N(64), 1+r.IntN(3000), 0.2+0.7*r.Float64()
		for v := range span {
			if r.Float64() < p {
				vals = append(vals, base+uint32(v))
			}
		}
	case 4: // events in time order, gaps about 2^k
		k := 1 + r.IntN(12)
		for v := r.Uint32N(1 << 20); len(vals) < 1+r.IntN(100_000); v += 1 + r.Uint32N(2<<k) {
			vals = append(vals, v)
		}
	case 5: // dense across containers: bitmap containers
		base, p := r.Uint32N(1<<28), 0.5+0.49*r.Float64()
		for v := range 1 + r.IntN(300_000) {
			if r.Float64() < p {
				vals = append(vals, base+uint32(v))
			}
		}
	case 6: // long runs across containers
		v := r.Uint32N(1 << 24)
		for range 1 + r.IntN(8) {
			for range 1 + r.IntN(200_000) {
				vals = append(vals, v)
				v++
			}
			v += 1 + r.Uint32N(100_000)
		}
	case 7:
		return nil
	default:
		shapes := efShapes()
		return shapes[r.IntN(len(shapes))]
	}
	slices.Sort(vals)
	return slices.Compact(vals)
}

// newPiecesWriter returns a bitmapsWriter staging on the heap.
func newPiecesWriter(t testing.TB, compact bool) *bitmapsWriter {
	return &bitmapsWriter{st: &stage{b: newTestBytes(t), spec: partSpec{1, segfmt.PartBitmaps, segfmt.EncRoaringTable}}, compact: compact}
}

// stagedBytes returns the bytes staged in w from off.
func stagedBytes(t testing.TB, w *bitmapsWriter, off int64) []byte {
	buf := make([]byte, w.st.n-off)
	_, err := w.st.b.ReadAt(buf, off)
	require.NoError(t, err)
	return buf
}

// TestBitmapPiecesSameBytesAsRows: addPieces writes what addRows writes, for random bitmaps
// taking every form, cut into pieces at random, one after another in one part (compact and
// not), and checks them as checkBitmapRows does; each is called at most three times. The cases
// are checked to cover every form.
func TestBitmapPiecesSameBytesAsRows(t *testing.T) {
	r := rand.New(rand.NewPCG(seedFor(t, 61), 61))
	type trial struct {
		rows []uint32
		cuts []int // nil: randomCuts
	}
	var trials []trial
	for _, rows := range append(efShapes(), nil) {
		trials = append(trials, trial{rows: rows})
	}
	for range 400 {
		trials = append(trials, trial{rows: piecesShape(r)})
	}
	// Three of over a million rows, cut at random and every 997 rows (lows ending mid-word at
	// every block): bitmap containers and runs; Elias-Fano, its lows many blocks; Elias-Fano,
	// the highs of the last row over a block of zeros past the others'.
	big := 1 << 20
	if raceEnabled {
		big = 1 << 17
	}
	var dense, sparse []uint32
	for v := uint32(1 << 16); len(dense) < big+50_000; v++ {
		if r.IntN(10) > 0 || v>>18%2 == 0 {
			dense = append(dense, v)
		}
	}
	for v := uint32(7); len(sparse) < big+10_000; v += 1 + r.Uint32N(4000) {
		sparse = append(sparse, v)
	}
	gap := make([]uint32, big+1)
	for i := range big {
		gap[i] = uint32(i) * 64
	}
	gap[big] = 1<<32 - 1
	var enc roaringEncoder
	if !raceEnabled { // smaller, it is roaring
		require.Equal(t, []string{"ef l<16"}, formsOf(&enc, gap))
	}
	for _, rows := range [][]uint32{dense, sparse, gap} {
		var cuts []int
		for i := 997; i < len(rows); i += 997 {
			cuts = append(cuts, i)
		}
		trials = append(trials, trial{rows: rows}, trial{rows: rows, cuts: cuts})
	}

	seen := map[string]int{}
	for _, compact := range []bool{false, true} {
		a, b := newPiecesWriter(t, compact), newPiecesWriter(t, compact)
		for i, c := range trials {
			rows, cuts := c.rows, c.cuts
			if cuts == nil {
				cuts = randomCuts(r, rows)
			}
			if compact {
				for _, f := range formsOf(&enc, rows) {
					seen[f]++
				}
			}
			start := a.st.n
			require.NoError(t, a.addRows(rows))
			calls := 0
			n, h, err := b.addPieces(1, eachPieces(rows, cuts, &calls), 1<<32, nil, true)
			require.NoError(t, err)
			require.Equal(t, len(rows), n)
			want, _ := checkBitmapRows(1, rows, 1<<32, nil, true)
			require.Equal(t, want, h)
			require.LessOrEqual(t, calls, 3)
			require.Equal(t, a.ends, b.ends, "set %d (%d rows, compact %v, %d cuts)", i, len(rows), compact, len(cuts))
			require.Equal(t, a.v4, b.v4, "set %d", i)
			if got := stagedBytes(t, b, start); !bytes.Equal(stagedBytes(t, a, start), got) {
				t.Fatalf("set %d (%d rows, compact %v, %d cuts from %v): the bytes differ", i, len(rows), compact, len(cuts), cuts[:min(len(cuts), 20)])
			}
		}
		require.NoError(t, a.finish())
		require.NoError(t, b.finish())
		require.Equal(t, a.st.spec.enc, b.st.spec.enc)
		require.Equal(t, stagedBytes(t, a, 0), stagedBytes(t, b, 0))
	}
	t.Logf("forms: %v", seen)
	for _, f := range []string{"empty", "ef l=0", "ef l<16", "ef l>=16", "roaring array", "roaring run", "roaring bitmap"} {
		require.Positive(t, seen[f], "no case of %s", f)
	}
}

// formsOf names the form addRows gives rows with compact, or for roaring the kinds of its
// containers.
func formsOf(enc *roaringEncoder, rows []uint32) []string {
	if len(rows) == 0 {
		return []string{"empty"}
	}
	cs := enc.rowsContainers(rows)
	if efSize(len(rows), rows[len(rows)-1]) < roaringSize(cs) {
		switch l := efLowBits(len(rows), rows[len(rows)-1]); {
		case l == 0:
			return []string{"ef l=0"}
		case l < 16:
			return []string{"ef l<16"}
		}
		return []string{"ef l>=16"}
	}
	var forms []string
	for i := range cs {
		f := "roaring " + []string{"array", "bitmap", "run"}[cs[i].kind]
		if !slices.Contains(forms, f) {
			forms = append(forms, f)
		}
	}
	return forms
}

// TestWriteBitmapPiecesSegment writes a segment of over a million rows whose bitmaps take
// every form, one of them of over a million rows, through WriteBitmapRows and through
// WriteBitmapPieces cut at random: the same file, with compression none (version 2) and s2
// (version 4); Verify passes.
func TestWriteBitmapPiecesSegment(t *testing.T) {
	rows := 1<<20 + 70_000
	if raceEnabled {
		rows = 150_000
	}
	r := rand.New(rand.NewPCG(seedFor(t, 67), 67))
	const card = 7
	bms := make([][]uint32, card)
	for i := range uint32(rows) {
		if r.IntN(20) > 0 && i>>17%4 != 3 {
			bms[1] = append(bms[1], i) // most rows: runs and bitmap containers
		}
		if r.IntN(1000) == 0 {
			bms[2] = append(bms[2], i) // sparse: Elias-Fano
		}
		if i%100_000 < 30_000 {
			bms[3] = append(bms[3], i) // runs
		}
		if i >= 500 && i < 800 && r.IntN(2) == 0 {
			bms[5] = append(bms[5], i) // a dense cluster: Elias-Fano, no low bits
		}
		if i%16 == 3 {
			bms[6] = append(bms[6], i) // every 16th row
		}
	}
	// Id 4 holds no row; id 0 (null) the rows no other id holds.
	ids := make([][]uint32, rows)
	for id := 1; id < card; id++ {
		for _, row := range bms[id] {
			ids[row] = append(ids[row], uint32(id))
		}
	}
	for row, rs := range ids {
		if len(rs) == 0 {
			bms[0] = append(bms[0], uint32(row))
		}
	}
	require.Greater(t, len(bms[1]), min(rows/2, 1<<20))
	cuts := make([][]int, card)
	for id := range cuts {
		cuts[id] = randomCuts(r, bms[id])
	}
	s := Schema{Dimensions: []Dimension{{Name: "d", MultiValue: true}}}
	write := func(pieces bool, comp Compression) []byte {
		w, err := newWriter(s, writerOptions{Compression: comp})
		require.NoError(t, err)
		tw, err := w.Time()
		require.NoError(t, err)
		d, err := w.Dim("d")
		require.NoError(t, err)
		require.NoError(t, d.AddNull())
		for v := 1; v < card; v++ {
			_, err := d.AddValue(fmt.Sprint(v))
			require.NoError(t, err)
		}
		for i, rs := range ids {
			require.NoError(t, tw.Append(int64(i)))
			require.NoError(t, d.AppendIDs(rs))
		}
		for id, rs := range bms {
			if pieces {
				calls := 0
				require.NoError(t, d.WriteBitmapPieces(uint32(id), eachPieces(rs, cuts[id], &calls)))
				require.LessOrEqual(t, calls, 3)
			} else {
				require.NoError(t, d.WriteBitmapRows(uint32(id), rs))
			}
		}
		var buf bytes.Buffer
		_, err = w.FinishTo(&buf)
		require.NoError(t, err)
		return buf.Bytes()
	}
	for _, comp := range []Compression{CompressionNone, CompressionS2} {
		want := write(false, comp)
		got := write(true, comp)
		require.True(t, bytes.Equal(want, got), "%s: WriteBitmapPieces and WriteBitmapRows give different files", comp)
		seg, err := newSegmentBytes(got)
		require.NoError(t, err)
		require.NoError(t, seg.Verify())
		col, err := seg.Dim("d")
		require.NoError(t, err)
		require.Equal(t, comp != CompressionNone, col.bms.v4)
		require.NoError(t, seg.Close())
	}
}

// TestWriteBitmapPiecesRejects: WriteBitmapPieces checks what WriteBitmapRows checks, across
// pieces too, returns each's own error wrapped, and rows differing between passes are an
// error; every error fails the writer.
func TestWriteBitmapPiecesRejects(t *testing.T) {
	s := Schema{Dimensions: []Dimension{{Name: "d"}}}
	// 100 rows: the null id's are 0 and 3, the rest id 1's.
	const rows = 100
	start := func() (*writer, segwrite.DimWriter) {
		w, err := newWriter(s, writerOptions{Compression: CompressionS2})
		require.NoError(t, err)
		tw, err := w.Time()
		require.NoError(t, err)
		d, err := w.Dim("d")
		require.NoError(t, err)
		require.NoError(t, d.AddNull())
		_, err = d.AddValue("a")
		require.NoError(t, err)
		for i := range rows {
			require.NoError(t, tw.Append(int64(i)))
			id := uint32(1)
			if i == 0 || i == 3 {
				id = 0
			}
			require.NoError(t, d.AppendID(id))
		}
		return w, d
	}
	pieces := func(ps ...[]uint32) func(func([]uint32) error) error {
		return func(fn func([]uint32) error) error {
			for _, p := range ps {
				if err := fn(p); err != nil {
					return err
				}
			}
			return nil
		}
	}
	// passes gives pieces ps[k] on call k (the last again after), as a caller whose rows change
	// between calls would.
	passes := func(ps ...[][]uint32) func(func([]uint32) error) error {
		k := 0
		return func(fn func([]uint32) error) error {
			p := ps[min(k, len(ps)-1)]
			k++
			return pieces(p...)(fn)
		}
	}
	var id1 []uint32 // id 1's rows
	for i := uint32(1); i < rows; i++ {
		if i != 3 {
			id1 = append(id1, i)
		}
	}
	fails := func(name string, id uint32, each func(func([]uint32) error) error, target error, msg string) {
		t.Helper()
		w, d := start()
		if id == 1 {
			require.NoError(t, d.WriteBitmapPieces(0, pieces([]uint32{0}, nil, []uint32{3})))
		}
		err := d.WriteBitmapPieces(id, each)
		require.ErrorIs(t, err, target, name)
		require.ErrorContains(t, err, msg, name)
		require.Equal(t, err, d.WriteBitmapRows(id, nil), "%s: the error sticks", name)
		_, ferr := w.FinishTo(io.Discard)
		require.Error(t, ferr, name)
	}
	fails("not increasing across pieces", 1, pieces([]uint32{1, 2}, []uint32{2}), medium.ErrInvalid, "bitmap 1: rows not strictly increasing at index 2 (2 after 2)")
	fails("not increasing after an empty piece", 1, pieces(id1[:3], nil, id1[2:3]), medium.ErrInvalid, "not strictly increasing at index 3 (4 after 4)")
	fails("not increasing in a piece", 1, pieces(id1[:3], []uint32{6, 5}), medium.ErrInvalid, "not strictly increasing at index 4 (5 after 6)")
	fails("not increasing, the null id", 0, pieces([]uint32{0}, []uint32{0}), medium.ErrInvalid, "bitmap 0: rows not strictly increasing at index 1 (0 after 0)")
	fails("row past the end", 1, pieces(id1, []uint32{rows}), medium.ErrInvalid, "bitmap 1 holds row 100, the column has 100 rows")
	fails("null rows missing", 0, pieces([]uint32{0}, nil), medium.ErrInvalid, "null id differs")
	fails("null rows other", 0, pieces([]uint32{0}, []uint32{2}), medium.ErrInvalid, "null id differs")
	fails("null rows more", 0, pieces([]uint32{0}, []uint32{3, 4}), medium.ErrInvalid, "null id differs")
	stop := errors.New("stop")
	fails("each's error", 1, func(fn func([]uint32) error) error {
		_ = fn(id1[:5])
		return stop
	}, stop, "bitmap 1: rows: stop")
	fails("each's error in a later pass", 1, func() func(func([]uint32) error) error {
		k := 0
		return func(fn func([]uint32) error) error {
			if k++; k == 2 {
				return stop
			}
			return fn(id1)
		}
	}(), stop, "bitmap 1: rows: stop")
	fails("each goes on after fn's error", 0, func(fn func([]uint32) error) error {
		_ = fn([]uint32{0})
		_ = fn([]uint32{0})
		_ = fn([]uint32{4})
		return nil
	}, medium.ErrInvalid, "not strictly increasing at index 1 (0 after 0)")
	fails("each returns another error than fn's", 0, func(fn func([]uint32) error) error {
		_ = fn([]uint32{3, 0})
		return stop
	}, medium.ErrInvalid, "not strictly increasing")

	// Rows differing between passes. Id 1's 98 rows of 99 are roaring (two passes: the table,
	// the bodies); 5, 70 and 99 Elias-Fano (three: the count, the lows, the highs).
	sparse := []uint32{5, 70, 99}
	other := append([]uint32{1, 2, 3}, slices.DeleteFunc(slices.Clone(id1[2:]), func(v uint32) bool { return v == 50 })...)
	require.Len(t, other, len(id1))
	differ := "a later pass over the rows gave other"
	for _, c := range []struct {
		name string
		id   uint32
		each func(func([]uint32) error) error
	}{
		{"roaring: fewer rows", 1, passes([][]uint32{id1}, [][]uint32{id1[:50]})},
		{"roaring: more rows", 1, passes([][]uint32{id1[:50]}, [][]uint32{id1})},
		{"roaring: another last", 1, passes([][]uint32{id1}, [][]uint32{id1[:len(id1)-1]})},
		{"roaring: not increasing", 1, passes([][]uint32{id1}, [][]uint32{id1, id1[:1]})},
		{"roaring: the same count and last", 1, passes([][]uint32{id1}, [][]uint32{other})},
		{"ef lows: fewer rows", 1, passes([][]uint32{sparse}, [][]uint32{sparse[:2]})},
		{"ef lows: another row", 1, passes([][]uint32{sparse}, [][]uint32{{5, 71, 99}})},
		{"ef highs: fewer rows", 1, passes([][]uint32{sparse}, [][]uint32{sparse}, [][]uint32{sparse[1:]})},
		{"ef highs: more rows", 1, passes([][]uint32{sparse}, [][]uint32{sparse}, [][]uint32{{5, 6, 70, 99}})},
		{"ef highs: another last", 1, passes([][]uint32{sparse}, [][]uint32{sparse}, [][]uint32{{5, 70, 98}})},
	} {
		fails(c.name, c.id, c.each, medium.ErrInvalid, differ)
	}

	w, d := start()
	require.ErrorIs(t, d.WriteBitmapPieces(1, pieces(id1)), ErrState, "out of order")
	w.Abort()

	// Well-formed bitmaps in pieces pass the writer's checks of the total.
	w, d = start()
	require.NoError(t, d.WriteBitmapPieces(0, pieces(nil, []uint32{0}, nil, []uint32{3}, nil)))
	require.NoError(t, d.WriteBitmapPieces(1, pieces(id1[:1], id1[1:40], nil, id1[40:])))
	_, err := w.FinishTo(io.Discard)
	require.NoError(t, err)
	w, d = start()
	require.NoError(t, d.WriteBitmapPieces(0, pieces([]uint32{0, 3})))
	require.NoError(t, d.WriteBitmapPieces(1, pieces(id1[:10])))
	_, err = w.FinishTo(io.Discard)
	require.ErrorIs(t, err, medium.ErrInvalid, "bitmaps hold fewer rows than the rows do")
}

// bigBitmaps are bitmaps of bigRows rows, each given as a function of i returning its i-th
// row, written in pieces of bigPiece rows by TestBitmapPiecesMemoryBounded and
// BenchmarkWriteBitmapPieces.
var bigBitmaps = []struct {
	name string
	row  func(i int) uint32
}{
	// A piece each of a run container, of bitmap containers and of array containers.
	{"roaring", func(i int) uint32 {
		k, j := uint32(i/bigPiece), uint32(i%bigPiece)
		switch k % 3 {
		case 0:
			return k<<22 | j
		case 1:
			return k<<22 | j*3/2
		}
		return k<<22 | j*20
	}},
	// A row in 64 up to 2^28 (4,096 containers): Elias-Fano of 6 low bits.
	{"ef", func(i int) uint32 { return uint32(i)*64 + uint32(i*7919%64) }},
	// A row in 1,000 up to near 2^32 (64,000 containers): Elias-Fano of 9 low bits.
	{"ef-wide", func(i int) uint32 { return uint32(i)*1000 + uint32(i*7919%1000) }},
}

const bigRows, bigPiece = 4 << 20, 64 << 10

// TestBitmapPiecesMemoryBounded: a bitmap of 4 Mi rows (16 MiB of them) given in pieces of 64 Ki
// rows is written with under 1 MiB allocated in all, in the roaring form and in Elias-Fano,
// beyond an entry per container of the bitmap (40 bytes, allocated twice over as the table
// doubles); its bytes are those of addRows (the stage's CRC and length).
func TestBitmapPiecesMemoryBounded(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's build allocates more (slices.Grow's make, for one)")
	}
	const n, piece = bigRows, bigPiece
	for _, c := range bigBitmaps {
		t.Run("form="+c.name, func(t *testing.T) {
			rows := make([]uint32, n)
			for i := range rows {
				rows[i] = c.row(i)
			}
			want := &bitmapsWriter{st: &stage{b: discardBytes{}}, compact: true}
			require.NoError(t, want.addRows(rows))
			require.Equal(t, c.name != "roaring", want.v4)

			buf := make([]uint32, piece)
			each := func(fn func([]uint32) error) error {
				for lo := 0; lo < n; lo += piece {
					for i := range buf {
						buf[i] = c.row(lo + i)
					}
					if err := fn(buf); err != nil {
						return err
					}
				}
				return nil
			}
			w := &bitmapsWriter{st: &stage{b: discardBytes{}}, compact: true}
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			got, _, err := w.addPieces(1, each, 1<<32, nil, false)
			runtime.ReadMemStats(&after)
			require.NoError(t, err)
			require.Equal(t, n, got)
			alloc, containers := after.TotalAlloc-before.TotalAlloc, len(w.enc.cs)
			t.Logf("%d rows in pieces of %d, %d containers: %d bytes allocated, %d staged", n, piece, containers, alloc, w.st.n)
			require.Less(t, alloc, uint64(1<<20+2*unsafe.Sizeof(roaringContainer{})*uintptr(containers)))
			require.Equal(t, want.st.n, w.st.n)
			require.Equal(t, want.st.crc, w.st.crc)
			require.Equal(t, want.v4, w.v4)
		})
	}
}
