package columns

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/writeout/writeout/internal/segfmt"
)

// numWriter appends the values of a numeric column: int64 for __time and long metrics, float64
// for double metrics. writer.Time, writer.Long and writer.Double return one.
type numWriter[T Number] struct {
	cw        chunkedWriter
	chunkRows int
	vals      []T
	ints      []int64 // encode's scratch
	raw       []byte
	rows      int
	err       error
	finished  bool
	metric    bool              // a metric's values: AppendNull allowed
	times     *numWriter[int64] // a first/last metric's times (segfmt.PartTimes), else nil
	pc        *planeCoder       // the planes form allowed (a version 4 part when used), else nil
	nulls     *roaring.Bitmap
	// encode appends a chunk's values to dst, reporting whether it took the planes form
	// (encoding v4).
	encode func(dst []byte, vals []T, scratch *[]int64, pc *planeCoder) ([]byte, bool)
	v4     segfmt.Encoding

	// __time only (isTime): every value is truncated to gran, in order; first and last.
	isTime      bool
	gran        Granularity
	first, last int64

	// doubleSum only: the exactness tails (segfmt.PartTails), else nil.
	tails   *blobWriter
	tailBuf []byte
}

// newNumWriter returns a writer of the values part cw.
func newNumWriter[T Number](cw chunkedWriter, chunkRows int, pc *planeCoder) *numWriter[T] {
	w := &numWriter[T]{cw: cw, chunkRows: chunkRows, pc: pc}
	w.encode, w.v4 = numEncoder[T]()
	return w
}

// Append implements segwrite.NumWriter.
func (w *numWriter[T]) Append(v T) error {
	if w.times != nil {
		return w.timedErr()
	}
	if w.tails != nil {
		return w.AppendSum(v, nil)
	}
	return w.append(v)
}

// AppendTimed implements segwrite.NumWriter.
func (w *numWriter[T]) AppendTimed(v T, t int64) error {
	if w.times == nil {
		return fmt.Errorf("columns: column %q: AppendTimed on a column that stores no times: %w", w.cw.st.name, ErrState)
	}
	if err := w.append(v); err != nil {
		return err
	}
	if err := w.times.append(t); err != nil {
		w.err = err
	}
	return w.err
}

// AppendSum implements segwrite.NumWriter.
func (w *numWriter[T]) AppendSum(v T, tail []float64) error {
	if w.tails == nil {
		if len(tail) > 0 {
			return fmt.Errorf("columns: column %q: a tail on a metric that stores none: %w", w.cw.st.name, ErrState)
		}
		return w.append(v)
	}
	if err := w.append(v); err != nil {
		return err
	}
	w.tailBuf = w.tailBuf[:0]
	for _, x := range tail {
		w.tailBuf = binary.LittleEndian.AppendUint64(w.tailBuf, math.Float64bits(x))
	}
	if err := w.tails.append(w.tailBuf); err != nil {
		w.err = err
	}
	return w.err
}

// AppendValues implements segwrite.NumWriter.
func (w *numWriter[T]) AppendValues(vs []T) error {
	if w.times != nil {
		return w.timedErr()
	}
	if w.tails != nil {
		for _, v := range vs {
			if err := w.AppendSum(v, nil); err != nil {
				return err
			}
		}
		return nil
	}
	if w.err != nil {
		return w.err
	}
	if w.finished {
		return fmt.Errorf("columns: column %q: append after finish: %w", w.cw.st.name, ErrState)
	}
	if w.isTime && !w.timesOK(vs) {
		// A time out of order, out of range or not truncated: value by value, for the error
		// that names its row.
		for _, v := range vs {
			if err := w.append(v); err != nil {
				return err
			}
		}
		return nil
	}
	if w.isTime && len(vs) > 0 {
		if w.rows == 0 {
			w.first = int64(vs[0])
		}
		w.last = int64(vs[len(vs)-1])
	}
	return appendBulk(&w.vals, &w.rows, w.chunkRows, vs, w.flush)
}

// timesOK reports whether vs, the next values of __time, pass append's checks: in order after
// the last time, within the times a segment can hold, truncated to the granularity.
func (w *numWriter[T]) timesOK(vs []T) bool {
	if len(vs) == 0 {
		return true
	}
	last := int64(vs[0])
	if w.rows > 0 {
		last = w.last
	}
	lo, hi := w.gran.Truncate(MinTime), MaxTime
	if w.gran == GranularityNone {
		// In order after last, every value lies between the first and the last: one
		// comparison a value, and the range checked at the ends.
		if int64(vs[0]) < max(last, lo) || int64(vs[len(vs)-1]) > hi {
			return false
		}
		last = int64(vs[0])
		for _, x := range vs[1:] {
			v := int64(x)
			if v < last {
				return false
			}
			last = v
		}
		return true
	}
	for _, x := range vs {
		v := int64(x)
		if v < last || v < lo || v > hi || w.gran.Truncate(v) != v {
			return false
		}
		last = v
	}
	return true
}

