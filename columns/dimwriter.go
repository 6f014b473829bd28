package columns

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/writeout/writeout/internal/mix"
	"github.com/writeout/writeout/internal/multierr"
	"github.com/writeout/writeout/internal/segfmt"
	"github.com/writeout/writeout/medium"
)

// dimWriter writes a dictionary dimension in three phases, each closing the one before:
//
//  1. the dictionary: AddNull first if the dimension has nulls (null gets id 0), then AddValue
//     for every distinct value in strictly increasing byte order (ids follow);
//  2. the rows: AppendID (single value) or AppendIDs (either kind) for each row in order,
//     AppendNull for a null row; the null bitmap is built from them;
//  3. the bitmap index (unless the dimension has NoBitmapIndex): WriteBitmap for every id in
//     order, each the set of rows holding that id. Only one bitmap is held at a time.
//
// The writer checks what it cheaply can: ids below the cardinality, the null id alone in a row,
// each bitmap within the rows, the null id's bitmap equal to the null rows, the bitmaps' total
// cardinality equal to the number of distinct (row, id) pairs, and (by a sum of a 64-bit hash
// over the pairs, computed from the rows and again from the bitmaps) that the bitmaps hold
// exactly the rows' ids. The pair hashes cost a hash per (row, id) twice over, and the distinct
// pairs of multi-value rows a sort per row, so those two are computed only in builds with the
// invariants tag (go test -tags invariants), as CI runs; Verify checks the same of a file.
type dimWriter struct {
	dim       Dimension
	chunkRows int
	phase     int // 0 dictionary, 1 rows, 2 bitmaps, 3 finished
	dict      dictWriter
	card      int
	width     int
	ids       chunkedWriter
	vals      []uint32 // ids of the rows of the current chunk
	counts    []uint32 // multi-value: ids per row of the current chunk
	raw       []byte
	rows      int
	pairs     uint64 // distinct (row, id) pairs (of a multi-value dimension: invariants only)
	pairHash  uint64 // sum of pairHash over the distinct (row, id) pairs of the rows
	bmHash    uint64 // the same over the bitmaps written
	nullsSt   *stage
	nulls     *roaring.Bitmap
	nullRows  []uint32 // null rows of the current chunk, not yet in nulls
	bitmaps   *bitmapsWriter
	nextBM    int
	bmCard    uint64
	seen      []uint32 // scratch for distinct counting
	err       error
	// The version 4 ids part (single-value dimensions, with a planes coder): the chunks are
	// staged bit-packed in first (a child of med), the rows of each id counted in freq, and
	// at closeRows transcoded chunk by chunk into ids as frequency ranks (rankIDs).
	med    medium.Medium
	pc     *planeCoder
	first  medium.Medium
	firstB medium.Bytes
	staged []stagedChunk
	freq   []uint32
	// derive: the ids part stores no ids (segfmt.EncIDChunksDerived): readers derive them from
	// the bitmaps, which then carry the rows' data, so the pair hashes are checked in every
	// build (finish). Set by closeDict when deriveIDs allows it.
	derive   bool
	storeIDs bool // the writer's StoreIDs option: never derive
}

// stagedChunk is one bit-packed ids chunk staged in dimWriter.firstB.
type stagedChunk struct {
	off  int64
	size int
	rows int
}

func (d *dimWriter) fail(err error) error {
	if d.err == nil {
		d.err = fmt.Errorf("columns: column %q: %w", d.dim.Name, err)
	}
	return d.err
}

// AddNull implements segwrite.DimWriter.
func (d *dimWriter) AddNull() error {
	if d.err != nil {
		return d.err
	}
	if d.phase != 0 || d.dict.count > 0 || d.dict.hasNull {
		return d.fail(fmt.Errorf("AddNull after other dictionary values or rows: %w", ErrState))
	}
	d.dict.hasNull = true
	return nil
}

// AddValue implements segwrite.DimWriter.
func (d *dimWriter) AddValue(v string) (uint32, error) {
	if d.err != nil {
		return 0, d.err
	}
	if d.phase != 0 {
		return 0, d.fail(fmt.Errorf("AddValue after the first row: %w", ErrState))
	}
	if d.dict.count >= math.MaxUint32-1 {
		return 0, d.fail(fmt.Errorf("dictionary full: %w", ErrInvalid))
	}
	if err := d.dict.add(v); err != nil {
		return 0, d.fail(fmt.Errorf("dictionary: %w: %w", err, ErrInvalid))
	}
	id := uint32(d.dict.count - 1)
	if d.dict.hasNull {
		id++
	}
	return id, nil
}

