package ingest

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"reflect"

	"github.com/klauspost/compress/gzip"
	"github.com/parquet-go/parquet-go/deprecated"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
)

// The checks of a Parquet file made before parquet-go reads it.
//
// parquet-go allocates by the lengths and counts it reads from a file: the footer's length
// (2 GiB for 4 bytes of a 5.7 KB file), a thrift list's count, a page's compressed and
// uncompressed sizes, the decoded size an LZ4 block or a snappy preamble claims. So every such
// length is checked here first, against the bytes that hold it (the file, the footer, the
// column chunk) or, for what decompression produces, against the page's uncompressed size and
// what its codec can produce from its compressed bytes:
//
//	file:     | "PAR1" | column chunks ... | footer (thrift FileMetaData) | footer length u32 | "PAR1" |
//	chunk:    | page header (thrift) | page data | page header | page data | ...
//
// The row counts must agree too, or rows would be lost without an error: the file's rows are
// the sum of its row groups'; a column chunk of a column that is not repeated has one value
// (or null) per row of its group, and its pages' values add up to its own count.

// Limits of what a Parquet file may ask for, whatever its size.
const (
	// maxFooterBytes is the largest footer read.
	maxFooterBytes = 256 << 20
	// maxPageBytes is the largest page, compressed or not (a page holds at least one value,
	// at most columns.MaxValueBytes).
	maxPageBytes = 256 << 20
	// maxPageValues is the most values (levels) of a page: what its levels and values are
	// allocated by, which run-length encoding does not bound by the page's bytes.
	maxPageValues = 1 << 26
	// maxPageHeaderBytes is the largest page header (its statistics hold values).
	maxPageHeaderBytes = 16 << 20
	// maxThriftDepth is the deepest nesting of thrift structs, lists and maps.
	maxThriftDepth = 64
	// maxThriftAlloc bounds what decoding a thrift struct may allocate for its lists.
	maxThriftAlloc = 1 << 30
)

// errShort is a thrift struct that goes on past the bytes given.
var errShort = errors.New("truncated")

// thriftScan walks the thrift compact-protocol struct at the start of b without decoding it:
// every list, set and map count and every binary length must fit in the bytes left, so that
// decoding it allocates at most its bytes times the largest Go element. It returns the
// struct's length in bytes and the elements of its lists, sets and maps; errShort when b ends
// inside it.
func thriftScan(b []byte) (n int, elems int64, err error) {
	s := thriftScanner{b: b}
	if err := s.structure(); err != nil {
		return 0, 0, err
	}
	return s.off, s.elems, nil
}

type thriftScanner struct {
	b     []byte
	off   int
	elems int64
	depth int
}

func (s *thriftScanner) left() int { return len(s.b) - s.off }

func (s *thriftScanner) byte() (byte, error) {
	if s.off >= len(s.b) {
		return 0, errShort
	}
	c := s.b[s.off]
	s.off++
	return c, nil
}

func (s *thriftScanner) uvarint() (uint64, error) {
	var v uint64
	for shift := 0; shift < 70; shift += 7 {
		c, err := s.byte()
		if err != nil {
			return 0, err
		}
		v |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return v, nil
		}
	}
	return 0, errors.New("varint over 10 bytes")
}

func (s *thriftScanner) skip(n uint64) error {
	if n > uint64(s.left()) {
		return errShort
	}
	s.off += int(n)
	return nil
}

// count reads a count of elements of at least one byte each.
func (s *thriftScanner) count(n uint64, bytesEach int) error {
	if n > uint64(s.left()/bytesEach) {
		return errShort // past the bytes given (a page header's caller reads more, up to its limit)
	}
	s.elems += int64(n)
	return nil
}

func (s *thriftScanner) structure() error {
	if s.depth++; s.depth > maxThriftDepth {
		return fmt.Errorf("thrift structs nested over %d deep", maxThriftDepth)
	}
	for {
		c, err := s.byte()
		if err != nil {
			return err
		}
		if c == 0 { // STOP
			s.depth--
			return nil
		}
		if c>>4 == 0 { // a field id of its own
			if _, err := s.uvarint(); err != nil {
				return err
			}
		}
		if err := s.value(c&0xf, false); err != nil {
			return err
		}
	}
}

