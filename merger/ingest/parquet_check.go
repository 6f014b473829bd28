package ingest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"

	"github.com/parquet-go/parquet-go/deprecated"
	"github.com/parquet-go/parquet-go/format"
)

// The checks of a Parquet file made before parquet-go reads it.
//
// parquet-go allocates by the lengths and counts it reads from a file: the footer's length, a
// thrift list's count, a page's compressed and uncompressed sizes, the decoded size a snappy
// preamble or a zstd frame claims; its LZ4 decoder grows its buffer for as long as a block does
// not decode. So every such length is checked first (here, in parquet_thrift.go and in
// parquet_codec.go), against the bytes that hold it (the file, the footer, the
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