// Cardinality implements segwrite.DimWriter.
func (d *dimWriter) Cardinality() int {
	if d.dict.hasNull {
		return d.dict.count + 1
	}
	return d.dict.count
}

func (d *dimWriter) closeDict() error {
	if d.phase > 0 {
		return nil
	}
	d.card = d.Cardinality()
	d.width = idWidth(d.card)
	d.phase = 1
	if err := d.dict.finish(); err != nil {
		return d.fail(err)
	}
	if d.derive = deriveIDs(d.dim, d.card, d.pc != nil && !d.storeIDs); d.derive {
		d.chunkRows = maxChunkRows // one window of the readers' derivation a chunk
		return nil
	}
	if d.pc != nil && !d.dim.MultiValue && d.card > 1 && d.med != nil {
		first, err := d.med.NewChild()
		if err != nil {
			return d.fail(fmt.Errorf("ids stage: %w", err))
		}
		b, err := first.NewBytes()
		if err != nil {
			return d.fail(multierr.Join(fmt.Errorf("ids stage: %w", err), first.Close()))
		}
		d.first, d.firstB = first, b
		d.freq = make([]uint32, d.card)
	}
	return nil
}

// AppendID implements segwrite.DimWriter.
func (d *dimWriter) AppendID(id uint32) error {
	// The fast path: the rows phase under way, a valid id, room in the chunk.
	if d.phase == 1 && d.err == nil && !d.dim.MultiValue && int64(id) < int64(d.card) && d.rows < maxRows &&
		len(d.vals)+1 < d.chunkRows {
		if id == 0 && d.dict.hasNull {
			d.nullRows = append(d.nullRows, uint32(d.rows))
		}
		if invariants || d.derive {
			d.pairHash += pairHash(uint32(d.rows), id)
		}
		d.vals = append(d.vals, id)
		d.pairs++
		d.rows++
		return nil
	}
	one := [1]uint32{id}
	return d.AppendIDs(one[:])
}

// AppendSingleIDs implements segwrite.DimWriter.
func (d *dimWriter) AppendSingleIDs(ids []uint32) error {
	for len(ids) > 0 {
		// The fast path of AppendID for as many rows as leave room in the chunk; the row that
		// fills it, and anything out of the ordinary, goes through AppendID.
		n := 0
		if d.phase == 1 && d.err == nil && !d.dim.MultiValue {
			n = min(len(ids), d.chunkRows-1-len(d.vals), maxRows-d.rows)
		}
		if n <= 0 {
			if err := d.AppendID(ids[0]); err != nil {
				return err
			}
			ids = ids[1:]
			continue
		}
		run := ids[:n]
		var top uint32
		for _, id := range run {
			top = max(top, id)
		}
		if int64(top) >= int64(d.card) {
			// An id past the dictionary: row by row, for the error that names its row.
			for _, id := range run {
				if err := d.AppendID(id); err != nil {
					return err
				}
			}
			ids = ids[n:]
			continue
		}
		if d.dict.hasNull {
			for r, id := range run {
				if id == 0 {
					d.nullRows = append(d.nullRows, uint32(d.rows+r))
				}
			}
		}
		if invariants || d.derive {
			for r, id := range run {
				d.pairHash += pairHash(uint32(d.rows+r), id)
			}
		}
		d.vals = append(d.vals, run...)
		d.pairs += uint64(n)
		d.rows += n
		ids = ids[n:]
	}
	return nil
}

// appendNull appends a null row; the dictionary must have the null value.
func (d *dimWriter) appendNull() error { return d.AppendIDs(nil) }