// value skips a value of compact type t (an element of a list when elem: a bool is a byte).
func (s *thriftScanner) value(t byte, elem bool) error {
	switch t {
	case 1, 2: // bool: in the field header, or a byte in a list
		if elem {
			_, err := s.byte()
			return err
		}
		return nil
	case 3: // i8
		_, err := s.byte()
		return err
	case 4, 5, 6: // i16, i32, i64
		_, err := s.uvarint()
		return err
	case 7: // double
		return s.skip(8)
	case 8: // binary
		n, err := s.uvarint()
		if err != nil {
			return err
		}
		return s.skip(n)
	case 9, 10: // list, set
		h, err := s.byte()
		if err != nil {
			return err
		}
		n := uint64(h >> 4)
		if n == 15 {
			if n, err = s.uvarint(); err != nil {
				return err
			}
		}
		if err := s.count(n, 1); err != nil {
			return err
		}
		if s.depth++; s.depth > maxThriftDepth {
			return fmt.Errorf("thrift structs nested over %d deep", maxThriftDepth)
		}
		for range n {
			if err := s.value(h&0xf, true); err != nil {
				return err
			}
		}
		s.depth--
		return nil
	case 11: // map
		n, err := s.uvarint()
		if err != nil || n == 0 {
			return err
		}
		kv, err := s.byte()
		if err != nil {
			return err
		}
		if err := s.count(n, 2); err != nil {
			return err
		}
		if s.depth++; s.depth > maxThriftDepth {
			return fmt.Errorf("thrift structs nested over %d deep", maxThriftDepth)
		}
		for range n {
			if err := s.value(kv>>4, true); err != nil {
				return err
			}
			if err := s.value(kv&0xf, true); err != nil {
				return err
			}
		}
		s.depth--
		return nil
	case 12: // struct
		return s.structure()
	case 13: // uuid
		return s.skip(16)
	}
	return fmt.Errorf("thrift type %d", t)
}

// maxElem is the largest Go element of a slice reachable from the format's types: what one
// list element of a footer or a page header may cost when decoded.
var maxElem = func() int64 {
	seen := map[reflect.Type]bool{}
	var most int64
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		if seen[t] {
			return
		}
		seen[t] = true
		if k := t.Kind(); k == reflect.Slice {
			most = max(most, int64(t.Elem().Size()))
			walk(t.Elem())
		} else if k == reflect.Pointer || k == reflect.Array {
			walk(t.Elem())
		} else if k == reflect.Map {
			most = max(most, int64(t.Key().Size()+t.Elem().Size()))
			walk(t.Key())
			walk(t.Elem())
		} else if k == reflect.Struct {
			for i := range t.NumField() {
				walk(t.Field(i).Type)
			}
		}
	}
	walk(reflect.TypeFor[format.FileMetaData]())
	walk(reflect.TypeFor[format.PageHeader]())
	return most
}()

// decodeThrift checks the thrift struct at the start of b with thriftScan and decodes it into
// v; it returns the struct's length.
func decodeThrift(b []byte, v any) (int, error) {
	n, elems, err := thriftScan(b)
	if err != nil {
		return 0, err
	}
	if elems > maxThriftAlloc/maxElem {
		return 0, fmt.Errorf("%d thrift list elements in %d bytes", elems, n)
	}
	if err := thrift.Unmarshal(new(thrift.CompactProtocol), b[:n], v); err != nil {
		return 0, err
	}
	return n, nil
}

// pqFile is what the checks know of a Parquet file: its footer, decoded.
type pqFile struct {
	name      string
	r         io.ReaderAt
	size      int64
	dataEnd   int64 // where the footer starts: column chunks end before it
	md        format.FileMetaData
	leafRep   []bool // per leaf column: whether it or a group above it is repeated
	leafOpt   []bool // per leaf column: whether it or a group above it is not required
	leafType  []format.Type
	leafBits  []int // per leaf column: the fewest bits of a PLAIN value
	leafNames []string
	scratch   []byte // for counting what a gzip page decodes to
}

