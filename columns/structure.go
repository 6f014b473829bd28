package columns

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/writeout/writeout/internal/mix"
	"github.com/writeout/writeout/internal/segfmt"
	"github.com/writeout/writeout/internal/slicesx"
)

// Read-path structural checks. A part's CRC says its bytes are the ones written, not that the
// writer wrote them right: a buggy writer or a faulty tool can leave a part that agrees with
// its CRC and still breaks the format's invariants. So that such a part never reads as a
// wrong answer, the first read of a part runs, once its CRC matches, the cheap invariants
// Verify checks of it, over the whole part (or the parts checked together), once per open
// Segment; a later read costs an atomic load. A failure is remembered like a bad CRC: every read
// of the parts returns the same error, wrapping ErrCorrupt and naming the file, column and part.
//
//	part(s)                            checked on the first read of any of them
//	__time values                      every time not before the one before, inside the footer's
//	                                   interval, truncated to the granularity, and the interval
//	                                   the one the first and last times give
//	dictionary                         values strictly increasing, blocks exactly filled
//	ids, nulls (dictionary)            ids below the cardinality (as every read does), the null id
//	                                   alone in its row; the null rows exactly the rows holding
//	                                   the null id (keyed sums, see rowKey); with a bitmap index,
//	                                   each bitmap's count (from its header) the number of rows
//	                                   holding its id
//	one bitmap (on its first read)     exactly the rows holding its id (keyed sums over one pass
//	                                   of the ids); after bitmapChecksAlone such checks of a
//	                                   column, every bitmap of it at once (checkAllBitmaps)
//	nulls (raw dimension)              every null row holds no bytes
//	nulls (long or double metric)      not empty, every null row stores 0 (time 0, empty tail)
//
// The ids are held against the bitmaps' counts, not their rows, until a bitmap is read: an id
// changed in place changes two counts and fails every read of the ids, while ids permuted among
// rows (two rows swapping theirs) keep every count and fail only a read of one of their bitmaps,
// or Verify. A read of the ids alone (a merge, which rebuilds the bitmaps) decodes no bitmap.
//
// Every sketch read as bytes (SketchCursor.Bytes) is checked to decode, row by row
// (agg.Sketches.Check, which does not allocate).
//
// What the read path leaves to Verify: under rollup, that no two rows share a key (it needs
// every dimension of every row together, where a read touches only the columns it asks for);
// a metric's values and times, and raw strings, have no invariant to check.
//
// Each check reads its parts through checkCRC, never check, so that it does not run itself;
// a check that reads a mapped part whole (the times, a dimension's ids) and runs before its
// CRC is known computes the CRC as it reads, and judges it before anything else (fusedCRC).
// A reader that reads those parts whole itself (a merge) may put the check off and have it
// computed from its own reads (Deferral).
// One goroutine runs a check while others wait for its verdict (a mutex): the checks of
// different parts nest only one way (a dimension's check reads its dictionary, checked first).
// An error that is no verdict on the bytes (a closed segment, a read error) is not remembered.

// structCheck is the structural check of one or more parts of an open segment.
type structCheck struct {
	mu    sync.Mutex
	state atomic.Uint32 // structNone, structGood or structBad
	err   error         // the verdict when structBad (written under mu before state)
	fn    func() error
}

const (
	structNone uint32 = iota
	structGood
	structBad
)

func newStructCheck(fn func() error) *structCheck { return &structCheck{fn: fn} }

// passed reports whether the check ran and found nothing.
func (sc *structCheck) passed() bool { return sc.state.Load() == structGood }

// run runs the check unless it ran already, and returns its verdict.
func (sc *structCheck) run() error { return sc.runWith(sc.fn) }

// runWith is run with fn computing the verdict (a deferred check's, see Deferral).
func (sc *structCheck) runWith(fn func() error) error {
	if sc.passed() {
		return nil
	}
	sc.mu.Lock()
	defer sc.mu.Unlock()
	switch sc.state.Load() {
	case structGood:
		return nil
	case structBad:
		return sc.err
	}
	err := fn()
	switch {
	case err == nil:
		sc.state.Store(structGood)
	case errors.Is(err, ErrCorrupt):
		sc.err = err
		sc.state.Store(structBad)
	}
	return err
}