// AppendIDs implements segwrite.DimWriter.
func (d *dimWriter) AppendIDs(ids []uint32) error {
	if d.err != nil {
		return d.err
	}
	if d.phase > 1 {
		return d.fail(fmt.Errorf("row appended after the bitmaps: %w", ErrState))
	}
	if err := d.closeDict(); err != nil {
		return err
	}
	if d.rows >= maxRows {
		return d.fail(fmt.Errorf("more than %d rows: %w", maxRows, ErrInvalid))
	}
	var nullRow [1]uint32
	if len(ids) == 0 {
		if !d.dict.hasNull {
			return d.fail(fmt.Errorf("row %d: null row, but the dictionary has no null value (call AddNull first): %w", d.rows, ErrInvalid))
		}
		ids = nullRow[:]
	}
	if !d.dim.MultiValue && len(ids) > 1 {
		return d.fail(fmt.Errorf("row %d: %d values in a single-value dimension: %w", d.rows, len(ids), ErrInvalid))
	}
	if len(ids) > maxChunkValues {
		return d.fail(fmt.Errorf("row %d: %d values, at most %d: %w", d.rows, len(ids), maxChunkValues, ErrInvalid))
	}
	for _, id := range ids {
		if int64(id) >= int64(d.card) {
			return d.fail(fmt.Errorf("row %d: id %d not below the cardinality %d: %w", d.rows, id, d.card, ErrInvalid))
		}
		if id == 0 && d.dict.hasNull && len(ids) > 1 {
			return d.fail(fmt.Errorf("row %d: the null id inside a multi-value row: %w", d.rows, ErrInvalid))
		}
	}
	if d.dict.hasNull && ids[0] == 0 {
		d.nullRows = append(d.nullRows, uint32(d.rows))
	}
	if d.dim.MultiValue && len(d.vals)+len(ids) > maxChunkValues {
		if err := d.flush(); err != nil {
			return err
		}
	}
	d.vals = append(d.vals, ids...)
	if d.dim.MultiValue {
		d.counts = append(d.counts, uint32(len(ids)))
		if invariants {
			d.pairs += d.distinct(ids)
		}
	} else {
		d.pairs++
		if invariants || d.derive {
			d.pairHash += pairHash(uint32(d.rows), ids[0])
		}
	}
	d.rows++
	if d.rowsInChunk() == d.chunkRows {
		return d.flush()
	}
	return nil
}

func (d *dimWriter) rowsInChunk() int {
	if d.dim.MultiValue {
		return len(d.counts)
	}
	return len(d.vals)
}

// distinct counts the distinct ids of one row and adds their pair hashes (invariants only).
func (d *dimWriter) distinct(ids []uint32) uint64 {
	row := uint32(d.rows)
	if len(ids) == 1 {
		d.pairHash += pairHash(row, ids[0])
		return 1
	}
	d.seen = append(d.seen[:0], ids...)
	slices.Sort(d.seen)
	d.seen = slices.Compact(d.seen)
	for _, id := range d.seen {
		d.pairHash += pairHash(row, id)
	}
	return uint64(len(d.seen))
}

// pairHash mixes a (row, id) pair into 64 bits (the splitmix64 finalizer).
func pairHash(row, id uint32) uint64 { return mix.Mix64(uint64(row)<<32 | uint64(id)) }

func (d *dimWriter) flush() error {
	if len(d.nullRows) > 0 {
		d.nulls.AddMany(d.nullRows)
		d.nullRows = d.nullRows[:0]
	}
	n := d.rowsInChunk()
	if n == 0 {
		return d.err
	}
	switch {
	case d.derive:
		d.raw = d.raw[:0] // a derived chunk holds no bytes
	case d.dim.MultiValue:
		d.raw = appendMultiIDs(d.raw[:0], d.counts, d.vals, d.width)
	default:
		d.raw = appendIDs(d.raw[:0], d.vals, d.width)
	}
	if d.firstB != nil {
		for _, id := range d.vals {
			d.freq[id]++
		}
		d.staged = append(d.staged, stagedChunk{off: d.firstB.Size(), size: len(d.raw), rows: n})
		if _, err := d.firstB.Write(d.raw); err != nil {
			return d.fail(fmt.Errorf("ids stage: %w", err))
		}
	} else if err := d.ids.writeChunk(d.raw, n); err != nil {
		return d.fail(err)
	}
	d.vals, d.counts = d.vals[:0], d.counts[:0]
	return nil
}

func (d *dimWriter) closeRows() error {
	if d.phase > 1 {
		return nil
	}
	if err := d.closeDict(); err != nil {
		return err
	}
	d.phase = 2
	if err := d.flush(); err != nil {
		return err
	}
	var perm []uint32
	deltas := false
	if d.firstB != nil {
		var err error
		if perm, deltas, err = d.rankIDs(); err != nil {
			return d.fail(err)
		}
	}
	if err := d.ids.finish(); err != nil {
		return d.fail(err)
	}
	if d.derive {
		d.ids.st.spec.enc = segfmt.EncIDChunksDerived
	}
	if perm != nil {
		if err := d.ids.st.write(appendPacked(nil, perm, d.width)); err != nil {
			return d.fail(err)
		}
		d.ids.st.spec.enc = segfmt.EncIDChunksV4
		if deltas {
			d.ids.st.spec.enc = segfmt.EncIDChunksV5
		}
	}
	d.vals, d.counts, d.raw, d.seen, d.nullRows = nil, nil, nil, nil, nil
	return nil
}

