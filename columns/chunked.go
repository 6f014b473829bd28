package columns

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync/atomic"

	"github.com/writeout/writeout/internal/segfmt"
	"github.com/writeout/writeout/medium"
)

// A chunked part holds a column's values in chunks of up to ChunkRows rows, each chunk framed by
// appendChunk (codec byte, optional compression), then an index and a trailer:
//
//	chunk 0 | chunk 1 | ... | chunk k-1 |
//	index: k x (offset u64 | first row u64) | chunk count u32 | rows u64
//
// Offsets are from the start of the part; chunk i ends where chunk i+1 (or the index) starts.
// Rows are numbered from 0 and first rows strictly increase from 0; a part with no rows has no
// chunks. A row is found by a binary search of the first rows, so chunks may hold different
// numbers of rows (blob chunks close early when they grow large).
const (
	chunkIndexEntry  = 16
	chunkTrailerSize = 12
	maxChunkRows     = 1 << 16
	defaultChunkRows = 4096
)

// chunkIndexBuf is how many bytes of index entries a chunkedWriter keeps in memory; past it they
// go to a Bytes of the writer's medium (a variable for tests).
var chunkIndexBuf = 64 << 10

// source is where a segment's bytes come from: a mapping or an io.ReaderAt.
type source struct {
	data []byte      // the whole file when mapped
	r    io.ReaderAt // otherwise; when mapped, the file (for VerifyChecksumsContext, see partCRC)
	size int64
	// closed is set by Segment.Close, which must not run concurrently with reads.
	closed bool
	// viewed, when set (a segment's mapped source), is set by every view of the mapping
	// (see Segment.ReleasePages).
	viewed *atomic.Bool
	// willNeed, when set (a file's), asks the kernel to read [off, off+n) ahead (see
	// readAhead).
	willNeed func(off, n int64)
}

// file returns the source that reads a mapped file's bytes through its descriptor, for a
// pass over a large part that should leave no page of the mapping resident (a copy out of the
// page cache, see partCRC); nil when s is not a mapped file still open.
func (s *source) file() *source {
	if s.data == nil || s.r == nil || s.closed {
		return nil
	}
	return &source{r: s.r, size: s.size, willNeed: s.willNeed}
}