// markPassed records the check as run and passed (Verify checked the same and more).
func (sc *structCheck) markPassed() {
	sc.mu.Lock()
	if sc.state.Load() == structNone {
		sc.state.Store(structGood)
	}
	sc.mu.Unlock()
}

// addStructChecks gives the parts of the columns their structural checks (parseColumns calls it
// once the columns are parsed).
func (s *Segment) addStructChecks() {
	s.pairSeed = rand.Uint64()
	attach := func(sc *structCheck, ps ...*segfmt.PartInfo) {
		sc.fn = s.thenRelease(sc.fn)
		for _, p := range ps {
			if p != nil {
				s.checkOf(p).sc = sc
			}
		}
		s.structs = append(s.structs, sc)
	}
	attach(newStructCheck(s.checkTime), s.time.ix.part)
	s.time.ix.chk.readWhole = true
	for i, d := range s.f.schema.Dimensions {
		c := 1 + i
		if d.Raw {
			rc := s.raws[i]
			attach(newStructCheck(func() error { return s.checkRawNulls(rc) }), s.part(c, segfmt.PartNulls))
			continue
		}
		dc := s.dims[i]
		attach(newStructCheck(func() error { return s.checkDict(dc) }), dc.dict.part)
		attach(newStructCheck(func() error { return s.checkDimRows(dc) }), s.part(c, segfmt.PartIDs), s.part(c, segfmt.PartNulls))
		dc.ix.chk.readWhole = !dc.derived
		if dc.bms != nil {
			dc.bmChecked = make([]atomic.Uint64, (dc.bms.count+63)/64)
		}
	}
	for i := range s.f.schema.Metrics {
		p := s.part(1+len(s.f.schema.Dimensions)+i, segfmt.PartNulls)
		if p == nil {
			continue
		}
		var fn func() error
		switch {
		case s.longs[i] != nil:
			l := s.longs[i]
			fn = func() error { return checkMetricNulls(l) }
		case s.doubles[i] != nil:
			d := s.doubles[i]
			fn = func() error { return checkMetricNulls(d) }
		default:
			continue // decodeFooter allows a nulls part to long and double metrics only
		}
		attach(newStructCheck(fn), p)
	}
}

// markStructPassed records every structural check as passed (after Verify).
func (s *Segment) markStructPassed() {
	for _, sc := range s.structs {
		sc.markPassed()
	}
	for _, dc := range s.dims {
		if dc != nil {
			dc.markBitmapsPassed()
		}
	}
}

// checkTime checks the __time column: see verifyTime.
func (s *Segment) checkTime() error {
	c := s.time.Cursor()
	c.cr.forCheck()
	c.cr.fused = s.time.ix.chk.fuse()
	defer c.Release()
	err := s.timeRows(c)
	if c.cr.fused != nil {
		if cerr := s.time.ix.chk.finishFused(c.cr.fused, s.time.ix); cerr != nil {
			return cerr
		}
	}
	return s.timeErr(err)
}

// timeErr is err, an error of the __time column's check, naming the file and the part.
func (s *Segment) timeErr(err error) error {
	if err != nil && !strings.HasPrefix(err.Error(), "columns: column ") {
		// The interval's error names no part: the footer's interval is checked against the
		// times, so name theirs.
		err = partError(TimeColumn, segfmt.PartValues, &msgErr{msg: strings.TrimPrefix(err.Error(), "columns: "), err: err})
	}
	return s.inFile(err)
}

