package columns

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/writeout/writeout/internal/mix"
	"github.com/writeout/writeout/internal/segfmt"
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
//	ids, bitmaps, nulls (dictionary)   ids below the cardinality (as every read does), the null id
//	                                   alone in its row; the bitmaps hold exactly the distinct
//	                                   (row, id) pairs of the ids (a sum over the pairs keyed at
//	                                   random per Segment, and the count, compared: see rowKey);
//	                                   the null rows exactly the rows holding the null id
//	nulls (raw dimension)              every null row holds no bytes
//	nulls (long or double metric)      not empty, every null row stores 0 (time 0, empty tail)
//
// Every sketch read as bytes (SketchCursor.Bytes) is checked to decode, row by row
// (agg.Sketches.Check, which does not allocate).
//
// What the read path leaves to Verify: under rollup, that no two rows share a key (it needs
// every dimension of every row together, where a read touches only the columns it asks for);
// a metric's values and times, and raw strings, have no invariant to check.
//
// Each check reads its parts through checkCRC, never check, so that it does not run itself.
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
func (sc *structCheck) run() error {
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
	err := sc.fn()
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
		for _, p := range ps {
			if p != nil {
				s.checkOf(p).sc = sc
			}
		}
		s.structs = append(s.structs, sc)
	}
	attach(newStructCheck(s.checkTime), s.time.ix.part)
	for i, d := range s.f.schema.Dimensions {
		c := 1 + i
		if d.Raw {
			rc := s.raws[i]
			attach(newStructCheck(func() error { return s.checkRawNulls(rc) }), s.part(c, segfmt.PartNulls))
			continue
		}
		dc := s.dims[i]
		attach(newStructCheck(func() error { return s.checkDict(dc) }), dc.dict.part)
		ps := []*segfmt.PartInfo{s.part(c, segfmt.PartIDs), s.part(c, segfmt.PartNulls)}
		if dc.bms != nil {
			ps = append(ps, dc.bms.part)
		}
		attach(newStructCheck(func() error { return s.checkDimRows(dc) }), ps...)
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
}

// checkTime checks the __time column: see verifyTime.
func (s *Segment) checkTime() error {
	c := s.time.Cursor()
	c.cr.crcOnly = true
	defer c.Release()
	err := s.timeRows(c)
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

// checkDimRows checks a dictionary dimension's ids against its bitmaps and null rows: the
// bitmaps hold exactly the distinct (row, id) pairs of the ids, and the null rows are exactly
// the rows holding the null id. It reads each part once, a chunk or a bitmap at a time.
func (s *Segment) checkDimRows(c *DimColumn) error {
	if err := c.ix.chk.checkCRC(); err != nil {
		return err
	}
	if err := c.nulls.checkCRC(); err != nil {
		return err
	}
	if c.bms != nil {
		if err := c.bms.chk.checkCRC(); err != nil {
			return err
		}
	}
	seed := s.pairSeed
	rows := s.f.rows
	var pairs, nullRows pairSums
	hasNull := c.dict.hasNull
	withBitmaps := c.bms != nil
	cur := c.Cursor()
	cur.cr.crcOnly = true
	defer cur.Release()
	var scratch []uint32
	for r := 0; r < rows; {
		first, ids, offs, err := cur.Chunk(r)
		if err != nil {
			return s.inFile(err)
		}
		if offs == nil {
			var sum, nsum, ncount uint64
			for k, id := range ids {
				key := rowKey(seed, uint32(first+k))
				sum += key * (2*uint64(id) + 1)
				if id == 0 {
					nsum += key
					ncount++
				}
			}
			if withBitmaps {
				pairs.sum += sum
				pairs.count += uint64(len(ids))
			}
			if hasNull {
				nullRows.sum += nsum
				nullRows.count += ncount
			}
			r = first + len(ids)
			continue
		}
		for k := 0; k+1 < len(offs); k++ {
			row := ids[offs[k]:offs[k+1]]
			key := rowKey(seed, uint32(first+k))
			if hasNull && row[0] == 0 {
				nullRows.sum += key
				nullRows.count++
			}
			if !withBitmaps {
				continue
			}
			switch {
			case len(row) == 1:
				pairs.sum += key * (2*uint64(row[0]) + 1)
				pairs.count++
				continue
			case len(row) > 16: // a long row: its distinct ids, sorted
				scratch = append(scratch[:0], row...)
				slices.Sort(scratch)
				row = slices.Compact(scratch)
				for _, id := range row {
					pairs.sum += key * (2*uint64(id) + 1)
				}
				pairs.count += uint64(len(row))
				continue
			}
			// A short row: an id seen earlier in it is skipped (a loop the compiler keeps
			// inline, where slices.Contains costs a call per id).
			var w, n uint64
			for j := range row {
				id := row[j]
				dup := false
				for i := 0; i < j; i++ {
					if row[i] == id {
						dup = true
						break
					}
				}
				if !dup {
					w += 2*uint64(id) + 1
					n++
				}
			}
			pairs.sum += key * w
			pairs.count += n
		}
		r = first + len(offs) - 1
	}
	nulls, err := s.decodeNulls(c.dim.Name, c.nulls)
	if err != nil {
		return s.inFile(err)
	}
	var got pairSums
	for it := nulls.Iterator(); it.HasNext(); {
		got.sum += rowKey(seed, it.Next())
		got.count++
	}
	if got != nullRows {
		return s.fileError(c.nulls.part, corruptf("%d null rows, %d rows hold the null id (or other rows)", got.count, nullRows.count))
	}
	if !withBitmaps {
		return nil
	}
	got = pairSums{}
	bp := uint32Pool.Get(4096)
	defer func() { uint32Pool.Put(bp) }()
	buf := bp[:4096]
	rs := &rowSums{seed: seed}
	for id := 0; id < c.bms.count; id++ {
		raw, err := c.bms.raw(id)
		if err != nil {
			return s.fileError(c.bms.part, err)
		}
		rs.sum, rs.count = 0, 0
		d := roaringDecoder{out: buf[:0], piece: len(buf)}
		if err := d.eachStored(raw, c.bms.v4, uint64(rows), rs.rows); err != nil {
			return s.fileError(c.bms.part, fmt.Errorf("bitmap %d: %w", id, err))
		}
		got.sum += rs.sum * (2*uint64(id) + 1)
		got.count += rs.count
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