// checkParquetFooter reads the footer of the Parquet file r of size bytes, named name, with
// every length bounded, and checks what parquet-go will trust in it: the row counts, the
// schema and where each column chunk lies. Errors name the file and wrap ErrInput.
func checkParquetFooter(name string, r io.ReaderAt, size int64) (*pqFile, error) {
	bad := func(format string, args ...any) error {
		return inputErr("%s: not a readable Parquet file: %s", name, fmt.Sprintf(format, args...))
	}
	if size < 12 {
		return nil, bad("%d bytes, too short for its magic and footer", size)
	}
	var tail [8]byte
	if _, err := r.ReadAt(tail[:], size-8); err != nil {
		return nil, inputErr("%s: reading the Parquet footer: %v", name, err)
	}
	switch string(tail[4:]) {
	case parquetMagic:
	case "PARE":
		return nil, bad("its footer is encrypted, which ingest does not read")
	default:
		return nil, bad("it does not end with %q", parquetMagic)
	}
	n := int64(binary.LittleEndian.Uint32(tail[:4]))
	if n == 0 || n > size-12 {
		return nil, bad("footer length %d bytes, in a file of %d bytes (at most %d)", n, size, size-12)
	}
	if n > maxFooterBytes {
		return nil, bad("footer length %d bytes, over the limit of %d", n, maxFooterBytes)
	}
	footer := make([]byte, n)
	if _, err := r.ReadAt(footer, size-8-n); err != nil {
		return nil, inputErr("%s: reading the Parquet footer: %v", name, err)
	}
	f := &pqFile{name: name, r: r, size: size, dataEnd: size - 8 - n}
	used, err := decodeThrift(footer, &f.md)
	switch {
	case err == errShort:
		return nil, bad("footer: its metadata goes on past its %d bytes", n)
	case err != nil:
		return nil, bad("footer: %v", err)
	case int64(used) != n:
		return nil, bad("footer: its metadata ends %d bytes before its end", n-int64(used))
	}
	if err := f.checkSchema(); err != nil {
		return nil, bad("footer: %v", err)
	}
	if err := f.checkRowGroups(); err != nil {
		return nil, bad("footer: %v", err)
	}
	return f, nil
}