// checkDict checks a dictionary: every block exactly filled with its values, strictly
// increasing.
func (s *Segment) checkDict(c *DimColumn) error {
	d := c.dict
	var prev, buf []byte
	var it blockIter
	// The block table read once (blockRaw reads two entries a block, into a buffer that
	// escapes: an allocation a block).
	tbl, err := d.src.view(d.part.Offset+d.tableOff, int64(d.nblocks)*4, nil)
	if err != nil {
		return s.fileError(d.part, err)
	}
	for b := 0; b < d.nblocks; b++ {
		start, end := int64(binary.LittleEndian.Uint32(tbl[4*b:])), d.tableOff
		if b+1 < d.nblocks {
			end = int64(binary.LittleEndian.Uint32(tbl[4*(b+1):]))
		}
		if start >= end || end > d.tableOff || (b == 0 && start != 0) {
			return s.fileError(d.part, corruptf("dictionary block %d at [%d, %d) outside [0, %d)", b, start, end, d.tableOff))
		}
		raw, err := d.src.view(d.part.Offset+start, end-start, buf)
		if err != nil {
			return s.fileError(d.part, err)
		}
		if d.src.data == nil {
			buf = raw
		}
		it.rest, it.i = raw, 0
		for k := 0; k < d.blockLen(b); k++ {
			if err := it.next(); err != nil {
				return s.fileError(d.part, fmt.Errorf("block %d value %d: %w", b, k, err))
			}
			if (b > 0 || k > 0) && bytes.Compare(prev, it.val) >= 0 {
				return s.fileError(d.part, corruptf("value %d (%.40q) does not sort after %.40q", b*dictBlock+k, it.val, prev))
			}
			prev = append(prev[:0], it.val...)
		}
		if len(it.rest) != 0 {
			return s.fileError(d.part, corruptf("block %d: %d trailing bytes", b, len(it.rest)))
		}
	}
	return nil
}

// The (row, id) pairs of a dimension are compared as a sum and a count: the sum of
// rowKey(row) * (2*id + 1) over the pairs, where rowKey is a keyed hash of the row (the key
// random per open Segment). A row's key is computed once however many ids it holds, and the
// bitmap of id sums its rows' keys and multiplies once. A row moved from id a to id b changes
// the sum by 2*rowKey(row)*(b-a), which is 0 mod 2^64 only when rowKey(row) has as many
// trailing zero bits as 2^63/(b-a) needs (at least 31 for ids below 2^32); two rows swapping
// their ids change it by 2*(rowKey(r1)-rowKey(r2))*(a-b), as unlikely to be 0.

// rowKey is the keyed hash of a row.
func rowKey(seed uint64, row uint32) uint64 { return mix.Mix64(uint64(row) ^ seed) }

// pairSums is the sum and the count of a set of pairs, or of rows (id 0 for every row).
type pairSums struct{ sum, count uint64 }

// rowSums sums the keys of rows handed to it piece by piece (a roaringDecoder's fn).
type rowSums struct {
	seed, sum, count uint64
}

func (s *rowSums) rows(rs []uint32) error {
	sum := s.sum
	for _, r := range rs {
		sum += rowKey(s.seed, r)
	}
	s.sum = sum
	s.count += uint64(len(rs))
	return nil
}

// checkDimRows checks a dictionary dimension's ids against its null rows and, when it has a
// bitmap index, against the counts its bitmaps store: the null rows are exactly the rows
// holding the null id (keyed sums, see rowKey), and bitmap id holds as many rows as there are
// rows holding id (read from each bitmap's header: a roaring bitmap's container cardinalities,
// an Elias-Fano bitmap's count), so that an id changed in place, which changes two ids' counts,
// never reads as a wrong answer through the ids. It reads the ids once, a chunk at a time, and
// no bitmap's rows: a bitmap's rows are checked against the ids when it is read (checkBitmap).
func (s *Segment) checkDimRows(c *DimColumn) error {
	if c.derived {
		return s.checkDerivedRows(c)
	}
	fc := c.ix.chk.fuse() // nil: the ids' CRC first
	if fc == nil {
		if err := c.ix.chk.checkCRC(); err != nil {
			return err
		}
	}
	pcs := []*partCheck{c.nulls}
	if c.bms != nil {
		pcs = append(pcs, c.bms.chk)
	}
	for _, pc := range pcs {
		if err := pc.checkCRC(); err != nil {
			if fc != nil {
				if ierr := c.ix.chk.checkCRC(); ierr != nil {
					return ierr // the ids' CRC comes first
				}
			}
			return err
		}
	}
	dr := newDimRows(c)
	err := s.eachIDChunk(c, fc, dr.chunk)
	if fc != nil {
		if cerr := c.ix.chk.finishFused(fc, c.ix); cerr != nil {
			return cerr
		}
	}
	if err != nil {
		return s.inFile(err)
	}
	return dr.judge()
}

