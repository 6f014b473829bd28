package columns

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/RoaringBitmap/roaring/v2"
)

// A bitmap whose rows come in pieces (dimWriter.WriteBitmapPieces) is written in up to three
// passes over them, each keeping only what it carries from one piece to the next:
//
//  1. check the rows as checkBitmapRows does and table their roaring containers (key, card,
//     runs: an entry per container), then pick the form as appendBitmapRows does;
//  2. roaring: the header, then each container's body as its rows come (a bitmap container's
//     words kept until its last row); Elias-Fano: the header, then the lows;
//  3. Elias-Fano only: the highs, which follow the lows.
//
// The bytes go to the stage a block of about piecesBlock bytes at a time. Passes 2 and 3 check
// that their rows strictly increase, never pass the first pass's count and last row, and end
// with the first pass's count, last row and sum, so that rows differing between passes are an
// error rather than wrong bytes.
const (
	piecesBlock = 64 << 10 // bytes staged at a time
	piecesChunk = 4096     // rows at a time through the Elias-Fano lows packer
)

// rowsTally sums up the rows of a bitmap given in pieces.
type rowsTally struct {
	n    int
	last uint32 // when n > 0
	sum  uint64
}

// add adds a piece of rows. When they do not strictly increase (after those added before), it
// adds nothing and returns the index in rows where they stop, and false.
func (t *rowsTally) add(rows []uint32) (int, bool) {
	if len(rows) == 0 {
		return 0, true
	}
	if t.n > 0 && rows[0] <= t.last {
		return 0, false
	}
	sum := t.sum + uint64(rows[0])
	for k := 1; k < len(rows); k++ {
		if rows[k] <= rows[k-1] {
			return k, false
		}
		sum += uint64(rows[k])
	}
	t.n, t.last, t.sum = t.n+len(rows), rows[len(rows)-1], sum
	return 0, true
}

// addPieces adds the bitmap of id whose rows each hands out in pieces, as
// segwrite.DimWriter.WriteBitmapPieces describes, writing the bytes addRows writes for all of
// them. It checks what checkBitmapRows checks, for a column of nrows rows (nulls: the null
// rows, for the null id's bitmap, else nil), and returns the number of rows and, with the
// invariants tag or hash set, the sum of pairHash over them.
func (b *bitmapsWriter) addPieces(id uint32, each func(func([]uint32) error) error, nrows int, nulls *roaring.Bitmap, hash bool) (int, uint64, error) {
	s := piecesScan{id: id, nrows: nrows, cs: b.enc.cs[:0], hash: hash}
	if nulls != nil {
		s.nulls = nulls.Iterator()
	}
	err := eachPass(id, each, s.add)
	b.enc.cs = s.cs
	if err != nil {
		return 0, 0, err
	}
	if nulls != nil && uint64(s.tally.n) != nulls.GetCardinality() {
		return 0, 0, fmt.Errorf("bitmap of the null id differs from the null rows: %w", ErrInvalid)
	}
	cs := s.cs
	for i := range cs {
		cs[i].kind = kindFor(cs[i].card, cs[i].runs)
	}
	n, last := s.tally.n, s.tally.last
	var v4 bool
	switch {
	case b.compact && n == 0:
		v4 = true
	case b.compact && efSize(n, last) < roaringSize(cs):
		v4, err = true, b.piecesEF(id, each, s.tally)
	default:
		err = b.piecesRoaring(id, each, s.tally, cs)
	}
	if err == nil {
		err = b.stageBlock(1)
	}
	if cap(b.buf) > 1<<20 {
		b.buf = nil // the header of a bitmap of many containers: do not keep its buffer
	}
	if err != nil {
		return 0, 0, err
	}
	b.v4 = b.v4 || v4
	b.ends = append(uint64Pool.Grow(b.ends, 1), uint64(b.st.n))
	return n, s.sum, nil
}

