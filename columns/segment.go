package columns

import (
	"bytes"
	"fmt"
	"io"
	"sync/atomic"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/writeout/writeout/internal/segfmt"
	"github.com/writeout/writeout/internal/sys"
)

// Segment is an open segment file.
//
// A Segment and its column handles (Column, DimColumn, ...) are safe for concurrent use by
// many goroutines: their only mutable state is each part's checksum state (atomic), and reads
// go through a mapping or an io.ReaderAt. Cursors (Cursor, DimCursor, ...) and dictionary iterators keep the chunk
// they decoded last and are used by one goroutine at a time; take one per goroutine. Close must
// not run while other calls are in progress; after it, calls fail.
//
// Opening checks the header, the trailer, the footer's CRC, the footer itself, the index of
// every part and the CRC of every dictionary; reads check every offset and length they follow.
// Every other part's CRC-32C is checked by the first read that touches the part, before it
// returns anything from it: once per part while the segment is open (a later read costs an
// atomic load), and a mismatch is remembered, so every read of a damaged part fails with an
// error wrapping ErrCorrupt that names the file, the column and the part. VerifyChecksumsContext and
// Verify check every part at once, and the reads that follow compute nothing again;
// TrustChecksums (or OpenOptions.TrustChecksums, from Open on) skips the checks for bytes the
// caller has just checked another way. Once a part's CRC matches, its first read also checks
// the part's structure (dictionary order, ids against bitmaps and null rows, times against the
// interval, ...; see structure.go), once, remembering a failure the same way; what needs every
// column at once (the rollup key order) is checked by Verify only.
type Segment struct {
	name    string // the path given to Open, or OpenOptions.Name; "" for newSegmentBytes
	src     source
	closed  atomic.Bool
	closeFn func() error
	dropFn  func(off, n int64) error // drops the mapping's resident pages of a range (ReleasePages); nil unless mapped from a file
	f       *footer
	checks  []partCheck // read-path checksum state, one per part of f.parts
	// crcPasses counts the parts whose CRC was computed (for tests: each once), fileCRCs those
	// of a mapped file read through its descriptor, fusedCRCs those a structural check
	// computed as it read (fusedCRC), runCRCs those put together from deferred cursors' runs
	// (partRuns).
	crcPasses, fileCRCs, fusedCRCs, runCRCs atomic.Int64
	// release is what ReleasePages knows of the mapping's use.
	release releaseState

	time     *Column[int64]
	dims     []*DimColumn // nil for raw dimensions
	raws     []*RawColumn // nil for dictionary dimensions
	longs    []*Column[int64]
	doubles  []*Column[float64]
	sketches []*SketchColumn

	// structs are the structural checks of the parts (structure.go); pairSeed keys their
	// hashes of (row, id) pairs.
	structs  []*structCheck
	pairSeed uint64
}

// Open opens a segment file. On Linux it maps the file (read-only, shared); elsewhere, or if
// the mapping fails as unsupported, it reads with ReadAt. Close unmaps or closes the file.
func Open(path string) (*Segment, error) { return openWith(path, &sys.Default, OpenOptions{}) }

// OpenOptions are the options of OpenWith and NewSegmentWith. The zero value is what Open and
// NewSegment do.
type OpenOptions struct {
	// TrustChecksums skips every CRC check of the read path, and the structural checks that
	// follow them: the segment is opened as if
	// every part had been checked. It is for a file
	// whose bytes the caller has just checked; damaged bytes then
	// give wrong answers or decoding errors rather than a checksum error.
	TrustChecksums bool
	// Name names the segment (Segment.Name) for NewSegmentWith, whose reader has no path: the
	// URL of an object, for example. Open and OpenWith name it by its path.
	Name string
}

// OpenWith is Open with options.
func OpenWith(path string, o OpenOptions) (*Segment, error) { return openWith(path, &sys.Default, o) }

func openWith(path string, calls *sys.Calls, o OpenOptions) (*Segment, error) {
	f, _, err := openRegular(path)
	if err != nil {
		return nil, fmt.Errorf("columns: open: %w", err)
	}
	return openFileWith(f, path, calls, o)
}

// NewSegment reads a segment of size bytes from r, which must allow concurrent ReadAt calls (as
// io.ReaderAt promises) and stay readable until the segment is closed. Close does not close r.
func NewSegment(r io.ReaderAt, size int64) (*Segment, error) {
	return NewSegmentWith(r, size, OpenOptions{})
}

// NewSegmentWith is NewSegment with options.
func NewSegmentWith(r io.ReaderAt, size int64, o OpenOptions) (*Segment, error) {
	if r == nil || size < 0 {
		return nil, fmt.Errorf("columns: NewSegment: nil reader or negative size: %w", ErrInvalid)
	}
	s, err := newSegment(source{r: r, size: size}, o.Name, nil, o)
	if err != nil {
		return nil, err
	}
	if d, ok := r.(PageDropper); ok {
		s.dropFn = d.DropPages
	}
	return s, nil
}