// checkDerivedRows is checkDimRows for a dimension whose ids its bitmaps give
// (segfmt.EncIDChunksDerived): its chunks hold no bytes, every bitmap decodes (checked as
// EachBitmapRows checks), together they hold each row exactly once (keyed sums of the rows,
// see rowKey, and their count), and the null rows are exactly the null id's bitmap. It decodes
// every bitmap once; the chunks' ids, derived as they are read, then hold valid ids.
func (s *Segment) checkDerivedRows(c *DimColumn) error {
	for _, pc := range []*partCheck{c.ix.chk, c.nulls, c.bms.chk} {
		if err := pc.checkCRC(); err != nil {
			return err
		}
	}
	if c.ix.idxOff != int64(c.ix.chunks()) {
		return s.fileError(c.ix.part, corruptf("%d chunks of derived ids in %d bytes, one byte each", c.ix.chunks(), c.ix.idxOff))
	}
	frames, err := s.src.view(c.ix.part.Offset, c.ix.idxOff, nil) // a byte a chunk
	if err != nil {
		return s.fileError(c.ix.part, err)
	}
	for i, codec := range frames {
		if codec != codecNone {
			return s.fileError(c.ix.part, corruptf("chunk %d of derived ids: codec %d, want none", i, codec))
		}
	}
	bp := uint32Pool.Get(4096)
	defer func() { uint32Pool.Put(bp) }()
	buf := bp[:4096]
	var all, nullID pairSums
	for id := 0; id < c.bms.count; id++ {
		ps, err := s.bitmapSums(c, id, buf)
		if err != nil {
			return err
		}
		all.sum += ps.sum
		all.count += ps.count
		if id == 0 && c.dict.hasNull {
			nullID = ps
		}
	}
	want := pairSums{count: uint64(s.f.rows)}
	for r := 0; r < s.f.rows; r++ {
		want.sum += rowKey(s.pairSeed, uint32(r))
	}
	if all != want {
		return s.fileError(c.bms.part, corruptf("the bitmaps hold %d rows in all, for %d rows (or not each row once)", all.count, want.count))
	}
	got, err := s.nullRowSums(c)
	if err != nil {
		return err
	}
	if got != nullID {
		return s.fileError(c.nulls.part, corruptf("%d null rows, the null id's bitmap holds %d (or other rows)", got.count, nullID.count))
	}
	return nil
}

// eachIDChunk hands fn every chunk of a dimension's ids in row order (as DimCursor.Chunk
// returns them), reading through the parts' CRC checks only, or, with fc, hashing the ids'
// chunks into fc instead (see fusedCRC).
func (s *Segment) eachIDChunk(c *DimColumn, fc *fusedCRC, fn func(first int, ids, offs []uint32)) error {
	cur := c.Cursor()
	cur.cr.forCheck()
	cur.cr.fused = fc
	defer cur.Release()
	for r := 0; r < s.f.rows; {
		first, ids, offs, err := cur.Chunk(r)
		if err != nil {
			return err
		}
		fn(first, ids, offs)
		if offs == nil {
			r = first + len(ids)
		} else {
			r = first + len(offs) - 1
		}
	}
	return nil
}

// storedCount returns the number of rows a stored bitmap holds, from its header alone (a
// version 4 form when v4): the sum of a roaring bitmap's container cardinalities, or an
// Elias-Fano bitmap's count. The rest of the bitmap is checked when it is decoded.
func storedCount(b []byte, v4 bool) (uint64, error) {
	if v4 && len(b) == 0 {
		return 0, nil
	}
	if v4 && b[0] == efTag {
		n, k := binary.Uvarint(b[1:])
		if k <= 0 || n == 0 {
			return 0, corruptf("elias-fano: bad count")
		}
		return n, nil
	}
	header, _, _, _, err := roaringHeader(b)
	if err != nil {
		return 0, err
	}
	var n uint64
	for i := 0; i+4 <= len(header); i += 4 {
		n += uint64(binary.LittleEndian.Uint16(header[i+2:])) + 1
	}
	return n, nil
}

