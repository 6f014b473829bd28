package columns

import (
	"fmt"
	"math/bits"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/writeout/writeout/internal/segwrite"
)

// WriteBitmap implements segwrite.DimWriter.
func (d *dimWriter) WriteBitmap(id uint32, bm *roaring.Bitmap) error {
	if err := d.beginBitmap(id); err != nil {
		return err
	}
	if bm == nil {
		bm = roaring.New()
	}
	if !bm.IsEmpty() && int64(bm.Maximum()) >= int64(d.rows) {
		return d.fail(fmt.Errorf("bitmap %d holds row %d, the column has %d rows: %w", id, bm.Maximum(), d.rows, ErrInvalid))
	}
	if id == 0 && d.dict.hasNull && !bm.Equals(d.nulls) {
		return d.fail(fmt.Errorf("bitmap of the null id differs from the null rows: %w", ErrInvalid))
	}
	d.bmCard += bm.GetCardinality()
	if invariants || d.derive {
		h := d.bmHash
		bm.Iterate(func(row uint32) bool {
			h += pairHash(row, id)
			return true
		})
		d.bmHash = h
	}
	if err := d.bitmaps.add(bm); err != nil {
		return d.fail(err)
	}
	d.nextBM++
	return nil
}

// WriteBitmapRows implements segwrite.DimWriter.
func (d *dimWriter) WriteBitmapRows(id uint32, rows []uint32) error {
	if err := d.beginBitmap(id); err != nil {
		return err
	}
	var nulls *roaring.Bitmap
	if d.dict.hasNull {
		nulls = d.nulls
	}
	h, err := checkBitmapRows(id, rows, d.rows, nulls, d.derive)
	if err != nil {
		return d.fail(err)
	}
	d.bmCard += uint64(len(rows))
	d.bmHash += h
	if err := d.bitmaps.addRows(rows); err != nil {
		return d.fail(err)
	}
	d.nextBM++
	return nil
}

// WriteBitmapPieces implements segwrite.DimWriter.
func (d *dimWriter) WriteBitmapPieces(id uint32, each func(fn func(rows []uint32) error) error) error {
	if err := d.beginBitmap(id); err != nil {
		return err
	}
	var nulls *roaring.Bitmap
	if id == 0 && d.dict.hasNull {
		nulls = d.nulls
	}
	n, h, err := d.bitmaps.addPieces(id, each, d.rows, nulls, d.derive)
	if err != nil {
		return d.fail(err)
	}
	d.bmCard += uint64(n)
	d.bmHash += h
	d.nextBM++
	return nil
}

// bitmapRun encodes the bitmaps of a run of consecutive ids apart from its dimWriter, so that
// several goroutines can encode one dimension's bitmap index: each fills a run of its own
// (AddRows), then one goroutine adds the runs to the writer in id order (WriteBitmapRun). The
// bytes are those WriteBitmapRows writes, and AddRows checks what WriteBitmapRows checks. A
// run is used by one goroutine at a time; the writer is not touched until WriteBitmapRun.
type bitmapRun struct {
	first, next uint32
	card        int
	rows        int
	nulls       *roaring.Bitmap // the null rows when the run starts at the null id, else nil
	compact     bool
	enc         roaringEncoder
	buf         []byte   // the bitmaps, back to back
	ends        []uint64 // where each ends in buf
	bmCard      uint64
	bmHash      uint64
	v4          bool
	hash        bool // sum pairHash in every build (the writer derives the ids)
	name        string
	err         error
}

// NewBitmapRun implements segwrite.DimWriter.
func (d *dimWriter) NewBitmapRun(first uint32) (segwrite.BitmapRun, error) {
	if err := d.openBitmaps(); err != nil {
		return nil, err
	}
	if int(first) < d.nextBM || int(first) > d.card {
		return nil, d.fail(fmt.Errorf("NewBitmapRun(%d): the next bitmap is %d of %d: %w", first, d.nextBM, d.card, ErrState))
	}
	r := &bitmapRun{first: first, next: first, card: d.card, rows: d.rows, compact: d.bitmaps.compact, hash: d.derive, name: d.dim.Name}
	if first == 0 && d.dict.hasNull {
		r.nulls = d.nulls
	}
	return r, nil
}

// AddRows implements segwrite.BitmapRun.
func (r *bitmapRun) AddRows(rows []uint32) error {
	if r.err != nil {
		return r.err
	}
	id := r.next
	if int(id) >= r.card {
		return r.fail(fmt.Errorf("bitmap %d: id not below the cardinality %d: %w", id, r.card, ErrInvalid))
	}
	var nulls *roaring.Bitmap
	if id == 0 {
		nulls = r.nulls
	}
	h, err := checkBitmapRows(id, rows, r.rows, nulls, r.hash)
	if err != nil {
		return r.fail(err)
	}
	r.bmCard += uint64(len(rows))
	r.bmHash += h
	var v4 bool
	if r.buf == nil {
		r.buf = bytePool.Get(64 << 10)
	}
	r.buf, v4 = r.enc.appendBitmapRows(bytePool.Grow(r.buf, efSize(max(len(rows), 1), lastOr0(rows))), rows, r.compact)
	r.v4 = r.v4 || v4
	r.ends = append(r.ends, uint64(len(r.buf)))
	r.next++
	return nil
}

