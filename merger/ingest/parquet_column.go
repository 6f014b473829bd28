package ingest

import (
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/parquet-go/parquet-go"
)

// How a column's pages are read: one page of values at a time, a row's values taken from it.

// errCorrupt is a column chunk whose levels and values do not agree.
var errCorrupt = errors.New("levels and values do not agree")

// load reads the next page of the column chunk: io.EOF at its end.
func (c *pqColumn) load() error {
	if c.page != nil {
		parquet.Release(c.page)
		c.page = nil
	}
	if c.pages == nil {
		return io.EOF
	}
	pg, err := c.pages.ReadPage()
	if err != nil {
		return err
	}
	c.page = pg
	c.li, c.vi = 0, 0
	c.def, c.rep = pg.DefinitionLevels(), pg.RepetitionLevels()
	if c.maxDef > 0 {
		c.n = len(c.def)
		c.nvals = 0
		for _, d := range c.def {
			if d > c.maxDef {
				return fmt.Errorf("definition level %d, at most %d", d, c.maxDef)
			}
			if d == c.maxDef {
				c.nvals++
			}
		}
	} else {
		c.n = int(pg.NumValues())
		c.nvals = c.n
	}
	if c.maxRep > 0 {
		if len(c.rep) != c.n {
			return fmt.Errorf("%d repetition levels, %d definition levels", len(c.rep), c.n)
		}
		for _, r := range c.rep {
			if r > c.maxRep {
				return fmt.Errorf("repetition level %d, at most %d", r, c.maxRep)
			}
		}
	}
	data := pg.Data()
	c.idx = nil
	values := data
	if d := pg.Dictionary(); d != nil {
		c.idx = data.Int32()
		if len(c.idx) < c.nvals {
			return errCorrupt
		}
		if d != c.dict {
			c.dict = d
			c.dstrs, c.dhave = c.dstrs[:0], c.dhave[:0]
		}
		values = d.Page().Data()
	} else if len(c.dstrs) > 0 {
		c.dict, c.dstrs, c.dhave = nil, c.dstrs[:0], c.dhave[:0]
	}
	switch c.kind {
	case parquet.Boolean:
		c.bools = values.Boolean()
		c.vlen = 8 * len(c.bools)
	case parquet.Int32:
		c.i32 = values.Int32()
		c.vlen = len(c.i32)
	case parquet.Int64:
		c.i64s = values.Int64()
		c.vlen = len(c.i64s)
	case parquet.Float:
		c.f32 = values.Float()
		c.vlen = len(c.f32)
	case parquet.Double:
		c.f64s = values.Double()
		c.vlen = len(c.f64s)
	case parquet.ByteArray:
		c.ba, c.offs = values.ByteArray()
		c.vlen = max(len(c.offs)-1, 0)
	case parquet.Int96, parquet.FixedLenByteArray:
		return fmt.Errorf("values of type %s", c.kind)
	default:
		return fmt.Errorf("values of type %s", c.kind)
	}
	if c.idx != nil {
		if c.dict.Len() > c.vlen {
			return errCorrupt
		}
		c.vlen = c.dict.Len()
		if c.wantStr && len(c.dstrs) < c.vlen {
			c.dstrs = append(c.dstrs[:0], make([]string, c.vlen)...)
			c.dhave = append(c.dhave[:0], make([]bool, c.vlen)...)
		}
	} else if c.vlen < c.nvals {
		return errCorrupt
	}
	return nil
}

// ensure loads pages until one has a level left.
func (c *pqColumn) ensure() error {
	for c.li == c.n {
		if err := c.load(); err != nil {
			if err == io.EOF {
				return errors.New("fewer values than the row group has rows")
			}
			return err
		}
	}
	return nil
}