// deltaRecheck: after a chunk whose id-deltas form was the smaller, rankIDs writes the next
// chunks worth trying in that form without encoding their ranks to compare, but for every
// deltaRecheck-th chunk.
const deltaRecheck = 16

// rankIDs writes the staged chunks to the ids part as frequency ranks (segfmt.EncIDChunksV4), one
// chunk at a time, releases the first stage and returns the rank table: the ids by rows
// descending, ties by id. A chunk whose ids ascend within runs (deltasWorthTrying) is written
// in the id-deltas form instead when that is smaller; deltas reports whether one was, making
// the part segfmt.EncIDChunksV5. Once the id-deltas form has been the smaller, the next
// chunks' ranks are not encoded to compare but every deltaRecheck-th chunk's.
func (d *dimWriter) rankIDs() (perm []uint32, deltas bool, err error) {
	first, firstBytes := d.first, d.firstB
	d.first, d.firstB = nil, nil
	defer func() { err = multierr.Join(err, first.Close()) }()
	perm = make([]uint32, d.card)
	for i := range perm {
		perm[i] = uint32(i)
	}
	freq := d.freq
	slices.SortStableFunc(perm, func(a, b uint32) int { return cmp.Compare(freq[b], freq[a]) })
	rank := freq // reused: rank[id]
	for r, id := range perm {
		rank[id] = uint32(r)
	}
	d.freq = nil
	var buf []byte
	var diffs []uint32
	deltasWon := false // the last chunk compared kept its id-deltas form
	ids := d.vals[:0]
	for k, c := range d.staged {
		buf = grow(buf[:0], c.size)
		if _, err := firstBytes.ReadAt(buf, c.off); err != nil {
			return nil, false, fmt.Errorf("ids stage: read back: %w", err)
		}
		var rest []byte
		ids, rest, err = decodeIDs(ids[:0], buf, c.rows, d.card)
		if err == nil && len(rest) != 0 {
			err = corruptf("%d trailing bytes", len(rest))
		}
		if err != nil {
			return nil, false, fmt.Errorf("ids stage: %w", err)
		}
		tryDeltas := d.width > 0 && deltasWorthTrying(ids)
		if tryDeltas {
			// buf is free once ids are decoded: it takes the id-deltas form.
			buf, tryDeltas = appendIDDeltas(buf[:0], ids, d.card, d.width, d.pc, &diffs, maxFrame(len(ids)*4))
		}
		if tryDeltas && deltasWon && k%deltaRecheck != 0 {
			if err := d.ids.writeChunk(buf, c.rows); err != nil {
				return nil, false, err
			}
			continue
		}
		for i, id := range ids {
			ids[i] = rank[id]
		}
		d.raw = appendRankedIDs(d.raw[:0], ids, d.width, d.pc)
		out := d.raw
		if deltasWon = tryDeltas && len(buf) < len(d.raw); deltasWon {
			out, deltas = buf, true
		}
		if err := d.ids.writeChunk(out, c.rows); err != nil {
			return nil, false, err
		}
	}
	d.staged = nil
	return perm, deltas, nil
}

func (d *dimWriter) finish() error {
	if d.err != nil {
		return d.err
	}
	if d.phase > 2 {
		return nil
	}
	if err := d.closeRows(); err != nil {
		return err
	}
	d.phase = 3
	if d.bitmaps != nil {
		if d.nextBM != d.card {
			return d.fail(fmt.Errorf("%d of %d bitmaps written: %w", d.nextBM, d.card, ErrState))
		}
		if (invariants || !d.dim.MultiValue) && d.bmCard != d.pairs {
			return d.fail(fmt.Errorf("bitmaps hold %d rows in all, the rows hold %d distinct values: %w", d.bmCard, d.pairs, ErrInvalid))
		}
		if (invariants || d.derive) && d.bmHash != d.pairHash {
			return d.fail(fmt.Errorf("bitmaps do not hold the rows' ids (pair hashes differ): %w", ErrInvalid))
		}
		if err := d.bitmaps.finish(); err != nil {
			return d.fail(err)
		}
	}
	d.nulls.RunOptimize()
	if _, err := d.nulls.WriteTo(d.nullsSt); err != nil {
		return d.fail(d.nullsSt.fail(err))
	}
	d.nulls = nil
	return nil
}