// PageDropper is a ReaderAt that keeps what it read in memory of its own that it can give
// back, as an object store reader maps the cache file of the bytes it fetched: a segment over
// it releases them (ReleasePages, and the checks that release as they go) through DropPages,
// which takes the pages of [off, off+n) out of the process's resident set; a later read
// brings them back.
type PageDropper interface {
	DropPages(off, n int64) error
}

// newSegmentBytes reads a segment from b without copying; b must not change while the segment
// is in use.
func newSegmentBytes(b []byte) (*Segment, error) {
	if len(b) == 0 {
		return newSegment(source{r: bytes.NewReader(nil), size: 0}, "", nil, OpenOptions{})
	}
	return newSegment(source{data: b, size: int64(len(b))}, "", nil, OpenOptions{})
}

func newSegment(src source, name string, closeFn func() error, o OpenOptions) (*Segment, error) {
	s := &Segment{name: name, src: src, closeFn: closeFn}
	if src.data != nil {
		s.src.viewed = &s.release.viewed
	}
	f, err := readFooter(src)
	if err != nil {
		return nil, err
	}
	s.f = f
	s.checks = make([]partCheck, len(f.parts))
	for i := range s.checks {
		s.checks[i].seg, s.checks[i].part = s, &f.parts[i]
	}
	if o.TrustChecksums {
		s.trustChecksums()
	}
	if err := s.parseColumns(); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Segment) part(col int, kind segfmt.PartKind) *segfmt.PartInfo {
	for i := range s.f.parts {
		if p := &s.f.parts[i]; p.Index == col && p.Kind == kind {
			return p
		}
	}
	return nil // a side part the format version lacks (decodeFooter checked the rest are there)
}

func (s *Segment) parseColumns() error {
	sc := s.f.schema
	rows := s.f.rows
	chunked := func(p *segfmt.PartInfo) (*chunkIndex, error) {
		ix, err := parseChunkIndex(&s.src, p, rows)
		if err != nil {
			return nil, s.openError(p, err)
		}
		ix.chk = s.checkOf(p)
		return ix, nil
	}
	ix, err := chunked(s.part(0, segfmt.PartValues))
	if err != nil {
		return err
	}
	s.time = &Column[int64]{seg: s, name: TimeColumn, ix: ix}
	s.dims = make([]*DimColumn, len(sc.Dimensions))
	s.raws = make([]*RawColumn, len(sc.Dimensions))
	for i, d := range sc.Dimensions {
		c := 1 + i
		if d.Raw {
			ix, err := chunked(s.part(c, segfmt.PartValues))
			if err != nil {
				return err
			}
			s.raws[i] = &RawColumn{seg: s, dim: d, ix: ix, nulls: s.checkOf(s.part(c, segfmt.PartNulls))}
			continue
		}
		dc := &DimColumn{seg: s, dim: d, nulls: s.checkOf(s.part(c, segfmt.PartNulls))}
		dp := s.part(c, segfmt.PartDictionary)
		// The dictionary's count and null flag are read from unchecked bytes; the part is
		// checked before anything derived from it is handed out: by Dim (Cardinality and
		// HasNull are reached through it), and by every read of its bytes. A failure to parse
		// here blames the dictionary when its CRC is wrong.
		if dc.dict, err = parseDict(&s.src, dp); err != nil {
			return s.openError(dp, err)
		}
		dc.dict.chk = s.checkOf(dp)
		card := dc.dict.cardinality()
		if card == 0 && rows > 0 {
			return s.openError(dp, corruptf("empty dictionary for %d rows", rows))
		}
		ip := s.part(c, segfmt.PartIDs)
		if ip.Encoding == segfmt.EncIDChunksV4 || ip.Encoding == segfmt.EncIDChunksV5 {
			dc.deltas = ip.Encoding == segfmt.EncIDChunksV5
			// The chunked part, then the rank table.
			tail := rankTableSize(card)
			if tail > ip.Length {
				if derr := s.openError(dp, nil); derr != nil {
					return derr
				}
				return s.openError(ip, corruptf("%d bytes, too short for a rank table of %d bytes", ip.Length, tail))
			}
			raw, err := s.src.view(ip.Offset+ip.Length-tail, tail, nil)
			if err != nil {
				return s.openError(ip, err)
			}
			if dc.perm, err = decodeRankTable(raw, card); err != nil {
				if derr := s.openError(dp, nil); derr != nil {
					return derr // the table did not fit the dictionary's count: which is wrong
				}
				return s.openError(ip, err)
			}
			chunks := *ip
			chunks.Length -= tail
			if dc.ix, err = parseChunkIndex(&s.src, &chunks, rows); err != nil {
				if derr := s.openError(dp, nil); derr != nil {
					return derr // the table's size comes from the dictionary's count
				}
				return s.openError(ip, err)
			}
			dc.ix.chk = s.checkOf(ip)
		} else if dc.ix, err = chunked(ip); err != nil {
			return err
		}
		if ip.Encoding == segfmt.EncIDChunksDerived {
			if d.NoBitmapIndex {
				return s.openError(ip, corruptf("ids derived from a bitmap index the dimension does not have"))
			}
			dc.derived = true
		}
		if !d.NoBitmapIndex {
			p := s.part(c, segfmt.PartBitmaps)
			if dc.bms, err = parseBitmaps(&s.src, p, card, rows); err != nil {
				if derr := s.openError(dp, nil); derr != nil {
					return derr // the table did not fit the dictionary's count: which is wrong
				}
				return s.openError(p, err)
			}
			dc.bms.chk = s.checkOf(p)
		}
		s.dims[i] = dc
	}
	for i, m := range sc.Metrics {
		c := 1 + len(sc.Dimensions) + i
		ix, err := chunked(s.part(c, segfmt.PartValues))
		if err != nil {
			return err
		}
		var (
			l  *Column[int64]
			d  *Column[float64]
			sk *SketchColumn
		)
		var times *Column[int64]
		if p := s.part(c, segfmt.PartTimes); p != nil {
			tix, err := chunked(p)
			if err != nil {
				return err
			}
			times = &Column[int64]{seg: s, name: m.Name, ix: tix, part: segfmt.PartTimes}
		}
		var nulls *partCheck
		if p := s.part(c, segfmt.PartNulls); p != nil {
			nulls = s.checkOf(p)
		}
		switch m.column() {
		case MetricLong:
			l = &Column[int64]{seg: s, name: m.Name, ix: ix, times: times, nulls: nulls}
		case MetricDouble:
			d = &Column[float64]{seg: s, name: m.Name, ix: ix, times: times, nulls: nulls}
			if p := s.part(c, segfmt.PartTails); p != nil {
				tix, err := chunked(p)
				if err != nil {
					return err
				}
				d.tails = &TailColumn{seg: s, name: m.Name, ix: tix}
			}
		case MetricHyperUnique:
			sks, err := m.Sketches()
			if err != nil {
				return fmt.Errorf("metric %q: %w: %w", m.Name, ErrCorrupt, err)
			}
			sk = &SketchColumn{seg: s, name: m.Name, ix: ix, sks: sks}
		}
		s.longs, s.doubles, s.sketches = append(s.longs, l), append(s.doubles, d), append(s.sketches, sk)
	}
	s.addStructChecks()
	return nil
}

