package columns

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/RoaringBitmap/roaring/v2"
)

// LongWriter appends int64 values: __time or a long metric.
type LongWriter struct {
	cw        chunkedWriter
	chunkRows int
	vals      []int64
	raw       []byte
	isTime    bool
	gran      Granularity // __time: every value is truncated to it
	rows      int
	first     int64
	last      int64
	err       error
	finished  bool
	times     *LongWriter // a first/last metric's times (PartTimes), else nil
	metric    bool        // a long metric's values: AppendNull allowed
	pc        *planeCoder // the planes form allowed (a version 4 part when used), else nil
	nulls     *roaring.Bitmap
}

// Append appends the next row's value. For __time, values must not decrease and must be
// truncated to the schema's granularity. A first/last metric takes AppendTimed instead.
func (l *LongWriter) Append(v int64) error {
	if l.times != nil {
		return l.timedErr()
	}
	return l.append(v)
}

// AppendTimed appends the next row's value of a first/last metric with the time stored with it
// (the event time of the row it came from).
func (l *LongWriter) AppendTimed(v, t int64) error {
	if l.times == nil {
		return l.untimedErr()
	}
	if err := l.append(v); err != nil {
		return err
	}
	if err := l.times.append(t); err != nil {
		l.err = err
	}
	return l.err
}

// AppendValues appends the next rows' values, as Append does each. A long metric's values are
// copied into the chunk in bulk: a merge hands runs of rows over this way.
func (l *LongWriter) AppendValues(vs []int64) error {
	if l.times != nil {
		return l.timedErr()
	}
	if l.err != nil {
		return l.err
	}
	if l.finished {
		return fmt.Errorf("columns: column %q: append after finish: %w", l.cw.st.name, ErrState)
	}
	if l.isTime && !l.timesOK(vs) {
		// A time out of order, out of range or not truncated: value by value, for the error
		// that names its row.
		for _, v := range vs {
			if err := l.append(v); err != nil {
				return err
			}
		}
		return nil
	}
	if l.isTime && len(vs) > 0 {
		if l.rows == 0 {
			l.first = vs[0]
		}
		l.last = vs[len(vs)-1]
	}
	return appendBulk(&l.vals, &l.rows, l.chunkRows, vs, l.flush)
}

// timesOK reports whether vs, the next values of __time, pass append's checks: in order after
// the last time, within the times a segment can hold, truncated to the granularity.
func (l *LongWriter) timesOK(vs []int64) bool {
	if len(vs) == 0 {
		return true
	}
	last := vs[0]
	if l.rows > 0 {
		last = l.last
	}
	lo, hi := l.gran.Truncate(MinTime), MaxTime
	none := l.gran == GranularityNone
	for _, v := range vs {
		if v < last || v < lo || v > hi || !none && l.gran.Truncate(v) != v {
			return false
		}
		last = v
	}
	return true
}

// AppendNull appends a null row to a long metric (not __time): the value stored is 0 (and, for
// a first/last metric, the time stored with it 0), and the row goes to the metric's nulls part
// (see Value.Null). A segment with a metric's null row is written as format version 3.
func (l *LongWriter) AppendNull() error {
	if !l.metric {
		if l.err == nil {
			l.err = fmt.Errorf("columns: column %q: AppendNull on a column that holds no nulls: %w", l.cw.st.name, ErrState)
		}
		return l.err
	}
	row := l.rows
	if err := l.append(0); err != nil {
		return err
	}
	if l.times != nil {
		if err := l.times.append(0); err != nil {
			l.err = err
			return err
		}
	}
	if l.nulls == nil {
		l.nulls = roaring.New()
	}
	l.nulls.Add(uint32(row))
	return nil
}

// Nulls returns the number of null rows appended so far.
func (l *LongWriter) Nulls() int {
	if l.nulls == nil {
		return 0
	}
	return int(l.nulls.GetCardinality())
}

func (l *LongWriter) timedErr() error {
	if l.err == nil {
		l.err = fmt.Errorf("columns: column %q: a first/last metric takes AppendTimed: %w", l.cw.st.name, ErrState)
	}
	return l.err
}

func (l *LongWriter) untimedErr() error {
	return fmt.Errorf("columns: column %q: AppendTimed on a column that stores no times: %w", l.cw.st.name, ErrState)
}