// stageBlock stages b.buf and empties it when it holds least bytes or more (and one or more).
func (b *bitmapsWriter) stageBlock(least int) error {
	if len(b.buf) < least || len(b.buf) == 0 {
		return nil
	}
	err := b.st.write(b.buf)
	b.buf = b.buf[:0]
	return err
}

// bufRoom makes the capacity of b.buf at least n.
func (b *bitmapsWriter) bufRoom(n int) {
	b.buf = slices.Grow(b.buf, max(0, n-len(b.buf)))
}

// eachPass calls each with fn, and returns fn's first error as it is, else each's wrapped.
func eachPass(id uint32, each func(func([]uint32) error) error, fn func([]uint32) error) error {
	var ferr error
	err := each(func(rows []uint32) error {
		if ferr == nil {
			ferr = fn(rows)
		}
		return ferr
	})
	switch {
	case ferr != nil:
		return ferr
	case err != nil:
		return fmt.Errorf("bitmap %d: rows: %w", id, err)
	}
	return nil
}

// laterPass is eachPass for a pass after the first, whose rows tallied first: fn is handed
// rows strictly increasing, never more than first's nor past its last, and the pass must end
// with first's tally.
func laterPass(id uint32, each func(func([]uint32) error) error, first rowsTally, fn func([]uint32) error) error {
	var t rowsTally
	err := eachPass(id, each, func(rows []uint32) error {
		if _, ok := t.add(rows); !ok || t.n > first.n || t.last > first.last {
			return passesDiffer(id, t, first)
		}
		return fn(rows)
	})
	if err == nil && t != first {
		err = passesDiffer(id, t, first)
	}
	return err
}

func passesDiffer(id uint32, t, first rowsTally) error {
	return fmt.Errorf("bitmap %d: a later pass over the rows gave other rows than the first (%d rows up to %d, then %d up to %d): %w",
		id, first.n, first.last, t.n, t.last, ErrInvalid)
}

// piecesScan is the first pass over a bitmap's pieces: it checks the rows as checkBitmapRows
// does and tables their roaring containers (kind not set).
type piecesScan struct {
	id    uint32
	nrows int
	nulls roaring.IntPeekable // the null rows, for the null id's bitmap
	tally rowsTally
	hash  bool   // sum pairHash in every build
	sum   uint64 // the sum of pairHash over the rows (invariants or hash)
	cs    []roaringContainer
}

func (s *piecesScan) add(rows []uint32) error {
	if len(rows) == 0 {
		return nil
	}
	before := s.tally
	if k, ok := s.tally.add(rows); !ok {
		prev := before.last
		if k > 0 {
			prev = rows[k-1]
		}
		return fmt.Errorf("bitmap %d: rows not strictly increasing at index %d (%d after %d): %w", s.id, before.n+k, rows[k], prev, ErrInvalid)
	}
	if last := rows[len(rows)-1]; int64(last) >= int64(s.nrows) {
		return fmt.Errorf("bitmap %d holds row %d, the column has %d rows: %w", s.id, last, s.nrows, ErrInvalid)
	}
	if s.nulls != nil {
		for _, r := range rows {
			if !s.nulls.HasNext() || s.nulls.Next() != r {
				return fmt.Errorf("bitmap of the null id differs from the null rows: %w", ErrInvalid)
			}
		}
	}
	if invariants || s.hash {
		for _, r := range rows {
			s.sum += pairHash(r, s.id)
		}
	}
	for lo := 0; lo < len(rows); {
		hi := keyEnd(rows, lo)
		key, runs := uint16(rows[lo]>>16), runsIn(rows[lo:hi])
		if lo == 0 && before.n > 0 && s.cs[len(s.cs)-1].key == key {
			// The container the last piece ended in goes on; its last run too when the row
			// follows.
			c := &s.cs[len(s.cs)-1]
			if rows[0] == before.last+1 {
				runs--
			}
			c.card += hi - lo
			c.runs += runs
		} else {
			if len(s.cs) == cap(s.cs) {
				s.cs = slices.Grow(s.cs, max(len(s.cs), 64)) // doubling: append grows big slices by a quarter
			}
			s.cs = append(s.cs, roaringContainer{key: key, card: hi - lo, runs: runs})
		}
		lo = hi
	}
	return nil
}