// Close unmaps the file (or closes it) for a segment from Open; for one from NewSegment it
// releases nothing. A second Close returns nil.
func (s *Segment) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	s.src.closed = true
	if s.closeFn != nil {
		return s.closeFn()
	}
	return nil
}

// Name returns the path the segment was opened from, or "" for a segment made by NewSegment
// or newSegmentBytes.
func (s *Segment) Name() string { return s.name }

// ChecksumStats says how the CRCs of a Segment's parts were computed so far (see
// Segment.ChecksumStats).
type ChecksumStats struct {
	// Computed counts the CRC computations: a part's on its first read, once per open
	// Segment, and every part's again on each Verify.
	Computed int64
	// ViaFile counts those of a mapped file's parts read through its descriptor (a large
	// part's first read, a pass over the parts a merge did not read).
	ViaFile int64
	// Fused counts the CRCs a structural check computed from the chunks it decoded, and
	// FromRuns those put together from the chunks that cursors taken with a Deferral loaded:
	// the part was read once, not once more for its CRC.
	Fused, FromRuns int64
}

// ChecksumStats returns the counts of the segment's CRC computations so far: what reading it
// cost beyond the reads themselves.
func (s *Segment) ChecksumStats() ChecksumStats {
	return ChecksumStats{Computed: s.crcPasses.Load(), ViaFile: s.fileCRCs.Load(), Fused: s.fusedCRCs.Load(), FromRuns: s.runCRCs.Load()}
}

// Schema returns the segment's schema.
func (s *Segment) Schema() Schema { return s.f.schema.Clone() }

// Rows returns the number of rows.
func (s *Segment) Rows() int { return s.f.rows }

// Interval returns the time interval the segment covers.
func (s *Segment) Interval() Interval { return s.f.interval }

// Info returns the segment's description, as publishing it returned it (without path and
// syncs): its size and its footer's parts among the rest.
func (s *Segment) Info() Info { return s.f.info(s.src.size) }