// appendBulk appends vs to a writer's chunk of values (vals, at most chunkRows), counting rows
// and flushing each chunk that fills: AppendValues' copy. A failed flush stops it (the writer
// keeps the error).
func appendBulk[T Number](vals *[]T, rows *int, chunkRows int, vs []T, flush func() error) error {
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

// AppendNull implements segwrite.NumWriter.
func (w *numWriter[T]) AppendNull() error {
	if !w.metric {
		if w.err == nil {
			w.err = fmt.Errorf("columns: column %q: AppendNull on a column that holds no nulls: %w", w.cw.st.name, ErrState)
		}
		return w.err
	}
	row := w.rows
	if err := w.append(0); err != nil {
		return err
	}
	if w.times != nil {
		if err := w.times.append(0); err != nil {
			w.err = err
			return err
		}
	}
	if w.tails != nil {
		if err := w.tails.append(nil); err != nil {
			w.err = err
			return err
		}
	}
	if w.nulls == nil {
		w.nulls = roaring.New()
	}
	w.nulls.Add(uint32(row))
	return nil
}

// nullCount returns the number of null rows appended so far.
func (w *numWriter[T]) nullCount() int {
	if w.nulls == nil {
		return 0
	}
	return int(w.nulls.GetCardinality())
}

func (w *numWriter[T]) timedErr() error {
	if w.err == nil {
		w.err = fmt.Errorf("columns: column %q: a first/last metric takes AppendTimed: %w", w.cw.st.name, ErrState)
	}
	return w.err
}

func (w *numWriter[T]) append(v T) error {
	if w.err != nil {
		return w.err
	}
	if w.finished {
		return fmt.Errorf("columns: column %q: append after finish: %w", w.cw.st.name, ErrState)
	}
	if w.isTime {
		if err := w.checkTime(int64(v)); err != nil {
			return err
		}
	}
	if w.vals == nil {
		w.vals = numPool[T]().Get(w.chunkRows)
	}
	w.vals = append(w.vals, v)
	w.rows++
	if len(w.vals) == w.chunkRows {
		return w.flush()
	}
	return nil
}

// checkTime checks the next time v of __time and takes it as the last (the first too for row 0).
func (w *numWriter[T]) checkTime(v int64) error {
	if w.rows > 0 && v < w.last {
		w.err = fmt.Errorf("columns: column %q: row %d: time %d before the previous row's %d: rows must come in time order: %w", TimeColumn, w.rows, v, w.last, ErrInvalid)
		return w.err
	}
	if !w.gran.validTime(v) {
		w.err = fmt.Errorf("columns: column %q: row %d: time %d outside the times a segment can hold, [%d, %d] (MinTime and MaxTime, truncated): %w", TimeColumn, w.rows, v, w.gran.Truncate(MinTime), MaxTime, ErrInvalid)
		return w.err
	}
	if w.gran.Truncate(v) != v {
		w.err = fmt.Errorf("columns: column %q: row %d: time %d not truncated to the granularity %s: %w", TimeColumn, w.rows, v, w.gran, ErrInvalid)
		return w.err
	}
	if w.rows == 0 {
		w.first = v
	}
	w.last = v
	return nil
}

func (w *numWriter[T]) flush() error {
	if len(w.vals) == 0 {
		return w.err
	}
	var planes bool
	w.raw, planes = w.encode(w.raw[:0], w.vals, &w.ints, w.pc)
	if planes {
		w.cw.st.spec.enc = w.v4
	}
	if err := w.cw.writeChunk(w.raw, len(w.vals)); err != nil && w.err == nil {
		w.err = err
	}
	w.vals = w.vals[:0]
	return w.err
}

func (w *numWriter[T]) finish() error {
	if w.finished {
		return w.err
	}
	w.finished = true
	if err := w.flush(); err != nil {
		return err
	}
	w.err = w.cw.finish()
	numPool[T]().Put(w.vals)
	bytePool.Put(w.raw)
	int64Pool.Put(w.ints)
	w.vals, w.raw, w.ints = nil, nil, nil
	if w.err == nil && w.times != nil {
		w.err = w.times.finish()
	}
	if w.err == nil && w.tails != nil {
		w.err = w.tails.finishBlobs()
	}
	return w.err
}
