package merger

import (
	"encoding/binary"
	"fmt"
	"math"
	"sort"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/columns/agg"
)

// Rollup in the Builder: a row whose key (truncated time, dimension values) is held combines
// into the stored row through each metric's kernel in columns/agg.

// rowKey returns the rollup key of a row: its truncated time and dimension values.
func (b *Builder) rowKey(t int64, r columns.Row) []byte {
	k := binary.LittleEndian.AppendUint64(b.keyBuf[:0], uint64(t))
	for i, vals := range r.Dims {
		if b.dims[i].kind == kindMulti && len(vals) > 1 {
			b.sorted = append(b.sorted[:0], vals...)
			sort.Strings(b.sorted)
			vals = b.sorted
		}
		k = binary.AppendUvarint(k, uint64(len(vals)))
		for _, v := range vals {
			k = binary.AppendUvarint(k, uint64(len(v)))
			k = append(k, v...)
		}
	}
	b.keyBuf = k
	return k
}

// combine rolls row r into stored row old, through each metric's accumulator of columns/agg
// (which alone decides what a null means), resumed from the stored row.
func (b *Builder) combine(old uint32, r columns.Row) error {
	for i, m := range b.mets {
		v := m.input(r.Metrics[i])
		k := m.agg.Kind
		var t int64
		if m.agg.Timed() {
			t = m.times[old]
		}
		wasNull := m.isNull(old)
		switch m.agg.Type {
		case agg.Long:
			acc := agg.LongAccOf(k, m.longs[old], m.carry[old], t, wasNull)
			acc.Add(k, v.Long, r.Time, v.Null)
			m.longs[old] = acc.V
			if !acc.Set {
				m.longs[old] = 0
			}
			if c := acc.C - m.carry[old]; c != 0 {
				m.addCarry(old, c)
			}
			if m.agg.Timed() {
				m.times[old] = acc.Time()
			}
			m.setNull(old, !acc.Set)
		case agg.Double:
			if v.Null && !wasNull {
				// agg skips a null: the stored row stays as it is, bytes included (one
				// value's -0 is not rounded through an exact sum to +0).
				continue
			}
			if k == agg.Sum && wasNull && !v.Null {
				// The row's one value so far: stored as it came (as a merge stores one value).
				m.dbls[old] = v.Double
				m.setNull(old, false)
				continue
			}
			acc := agg.NewDoubleAcc(k)
			if !wasNull {
				if s := m.sums[old]; s != nil {
					acc.Sum = *s
					acc.Set = true
				} else {
					acc.Add(k, m.dbls[old], t, nil, false)
				}
			}
			acc.Add(k, v.Double, r.Time, nil, v.Null)
			if k == agg.Sum && !wasNull && !v.Null {
				// Combined from several: its exact sum is kept.
				if m.sums == nil {
					m.sums = map[uint32]*agg.ExactSum{}
				}
				if m.sums[old] == nil {
					m.sums[old] = &agg.ExactSum{}
				}
				*m.sums[old] = acc.Sum
			}
			m.dbls[old] = acc.Value(k)
			if m.agg.Timed() {
				m.times[old] = acc.Time()
			}
			m.setNull(old, !acc.Set)
		case agg.SketchType:
			// A row's sketch is the one given, or the sketch of its values of the source
			// dimension: those equal the stored row's, whose dimensions are equal.
			// The row is now combined from several: its sketch is materialized and kept in
			// canonical form (agg.Canonicalize), as a merge of the rows' sketches would be.
			sk := m.sks[old]
			if sk == nil {
				sk = m.kind.New()
				if err := b.insertValues(sk, old, m.src); err != nil {
					return fmt.Errorf("%w: builder: metric %q: %w", ErrInvalid, m.met.Name, err)
				}
				m.sks[old] = sk
			}
			var err error
			if v.Sketch == nil {
				err = b.insertValues(sk, old, m.src)
			} else {
				err = sk.Merge(v.Sketch)
			}
			if err != nil {
				return fmt.Errorf("%w: builder: metric %q: %w", ErrInvalid, m.met.Name, err)
			}
			sk.Compact()
		}
	}
	return nil
}

// addCarry adds c to the carries out of int64 of row's sum (agg.AddLong). A row whose carries
// add up to 0 again holds its exact sum.
func (m *bmet) addCarry(row uint32, c int64) {
	if m.carry == nil {
		m.carry = map[uint32]int64{}
	}
	if m.carry[row] += c; m.carry[row] == 0 {
		delete(m.carry, row)
	}
}

// overflow returns, when some row's exact sum does not fit an int64, an error wrapping
// agg.ErrOverflow naming the first such row (in the order rows were added) and its time.
func (b *Builder) overflow(m *bmet) error {
	if len(m.carry) == 0 {
		return nil
	}
	row := uint32(math.MaxUint32)
	for r := range m.carry {
		row = min(row, r)
	}
	return fmt.Errorf("row %d (time %d, truncated): %w", row, b.times[row], agg.OverflowError(m.longs[row], m.carry[row]))
}

// insertValues adds row's values of dimension k to sk; k < 0 adds nothing.
func (b *Builder) insertValues(sk agg.Sketch, row uint32, k int) error {
	if k < 0 {
		return nil
	}
	d := b.dims[k]
	switch d.kind {
	case kindRaw:
		if d.rawOK[row] {
			return sk.Insert([]byte(d.raw[row]))
		}
	case kindSingle, kindMulti:
		for _, id := range d.rowIDs(int(row)) {
			if id != 0 {
				if err := sk.Insert([]byte(d.vals[id])); err != nil {
					return err
				}
			}
		}
	}
	return nil
}
