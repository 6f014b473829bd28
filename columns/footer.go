package columns

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"time"

	"github.com/writeout/writeout/internal/segfmt"
)

// File framing.
const (
	magic = "WOSEG"
	// maxVersion is the newest format version this package writes and reads. A segment is written
	// as version 6 when some part uses an encoding of version 6 (encodingsV6); else as version 5
	// when some part uses an encoding of version 5 (encodingsV5); else as version 4
	// when some part uses an encoding of version 4 (encodingsV4); else as version 3
	// when some long or double metric has a null row (its segfmt.PartNulls part, see layout); otherwise
	// as version 2, byte for byte what writers before version 3 wrote. It also reads version 1,
	// whose layout lacks the metrics' side parts (segfmt.PartTimes, segfmt.PartTails).
	maxVersion = 6
	minVersion = 1
	// versionNoNulls is the version of a segment without metric nulls parts.
	versionNoNulls = 2
	// versionNulls is the version of a segment with a metric nulls part and only the
	// encodings of version 2.
	versionNulls = 3
	// versionV4 is the version of a segment with at least one part in a version 4 encoding;
	// its metrics may have nulls parts or not.
	versionV4 = 4
	// versionV5 is the version of a segment with at least one part in a version 5 encoding;
	// its other parts may use the encodings of version 4 or not.
	versionV5 = 5
	// versionV6 is the version of a segment with at least one part in a version 6 encoding;
	// its other parts may use the encodings of versions 4 and 5 or not.
	versionV6  = 6
	headerSize = len(magic) + 1
	// trailer: footer CRC-32C u32 | footer length u32 | magic
	trailerSize = 4 + 4 + len(magic)
	maxFooter   = 1 << 30
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// encodingsV4 maps an encoding of version 2 to the encoding a version 4 segment may use
// instead for the same part (see doc.go). A writer picks the version 4 encoding for a part only
// when the part needs it, and the segment is version 4 exactly when some part does.
var encodingsV4 = map[segfmt.Encoding]segfmt.Encoding{
	segfmt.EncLongChunks:   segfmt.EncLongChunksV4,
	segfmt.EncDoubleChunks: segfmt.EncDoubleChunksV4,
	segfmt.EncIDChunks:     segfmt.EncIDChunksV4,
	segfmt.EncRoaringTable: segfmt.EncRoaringTableV4,
}

// encodingsV5 maps an encoding of version 2 to the encoding a version 5 segment may use instead
// for the same part, besides the one of encodingsV4 (see doc.go). The segment is version 5
// exactly when some part uses one.
var encodingsV5 = map[segfmt.Encoding]segfmt.Encoding{
	segfmt.EncIDChunks: segfmt.EncIDChunksV5,
}

// encodingsV6 maps an encoding of version 2 to the encoding a version 6 segment may use instead
// for the same part, besides those of encodingsV4 and encodingsV5 (see doc.go). The segment is
// version 6 exactly when some part uses one.
var encodingsV6 = map[segfmt.Encoding]segfmt.Encoding{
	segfmt.EncIDChunks: segfmt.EncIDChunksDerived,
}

// isV6Encoding reports whether e is an encoding of version 6.
func isV6Encoding(e segfmt.Encoding) bool { return replaces(encodingsV6, e) }

// isV5Encoding reports whether e is an encoding of version 5.
func isV5Encoding(e segfmt.Encoding) bool { return replaces(encodingsV5, e) }

// replaces reports whether e is one of the encodings m maps to.
func replaces(m map[segfmt.Encoding]segfmt.Encoding, e segfmt.Encoding) bool {
	for _, to := range m {
		if to == e {
			return true
		}
	}
	return false
}

// isV4Encoding reports whether e is an encoding of version 4.
func isV4Encoding(e segfmt.Encoding) bool { return replaces(encodingsV4, e) }

// Interval is a time range in milliseconds since the epoch, Start inclusive, End exclusive.
type Interval struct {
	Start int64 `json:"start"`
	End   int64 `json:"end"`
}

// Contains reports whether t is within the interval.
func (iv Interval) Contains(t int64) bool { return iv.Start <= t && t < iv.End }

// String formats the interval as Druid does: start/end in ISO 8601, UTC.
func (iv Interval) String() string {
	f := func(ms int64) string { return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z") }
	return f(iv.Start) + "/" + f(iv.End)
}

// partSpec is one part the schema asks for.
type partSpec struct {
	column int
	kind   segfmt.PartKind
	enc    segfmt.Encoding
}

// layout returns the parts a schema's segment holds, in the order the writer writes them.
func layout(s Schema, version uint8) []partSpec {
	out := []partSpec{{0, segfmt.PartValues, segfmt.EncLongChunks}}
	for i, d := range s.Dimensions {
		c := 1 + i
		if d.Raw {
			out = append(out, partSpec{c, segfmt.PartValues, segfmt.EncBlobChunks}, partSpec{c, segfmt.PartNulls, segfmt.EncRoaring})
			continue
		}
		ids := segfmt.EncIDChunks
		if d.MultiValue {
			ids = segfmt.EncMultiIDChunks
		}
		out = append(out, partSpec{c, segfmt.PartDictionary, segfmt.EncFrontCoded}, partSpec{c, segfmt.PartIDs, ids})
		if !d.NoBitmapIndex {
			out = append(out, partSpec{c, segfmt.PartBitmaps, segfmt.EncRoaringTable})
		}
		out = append(out, partSpec{c, segfmt.PartNulls, segfmt.EncRoaring})
	}
	for i, m := range s.Metrics {
		c := 1 + len(s.Dimensions) + i
		enc := segfmt.EncLongChunks
		switch m.column() {
		case MetricDouble:
			enc = segfmt.EncDoubleChunks
		case MetricHyperUnique:
			enc = segfmt.EncBlobChunks
		case MetricLong:
		}
		out = append(out, partSpec{c, segfmt.PartValues, enc})
		if version < 2 {
			continue
		}
		a := m.Agg()
		if a.Timed() {
			out = append(out, partSpec{c, segfmt.PartTimes, segfmt.EncLongChunks})
		}
		if a.Exact() {
			out = append(out, partSpec{c, segfmt.PartTails, segfmt.EncBlobChunks})
		}
	}
	return out
}

// metricNullsColumn reports whether column index c of s is a long or double metric: one that
// may have a nulls part (segfmt.PartNulls, segfmt.EncRoaring) from version 3 on, present exactly when the
// metric has null rows.
func metricNullsColumn(s Schema, c int) bool {
	i := c - 1 - len(s.Dimensions)
	if i < 0 || i >= len(s.Metrics) {
		return false
	}
	t := s.Metrics[i].column()
	return t == MetricLong || t == MetricDouble
}

// checkVersionSchema reports a schema that the format version cannot hold: version 1 has no
// side parts, so no first/last aggregator.
func checkVersionSchema(s Schema, version uint8) error {
	if version >= 2 {
		return nil
	}
	for _, m := range s.Metrics {
		if m.Agg().Timed() {
			return corruptf("columns: footer: metric %q: aggregator %s in a version %d segment (it needs version 2)", m.Name, m.Aggregator, version)
		}
	}
	return nil
}

// columnName returns the name of column index c of s.
func columnName(s Schema, c int) string {
	switch {
	case c == 0:
		return TimeColumn
	case c <= len(s.Dimensions):
		return s.Dimensions[c-1].Name
	case c <= len(s.Dimensions)+len(s.Metrics):
		return s.Metrics[c-1-len(s.Dimensions)].Name
	}
	return fmt.Sprintf("#%d", c)
}

// footer is the decoded footer of a segment.
type footer struct {
	version  uint8
	rows     int
	interval Interval
	schema   Schema
	parts    []segfmt.PartInfo
}

// Footer layout (all integers little-endian):
//
//	version u8 | rows u64 | interval start i64 | interval end i64 |
//	schema length uvarint | schema JSON | part count uvarint |
//	part count x (column uvarint | kind u8 | encoding u8 | offset u64 | length u64 | crc u32)
func appendFooter(dst []byte, f *footer) ([]byte, error) {
	js, err := json.Marshal(f.schema)
	if err != nil {
		return dst, fmt.Errorf("columns: footer: schema: %w", err)
	}
	dst = append(dst, f.version)
	dst = binary.LittleEndian.AppendUint64(dst, uint64(f.rows))
	dst = binary.LittleEndian.AppendUint64(dst, uint64(f.interval.Start))
	dst = binary.LittleEndian.AppendUint64(dst, uint64(f.interval.End))
	dst = binary.AppendUvarint(dst, uint64(len(js)))
	dst = append(dst, js...)
	dst = binary.AppendUvarint(dst, uint64(len(f.parts)))
	for _, p := range f.parts {
		dst = binary.AppendUvarint(dst, uint64(p.Index))
		dst = append(dst, byte(p.Kind), byte(p.Encoding))
		dst = binary.LittleEndian.AppendUint64(dst, uint64(p.Offset))
		dst = binary.LittleEndian.AppendUint64(dst, uint64(p.Length))
		dst = binary.LittleEndian.AppendUint32(dst, p.CRC)
	}
	return dst, nil
}

// appendTrailer appends the trailer after a footer of the given bytes.
func appendTrailer(dst, footerBytes []byte) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, crc32.Checksum(footerBytes, castagnoli))
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(footerBytes)))
	return append(dst, magic...)
}