// Time returns the __time column.
func (s *Segment) Time() *Column[int64] { return s.time }

// Dim returns a dictionary dimension.
func (s *Segment) Dim(name string) (*DimColumn, error) {
	i := s.f.schema.Dimension(name)
	if i < 0 || s.dims[i] == nil {
		return nil, fmt.Errorf("columns: no dictionary dimension %q: %w", name, ErrSchema)
	}
	// The column's cardinality and null flag come from its dictionary: checked first.
	if err := s.dims[i].dict.check(); err != nil {
		return nil, err
	}
	return s.dims[i], nil
}

// Raw returns a raw dimension.
func (s *Segment) Raw(name string) (*RawColumn, error) {
	i := s.f.schema.Dimension(name)
	if i < 0 || s.raws[i] == nil {
		return nil, fmt.Errorf("columns: no raw dimension %q: %w", name, ErrSchema)
	}
	return s.raws[i], nil
}

// Long returns a long metric.
func (s *Segment) Long(name string) (*Column[int64], error) {
	i := s.f.schema.Metric(name)
	if i < 0 || s.longs[i] == nil {
		return nil, fmt.Errorf("columns: no long metric %q: %w", name, ErrSchema)
	}
	return s.longs[i], nil
}

// Double returns a double metric.
func (s *Segment) Double(name string) (*Column[float64], error) {
	i := s.f.schema.Metric(name)
	if i < 0 || s.doubles[i] == nil {
		return nil, fmt.Errorf("columns: no double metric %q: %w", name, ErrSchema)
	}
	return s.doubles[i], nil
}

// Sketch returns a sketch metric.
func (s *Segment) Sketch(name string) (*SketchColumn, error) {
	i := s.f.schema.Metric(name)
	if i < 0 || s.sketches[i] == nil {
		return nil, fmt.Errorf("columns: no hyperUnique metric %q: %w", name, ErrSchema)
	}
	return s.sketches[i], nil
}

// bitmap returns the bitmap of id in a dictionary dimension: the rows holding that value.
func (s *Segment) bitmap(dim string, id uint32) (*roaring.Bitmap, error) {
	d, err := s.Dim(dim)
	if err != nil {
		return nil, err
	}
	return d.Bitmap(id)
}

// nulls returns the null rows of a dimension (dictionary or raw).
func (s *Segment) nulls(dim string) (*roaring.Bitmap, error) {
	i := s.f.schema.Dimension(dim)
	switch {
	case i < 0:
		return nil, fmt.Errorf("columns: no dimension %q: %w", dim, ErrSchema)
	case s.raws[i] != nil:
		return s.raws[i].Nulls()
	}
	return s.dims[i].Nulls()
}

func (s *Segment) readNulls(name string, pc *partCheck) (*roaring.Bitmap, error) {
	if err := pc.check(); err != nil {
		return nil, err
	}
	return s.decodeNulls(name, pc)
}

// decodeNulls is readNulls after the part's check: it checks the CRC only.
func (s *Segment) decodeNulls(name string, pc *partCheck) (*roaring.Bitmap, error) {
	if err := pc.checkCRC(); err != nil {
		return nil, err
	}
	p := pc.part
	raw, err := s.src.view(p.Offset, p.Length, nil)
	if err != nil {
		return nil, partError(name, p.Kind, err)
	}
	bm, err := decodeBitmap(raw, s.f.rows)
	return bm, partError(name, p.Kind, err)
}

// seg checks the segment is open, row within it, and the part's CRC (once).
func (c *chunkReader) seg(row int) error {
	if c.src.closed {
		return fmt.Errorf("columns: %w", errClosed)
	}
	if rows := c.ix.rows; row < 0 || row >= rows {
		return rowErr(row, rows)
	}
	if c.df != nil {
		return c.df.seg(c)
	}
	if c.runs != nil {
		// The CRC is put together from the frames read (partRuns): only a verdict found
		// already stops the read.
		if st, _ := c.ix.chk.load(); st == checkBad {
			return c.ix.chk.checkCRC()
		}
		return nil
	}
	if c.fused != nil {
		return nil // the structural check reading the part computes its CRC
	}
	if c.crcOnly {
		return c.ix.chk.checkCRC()
	}
	return c.ix.chk.check()
}

// next returns the chunk holding row: the one after the current when reading on, else found
// by binary search.
func (c *chunkReader) next(row int) int {
	if c.cur >= 0 && row == c.hi && c.cur+1 < c.ix.chunks() {
		return c.cur + 1
	}
	return c.ix.find(row)
}

// partOr returns k, or segfmt.PartValues for the zero kind.
func partOr(k segfmt.PartKind) segfmt.PartKind {
	if k == 0 {
		return segfmt.PartValues
	}
	return k
}
