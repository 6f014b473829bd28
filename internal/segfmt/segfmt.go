// Package segfmt holds the on-disk vocabulary of a writeout segment file: what each part of a
// column holds (PartKind) and how its bytes are laid out (Encoding). The byte layouts are drawn
// out in the documentation of package columns (columns/doc.go), which reads and writes them.
package segfmt

import "fmt"

// PartKind says what a part of a column holds.
type PartKind uint8

// The part kinds.
const (
	PartValues     PartKind = 1 // chunked values: __time, metrics, raw strings, sketches
	PartDictionary PartKind = 2 // a dimension's sorted, front-coded dictionary
	PartIDs        PartKind = 3 // a dimension's dictionary ids per row
	PartBitmaps    PartKind = 4 // a dimension's bitmap index: one roaring bitmap per id
	PartNulls      PartKind = 5 // a dimension's null rows, or (version 3) a long or double metric's, one roaring bitmap
	PartTimes      PartKind = 6 // a first/last metric's time per row, stored with its value
	PartTails      PartKind = 7 // a doubleSum metric's exactness tail per row (see columns/agg)
)

func (k PartKind) String() string {
	switch k {
	case PartValues:
		return "values"
	case PartDictionary:
		return "dictionary"
	case PartIDs:
		return "ids"
	case PartBitmaps:
		return "bitmaps"
	case PartNulls:
		return "nulls"
	case PartTimes:
		return "times"
	case PartTails:
		return "tails"
	}
	return fmt.Sprintf("kind%d", uint8(k))
}

// Encoding says how a part is laid out; see doc.go.
type Encoding uint8

// The part encodings.
const (
	EncLongChunks    Encoding = 1 // chunks of int64 values
	EncDoubleChunks  Encoding = 2 // chunks of float64 values
	EncBlobChunks    Encoding = 3 // chunks of byte strings (raw strings, sketches)
	EncIDChunks      Encoding = 4 // chunks of one bit-packed id per row
	EncMultiIDChunks Encoding = 5 // chunks of per-row id counts and bit-packed ids
	EncFrontCoded    Encoding = 6 // front-coded dictionary blocks with a block table
	EncRoaringTable  Encoding = 7 // roaring bitmaps back to back with an end-offset table
	EncRoaring       Encoding = 8 // one roaring bitmap
	// Version 4 encodings of chunks (doc.go, "Version 4 encodings: chunks").
	EncLongChunksV4   Encoding = 11 // EncLongChunks whose chunks may take the planes form
	EncDoubleChunksV4 Encoding = 12 // EncDoubleChunks whose integral chunks may take the planes form
	EncIDChunksV4     Encoding = 13 // chunks of frequency ranks (packed or planes) and a rank table
	// EncRoaringTableV4 is EncRoaringTable's version 4 replacement: each bitmap is empty,
	// Elias-Fano or roaring, whichever is smallest (doc.go, "Version 4 encodings: bitmap index").
	EncRoaringTableV4 Encoding = 14
	// EncIDChunksV5 is EncIDChunksV4 whose chunks may also take the id-deltas form (doc.go,
	// "Version 5 encodings"), for ids sorted within runs of rows.
	EncIDChunksV5 Encoding = 15
	// EncIDChunksDerived is the version 6 ids part of a single-value dimension with a bitmap
	// index: chunks that store no ids, each chunk's ids being those its rows' bitmaps give
	// (doc.go, "Version 6 encodings").
	EncIDChunksDerived Encoding = 16
)

func (e Encoding) String() string {
	switch e {
	case EncLongChunks:
		return "long-chunks"
	case EncDoubleChunks:
		return "double-chunks"
	case EncBlobChunks:
		return "blob-chunks"
	case EncIDChunks:
		return "id-chunks"
	case EncMultiIDChunks:
		return "multi-id-chunks"
	case EncFrontCoded:
		return "front-coded"
	case EncRoaringTable:
		return "roaring-table"
	case EncRoaring:
		return "roaring"
	case EncLongChunksV4:
		return "long-chunks-v4"
	case EncDoubleChunksV4:
		return "double-chunks-v4"
	case EncIDChunksV4:
		return "id-chunks-v4"
	case EncRoaringTableV4:
		return "roaring-table-v4"
	case EncIDChunksV5:
		return "id-chunks-v5"
	case EncIDChunksDerived:
		return "id-chunks-derived"
	}
	return fmt.Sprintf("encoding%d", uint8(e))
}

// PartInfo describes one part of a segment file, as its footer lists it.
type PartInfo struct {
	Column   string // the column's name: __time, a dimension or a metric
	Kind     PartKind
	Encoding Encoding
	Offset   int64  // from the start of the file
	Length   int64  // bytes
	CRC      uint32 // CRC-32C (Castagnoli) of the part's bytes
	// Index is the column's index in its schema: 0 __time, then dimensions, then metrics.
	Index int `json:"-"`
}