func appendHeader(dst []byte, version uint8) []byte { return append(append(dst, magic...), version) }

// maxRows bounds a segment's row count: row numbers are roaring bitmap members (uint32), and
// must fit an int everywhere.
const maxRows = 1<<31 - 1

// decodeFooter parses and checks a footer that starts at footerStart (the end of the last part).
func decodeFooter(b []byte, footerStart int64) (*footer, error) {
	bad := func(format string, args ...any) error {
		return corruptf("columns: footer: "+format, args...)
	}
	if len(b) < 1+8+8+8 {
		return nil, bad("%d bytes, too short", len(b))
	}
	if b[0] < minVersion || b[0] > maxVersion {
		return nil, fmt.Errorf("columns: footer: version %d (this reader reads %d to %d): %w", b[0], minVersion, maxVersion, ErrVersion)
	}
	f := &footer{version: b[0]}
	rows := binary.LittleEndian.Uint64(b[1:])
	if rows > maxRows {
		return nil, bad("%d rows, at most %d", rows, maxRows)
	}
	f.rows = int(rows)
	f.interval = Interval{int64(binary.LittleEndian.Uint64(b[9:])), int64(binary.LittleEndian.Uint64(b[17:]))}
	if f.interval.Start > f.interval.End {
		return nil, bad("interval start %d after end %d", f.interval.Start, f.interval.End)
	}
	rest := b[25:]
	n, k := binary.Uvarint(rest)
	if k <= 0 || n > uint64(len(rest)-k) {
		return nil, bad("schema length past the end")
	}
	js := rest[k : k+int(n)]
	rest = rest[k+int(n):]
	schema, err := ParseSchema(js)
	if err != nil {
		return nil, bad("schema: %v", err)
	}
	f.schema = schema
	if err := checkVersionSchema(schema, f.version); err != nil {
		return nil, err
	}
	want := layout(schema, f.version)
	// From version 3 a long or double metric may have one more part, its nulls.
	optional := 0
	if f.version >= 3 {
		for c := range 1 + len(schema.Dimensions) + len(schema.Metrics) {
			if metricNullsColumn(schema, c) {
				optional++
			}
		}
	}
	np, k := binary.Uvarint(rest)
	if k <= 0 || np < uint64(len(want)) || np > uint64(len(want)+optional) {
		if optional > 0 {
			return nil, bad("%d parts listed, the schema has %d to %d", np, len(want), len(want)+optional)
		}
		return nil, bad("%d parts listed, the schema has %d", np, len(want))
	}
	rest = rest[k:]
	expect := make(map[[2]int]segfmt.Encoding, len(want))
	for _, w := range want {
		expect[[2]int{w.column, int(w.kind)}] = w.enc
	}
	ncols := 1 + len(schema.Dimensions) + len(schema.Metrics)
	next := int64(headerSize)
	f.parts = make([]segfmt.PartInfo, 0, np)
	metricNulls, partsV4, partsV5, partsV6 := 0, 0, 0, 0
	seenNulls := map[int]bool{}
	for i := 0; i < int(np); i++ {
		c, k := binary.Uvarint(rest)
		if k <= 0 || c >= uint64(ncols) || len(rest)-k < 2+8+8+4 {
			return nil, bad("part %d: bad column or short entry", i)
		}
		rest = rest[k:]
		p := segfmt.PartInfo{
			Index:    int(c),
			Kind:     segfmt.PartKind(rest[0]),
			Encoding: segfmt.Encoding(rest[1]),
			Offset:   int64(binary.LittleEndian.Uint64(rest[2:])),
			Length:   int64(binary.LittleEndian.Uint64(rest[10:])),
			CRC:      binary.LittleEndian.Uint32(rest[18:]),
		}
		rest = rest[22:]
		p.Column = columnName(schema, p.Index)
		key := [2]int{p.Index, int(p.Kind)}
		enc, ok := expect[key]
		if !ok && optional > 0 && p.Kind == segfmt.PartNulls && metricNullsColumn(schema, p.Index) && !seenNulls[p.Index] {
			// A metric's nulls part, at most once.
			seenNulls[p.Index] = true
			enc, ok = segfmt.EncRoaring, true
			metricNulls++
		}
		if !ok {
			return nil, corruptf("columns: column %q part %s: unexpected or duplicate part", p.Column, p.Kind)
		}
		delete(expect, key)
		if f.version >= versionV4 && p.Encoding != enc && encodingsV4[enc] == p.Encoding {
			enc = p.Encoding
			partsV4++
		}
		if f.version >= versionV5 && p.Encoding != enc && encodingsV5[enc] == p.Encoding {
			enc = p.Encoding
			partsV5++
		}
		if f.version >= versionV6 && p.Encoding != enc && encodingsV6[enc] == p.Encoding {
			enc = p.Encoding
			partsV6++
		}
		if enc != p.Encoding {
			return nil, corruptf("columns: column %q part %s: encoding %s, want %s", p.Column, p.Kind, p.Encoding, enc)
		}
		if p.Offset != next {
			return nil, corruptf("columns: column %q part %s: offset %d, want %d (parts are contiguous)", p.Column, p.Kind, p.Offset, next)
		}
		if p.Length < 0 || p.Length > footerStart-p.Offset {
			return nil, corruptf("columns: column %q part %s: offset %d length %d past end %d", p.Column, p.Kind, p.Offset, p.Length, footerStart)
		}
		next = p.Offset + p.Length
		f.parts = append(f.parts, p)
	}
	if next != footerStart {
		return nil, bad("parts end at %d, footer starts at %d", next, footerStart)
	}
	if len(f.parts)-metricNulls != len(want) {
		return nil, bad("%d parts listed, %d of them metric nulls: the schema has %d", len(f.parts), metricNulls, len(want))
	}
	if f.version == versionNulls && metricNulls == 0 {
		return nil, bad("version %d without a metric nulls part (such a segment is version %d)", f.version, versionNoNulls)
	}
	if f.version == versionV4 && partsV4 == 0 {
		return nil, bad("version %d without a part in a version %d encoding (such a segment is version %d or %d)", f.version, versionV4, versionNoNulls, versionNulls)
	}
	if f.version == versionV5 && partsV5 == 0 {
		return nil, bad("version %d without a part in a version %d encoding (such a segment is version %d at most)", f.version, versionV5, versionV4)
	}
	if f.version == versionV6 && partsV6 == 0 {
		return nil, bad("version %d without a part in a version %d encoding (such a segment is version %d at most)", f.version, versionV6, versionV5)
	}
	if len(rest) != 0 {
		return nil, bad("%d trailing bytes", len(rest))
	}
	return f, nil
}