// How many bitmaps of a dimension are checked one at a time, each with a pass over the ids,
// before the rest are checked together in one pass (checkAllBitmaps).
const bitmapChecksAlone = 4

// checkBitmap checks, before bitmap id of c is first read, that it holds exactly the rows
// holding id. It needs neither the ids' own check (checkDimRows) nor the other bitmaps: a
// read of bitmaps alone (a filter) reads the ids once for each of the first bitmapChecksAlone
// bitmaps it reads. A bitmap that passed costs an atomic load; a verdict of corrupt is
// remembered for every later bitmap read of the column.
func (c *DimColumn) checkBitmap(id uint32) error {
	if checkState(c.bms.chk.state.Load()>>32) == checkTrusted || c.bmChecked == nil || int(id) >= c.bms.count {
		return nil
	}
	if c.bmChecked[id/64].Load()&(1<<(id%64)) != 0 && !c.bmBad.Load() {
		return nil
	}
	if c.derived {
		// The bitmaps are the rows' data: checked together, by the ids part's check.
		if err := c.ix.chk.check(); err != nil {
			return err
		}
		c.markBitmapsPassed()
		return nil
	}
	c.bmMu.Lock()
	defer c.bmMu.Unlock()
	switch {
	case c.bmErr != nil:
		return c.bmErr
	case c.bmChecked[id/64].Load()&(1<<(id%64)) != 0:
		return nil
	}
	var err error
	if c.bmAlone < bitmapChecksAlone {
		c.bmAlone++
		if err = c.seg.checkOneBitmap(c, id); err == nil {
			c.bmChecked[id/64].Or(1 << (id % 64))
		}
	} else if err = c.seg.checkAllBitmaps(c); err == nil {
		c.markBitmapsPassed()
	}
	if errors.Is(err, ErrCorrupt) {
		c.bmErr = err
		c.bmBad.Store(true)
	}
	return err
}

// markBitmapsPassed records every bitmap of c as checked.
func (c *DimColumn) markBitmapsPassed() {
	for i := range c.bmChecked {
		c.bmChecked[i].Store(^uint64(0))
	}
}

// checkOneBitmap checks that bitmap id of c holds exactly the rows holding id: keyed sums
// (rowKey) of the rows, one pass over the ids.
func (s *Segment) checkOneBitmap(c *DimColumn, id uint32) error {
	seed := s.pairSeed
	var want pairSums
	err := s.eachIDChunk(c, nil, func(first int, ids, offs []uint32) {
		if offs == nil {
			var sum, n uint64
			for k, v := range ids {
				if v == id {
					sum += rowKey(seed, uint32(first+k))
					n++
				}
			}
			want.sum += sum
			want.count += n
			return
		}
		for k := 0; k+1 < len(offs); k++ {
			for _, v := range ids[offs[k]:offs[k+1]] {
				if v == id {
					want.sum += rowKey(seed, uint32(first+k))
					want.count++
					break
				}
			}
		}
	})
	if err != nil {
		return s.inFile(err)
	}
	got, err := s.bitmapSums(c, int(id), nil)
	if err != nil {
		return err
	}
	if got != want {
		return s.fileError(c.bms.part, corruptf("bitmap %d holds %d rows, %d rows hold id %d (or other rows than the bitmap)", id, got.count, want.count, id))
	}
	return nil
}