// piecesRoaring writes the roaring serialization of the rows each hands out, of which the
// first pass tallied first and tabled the containers cs.
func (b *bitmapsWriter) piecesRoaring(id uint32, each func(func([]uint32) error) error, first rowsTally, cs []roaringContainer) error {
	b.buf = appendRoaringHeader(b.buf[:0], cs)
	if len(cs) == 0 {
		return nil
	}
	if err := b.stageBlock(piecesBlock); err != nil {
		return err
	}
	// Room for a block and what may follow it before it is staged: a container's end and the
	// next one's start.
	b.bufRoom(piecesBlock + 2*roaringBitmapBytes + 8)
	for i := range cs {
		if cs[i].kind == roaringBitmapKind && b.words == nil {
			b.words = new([wordsPerContainer]uint64)
		}
	}
	r := roaringPieces{b: b, id: id, cs: cs, ci: -1}
	err := laterPass(id, each, first, r.add)
	if err == nil {
		err = r.end()
	}
	if err == nil && r.ci != len(cs)-1 {
		err = r.differ()
	}
	return err
}

// roaringPieces writes the container bodies of a roaring serialization, tabled in cs, from
// its rows as they come. A container's body is at most roaringBitmapBytes+2 bytes.
type roaringPieces struct {
	b           *bitmapsWriter
	id          uint32
	cs          []roaringContainer
	ci          int    // the container being written, -1 before the first
	card        int    // its rows so far
	runs        int    // its runs written (a run container)
	start, prev uint32 // its run not written yet (a run container)
}

func (r *roaringPieces) add(rows []uint32) error {
	for lo := 0; lo < len(rows); {
		hi := keyEnd(rows, lo)
		if key := uint16(rows[lo] >> 16); r.ci < 0 || key != r.cs[r.ci].key {
			if err := r.end(); err != nil {
				return err
			}
			r.ci++
			if r.ci == len(r.cs) || r.cs[r.ci].key != key {
				return r.differ()
			}
			r.card, r.runs = 0, 0
			if c := &r.cs[r.ci]; c.kind == roaringRunKind {
				r.b.buf = binary.LittleEndian.AppendUint16(r.b.buf, uint16(c.runs))
			}
		}
		if err := r.body(rows[lo:hi]); err != nil {
			return err
		}
		if err := r.b.stageBlock(piecesBlock); err != nil {
			return err
		}
		lo = hi
	}
	return nil
}

// body adds vals, of the container being written.
func (r *roaringPieces) body(vals []uint32) error {
	c := &r.cs[r.ci]
	if r.card+len(vals) > c.card {
		return r.differ()
	}
	buf := r.b.buf
	switch c.kind {
	case roaringArrayKind:
		for _, v := range vals {
			buf = binary.LittleEndian.AppendUint16(buf, uint16(v))
		}
	case roaringRunKind:
		start, prev, runs, vs := r.start, r.prev, r.runs, vals
		if r.card == 0 {
			start, prev, vs = vals[0], vals[0], vals[1:]
		}
		for _, v := range vs {
			if v != prev+1 {
				if runs+2 > c.runs { // this run and the one v starts
					return r.differ()
				}
				buf = binary.LittleEndian.AppendUint16(buf, uint16(start))
				buf = binary.LittleEndian.AppendUint16(buf, uint16(prev-start))
				runs++
				start = v
			}
			prev = v
		}
		r.start, r.prev, r.runs = start, prev, runs
	default:
		w := r.b.words
		for _, v := range vals {
			w[uint16(v)>>6] |= 1 << (v & 63)
		}
	}
	r.b.buf = buf
	r.card += len(vals)
	return nil
}