// view returns the n bytes at off. A mapped source returns a view of the mapping, valid until
// the segment is closed; otherwise the bytes are read into buf (grown when too small). The range
// is checked against the size first, so nothing outside the file is ever read.
func (s *source) view(off, n int64, buf []byte) ([]byte, error) {
	if s.closed {
		return nil, fmt.Errorf("columns: %w", errClosed)
	}
	if off < 0 || n < 0 || off > s.size || n > s.size-off {
		return nil, corruptf("range [%d, %d+%d) outside the file of %d bytes", off, off, n, s.size)
	}
	if s.data != nil {
		if v := s.viewed; v != nil && !v.Load() {
			v.Store(true)
		}
		return s.data[off : off+n : off+n], nil
	}
	if int64(cap(buf)) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	k, err := s.r.ReadAt(buf, off)
	if k == len(buf) {
		return buf, nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return nil, fmt.Errorf("read %d bytes at %d: %w", n, off, err)
}

// chunkedWriter writes chunk frames to a stage and keeps their index: the last entries in
// index, at most chunkIndexBuf bytes with the trailer, the ones before in spill, a Bytes of med
// made the first time index fills. finish copies spill, then index and the trailer, into the
// stage after the frames.
type chunkedWriter struct {
	st     *stage
	med    medium.Medium
	comp   Compression
	frame  []byte
	index  []byte       // a pooled buffer
	spill  medium.Bytes // nil until index first fills
	rows   int
	chunks int
}

func (c *chunkedWriter) writeChunk(raw []byte, rows int) error {
	if rows <= 0 {
		return nil
	}
	var err error
	c.frame = bytePool.Regrow(c.frame, maxFrame(len(raw)))
	c.frame, err = appendChunk(c.frame, raw, c.comp)
	if err != nil {
		return c.st.fail(err)
	}
	// index stays within chunkIndexBuf bytes, the trailer finish appends included.
	if len(c.index) > 0 && len(c.index)+chunkIndexEntry+chunkTrailerSize > chunkIndexBuf {
		if err := c.spillIndex(); err != nil {
			return err
		}
	}
	c.index = bytePool.Grow(c.index, chunkIndexEntry)
	c.index = binary.LittleEndian.AppendUint64(c.index, uint64(c.st.n))
	c.index = binary.LittleEndian.AppendUint64(c.index, uint64(c.rows))
	c.rows += rows
	c.chunks++
	return c.st.write(c.frame)
}

// spillIndex appends the index entries in memory to spill, making it first if need be.
func (c *chunkedWriter) spillIndex() error {
	if c.st.err != nil {
		return c.st.err
	}
	if c.spill == nil {
		b, err := c.med.NewBytes()
		if err != nil {
			return c.st.fail(fmt.Errorf("chunk index: %w", err))
		}
		c.spill = b
	}
	if _, err := c.spill.Write(c.index); err != nil {
		return c.st.fail(fmt.Errorf("chunk index: %w", err))
	}
	c.index = c.index[:0]
	return nil
}

// finish writes the index (what went to spill, then the entries in memory) and the trailer,
// and discards spill (a medium.Discarder).
func (c *chunkedWriter) finish() error {
	err := c.copySpill()
	c.index = bytePool.Grow(c.index, chunkTrailerSize)
	c.index = binary.LittleEndian.AppendUint32(c.index, uint32(c.chunks))
	c.index = binary.LittleEndian.AppendUint64(c.index, uint64(c.rows))
	if err == nil {
		err = c.st.write(c.index)
	}
	bytePool.Put(c.frame)
	bytePool.Put(c.index)
	c.index, c.frame = nil, nil
	return err
}

// copySpill writes spill's bytes to the stage, through its Write (which keeps its CRC and size).
func (c *chunkedWriter) copySpill() error {
	if c.spill == nil {
		return nil
	}
	b := c.spill
	c.spill = nil
	n, err := b.WriteTo(c.st)
	if err == nil && n != b.Size() {
		err = fmt.Errorf("copied %d of %d bytes: %w", n, b.Size(), io.ErrShortWrite)
	}
	if d, ok := b.(medium.Discarder); ok {
		_ = d.Discard() // else given back when the medium closes
	}
	if err != nil {
		return c.st.fail(fmt.Errorf("chunk index: %w", err))
	}
	return nil
}

// chunkIndex is the index of a chunked part, decoded entry by entry where it is stored: raw is
// a view of the mapping (valid until the segment is closed: read it only after a check that
// the segment is open) or, for a segment read with ReadAt, a copy.
type chunkIndex struct {
	part   *segfmt.PartInfo
	chk    *partCheck // the part's read-path check
	raw    []byte     // n entries of chunkIndexEntry bytes: offset u64, first row u64
	n      int        // the number of chunks
	idxOff int64      // the index's offset: where the last chunk ends
	rows   int        // the row count
}

// parseChunkIndex reads and checks the index of a chunked part whose column has rows rows.
func parseChunkIndex(src *source, p *segfmt.PartInfo, rows int) (*chunkIndex, error) {
	if p.Length < chunkTrailerSize {
		return nil, corruptf("%d bytes, too short for a chunk trailer", p.Length)
	}
	tr, err := src.view(p.Offset+p.Length-chunkTrailerSize, chunkTrailerSize, nil)
	if err != nil {
		return nil, err
	}
	n := int64(binary.LittleEndian.Uint32(tr))
	total := binary.LittleEndian.Uint64(tr[4:])
	if total != uint64(rows) {
		return nil, corruptf("%d rows, the segment has %d", total, rows)
	}
	body := p.Length - chunkTrailerSize
	if n > body/(chunkIndexEntry+1) {
		return nil, corruptf("%d chunks do not fit in %d bytes", n, body)
	}
	if (n == 0) != (rows == 0) {
		return nil, corruptf("%d chunks for %d rows", n, rows)
	}
	idxOff := body - n*chunkIndexEntry
	raw, err := src.view(p.Offset+idxOff, n*chunkIndexEntry, nil)
	if err != nil {
		return nil, err
	}
	var prevOff, prevFirst uint64
	for i := int64(0); i < n; i++ {
		off := binary.LittleEndian.Uint64(raw[i*chunkIndexEntry:])
		fr := binary.LittleEndian.Uint64(raw[i*chunkIndexEntry+8:])
		switch {
		case i == 0 && (off != 0 || fr != 0):
			return nil, corruptf("chunk 0 at offset %d row %d, want 0 and 0", off, fr)
		case i > 0 && (off <= prevOff || fr <= prevFirst):
			return nil, corruptf("chunk %d at offset %d row %d: not after chunk %d", i, off, fr, i-1)
		case off >= uint64(idxOff) || fr >= uint64(rows):
			return nil, corruptf("chunk %d at offset %d row %d: past the index at %d or the row count %d", i, off, fr, idxOff, rows)
		}
		if i > 0 && fr-prevFirst > maxChunkRows {
			return nil, corruptf("chunk %d holds %d rows, at most %d", i-1, fr-prevFirst, maxChunkRows)
		}
		prevOff, prevFirst = off, fr
	}
	if n > 0 && uint64(rows)-prevFirst > maxChunkRows {
		return nil, corruptf("chunk %d holds %d rows, at most %d", n-1, uint64(rows)-prevFirst, maxChunkRows)
	}
	return &chunkIndex{part: p, raw: raw, n: int(n), idxOff: idxOff, rows: rows}, nil
}

// chunks returns the number of chunks.
func (ix *chunkIndex) chunks() int { return ix.n }

// off returns the offset of chunk i in the part, i in [0, chunks()]: the index's for chunks().
func (ix *chunkIndex) off(i int) int64 {
	if i == ix.n {
		return ix.idxOff
	}
	return int64(binary.LittleEndian.Uint64(ix.raw[i*chunkIndexEntry:]))
}

// first returns the first row of chunk i, i in [0, chunks()]: the row count for chunks().
func (ix *chunkIndex) first(i int) int {
	if i == ix.n {
		return ix.rows
	}
	return int(binary.LittleEndian.Uint64(ix.raw[i*chunkIndexEntry+8:]))
}

// find returns the chunk holding row, which must be below the row count: the last whose first
// row is at most row, found by a binary search.
func (ix *chunkIndex) find(row int) int {
	lo, hi := 0, ix.n // first(lo) <= row < first(hi)
	for hi-lo > 1 {
		m := int(uint(lo+hi) >> 1) // below n: its entry is in raw
		e := ix.raw[m*chunkIndexEntry : (m+1)*chunkIndexEntry]
		if int(binary.LittleEndian.Uint64(e[8:])) <= row {
			lo = m
		} else {
			hi = m
		}
	}
	return lo
}

// frame returns the bytes of chunk i (read into buf unless mapped).
func (ix *chunkIndex) frame(src *source, i int, buf []byte) ([]byte, error) {
	lo := ix.off(i)
	return src.view(ix.part.Offset+lo, ix.off(i+1)-lo, buf)
}

// chunkReader decodes the chunks of one part one at a time, keeping the raw bytes of the current
// one. It is used by one goroutine.
type chunkReader struct {
	src   *source
	ix    *chunkIndex
	cur   int // current chunk, -1 for none
	lo    int // first row of the current chunk
	hi    int // first row after it
	frame []byte
	buf   []byte
	// crcOnly skips the parts' structural checks (the reader of a structural check).
	crcOnly bool
	// ahead: frame holds the part's bytes from frameOff, read through the file a window of
	// window bytes at a time (see forCheck, sequential).
	ahead    bool
	frameOff int64
	window   int64
	hinted   int64 // the part's bytes below it were asked for ahead (readAhead)
	// fused, when set (by a structural check that reads the part whole, see fusedCRC), takes
	// the frames as they are loaded, and the part's CRC is not checked first: the check
	// computes it.
	fused *fusedCRC
	// df, when set, is the part's structural check this reader put off (see Deferral).
	df *deferred
	// runs, when set, takes the frames as they are loaded, for a part whose CRC this reader
	// put off to a Deferral (see partRuns), run is its current run.
	runs *partRuns
	run  *crcRun
}

func newChunkReader(src *source, ix *chunkIndex) chunkReader {
	return chunkReader{src: src, ix: ix, cur: -1}
}

// forCheck makes c the reader of a structural check (crcOnly). A check reads its part whole,
// once: a mapped file's part longer than crcViaFileMin it reads through the descriptor, as
// partCRC checks it, where through the mapping the whole part would count in the RSS at once
// (until the check released it, see thenRelease). It reads crcPiece at a time (frameAhead):
// one read for many small frames.
func (c *chunkReader) forCheck() {
	c.crcOnly = true
	c.sequential()
	c.window = crcPiece
}

// sequential makes c read a mapped file's part longer than crcViaFileMin through the
// descriptor, crcPiece at a time (frameAhead), for a reader that reads the part front to back
// once: through the mapping, the pages it touched stay resident until a release, and a page
// cache's large folios map whole (a 300 M-row merge of five interleaved inputs held 85 MiB of
// them between releases every 2^17 rows, where its reads spanned a few).
func (c *chunkReader) sequential() {
	if c.cur >= 0 || c.frame != nil {
		return // it has read: its source stays
	}
	if f := c.src.file(); f != nil && c.ix.chk != nil && c.ix.chk.part.Length > crcViaFileMin {
		c.src, c.ahead, c.window = f, true, seqWindow
	}
}

// seqWindow is what a sequential reader (not a check's) reads through the descriptor at a
// time: a merge holds one window a column an input (35 for five inputs of the peers' seven
// columns), and 256 KiB windows (a check's) cost it 9 MiB more at 30 M rows than 64 KiB ones.
const seqWindow = 64 << 10

// frameAhead returns chunk i's frame from the window in c.frame, reading the window anew, from
// the frame on, when the frame is not in it.
func (c *chunkReader) frameAhead(i int) ([]byte, error) {
	lo, hi := c.ix.off(i), c.ix.off(i+1)
	if lo < c.frameOff || hi > c.frameOff+int64(len(c.frame)) {
		n := max(hi-lo, min(c.window, c.ix.part.Length-lo))
		c.frame = bytePool.Regrow(c.frame, int(max(n, 0)))
		b, err := c.src.view(c.ix.part.Offset+lo, n, c.frame)
		if err != nil {
			return nil, err
		}
		c.frame, c.frameOff = b, lo
		c.hinted = readAhead(c.src, c.ix.part.Offset, lo+n, c.ix.part.Length, c.hinted)
	}
	return c.frame[lo-c.frameOff : hi-c.frameOff : hi-c.frameOff], nil
}

// Read-ahead of a part read through the descriptor: the kernel's own read-ahead follows one
// sequential reader of a file, and a merge reads each input's columns at once, each its own
// part (and goroutines share the descriptor), so that from a file not in the page cache each
// window was read when asked for. Once a reader has read to within readAheadLead bytes of
// what it asked for ahead, it asks for the next readAheadSpan bytes of its part (variables
// for tests; the lead is at least a window, of a check's reader too). A 300 M-row hour rollup
// of five overlapping inputs not in the page cache took 8.6-9.6 s without, 6.1-6.2 s with
// (4.4 s warm; at 700 MB/s, reading the inputs whole, as the check of the parts it does not
// read does, takes 5.2 s); 4 MiB ahead, 6.9-8.5 s. The checksum pass over the parts a merge
// does not read (crcRange) asks the same way: that 300 M-row rollup's pass took 2.17-2.32 s
// from the disk without, 1.12-1.23 s with.
var (
	readAheadSpan int64 = 16 << 20
	readAheadLead int64 = 8 << 20
)

// readAhead asks src for the bytes ahead of end, up to limit, of a part at base in the file
// (end and limit offsets in the part), when src takes such hints and a sequential reader that
// has read to end is within readAheadLead of hinted, the end of what it asked for before. It
// returns the end of what it has asked for.
func readAhead(src *source, base, end, limit, hinted int64) int64 {
	if src.willNeed == nil || end+readAheadLead <= hinted {
		return hinted
	}
	from := max(hinted, end)
	to := min(from+readAheadSpan, limit)
	if from >= to {
		// Nothing left to read (a hint of no bytes would ask for the rest of the file).
		return hinted
	}
	src.willNeed(base+from, to-from)
	return to
}

// load returns the raw (decompressed) bytes of chunk i and sets the current range.
func (c *chunkReader) load(i int, maxRaw int) ([]byte, error) {
	c.cur = -1
	var fr []byte
	var err error
	switch {
	case c.ahead:
		fr, err = c.frameAhead(i)
	case c.src.data == nil:
		c.frame = bytePool.Regrow(c.frame, int(c.ix.off(i+1)-c.ix.off(i)))
		if fr, err = c.ix.frame(c.src, i, c.frame); err == nil {
			c.frame = fr
		}
	default:
		fr, err = c.ix.frame(c.src, i, nil)
	}
	if err != nil {
		return nil, err
	}
	if c.fused != nil {
		c.fused.add(i, fr)
	}
	if c.runs != nil {
		c.runs.took(&c.run, i, fr)
	}
	raw, buf, err := decodeChunk(c.buf, fr, maxRaw)
	c.buf = buf
	if err != nil {
		return nil, fmt.Errorf("chunk %d: %w", i, err)
	}
	c.lo, c.hi = c.ix.first(i), c.ix.first(i+1)
	return raw, nil
}

// release gives the reader's buffers back to the pools; a later load takes new ones.
func (c *chunkReader) release() {
	bytePool.Put(c.frame)
	bytePool.Put(c.buf)
	c.frame, c.buf, c.cur = nil, nil, -1
}

// rowErr reports a row outside the column.
func rowErr(row, rows int) error {
	return fmt.Errorf("columns: row %d out of range [0, %d): %w", row, rows, ErrInvalid)
}
