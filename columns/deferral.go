package columns

import (
	"cmp"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"
)

// Deferred structural checks. The structural check of the __time values and the one of a
// dimension's ids (structure.go) read their part whole before its first read hands out
// anything. A reader that reads those parts whole itself and publishes nothing it derived
// before a verdict (a merge, whose output is staged until it publishes) pays for every chunk
// twice: the check decodes it, then the reader does. A cursor taken with a Deferral
// (Column.DeferredCursor, DimColumn.DeferredCursor) puts the check off instead:
//   - its first read checks the part's CRC, as every cursor's does, and nothing more;
//   - as it decodes the chunks, in row order, it gathers what the check compares (the times'
//     order and bounds, the rows holding each id and the null rows), and a chunk that breaks
//     an invariant the check sees chunk by chunk (a time out of order) fails the read, and
//     every later read of the part, as the check would have;
//   - Deferral.Judge gives the verdict before the reader publishes: from what a cursor
//     gathered when it decoded every chunk of the part in order, else by running the check
//     whole. A verdict counts for every reader of the segment, as the check's own does.
//
// Until Judge returns, such a cursor may hand out values of a part the check will refuse (an
// id changed in place, within the cardinality): never a panic or an id out of range (the
// decoders check what every read needs), but values that must not reach an answer.

// A Deferral holds the structural checks put off by the cursors taken with it, until Judge.
// Its methods are safe for concurrent use; a cursor is still used by one goroutine.
type Deferral struct {
	mu     sync.Mutex
	checks []*deferred
	crcs   map[*partCheck]*partRuns // the parts whose CRC cursors put off (Column.DeferredCursor)
}

// deferred is a structural check one cursor put off.
type deferred struct {
	sc     *structCheck
	chunks int          // the part's chunks
	next   int          // the chunk expected next
	judge  func() error // the check's verdict from the chunks gathered, when all came in order
}

// took reports whether chunk i is the part's next in row order, and counts it. A chunk out of
// order is not gathered, and the gathering goes on from the next one when it comes: a merge's
// cursor looks at a time ahead of its rows (cursor.streamAhead), then goes back, and its
// times were all checked again after the rows (0.54 s of a 300 M-row hour rollup's CPU).
func (x *deferred) took(i int) bool {
	if x.next != i {
		return false
	}
	x.next++
	return true
}

// fail records err, what a chunk broke, as the check's verdict.
func (x *deferred) fail(err error) error {
	if !errors.Is(err, ErrCorrupt) {
		return err // a bad CRC (remembered by the part's check) or a read error
	}
	return x.sc.runWith(func() error { return err })
}

// seg is chunkReader.seg for a reader that put off its part's structural check: on its first
// read, the part's CRC is checked, unless the reader computes it from the frames it loads
// (fused, judged by Judge); either way a verdict found already (a bad CRC, the check failed)
// fails every read.
func (x *deferred) seg(c *chunkReader) error {
	pc := c.ix.chk
	if c.fused == nil {
		if err := pc.checkCRC(); err != nil {
			return err
		}
	} else if st, _ := pc.load(); st == checkBad {
		return pc.checkCRC()
	}
	if x.sc.state.Load() == structBad {
		return x.sc.run()
	}
	return nil
}

// readErr is err, an error decoding or checking a chunk of c's part: for a reader that
// computes the part's CRC from the frames it loads (a deferred check's, or runs: see
// partRuns), the part's CRC error when the bytes do not match it, so that damaged bytes read
// as a bad CRC, as when the CRC is checked first.
func (c *chunkReader) readErr(err error) error {
	fromFrames := c.runs != nil || c.df != nil && c.fused != nil
	if !fromFrames || c.src.closed {
		return err
	}
	if cerr := c.ix.chk.checkCRC(); cerr != nil {
		return cerr
	}
	return err
}

func (d *Deferral) add(sc *structCheck, chunks int, judge func() error) *deferred {
	x := &deferred{sc: sc, chunks: chunks, judge: judge}
	d.mu.Lock()
	d.checks = append(d.checks, x)
	d.mu.Unlock()
	return x
}

// Judge returns the verdict of every structural check put off by the cursors taken with d:
// nil when each passed, else the first failure, an error wrapping ErrCorrupt that names the
// file, the column and the part (or the error that kept a check from reading its parts). A
// check that a cursor saw whole is judged from what it gathered; one that no cursor saw whole
// (a cursor that read only some rows, or jumped back) runs whole. Call it once the cursors
// are done; the checks are then off d, and a second Judge returns nil.
func (d *Deferral) Judge() error {
	d.mu.Lock()
	checks := d.checks
	d.checks = nil
	crcs := d.crcs
	d.crcs = nil
	d.mu.Unlock()
	judged := make(map[*structCheck]bool, len(checks))
	var first error
	keep := func(err error) {
		if err != nil && first == nil {
			first = err
		}
	}
	// The CRCs first: a part's bad bytes are the cause of whatever else they break.
	for _, r := range sortedRuns(crcs) {
		keep(r.judge())
	}
	for _, x := range checks {
		if !judged[x.sc] && x.next == x.chunks {
			judged[x.sc] = true
			keep(x.sc.runWith(x.judge))
		}
	}
	for _, x := range checks {
		if !judged[x.sc] {
			judged[x.sc] = true
			keep(x.sc.run())
		}
	}
	return first
}