// bitmapSums returns the keyed sum (rowKey) and the count of the rows of bitmap id of c.
func (s *Segment) bitmapSums(c *DimColumn, id int, buf []uint32) (pairSums, error) {
	raw, err := c.bms.raw(id)
	if err != nil {
		return pairSums{}, s.fileError(c.bms.part, err)
	}
	if len(buf) == 0 {
		bp := uint32Pool.Get(4096)
		defer func() { uint32Pool.Put(bp) }()
		buf = bp[:4096]
	}
	rs := &rowSums{seed: s.pairSeed}
	d := roaringDecoder{out: buf[:0], piece: len(buf)}
	if err := d.eachStored(raw, c.bms.v4, uint64(s.f.rows), rs.rows); err != nil {
		return pairSums{}, s.fileError(c.bms.part, fmt.Errorf("bitmap %d: %w", id, err))
	}
	return pairSums{sum: rs.sum, count: rs.count}, nil
}

// checkAllBitmaps checks that c's bitmaps hold exactly the distinct (row, id) pairs of its
// ids: one pass over the ids and every bitmap decoded, the pairs compared as keyed sums (see
// rowKey).
func (s *Segment) checkAllBitmaps(c *DimColumn) error {
	seed := s.pairSeed
	var pairs pairSums
	var scratch []uint32
	err := s.eachIDChunk(c, nil, func(first int, ids, offs []uint32) {
		if offs == nil {
			var sum uint64
			for k, id := range ids {
				sum += rowKey(seed, uint32(first+k)) * (2*uint64(id) + 1)
			}
			pairs.sum += sum
			pairs.count += uint64(len(ids))
			return
		}
		for k := 0; k+1 < len(offs); k++ {
			key := rowKey(seed, uint32(first+k))
			var row []uint32
			row, scratch = slicesx.Distinct(ids[offs[k]:offs[k+1]], scratch)
			for _, id := range row {
				pairs.sum += key * (2*uint64(id) + 1)
			}
			pairs.count += uint64(len(row))
		}
	})
	if err != nil {
		return s.inFile(err)
	}
	bp := uint32Pool.Get(4096)
	defer func() { uint32Pool.Put(bp) }()
	buf := bp[:4096]
	var got pairSums
	for id := 0; id < c.bms.count; id++ {
		ps, err := s.bitmapSums(c, id, buf)
		if err != nil {
			return err
		}
		got.sum += ps.sum * (2*uint64(id) + 1)
		got.count += ps.count
	}
	if got != pairs {
		return s.fileError(c.bms.part, corruptf("the bitmaps hold %d rows in all, the rows hold %d distinct values (or other rows than the bitmaps)", got.count, pairs.count))
	}
	return nil
}

// checkRawNulls checks that every null row of a raw dimension holds no bytes.
func (s *Segment) checkRawNulls(c *RawColumn) error {
	nulls, err := s.decodeNulls(c.dim.Name, c.nulls)
	if err != nil {
		return s.inFile(err)
	}
	if nulls.IsEmpty() {
		return nil
	}
	cur := c.Cursor()
	defer cur.Release()
	for it := nulls.Iterator(); it.HasNext(); {
		row := int(it.Next())
		b, err := cur.at(row)
		if err != nil {
			return s.inFile(err)
		}
		if len(b) > 0 {
			return s.fileError(c.nulls.part, corruptf("row %d: null row holds %d bytes", row, len(b)))
		}
	}
	return nil
}

// checkMetricNulls checks a metric's nulls part: see verifyNulls.
func checkMetricNulls[T Number](c *Column[T]) error {
	nulls, err := c.seg.decodeNulls(c.name, c.nulls)
	if err != nil {
		return c.seg.inFile(err)
	}
	return c.seg.inFile(nullsStoreZero(c, nulls))
}

// inFile names the file of an error that names its column and part (partError), unless it
// does already (fileError): columns: data/a.seg: column "page" part ids: <err>.
func (s *Segment) inFile(err error) error {
	name := s.name
	if name == "" {
		name = "unnamed segment"
	}
	if err == nil || strings.HasPrefix(err.Error(), "columns: "+name+": ") {
		return err
	}
	return &msgErr{msg: "columns: " + name + ": " + strings.TrimPrefix(err.Error(), "columns: "), err: err}
}

// msgErr is err with another message (inFile's, naming the file).
type msgErr struct {
	msg string
	err error
}

func (e *msgErr) Error() string { return e.msg }
func (e *msgErr) Unwrap() error { return e.err }