// end ends the container being written, if any.
func (r *roaringPieces) end() error {
	if r.ci < 0 {
		return nil
	}
	c := &r.cs[r.ci]
	if r.card != c.card {
		return r.differ()
	}
	buf := r.b.buf
	switch c.kind {
	case roaringRunKind:
		if r.runs+1 != c.runs {
			return r.differ()
		}
		buf = binary.LittleEndian.AppendUint16(buf, uint16(r.start))
		buf = binary.LittleEndian.AppendUint16(buf, uint16(r.prev-r.start))
	case roaringBitmapKind:
		for _, w := range r.b.words {
			buf = binary.LittleEndian.AppendUint64(buf, w)
		}
		clear(r.b.words[:])
	}
	r.b.buf = buf
	return nil
}

func (r *roaringPieces) differ() error {
	return fmt.Errorf("bitmap %d: a later pass over the rows gave other containers than the first: %w", r.id, ErrInvalid)
}

// piecesEF writes the Elias-Fano form of the rows each hands out, which the first pass
// tallied first: the lows in a pass, then the highs in another.
func (b *bitmapsWriter) piecesEF(id uint32, each func(func([]uint32) error) error, first rowsTally) error {
	n, last := first.n, first.last
	l := efLowBits(n, last)
	b.buf = appendEFHeader(b.buf[:0], n, l)
	if l > 0 {
		// Room for piecesBlock bytes and a chunk's lows stored a word at a time past them.
		dst := slices.Grow(b.buf, piecesBlock+4*piecesChunk+8)
		p := efPacker{dst: dst[:cap(dst)], l: uint(l), mask: 1<<l - 1, low: len(b.buf)}
		err := laterPass(id, each, first, func(rows []uint32) error {
			for len(rows) > 0 {
				k := min(len(rows), piecesChunk)
				p.addLows(rows[:k])
				rows = rows[k:]
				if p.low >= piecesBlock {
					if err := b.st.write(p.dst[:p.low]); err != nil {
						return err
					}
					p.low = 0
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		p.endLows()
		b.buf = p.dst[:p.low]
	}
	b.bufRoom(piecesBlock + 32)
	h := efHighs{b: b, l: uint(l)}
	if err := laterPass(id, each, first, h.add); err != nil {
		return err
	}
	// The last row's bit, the highs' last, is in word h.hw: its bytes up to that bit's.
	end := (n + int(last>>l) + 7) / 8
	b.buf = binary.LittleEndian.AppendUint64(b.buf, h.hacc)
	b.buf = b.buf[:len(b.buf)-8+end-8*h.hw]
	return nil
}

// efHighs writes the highs of an Elias-Fano form of l low bits from its rows as they come, a
// word at a time: each when a later row's bit falls past it.
type efHighs struct {
	b    *bitmapsWriter
	l    uint
	i    int    // rows so far
	hw   int    // the word hacc holds, the first not written
	hacc uint64 // its bits so far
}

func (h *efHighs) add(rows []uint32) error {
	buf, l, i, hw, hacc := h.b.buf, h.l&31, h.i, h.hw, h.hacc
	for _, v := range rows {
		b := int(v>>l) + i
		if w := b >> 6; w != hw { // about one row in 32 (two bits a row)
			var err error
			if buf, err = h.put(buf, hacc, w-hw-1); err != nil {
				return err
			}
			hw, hacc = w, 0
		}
		hacc |= 1 << (b & 63)
		i++
	}
	h.b.buf, h.i, h.hw, h.hacc = buf, i, hw, hacc
	return nil
}

// put appends the word x, then zeros words of 0, to buf, staging it whenever it holds a block.
func (h *efHighs) put(buf []byte, x uint64, zeros int) ([]byte, error) {
	buf = binary.LittleEndian.AppendUint64(buf, x)
	for {
		if len(buf) >= piecesBlock {
			if err := h.b.st.write(buf); err != nil {
				return buf, err
			}
			buf = buf[:0]
		}
		if zeros == 0 {
			return buf, nil
		}
		k := min(zeros, (piecesBlock-len(buf)+7)/8)
		buf = append(buf, make([]byte, 8*k)...)
		zeros -= k
	}
}