func (l *LongWriter) append(v int64) error {
	if l.err != nil {
		return l.err
	}
	if l.finished {
		return fmt.Errorf("columns: column %q: append after finish: %w", l.cw.st.name, ErrState)
	}
	if l.isTime {
		if l.rows > 0 && v < l.last {
			l.err = fmt.Errorf("columns: column %q: row %d: time %d before the previous row's %d: rows must come in time order: %w", TimeColumn, l.rows, v, l.last, ErrInvalid)
			return l.err
		}
		if !l.gran.ValidTime(v) {
			l.err = fmt.Errorf("columns: column %q: row %d: time %d outside the times a segment can hold, [%d, %d] (MinTime and MaxTime, truncated): %w", TimeColumn, l.rows, v, l.gran.Truncate(MinTime), MaxTime, ErrInvalid)
			return l.err
		}
		if l.gran.Truncate(v) != v {
			l.err = fmt.Errorf("columns: column %q: row %d: time %d not truncated to the granularity %s: %w", TimeColumn, l.rows, v, l.gran, ErrInvalid)
			return l.err
		}
		if l.rows == 0 {
			l.first = v
		}
		l.last = v
	}
	if l.vals == nil {
		l.vals = int64Pool.Get(l.chunkRows)
	}
	l.vals = append(l.vals, v)
	l.rows++
	if len(l.vals) == l.chunkRows {
		return l.flush()
	}
	return nil
}

func (l *LongWriter) flush() error {
	if len(l.vals) == 0 {
		return l.err
	}
	var planes bool
	l.raw, planes = appendInt64sV(l.raw[:0], l.vals, l.pc)
	if planes {
		l.cw.st.spec.enc = EncLongChunksV4
	}
	if err := l.cw.writeChunk(l.raw, len(l.vals)); err != nil && l.err == nil {
		l.err = err
	}
	l.vals = l.vals[:0]
	return l.err
}

// Rows returns the rows appended so far.
func (l *LongWriter) Rows() int { return l.rows }

// Size returns the bytes staged so far for the column's part; after Finish, the part's size.
func (l *LongWriter) Size() int64 { return l.cw.st.n }

func (l *LongWriter) finish() error {
	if l.finished {
		return l.err
	}
	l.finished = true
	if err := l.flush(); err != nil {
		return err
	}
	l.err = l.cw.finish()
	int64Pool.Put(l.vals)
	bytePool.Put(l.raw)
	l.vals, l.raw = nil, nil
	if l.err == nil && l.times != nil {
		l.err = l.times.finish()
	}
	return l.err
}

// DoubleWriter appends float64 values of a double metric.
type DoubleWriter struct {
	cw        chunkedWriter
	chunkRows int
	vals      []float64
	ints      []int64
	raw       []byte
	rows      int
	err       error
	finished  bool
	times     *LongWriter // a first/last metric's times (PartTimes), else nil
	tails     *blobWriter // a doubleSum metric's tails (PartTails), else nil
	tailBuf   []byte
	nulls     *roaring.Bitmap
	pc        *planeCoder // the planes form allowed (a version 4 part when used), else nil
}

// AppendNull appends a null row: the value stored is +0 (with an empty tail for a doubleSum
// metric, the time 0 for a first/last metric), and the row goes to the metric's nulls part (see
// Value.Null). A segment with a metric's null row is written as format version 3.
func (d *DoubleWriter) AppendNull() error {
	row := d.rows
	if err := d.append(0); err != nil {
		return err
	}
	if d.times != nil {
		if err := d.times.append(0); err != nil {
			d.err = err
			return err
		}
	}
	if d.tails != nil {
		if err := d.tails.append(nil); err != nil {
			d.err = err
			return err
		}
	}
	if d.nulls == nil {
		d.nulls = roaring.New()
	}
	d.nulls.Add(uint32(row))
	return nil
}

// Nulls returns the number of null rows appended so far.
func (d *DoubleWriter) Nulls() int {
	if d.nulls == nil {
		return 0
	}
	return int(d.nulls.GetCardinality())
}