// deferrable reports whether a cursor over pc's part may put off its structural check: it
// has one, not run yet, and the part is not trusted.
func (pc *partCheck) deferrable() bool {
	if pc == nil || pc.sc == nil || pc.sc.passed() {
		return false
	}
	st, _ := pc.load()
	return st != checkTrusted
}

// deferMaxCard bounds the dictionaries whose ids' check a cursor puts off: it keeps a count
// for each id until Judge (up to four bytes an id, see idCounts).
const deferMaxCard = 1 << 18

// DeferredCursor is Cursor for a reader that publishes nothing it derives from the column
// before d.Judge returns nil (see Deferral): for the __time column, the times' structural
// check is put off to d; for another column, the check of its part's CRC (see partRuns). So
// is it with d nil, or when the part is checked already, or trusted, or not mapped.
func (c *Column[T]) DeferredCursor(d *Deferral) *Cursor[T] {
	cur := c.Cursor()
	if d == nil {
		return cur
	}
	if any(c) != any(c.seg.time) {
		cur.cr.runs = d.runsOf(c.ix)
		return cur
	}
	if !c.ix.chk.deferrable() {
		return cur
	}
	tr := c.seg.newTimeRows()
	cur.times = tr
	cur.cr.deferTo(d, func() error { return c.seg.timeErr(tr.judge()) })
	return cur
}

// DeferredCursor is Cursor for a reader that publishes nothing it derives from the ids before
// d.Judge returns nil (see Deferral): the ids' structural check is put off to d. A dimension
// whose ids its bitmaps give (a derived ids part), or with over 2^18 values, keeps its check
// first, and its cursor is Cursor's; so is it with d nil.
func (c *DimColumn) DeferredCursor(d *Deferral) *DimCursor {
	cur := c.Cursor()
	if d == nil || c.derived || !c.ix.chk.deferrable() || c.dict.cardinality() > deferMaxCard {
		return cur
	}
	dr := newDimRows(c)
	cur.rows = dr
	cur.cr.deferTo(d, dr.judge)
	return cur
}

// deferTo makes c put off its part's structural check to d, judge giving the verdict from
// what c's cursor gathered. On a mapped file, c computes the part's CRC from the frames it
// loads (fusedCRC), so that the part is read once, and Judge judges the CRC first.
func (c *chunkReader) deferTo(d *Deferral, judge func() error) {
	pc := c.ix.chk
	c.crcOnly = true
	fc := pc.fuse()
	c.fused = fc
	// Once passed, the segment's pages go, as after the check itself (thenRelease): the
	// verdict reads the bitmaps' headers through the mapping.
	c.df = d.add(pc.sc, c.ix.chunks(), pc.seg.thenRelease(func() error {
		if fc != nil {
			if err := pc.finishFused(fc, c.ix); err != nil {
				return err
			}
		} else if err := pc.checkCRC(); err != nil {
			return err
		}
		return judge()
	}))
}

// runsOf returns the runs the deferred cursors of ix's part record, made on the first call,
// or nil when the part's CRC is not to be put off: it is checked already or trusted, or the
// file is not mapped (as fusedCRC).
func (d *Deferral) runsOf(ix *chunkIndex) *partRuns {
	if ix == nil || ix.chk == nil {
		return nil
	}
	pc := ix.chk
	if pc.seg.src.data == nil {
		return nil
	}
	if st, _ := pc.load(); st != checkNone {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if r := d.crcs[pc]; r != nil {
		return r
	}
	if d.crcs == nil {
		d.crcs = make(map[*partCheck]*partRuns)
	}
	r := &partRuns{pc: pc, ix: ix}
	d.crcs[pc] = r
	return r
}

// sortedRuns returns the values of m in the parts' order in their files (a map's order is
// random; the first failure Judge returns is then always the same).
func sortedRuns(m map[*partCheck]*partRuns) []*partRuns {
	rs := slices.Collect(maps.Values(m))
	slices.SortFunc(rs, func(a, b *partRuns) int {
		return cmp.Or(strings.Compare(a.pc.seg.name, b.pc.seg.name), cmp.Compare(a.pc.part.Offset, b.pc.part.Offset))
	})
	return rs
}