// next reads the column's value(s) of the next row.
func (c *pqColumn) next() error {
	c.strs = c.strs[:0]
	c.null = true
	if err := c.ensure(); err != nil {
		return err
	}
	if c.maxRep == 0 {
		present := c.maxDef == 0 || c.def[c.li] == c.maxDef
		c.li++
		if present {
			c.null = false
			return c.take()
		}
		return nil
	}
	if c.rep[c.li] != 0 {
		return errors.New("a row starts with a repetition level other than 0")
	}
	for first := true; ; first = false {
		if c.li == c.n {
			if err := c.load(); err == io.EOF {
				return nil
			} else if err != nil {
				return err
			}
			if c.n == 0 {
				continue
			}
		}
		if !first && c.rep[c.li] == 0 {
			return nil
		}
		d := c.def[c.li]
		c.li++
		switch {
		case d == c.maxDef:
			c.null = false
			if err := c.take(); err != nil {
				return err
			}
		case d >= c.elemDef:
			c.null = false
			c.strs = append(c.strs, "") // a null element
		}
	}
}

// take reads the next value.
func (c *pqColumn) take() error {
	j := c.vi
	c.vi++
	if j >= c.nvals {
		return errCorrupt
	}
	if c.idx != nil {
		j = int(c.idx[j])
	}
	if j < 0 || j >= c.vlen {
		return fmt.Errorf("value %d of %d", j, c.vlen)
	}
	c.big = false
	switch c.kind {
	case parquet.Boolean:
		c.i64 = int64(c.bools[j>>3] >> (j & 7) & 1)
	case parquet.Int32:
		if c.unsigned {
			c.i64 = int64(uint32(c.i32[j]))
		} else {
			c.i64 = int64(c.i32[j])
		}
	case parquet.Int64:
		c.i64 = c.i64s[j]
		if c.unsigned && c.i64 < 0 {
			c.big, c.u64 = true, uint64(c.i64)
		}
	case parquet.Float:
		c.f64 = float64(c.f32[j])
	case parquet.Double:
		c.f64 = c.f64s[j]
	case parquet.ByteArray:
		a, b := c.offs[j], c.offs[j+1]
		if a > b || int(b) > len(c.ba) {
			return fmt.Errorf("value %d at bytes %d..%d of %d", j, a, b, len(c.ba))
		}
		c.raw = c.ba[a:b:b]
	case parquet.Int96, parquet.FixedLenByteArray:
		return fmt.Errorf("values of type %s", c.kind)
	default:
		return fmt.Errorf("values of type %s", c.kind)
	}
	if c.wantStr {
		if c.idx != nil {
			if !c.dhave[j] {
				c.dstrs[j], c.dhave[j] = c.str(), true
			}
			c.strs = append(c.strs, c.dstrs[j])
		} else {
			c.strs = append(c.strs, c.str())
		}
	}
	return nil
}

// maxIntern is the most strings a column interns before it starts afresh.
const maxIntern = 1 << 16

// str returns the current value as text, interned: a string repeated in the column is
// allocated once.
func (c *pqColumn) str() string {
	var buf [24]byte
	b := c.raw
	if c.kind != parquet.ByteArray {
		b = c.appendText(buf[:0])
	}
	if s, ok := c.intern[string(b)]; ok {
		return s
	}
	if c.intern == nil || len(c.intern) >= maxIntern {
		c.intern = make(map[string]string)
	}
	s := string(b)
	c.intern[s] = s
	return s
}

// text returns the current value as text (not interned).
func (c *pqColumn) text() string {
	if c.kind == parquet.ByteArray {
		return string(c.raw)
	}
	return string(c.appendText(nil))
}

// appendText appends the current value's text: as CSV would give it.
func (c *pqColumn) appendText(dst []byte) []byte {
	switch {
	case c.kind == parquet.ByteArray:
		return append(dst, c.raw...)
	case c.kind == parquet.Boolean:
		return strconv.AppendBool(dst, c.i64 != 0)
	case c.big:
		return strconv.AppendUint(dst, c.u64, 10)
	case c.kind == parquet.Float:
		return strconv.AppendFloat(dst, c.f64, 'g', -1, 32)
	case c.isFloat:
		return strconv.AppendFloat(dst, c.f64, 'g', -1, 64)
	}
	return strconv.AppendInt(dst, c.i64, 10)
}