// Append appends the next row's value (of a doubleSum metric: with an empty tail, an exact
// value). A first/last metric takes AppendTimed instead.
func (d *DoubleWriter) Append(v float64) error {
	if d.times != nil {
		if d.err == nil {
			d.err = fmt.Errorf("columns: column %q: a first/last metric takes AppendTimed: %w", d.cw.st.name, ErrState)
		}
		return d.err
	}
	return d.AppendSum(v, nil)
}

// AppendValues appends the next rows' values, as Append does each (of a doubleSum metric: each
// with an empty tail), copied into the chunk in bulk.
func (d *DoubleWriter) AppendValues(vs []float64) error {
	if d.times != nil {
		return d.Append(0) // the error Append gives
	}
	if d.tails != nil {
		for _, v := range vs {
			if err := d.AppendSum(v, nil); err != nil {
				return err
			}
		}
		return nil
	}
	if d.err != nil {
		return d.err
	}
	if d.finished {
		return fmt.Errorf("columns: column %q: append after finish: %w", d.cw.st.name, ErrState)
	}
	return appendBulk(&d.vals, &d.rows, d.chunkRows, vs, d.flush)
}

// appendBulk appends vs to a writer's chunk of values (vals, at most chunkRows), counting rows
// and flushing each chunk that fills: AppendValues' copy. A failed flush stops it (the writer
// keeps the error).
func appendBulk[T int64 | float64](vals *[]T, rows *int, chunkRows int, vs []T, flush func() error) error {
	for len(vs) > 0 {
		if *vals == nil {
			*vals = make([]T, 0, chunkRows)
		}
		n := min(len(vs), chunkRows-len(*vals))
		*vals = append(*vals, vs[:n]...)
		*rows += n
		vs = vs[n:]
		if len(*vals) == chunkRows {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return nil
}

// AppendSum appends the next row's value of a doubleSum metric and its exactness tail: the
// terms that, added to v, give the exact sum it was rounded from (agg.ExactSum.Tail). On other
// double metrics the tail must be empty.
func (d *DoubleWriter) AppendSum(v float64, tail []float64) error {
	if d.tails == nil {
		if len(tail) > 0 {
			return fmt.Errorf("columns: column %q: a tail on a metric that stores none: %w", d.cw.st.name, ErrState)
		}
		return d.append(v)
	}
	if err := d.append(v); err != nil {
		return err
	}
	d.tailBuf = d.tailBuf[:0]
	for _, x := range tail {
		d.tailBuf = binary.LittleEndian.AppendUint64(d.tailBuf, math.Float64bits(x))
	}
	if err := d.tails.append(d.tailBuf); err != nil {
		d.err = err
	}
	return d.err
}

// AppendTimed appends the next row's value of a first/last metric with the time stored with it.
func (d *DoubleWriter) AppendTimed(v float64, t int64) error {
	if d.times == nil {
		return fmt.Errorf("columns: column %q: AppendTimed on a column that stores no times: %w", d.cw.st.name, ErrState)
	}
	if err := d.append(v); err != nil {
		return err
	}
	if err := d.times.append(t); err != nil {
		d.err = err
	}
	return d.err
}

func (d *DoubleWriter) append(v float64) error {
	if d.err != nil {
		return d.err
	}
	if d.finished {
		return fmt.Errorf("columns: column %q: append after finish: %w", d.cw.st.name, ErrState)
	}
	if d.vals == nil {
		d.vals = float64Pool.Get(d.chunkRows)
	}
	d.vals = append(d.vals, v)
	d.rows++
	if len(d.vals) == d.chunkRows {
		return d.flush()
	}
	return nil
}

func (d *DoubleWriter) flush() error {
	if len(d.vals) == 0 {
		return d.err
	}
	var planes bool
	d.raw, planes = appendFloat64sV(d.raw[:0], d.vals, &d.ints, d.pc)
	if planes {
		d.cw.st.spec.enc = EncDoubleChunksV4
	}
	if err := d.cw.writeChunk(d.raw, len(d.vals)); err != nil && d.err == nil {
		d.err = err
	}
	d.vals = d.vals[:0]
	return d.err
}

// Rows returns the rows appended so far.
func (d *DoubleWriter) Rows() int { return d.rows }

// Size returns the bytes staged so far for the column's part.
func (d *DoubleWriter) Size() int64 { return d.cw.st.n }

func (d *DoubleWriter) finish() error {
	if d.finished {
		return d.err
	}
	d.finished = true
	if err := d.flush(); err != nil {
		return err
	}
	d.err = d.cw.finish()
	float64Pool.Put(d.vals)
	bytePool.Put(d.raw)
	int64Pool.Put(d.ints)
	d.vals, d.raw, d.ints = nil, nil, nil
	if d.err == nil && d.times != nil {
		d.err = d.times.finish()
	}
	if d.err == nil && d.tails != nil {
		d.err = d.tails.finishBlobs()
	}
	return d.err
}

// blobWriter appends byte strings in chunks closed at chunkRows rows or blobChunkTarget bytes.
type blobWriter struct {
	cw        chunkedWriter
	chunkRows int
	lens      []int64
	data      []byte
	raw       []byte
	rows      int
	err       error
	finished  bool
}

func (b *blobWriter) append(v []byte) error {
	if b.err != nil {
		return b.err
	}
	if b.finished {
		return fmt.Errorf("columns: column %q: append after finish: %w", b.cw.st.name, ErrState)
	}
	if len(v) > MaxValueBytes {
		b.err = fmt.Errorf("columns: column %q: row %d: value of %d bytes, at most %d: %w", b.cw.st.name, b.rows, len(v), MaxValueBytes, ErrInvalid)
		return b.err
	}
	if b.lens == nil {
		b.lens = int64Pool.Get(b.chunkRows)
	}
	b.lens = append(b.lens, int64(len(v)))
	if b.data == nil {
		b.data = bytePool.Get(max(len(v), 4096))
	}
	// Double (the pool's grow): append's growth by a quarter at chunk sizes leaves four times
	// the chunk behind as garbage, per raw column.
	b.data = bytePool.Grow(b.data, len(v))
	b.data = append(b.data, v...)
	b.rows++
	if len(b.lens) == b.chunkRows || len(b.data) >= blobChunkTarget {
		return b.flush()
	}
	return nil
}

func (b *blobWriter) flush() error {
	if len(b.lens) == 0 {
		return b.err
	}
	b.raw = bytePool.Regrow(b.raw, len(b.data)+9*len(b.lens)+16)
	b.raw = appendBlobs(b.raw, b.lens, b.data)
	if err := b.cw.writeChunk(b.raw, len(b.lens)); err != nil && b.err == nil {
		b.err = err
	}
	b.lens, b.data = b.lens[:0], b.data[:0]
	if cap(b.raw) > 4*blobChunkTarget {
		// Do not keep one huge value's buffers (the pool drops those past its largest class).
		bytePool.Put(b.raw)
		bytePool.Put(b.data)
		b.raw, b.data = nil, nil
	}
	return b.err
}

// Rows returns the rows appended so far.
func (b *blobWriter) Rows() int { return b.rows }

// Size returns the bytes staged so far for the column's values part.
func (b *blobWriter) Size() int64 { return b.cw.st.n }

func (b *blobWriter) finishBlobs() error {
	if b.finished {
		return b.err
	}
	b.finished = true
	if err := b.flush(); err != nil {
		return err
	}
	b.err = b.cw.finish()
	int64Pool.Put(b.lens)
	bytePool.Put(b.data)
	bytePool.Put(b.raw)
	b.lens, b.data, b.raw = nil, nil, nil
	return b.err
}

// RawWriter appends the strings of a raw dimension.
type RawWriter struct {
	blobWriter
	nullsSt *stage
	nulls   *roaring.Bitmap
}

// Append appends the next row's value.
func (r *RawWriter) Append(v string) error {
	return r.append(unsafeBytes(v))
}

// AppendBytes appends the next row's value, copied: v may be reused once it returns.
func (r *RawWriter) AppendBytes(v []byte) error { return r.append(v) }

// AppendNull appends a null row.
func (r *RawWriter) AppendNull() error {
	if r.err == nil && !r.finished {
		r.nulls.Add(uint32(r.rows))
	}
	return r.append(nil)
}

func (r *RawWriter) finish() error {
	if r.finished {
		return r.err
	}
	if err := r.finishBlobs(); err != nil {
		return err
	}
	r.nulls.RunOptimize()
	if _, err := r.nulls.WriteTo(r.nullsSt); err != nil {
		r.err = r.nullsSt.fail(err)
	}
	r.nulls = nil
	return r.err
}