// checkSchema walks the schema tree (each group's children after it, depth first) and notes
// each leaf's repetition and the fewest bits of its values.
func (f *pqFile) checkSchema() error {
	sch := f.md.Schema
	if len(sch) == 0 {
		return errors.New("no schema")
	}
	i := 0
	var walk func(path string, repeated, optional bool, depth int) error
	walk = func(path string, repeated, optional bool, depth int) error {
		if i >= len(sch) {
			return fmt.Errorf("the schema has %d elements, its groups name more", len(sch))
		}
		if depth > maxThriftDepth {
			return fmt.Errorf("the schema nests over %d deep", maxThriftDepth)
		}
		e := &sch[i]
		i++
		kids := 0
		if e.NumChildren.Valid {
			if e.NumChildren.V < 0 {
				return fmt.Errorf("schema element %q has %d children", e.Name, e.NumChildren.V)
			}
			kids = int(e.NumChildren.V)
		}
		if depth > 0 {
			path += "." + e.Name
			if err := checkSchemaTypes(e); err != nil {
				return fmt.Errorf("column %q: %w", path[1:], err)
			}
			repeated = repeated || e.RepetitionType.Valid && e.RepetitionType.V == format.Repeated
			optional = optional || e.RepetitionType.Valid && e.RepetitionType.V != format.Required
			if e.Type.Valid { // a leaf, as parquet-go tells them
				bits := 1
				switch e.Type.V {
				case format.Int32, format.Float, format.ByteArray: // a BYTE_ARRAY's length: 4 bytes
					bits = 32
				case format.Int64, format.Double:
					bits = 64
				case format.Int96:
					bits = 96
				case format.FixedLenByteArray:
					if e.TypeLength.Valid && e.TypeLength.V > 0 {
						bits = 8 * int(min(e.TypeLength.V, 1<<20))
					}
				case format.Boolean:
				}
				f.leafRep = append(f.leafRep, repeated)
				f.leafOpt = append(f.leafOpt, optional)
				f.leafType = append(f.leafType, e.Type.V)
				f.leafBits = append(f.leafBits, bits)
				f.leafNames = append(f.leafNames, path[1:])
			}
		}
		if kids > len(sch)-i {
			return fmt.Errorf("schema element %q has %d children, the schema %d elements left", e.Name, kids, len(sch)-i)
		}
		for range kids {
			if err := walk(path, repeated, optional, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk("", false, false, 0); err != nil {
		return err
	}
	if i != len(sch) {
		return fmt.Errorf("the schema has %d elements, its tree %d", len(sch), i)
	}
	return nil
}

// checkSchemaTypes checks that a schema element's types are ones Parquet has and agree with
// each other: its physical type, its logical type and its converted type (which writers
// write beside the logical type for older readers). A flipped bit in a logical type read
// times in another unit or integers as zero, without an error.
func checkSchemaTypes(e *format.SchemaElement) error {
	if e.Type.Valid && (e.Type.V < format.Boolean || e.Type.V > format.FixedLenByteArray) {
		return fmt.Errorf("physical type %d", e.Type.V)
	}
	if e.RepetitionType.Valid && (e.RepetitionType.V < format.Required || e.RepetitionType.V > format.Repeated) {
		return fmt.Errorf("repetition %d", e.RepetitionType.V)
	}
	lt := e.LogicalType.Value
	if lt == nil {
		return nil
	}
	want, conv := format.Type(-1), deprecated.ConvertedType(-1)
	switch v := lt.(type) {
	case *format.IntType:
		switch v.BitWidth {
		case 8, 16, 32:
			want = format.Int32
		case 64:
			want = format.Int64
		default:
			return fmt.Errorf("logical type %s", v)
		}
		conv = deprecated.Int8 + deprecated.ConvertedType(bits.TrailingZeros8(uint8(v.BitWidth))-3)
		if !v.IsSigned {
			conv = deprecated.Uint8 + deprecated.ConvertedType(bits.TrailingZeros8(uint8(v.BitWidth))-3)
		}
	case *format.TimestampType:
		switch v.Unit.Value.(type) {
		case *format.MilliSeconds:
			conv = deprecated.TimestampMillis
		case *format.MicroSeconds:
			conv = deprecated.TimestampMicros
		case *format.NanoSeconds:
		default:
			return fmt.Errorf("logical type %s", v)
		}
		want = format.Int64
	case *format.DateType:
		want, conv = format.Int32, deprecated.Date
	case *format.StringType:
		want, conv = format.ByteArray, deprecated.UTF8
	case *format.EnumType:
		want, conv = format.ByteArray, deprecated.Enum
	}
	if want >= 0 && e.Type.Valid && e.Type.V != want {
		return fmt.Errorf("logical type %s on physical type %s", lt, e.Type.V)
	}
	known := false // a converted type that maps to a logical type above
	if ct := e.ConvertedType.V; e.ConvertedType.Valid {
		known = ct == deprecated.UTF8 || ct == deprecated.Enum || ct == deprecated.Date ||
			ct == deprecated.TimestampMillis || ct == deprecated.TimestampMicros ||
			ct >= deprecated.Uint8 && ct <= deprecated.Int64
	}
	if known && e.ConvertedType.V != conv {
		return fmt.Errorf("logical type %s with converted type %d (they disagree)", lt, e.ConvertedType.V)
	}
	return nil
}

// checkRowGroups checks the row counts and where each column chunk lies.
func (f *pqFile) checkRowGroups() error {
	md := &f.md
	if md.NumRows < 0 {
		return fmt.Errorf("%d rows", md.NumRows)
	}
	var sum int64
	for g := range md.RowGroups {
		rg := &md.RowGroups[g]
		if rg.NumRows < 0 || rg.NumRows > md.NumRows-sum {
			return fmt.Errorf("row group %d has %d rows, more than the file's %d rows leave (the row counts disagree)", g, rg.NumRows, md.NumRows)
		}
		sum += rg.NumRows
		if len(rg.Columns) != len(f.leafRep) {
			return fmt.Errorf("row group %d has %d column chunks, the schema %d columns", g, len(rg.Columns), len(f.leafRep))
		}
		for c := range rg.Columns {
			if err := f.checkChunk(g, c); err != nil {
				return fmt.Errorf("row group %d, column %q: %w", g, f.leafNames[c], err)
			}
		}
	}
	if sum != md.NumRows {
		return fmt.Errorf("the file has %d rows, its row groups %d (the row counts disagree)", md.NumRows, sum)
	}
	return nil
}

// chunkRange returns where column chunk c of row group g starts and ends, as parquet-go reads it.
func (f *pqFile) chunkRange(g, c int) (start, end int64) {
	m := &f.md.RowGroups[g].Columns[c].MetaData
	start = m.DataPageOffset
	if m.DictionaryPageOffset != 0 {
		start = m.DictionaryPageOffset
	}
	return start, start + m.TotalCompressedSize
}

func (f *pqFile) checkChunk(g, c int) error {
	cc := &f.md.RowGroups[g].Columns[c]
	m := &cc.MetaData
	rows := f.md.RowGroups[g].NumRows
	if cc.FilePath != "" {
		return fmt.Errorf("its data is in another file (%q), which ingest does not read", cc.FilePath)
	}
	if len(cc.EncryptedColumnMetadata) > 0 {
		return errors.New("it is encrypted, which ingest does not read")
	}
	if m.Type != f.leafType[c] {
		return fmt.Errorf("values of type %s, the schema says %s", m.Type, f.leafType[c])
	}
	if !f.leafOpt[c] && m.Statistics.NullCount > 0 {
		return fmt.Errorf("%d nulls in a required column", m.Statistics.NullCount)
	}
	switch m.Codec {
	case format.Uncompressed, format.Snappy, format.Gzip, format.Brotli, format.Zstd, format.Lz4Raw:
	case format.LZO, format.Lz4:
		return fmt.Errorf("compression codec %s, which ingest does not read", m.Codec)
	default:
		return fmt.Errorf("compression codec %s, which ingest does not read", m.Codec)
	}
	start := m.DataPageOffset
	if m.DictionaryPageOffset != 0 {
		start = m.DictionaryPageOffset
	}
	if start < 4 || m.TotalCompressedSize <= 0 || m.TotalCompressedSize > f.dataEnd-start ||
		m.DataPageOffset < start || m.DataPageOffset >= start+m.TotalCompressedSize {
		return fmt.Errorf("its pages at bytes %d..%d (data pages from %d), outside the file's column data at 4..%d",
			start, start+m.TotalCompressedSize, m.DataPageOffset, f.dataEnd)
	}
	if m.TotalUncompressedSize < 0 {
		return fmt.Errorf("%d bytes uncompressed", m.TotalUncompressedSize)
	}
	if f.leafRep[c] {
		if m.NumValues < rows {
			return fmt.Errorf("%d values (levels) for the group's %d rows (the row counts disagree)", m.NumValues, rows)
		}
	} else if m.NumValues != rows {
		return fmt.Errorf("%d values for the group's %d rows (the row counts disagree)", m.NumValues, rows)
	}
	return nil
}

// maxRatio is the most a page of codec c can grow when decompressed (of its compressed
// bytes), 0 for no bound but maxPageBytes: snappy writes at most 64 bytes with a copy of 3;
// LZ4 adds 255 bytes of length per byte; deflate reaches 1032:1; a zstd RLE block 2^17
// bytes from 4; brotli has no small bound.
func maxRatio(c format.CompressionCodec) int64 {
	switch c {
	case format.Uncompressed:
		return 1
	case format.Snappy:
		return 22
	case format.Lz4Raw:
		return 256
	case format.Gzip:
		return 1033
	case format.Zstd:
		return 1 << 15
	case format.Brotli, format.LZO, format.Lz4:
	}
	return 0
}

// pageWindow reads a column chunk's bytes through a window, so that walking its page headers
// reads each byte about once.
type pageWindow struct {
	r      io.ReaderAt
	end    int64 // the chunk's end
	buf    []byte
	bufOff int64
}

// at returns the bytes [off, off+n) of the chunk (n at most what is left), reading ahead
// at least want bytes.
func (w *pageWindow) at(off int64, n, want int) ([]byte, error) {
	n = int(min(int64(n), w.end-off))
	if off >= w.bufOff && off+int64(n) <= w.bufOff+int64(len(w.buf)) {
		return w.buf[off-w.bufOff : off-w.bufOff+int64(n)], nil
	}
	m := int(min(int64(max(n, want)), w.end-off))
	if cap(w.buf) < m {
		w.buf = make([]byte, m)
	}
	w.buf = w.buf[:m]
	w.bufOff = off
	if _, err := w.r.ReadAt(w.buf, off); err != nil && !(err == io.EOF && m > 0) {
		w.buf = w.buf[:0]
		return nil, err
	}
	return w.buf[:n], nil
}

// checkPages walks the pages of column chunk c of row group g, reading their headers (and,
// for the codecs whose decoders trust the data, a few bytes of the data or all of it), and
// checks every size parquet-go will allocate by and the row counts. kind is the leaf's type.
func (f *pqFile) checkPages(g, c int) error {
	m := &f.md.RowGroups[g].Columns[c].MetaData
	rows := f.md.RowGroups[g].NumRows
	start, end := f.chunkRange(g, c)
	w := pageWindow{r: f.r, end: end}
	ratio := maxRatio(m.Codec)
	var values, v2rows int64
	v2 := true
	for off, page := start, 0; off < end; page++ {
		var h format.PageHeader
		var hlen int
		for want := 4 << 10; ; want *= 8 {
			b, err := w.at(off, min(want, maxPageHeaderBytes), 64<<10)
			if err != nil {
				return fmt.Errorf("page %d: %w", page, err)
			}
			hlen, err = decodeThrift(b, &h)
			if err == nil {
				break
			}
			if err != errShort {
				return fmt.Errorf("page %d at byte %d: header: %w", page, off, err)
			}
			if len(b) < want || want >= maxPageHeaderBytes {
				return fmt.Errorf("page %d at byte %d: its header goes on past the column chunk's end (%d)", page, off, end)
			}
		}
		at := func(what string) error {
			return fmt.Errorf("page %d at byte %d: %s", page, off, what)
		}
		data := off + int64(hlen)
		size, usize := int64(h.CompressedPageSize), int64(h.UncompressedPageSize)
		if size < 0 || size > end-data || size > maxPageBytes {
			return at(fmt.Sprintf("%d bytes, the column chunk has %d left", size, end-data))
		}
		if usize < 0 || usize > maxPageBytes || ratio > 0 && usize > size*ratio+64 {
			return at(fmt.Sprintf("%d bytes uncompressed from %d compressed with %s", usize, size, m.Codec))
		}
		off = data + size
		// expect is the bytes the compressed part of the page decodes to; skip its bytes before.
		expect, skip := usize, int64(0)
		switch h.Type {
		case format.DictionaryPage:
			if page > 0 || !h.DictionaryPageHeader.Valid {
				return at("a dictionary page that is not the first of its column chunk")
			}
			n := int64(h.DictionaryPageHeader.V.NumValues)
			if n < 0 || n > (usize*8)/int64(f.leafBits[c]) {
				return at(fmt.Sprintf("a dictionary of %d values in %d bytes", n, usize))
			}
		case format.DataPage:
			if !h.DataPageHeader.Valid {
				return at("a data page without its header")
			}
			v2 = false
			n := int64(h.DataPageHeader.V.NumValues)
			if n < 0 || n > m.NumValues-values || n > maxPageValues {
				return at(fmt.Sprintf("%d values, the column chunk has %d left of its %d (the row counts disagree)", n, m.NumValues-values, m.NumValues))
			}
			values += n
		case format.DataPageV2:
			if !h.DataPageHeaderV2.Valid {
				return at("a data page without its header")
			}
			v := &h.DataPageHeaderV2.V
			n := int64(v.NumValues)
			if n < 0 || n > m.NumValues-values || n > maxPageValues {
				return at(fmt.Sprintf("%d values, the column chunk has %d left of its %d (the row counts disagree)", n, m.NumValues-values, m.NumValues))
			}
			if v.NumRows < 0 || int64(v.NumRows) > rows-v2rows || v.NumNulls < 0 || v.NumNulls > v.NumValues {
				return at(fmt.Sprintf("%d rows and %d nulls of %d values, the group has %d rows left (the row counts disagree)", v.NumRows, v.NumNulls, n, rows-v2rows))
			}
			levels := int64(v.RepetitionLevelsByteLength) + int64(v.DefinitionLevelsByteLength)
			if v.RepetitionLevelsByteLength < 0 || v.DefinitionLevelsByteLength < 0 || levels > size || levels > usize {
				return at(fmt.Sprintf("levels of %d and %d bytes in a page of %d (%d uncompressed)", v.RepetitionLevelsByteLength, v.DefinitionLevelsByteLength, size, usize))
			}
			values += n
			v2rows += int64(v.NumRows)
			expect, skip = usize-levels, levels
			if v.IsCompressed.Valid && !v.IsCompressed.V {
				expect = -1
			}
		case format.IndexPage:
			return at("an index page, which ingest does not read")
		default:
			return at(fmt.Sprintf("a page of type %s, which ingest does not read", h.Type))
		}
		if expect >= 0 && m.Codec != format.Uncompressed {
			if err := f.checkCompressed(&w, m.Codec, data+skip, size-skip, expect); err != nil {
				return at(err.Error())
			}
		}
	}
	if values != m.NumValues {
		return fmt.Errorf("its pages hold %d values, the footer says %d (the row counts disagree)", values, m.NumValues)
	}
	if v2 && values > 0 && v2rows != rows {
		return fmt.Errorf("its pages hold %d rows, the row group %d (the row counts disagree)", v2rows, rows)
	}
	return nil
}

// checkCompressed checks what the n compressed bytes at off say they decode to against
// expect, the bytes they must decode to, where the codec's decoder would trust them.
func (f *pqFile) checkCompressed(w *pageWindow, codec format.CompressionCodec, off, n, expect int64) error {
	switch codec {
	case format.Snappy: // a preamble: the decoded length, which the decoder allocates
		b, err := w.at(off, int(min(n, 10)), 64<<10)
		if err != nil {
			return err
		}
		v, k := binary.Uvarint(b)
		if k <= 0 || v != uint64(expect) {
			return fmt.Errorf("snappy data of %d bytes, the page header says %d", v, expect)
		}
	case format.Lz4Raw: // parquet-go doubles its buffer for as long as a block does not decode
		b, err := w.at(off, int(n), 64<<10)
		if err != nil {
			return err
		}
		got, err := lz4BlockSize(b, expect)
		if err != nil {
			return err
		}
		if got != expect {
			return fmt.Errorf("LZ4 data of %d bytes, the page header says %d", got, expect)
		}
	case format.Zstd: // a frame's content size, which the decoder allocates
		b, err := w.at(off, int(min(n, 18)), 64<<10)
		if err != nil {
			return err
		}
		if fcs, ok := zstdContentSize(b); ok && fcs > uint64(expect) {
			return fmt.Errorf("zstd data of %d bytes, the page header says %d", fcs, expect)
		}
	case format.Gzip: // its decoder grows its buffer until the stream ends: count what it gives
		b, err := w.at(off, int(n), 64<<10)
		if err != nil {
			return err
		}
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			return fmt.Errorf("gzip data: %w", err)
		}
		if f.scratch == nil {
			f.scratch = make([]byte, 32<<10)
		}
		got, err := io.CopyBuffer(io.Discard, io.LimitReader(zr, expect+1), f.scratch)
		if err != nil {
			return fmt.Errorf("gzip data: %w", err)
		}
		if got != expect {
			return fmt.Errorf("gzip data of %s bytes, the page header says %d", atLeast(got, expect), expect)
		}
	case format.Uncompressed, format.Brotli, format.LZO, format.Lz4:
		// Brotli streams into a buffer that grows until the stream ends: bounded by
		// maxPageBytes only, as no decoder of it is at hand to count what it gives.
	}
	return nil
}

// atLeast writes got, the bytes read with a limit of expect+1: "over expect" when it is.
func atLeast(got, expect int64) string {
	if got > expect {
		return fmt.Sprintf("over %d", expect)
	}
	return fmt.Sprint(got)
}

// zstdContentSize returns the content size in the header of the zstd frame at the start of b,
// when it has one.
func zstdContentSize(b []byte) (uint64, bool) {
	if len(b) < 5 || binary.LittleEndian.Uint32(b) != 0xFD2FB528 {
		return 0, false
	}
	fhd := b[4]
	single := fhd>>5&1 == 1
	i := 5
	if !single {
		i++ // the window descriptor
	}
	i += [4]int{0, 1, 2, 4}[fhd&3] // the dictionary id
	size := [4]int{0, 2, 4, 8}[fhd>>6]
	if fhd>>6 == 0 && single {
		size = 1
	}
	if size == 0 || i+size > len(b) {
		return 0, false
	}
	switch size {
	case 1:
		return uint64(b[i]), true
	case 2:
		return uint64(binary.LittleEndian.Uint16(b[i:])) + 256, true
	case 4:
		return uint64(binary.LittleEndian.Uint32(b[i:])), true
	}
	return binary.LittleEndian.Uint64(b[i:]), true
}

// lz4BlockSize returns the bytes the LZ4 block src decodes to, reading its sequences without
// decoding them, or an error when it is not a block the decoder reads (github.com/pierrec/lz4
// reads a block whose last sequence is literals only or ends with a match) or decodes to
// more than limit bytes. An empty block is empty.
func lz4BlockSize(src []byte, limit int64) (int64, error) {
	var n int64
	i := 0
	length := func(l int64) (int64, error) { // a length of 15 goes on in bytes of 255
		for {
			if i >= len(src) {
				return 0, errors.New("LZ4 block ends inside a length")
			}
			c := src[i]
			i++
			if l += int64(c); l > limit {
				return 0, fmt.Errorf("LZ4 data of over %d bytes, the page header says %d", limit, limit)
			}
			if c != 255 {
				return l, nil
			}
		}
	}
	for i < len(src) {
		tok := src[i]
		i++
		lit := int64(tok >> 4)
		var err error
		if lit == 15 {
			if lit, err = length(lit); err != nil {
				return 0, err
			}
		}
		if lit > int64(len(src)-i) {
			return 0, errors.New("LZ4 literals past the end of the block")
		}
		i += int(lit)
		if n += lit; n > limit {
			return 0, fmt.Errorf("LZ4 data of over %d bytes, the page header says %d", limit, limit)
		}
		if i == len(src) && tok&15 == 0 {
			break // the last sequence: literals only
		}
		if len(src)-i < 2 {
			return 0, errors.New("LZ4 block ends inside a sequence")
		}
		offset := int64(src[i]) | int64(src[i+1])<<8
		i += 2
		if offset == 0 || offset > n {
			return 0, fmt.Errorf("LZ4 match at offset %d after %d bytes", offset, n)
		}
		ml := int64(tok & 15)
		if ml == 15 {
			if ml, err = length(ml); err != nil {
				return 0, err
			}
		}
		if n += ml + 4; n > limit {
			return 0, fmt.Errorf("LZ4 data of over %d bytes, the page header says %d", limit, limit)
		}
	}
	return n, nil
}