// checkBitmapRows checks the rows of bitmap id, of a column of nrows rows: strictly
// increasing, below nrows, and for the null id equal to nulls when nulls is not nil. It returns
// the sum of pairHash over them in builds with the invariants tag or when hash is set, else 0.
func checkBitmapRows(id uint32, rows []uint32, nrows int, nulls *roaring.Bitmap, hash bool) (uint64, error) {
	if k, ok := strictlyIncreasing(rows); !ok {
		return 0, fmt.Errorf("bitmap %d: rows not strictly increasing at index %d (%d after %d): %w", id, k, rows[k], rows[k-1], ErrInvalid)
	}
	if n := len(rows); n > 0 && int64(rows[n-1]) >= int64(nrows) {
		return 0, fmt.Errorf("bitmap %d holds row %d, the column has %d rows: %w", id, rows[n-1], nrows, ErrInvalid)
	}
	if id == 0 && nulls != nil && !equalRows(nulls, rows) {
		return 0, fmt.Errorf("bitmap of the null id differs from the null rows: %w", ErrInvalid)
	}
	var h uint64
	if invariants || hash {
		for _, row := range rows {
			h += pairHash(row, id)
		}
	}
	return h, nil
}

// lastOr0 returns the last of rows, or 0 when there are none.
func lastOr0(rows []uint32) uint32 {
	if len(rows) == 0 {
		return 0
	}
	return rows[len(rows)-1]
}

func (r *bitmapRun) fail(err error) error {
	if r.err == nil {
		r.err = fmt.Errorf("columns: column %q: %w", r.name, err)
	}
	return r.err
}

// WriteBitmapRun implements segwrite.DimWriter.
func (d *dimWriter) WriteBitmapRun(run segwrite.BitmapRun) error {
	r, ok := run.(*bitmapRun)
	if !ok || r == nil {
		return d.fail(fmt.Errorf("bitmap run %T: not from NewBitmapRun: %w", run, ErrInvalid))
	}
	if r.err != nil {
		return d.fail(fmt.Errorf("bitmap run from %d: %w", r.first, r.err))
	}
	if r.next == r.first {
		return nil
	}
	if err := d.beginBitmap(r.first); err != nil {
		return err
	}
	if r.card != d.card || r.rows != d.rows {
		return d.fail(fmt.Errorf("bitmap run from %d: made for %d ids and %d rows, the column has %d and %d: %w",
			r.first, r.card, r.rows, d.card, d.rows, ErrState))
	}
	err := d.bitmaps.addRun(r)
	bytePool.Put(r.buf) // copied into the stage: the run's buffer goes to the next run
	r.buf = nil
	if err != nil {
		return d.fail(err)
	}
	d.bmCard += r.bmCard
	d.bmHash += r.bmHash
	d.nextBM = int(r.next)
	return nil
}

// WriteBitmapWords implements segwrite.DimWriter.
func (d *dimWriter) WriteBitmapWords(id uint32, words []uint64) error {
	if err := d.beginBitmap(id); err != nil {
		return err
	}
	last := len(words) - 1
	for last >= 0 && words[last] == 0 {
		last--
	}
	if last >= 0 {
		if top := int64(last)<<6 + 63 - int64(bits.LeadingZeros64(words[last])); top >= int64(d.rows) {
			return d.fail(fmt.Errorf("bitmap %d holds row %d, the column has %d rows: %w", id, top, d.rows, ErrInvalid))
		}
	}
	words = words[:last+1]
	if id == 0 && d.dict.hasNull && !equalWords(d.nulls, words) {
		return d.fail(fmt.Errorf("bitmap of the null id differs from the null rows: %w", ErrInvalid))
	}
	card := 0
	for _, w := range words {
		card += bits.OnesCount64(w)
	}
	d.bmCard += uint64(card)
	if invariants || d.derive {
		h := d.bmHash
		for k, w := range words {
			for ; w != 0; w &= w - 1 {
				h += pairHash(uint32(k<<6+bits.TrailingZeros64(w)), id)
			}
		}
		d.bmHash = h
	}
	if err := d.bitmaps.addWords(words); err != nil {
		return d.fail(err)
	}
	d.nextBM++
	return nil
}

// beginBitmap checks that the bitmap of id may come next, closing the rows on the first call.
func (d *dimWriter) beginBitmap(id uint32) error {
	if err := d.openBitmaps(); err != nil {
		return err
	}
	if int(id) != d.nextBM {
		return d.fail(fmt.Errorf("WriteBitmap(%d): want id %d next (ids in order, each once): %w", id, d.nextBM, ErrState))
	}
	if int(id) >= d.card {
		return d.fail(fmt.Errorf("WriteBitmap(%d): id not below the cardinality %d: %w", id, d.card, ErrInvalid))
	}
	return nil
}

// openBitmaps checks that bitmaps may be written, closing the rows on the first call.
func (d *dimWriter) openBitmaps() error {
	if d.err != nil {
		return d.err
	}
	if d.bitmaps == nil {
		return d.fail(fmt.Errorf("WriteBitmap on a dimension without a bitmap index: %w", ErrState))
	}
	if d.phase > 2 {
		return d.fail(fmt.Errorf("WriteBitmap after finish: %w", ErrState))
	}
	return d.closeRows()
}

// equalWords reports whether bm holds exactly the rows set in words.
func equalWords(bm *roaring.Bitmap, words []uint64) bool {
	it := bm.Iterator()
	n := uint64(0)
	for k, w := range words {
		for ; w != 0; w &= w - 1 {
			if !it.HasNext() || it.Next() != uint32(k<<6+bits.TrailingZeros64(w)) {
				return false
			}
			n++
		}
	}
	return n == bm.GetCardinality()
}

// equalRows reports whether bm holds exactly rows (strictly increasing).
func equalRows(bm *roaring.Bitmap, rows []uint32) bool {
	if bm.GetCardinality() != uint64(len(rows)) {
		return false
	}
	it := bm.Iterator()
	for _, r := range rows {
		if !it.HasNext() || it.Next() != r {
			return false
		}
	}
	return true
}
