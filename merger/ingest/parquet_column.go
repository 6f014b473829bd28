package ingest

import (
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"
)

// The columns of a Parquet file as parquetReader reads them: one page of values at a time.

// How the time column is read.
type timeHow uint8

const (
	timeNone   timeHow = iota
	timeEpoch          // an integer: value*timeMul/timeDiv milliseconds
	timeString         // text, parsed by timestamp.format
)

// pqColumn is one column read: its type, and its cursor in the current row group.
type pqColumn struct {
	name     string // the field
	leaf     *parquet.Column
	index    int // the leaf's column index in a row group
	kind     parquet.Kind
	logical  *format.LogicalType
	typeName string
	intType  bool // an integer logical type (or none)
	unsigned bool
	isFloat  bool
	maxDef   byte
	maxRep   byte
	elemDef  byte // for a list: the definition level at which an element exists

	wantStr    bool // dimensions read it: strs
	wantScalar bool // the time or a metric reads it: i64/u64/f64/raw

	timeHow          timeHow
	timeMul, timeDiv int64

	// The current page.
	pages parquet.Pages
	page  parquet.Page
	def   []byte
	rep   []byte
	li, n int // the next level, and the levels of the page
	vi    int // the next value
	nvals int // the values of the page
	// Its values (or, when idx is set, the dictionary's values, indexed by idx).
	idx   []int32
	bools []byte
	i32   []int32
	i64s  []int64
	f32   []float32
	f64s  []float64
	ba    []byte
	offs  []uint32
	vlen  int // the number of values in the arrays above
	dict  parquet.Dictionary
	dstrs []string // the dictionary's values as strings, filled as they are used
	dhave []bool

	intern map[string]string

	// The current row.
	null bool
	strs []string
	i64  int64
	u64  uint64
	big  bool // an unsigned value past int64: u64
	f64  float64
	raw  []byte // the bytes of a BYTE_ARRAY value, valid until the next row
}

// setType records the column's type.
func (c *pqColumn) setType(t parquet.Type) {
	c.kind = t.Kind()
	c.logical = t.LogicalType()
	if c.logical != nil && c.logical.Value == nil {
		c.logical = nil
	}
	c.typeName = c.kind.String()
	if c.logical != nil {
		c.typeName += " " + c.logical.String()
	}
	c.intType = true
	if c.logical != nil {
		switch lt := c.logical.Value.(type) {
		case *format.IntType:
			c.unsigned = !lt.IsSigned
		default:
			c.intType = false
		}
	}
	c.isFloat = c.kind == parquet.Float || c.kind == parquet.Double
}

// isString reports whether the column holds text: a BYTE_ARRAY with no logical type, or a
// STRING or ENUM one.
func (c *pqColumn) isString() bool {
	if c.kind != parquet.ByteArray {
		return false
	}
	if c.logical == nil {
		return true
	}
	switch c.logical.Value.(type) {
	case *format.StringType, *format.EnumType:
		return true
	}
	return false
}

func (c *pqColumn) isInt() bool {
	return (c.kind == parquet.Int32 || c.kind == parquet.Int64) && c.intType
}

func (c *pqColumn) dimOK() bool {
	return c.isString() || c.isInt() || c.kind == parquet.Boolean && c.intType
}

func (c *pqColumn) numberOK() bool {
	return c.isString() || c.isInt() || c.isFloat && c.intType
}

func (c *pqColumn) sketchOK() bool {
	return c.isString() || c.isInt() || c.kind == parquet.Boolean && c.intType
}

func (c *pqColumn) closePages() {
	if c.page != nil {
		parquet.Release(c.page)
		c.page = nil
	}
	if c.pages != nil {
		_ = c.pages.Close()
		c.pages = nil
	}
	c.li, c.n = 0, 0
}

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
