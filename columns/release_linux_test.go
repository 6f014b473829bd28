package columns

import (
	"bufio"
	"context"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/columns/agg"
	"github.com/writeout/writeout/internal/segfmt"
	"github.com/writeout/writeout/medium"
)

// mappingRss returns the resident bytes of the mapping that starts at b's first byte, from
// /proc/self/smaps (the Rss line of its VMA).
func mappingRss(t *testing.T, b []byte) int64 {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	require.NoError(t, err)
	defer f.Close()
	start := uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b))))
	sc := bufio.NewScanner(f)
	in := false
	for sc.Scan() {
		line := sc.Text()
		if lo, _, ok := strings.Cut(strings.Fields(line)[0], "-"); ok && !strings.HasSuffix(strings.Fields(line)[0], ":") {
			a, err := strconv.ParseUint(lo, 16, 64)
			in = err == nil && a == start
			continue
		}
		if in && strings.HasPrefix(line, "Rss:") {
			f := strings.Fields(line)
			kb, err := strconv.ParseInt(f[1], 10, 64)
			require.NoError(t, err)
			return kb << 10
		}
	}
	require.NoError(t, sc.Err())
	t.Fatalf("no mapping starts at %#x in /proc/self/smaps", start)
	return 0
}

// writeReleaseSegment writes a segment of rows rows of allSchema to a file and returns its
// path and rows.
func writeReleaseSegment(t *testing.T, rows int) (string, []Row) {
	t.Helper()
	s := allSchema()
	gen := newRowGen(7, s)
	rs := make([]Row, rows)
	for i := range rs {
		rs[i] = gen.next()
	}
	m := medium.NewHeap()
	defer func() { require.NoError(t, m.Close()) }()
	b := writeRows(t, s, rs, writerOptions{Medium: m, ChunkRows: 1024})
	path := filepath.Join(t.TempDir(), "release.seg")
	require.NoError(t, os.WriteFile(path, b, 0o644))
	return path, rs
}

func TestReleasePagesDropsTheMappingsResidentPages(t *testing.T) {
	path, rows := writeReleaseSegment(t, 8000)
	seg, err := Open(path)
	require.NoError(t, err)
	defer func() { require.NoError(t, seg.Close()) }()
	data := seg.src.data
	require.NotNil(t, data, "the segment should be mapped on Linux")
	require.Greater(t, len(data), 256<<10, "a segment of some pages")
	readAll := func() {
		t.Helper()
		rr := seg.RowReader()
		var r Row
		for i, want := range rows {
			require.NoError(t, rr.Read(i, &r))
			requireRowEqual(t, seg.Schema(), i, want, r)
		}
	}

	// VerifyChecksums reads every part and releases each once checked: what stays resident
	// is the header and the footer (and a fault-around window's worth of pages by them).
	require.NoError(t, seg.verifyChecksums())
	require.Less(t, mappingRss(t, data), int64(128<<10), "parts resident after VerifyChecksums")

	readAll()
	require.Greater(t, mappingRss(t, data), int64(len(data))/4, "the rows' parts resident once read")
	require.NoError(t, seg.ReleasePages())
	require.Zero(t, mappingRss(t, data), "no page resident after ReleasePages")

	// The bytes are the same when read again: every row, from views taken afresh.
	readAll()
	require.Positive(t, mappingRss(t, data), "read back in")
	require.NoError(t, seg.ReleasePages())
	// A part the read path checked (while the rows were read) is not read again by
	// VerifyChecksums, nor released: its reader may still be using it.
	readAll()
	before := mappingRss(t, data)
	require.NoError(t, seg.verifyChecksums())
	require.GreaterOrEqual(t, mappingRss(t, data), before)
}

// TestReleasePagesSkipsWhatNothingViewed: a release after which nothing viewed the mapping is
// skipped from the second on (a view taken just before a release may be read after it), but
// every releaseForceEvery-th is done; a view makes the next two releases drop the pages again.
func TestReleasePagesSkipsWhatNothingViewed(t *testing.T) {
	seg, _ := openMappedPages(t, 8000)
	data := seg.src.data
	col, err := seg.Long(string(agg.LongSum) + "_m")
	require.NoError(t, err)
	touch := func() { // a read of every row through the mapping
		t.Helper()
		cur := col.Cursor()
		for r := range seg.Rows() {
			_, err := cur.At(r)
			require.NoError(t, err)
		}
	}
	skipped := func(f func() error) int64 {
		t.Helper()
		n := releasesSkipped.Load()
		require.NoError(t, f())
		return releasesSkipped.Load() - n
	}
	touch()
	require.Positive(t, mappingRss(t, data))
	require.Zero(t, skipped(seg.ReleasePages), "viewed since the last release")
	require.Zero(t, mappingRss(t, data))
	require.Zero(t, skipped(seg.ReleasePages), "viewed before the last release")
	for i := 1; i < releaseForceEvery; i++ {
		require.Equal(t, int64(1), skipped(seg.ReleasePages), "release %d with nothing viewed", i)
	}
	require.Zero(t, skipped(seg.ReleasePages), "the releaseForceEvery-th is done")

	// A view, then a release, then the read of the view's bytes: the release after drops them.
	cur := col.Cursor()
	_, err = cur.At(0)
	require.NoError(t, err)
	require.Zero(t, skipped(seg.ReleasePages))
	for r := range seg.Rows() {
		_, err := cur.At(r)
		require.NoError(t, err)
	}
	require.Positive(t, mappingRss(t, data))
	require.Zero(t, skipped(seg.ReleasePages), "viewed before the last release")
	require.Zero(t, mappingRss(t, data))
}

func TestReleasePagesLeavesUnmappedBytesAlone(t *testing.T) {
	// A segment over caller's bytes (Go heap memory): MADV_DONTNEED there would zero them.
	path, rows := writeReleaseSegment(t, 3000)
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	want := append([]byte(nil), b...)
	seg, err := newSegmentBytes(b)
	require.NoError(t, err)
	require.NoError(t, seg.ReleasePages())
	require.Equal(t, want, b, "the caller's bytes are untouched")
	require.NoError(t, seg.verifyChecksums())
	var r Row
	require.NoError(t, seg.RowReader().Read(len(rows)-1, &r))
	requireRowEqual(t, seg.Schema(), len(rows)-1, rows[len(rows)-1], r)
	require.NoError(t, seg.Close())
	require.ErrorIs(t, seg.ReleasePages(), ErrState)
	require.ErrorIs(t, seg.ReleasePages(), medium.ErrClosed)
}

// TestReadCheckOfALargePart: the read path checks a part longer than crcViaFileMin through
// the file, so that the check does not make the whole part resident (the reader then faults in
// what it reads, and a merge releases it as it goes); a shorter one through the mapping, which
// the reader then finds ready, and so a part its structural check reads whole (the times, a
// dimension's ids), which makes it resident anyway. (The resident pages themselves are no measure here: the page
// cache maps a fault's whole folio, up to 2 MiB, and a test segment is a few of those. The
// peers' merge of 30 M rows in 5 interleaving inputs peaked at 292 MiB of mapped input pages
// checked through the mapping, 53 MiB through the file: bench/RESULTS.md.)
func TestReadCheckOfALargePart(t *testing.T) {
	defer func(n int64) { crcViaFileMin = n }(crcViaFileMin)
	path, rows := writeReleaseSegment(t, 8000)
	for _, min := range []int64{1 << 40, 100_000, 0} {
		crcViaFileMin = min
		seg, err := Open(path)
		require.NoError(t, err)
		require.NotNil(t, seg.src.data, "the segment should be mapped on Linux")
		var r Row
		require.NoError(t, seg.RowReader().Read(0, &r))
		requireRowEqual(t, seg.Schema(), 0, rows[0], r)
		var long, whole int64
		for i := range seg.f.parts {
			if seg.checks[i].state.Load()>>32 == uint64(checkNone) {
				continue
			}
			switch p := &seg.f.parts[i]; {
			case p.Column == TimeColumn || p.Kind == segfmt.PartIDs:
				whole++
			case p.Length > min:
				long++
			}
		}
		require.Positive(t, whole)
		require.Positive(t, seg.crcPasses.Load())
		require.Equal(t, long, seg.fileCRCs.Load(), "crcViaFileMin %d: the parts checked through the file", min)
		if min == 0 {
			require.Equal(t, seg.crcPasses.Load()-whole, seg.fileCRCs.Load(), "every part but those read whole")
		}
		require.NoError(t, seg.Close())
	}
}

// TestStructuralCheckReadsLargePartsViaFile: a structural check reads a mapped file's part
// longer than crcViaFileMin through the descriptor (as its CRC is checked), so that the
// check, which reads the part whole, does not fault it into the mapping; a shorter part
// through the mapping. Either way the checks pass.
func TestStructuralCheckReadsLargePartsViaFile(t *testing.T) {
	seg, dc := openMappedPages(t, 20_000)
	for _, large := range []bool{true, false} {
		crcViaFileMin = 0
		if !large {
			crcViaFileMin = seg.src.size
		}
		cur := dc.Cursor()
		cur.cr.forCheck()
		require.Equal(t, large, cur.cr.src.data == nil, "large %v: read through the file", large)
		cur.Release()
		tc := seg.time.Cursor()
		tc.cr.forCheck()
		require.Equal(t, large, tc.cr.src.data == nil, "large %v: read through the file", large)
		tc.Release()
		require.NoError(t, seg.checkTime())
		require.NoError(t, seg.checkDimRows(dc))
	}

	// Through the file, it reads many chunks' frames at once.
	crcViaFileMin = 0
	tc := seg.time.Cursor()
	defer tc.Release()
	tc.cr.forCheck()
	reads := &countingReaderAt{r: tc.cr.src.r}
	tc.cr.src.r = reads
	for r := 0; r < seg.Rows(); {
		first, vals, err := tc.Chunk(r)
		require.NoError(t, err)
		r = first + len(vals)
	}
	require.Greater(t, tc.cr.ix.n, 10)
	require.Less(t, reads.n, tc.cr.ix.n/4, "reads for %d chunks", tc.cr.ix.n)
}

type countingReaderAt struct {
	r io.ReaderAt
	n int
}

func (c *countingReaderAt) ReadAt(p []byte, off int64) (int, error) {
	c.n++
	return c.r.ReadAt(p, off)
}

// TestBitmapHeadersViaFile: the structural check of a mapped file's large bitmaps part reads
// each bitmap's header through the descriptor, a bounded prefix, and counts what the whole
// bitmap's header says; a prefix too short to parse is read again whole.
func TestBitmapHeadersViaFile(t *testing.T) {
	seg, dc := openMappedPages(t, 200_000)
	require.NotNil(t, dc.bms)
	for _, large := range []bool{false, true} {
		crcViaFileMin = seg.src.size
		if large {
			crcViaFileMin = 0
		}
		for _, short := range []bool{false, true} {
			hs := dc.bms.headers()
			require.Equal(t, large, hs.file != nil, "large %v: through the file", large)
			if short && large {
				hs.max = 5 // every roaring header cut: read again whole
			}
			for id := range dc.bms.count {
				raw, err := dc.bms.raw(id)
				require.NoError(t, err)
				want, err := storedCount(raw, dc.bms.v4)
				require.NoError(t, err)
				got, err := hs.count(id)
				require.NoError(t, err, "bitmap %d", id)
				require.Equal(t, want, got, "bitmap %d", id)
			}
		}
		require.NoError(t, seg.checkDimRows(dc))
	}
}

// openMappedPages opens a mapped segment of rows rows (writeReleaseSegment) and its dimension
// "page" until the test ends, and restores crcViaFileMin then, for a test that changes it.
func openMappedPages(t *testing.T, rows int) (*Segment, *DimColumn) {
	t.Helper()
	saved := crcViaFileMin
	path, _ := writeReleaseSegment(t, rows)
	seg, err := Open(path)
	require.NoError(t, err)
	t.Cleanup(func() {
		crcViaFileMin = saved
		require.NoError(t, seg.Close())
	})
	require.NotNil(t, seg.src.data, "the segment should be mapped on Linux")
	dc, err := seg.Dim("page")
	require.NoError(t, err)
	return seg, dc
}

// TestSequentialCursorsReadViaFile: Sequential cursors (a merge's) read a mapped file's large
// parts through the descriptor, a window at a time: they read what plain cursors read, with a
// deferred check too (its CRC computed from the windows' frames); their frames come from the
// descriptor, not the mapping (which a page cache's large folios map 2 MiB at a time: the 300 M
// merge's figures in bench/RESULTS.md show what that saves). Small parts are read through the
// mapping.
func TestSequentialCursorsReadViaFile(t *testing.T) {
	seg, dc := openMappedPages(t, 60_000)
	crcViaFileMin = 0
	plain, err := newSegmentBytes(seg.src.data) // the same mapping's bytes
	require.NoError(t, err)
	want, err := readTimesIDs(plain, nil)
	require.NoError(t, err)
	require.NoError(t, seg.ReleasePages())

	// The times and ids through deferred Sequential cursors, as a merge reads them.
	d := &Deferral{}
	tc := seg.Time().DeferredCursor(d).Sequential()
	require.Nil(t, tc.cr.src.data, "the times through the file")
	reads := &countingReaderAt{r: tc.cr.src.r}
	tc.cr.src.r = reads
	for r := 0; r < seg.Rows(); {
		first, vals, err := tc.Chunk(r)
		require.NoError(t, err)
		r = first + len(vals)
	}
	tc.Release()
	require.Greater(t, tc.cr.ix.n, 10)
	require.Less(t, reads.n, tc.cr.ix.n, "a window holds many chunks' frames")
	ids := dc.Cursor().Sequential()
	require.Nil(t, ids.cr.src.data, "the ids through the file")
	ids.Release()
	got, err := readTimesIDsWith(seg, d, true)
	require.NoError(t, err)
	require.Equal(t, want, got)
	require.NoError(t, d.Judge())
	require.Positive(t, seg.fusedCRCs.Load(), "CRCs computed from the windows' frames")

	// The metrics through Sequential cursors.
	var metrics [][]int64
	for _, m := range seg.Schema().Metrics {
		lc, err := seg.Long(m.Name)
		if err != nil {
			continue
		}
		cur := lc.Cursor().Sequential()
		require.Nil(t, cur.cr.src.data, "%s: through the file", m.Name)
		vals := make([]int64, seg.Rows())
		for r := range vals {
			vals[r], err = cur.At(r)
			require.NoError(t, err)
		}
		metrics = append(metrics, vals)
		cur.Release()
	}
	require.NotEmpty(t, metrics)
	// The same values through plain cursors.
	k := 0
	for _, m := range seg.Schema().Metrics {
		pc, err := plain.Long(m.Name)
		if err != nil {
			continue
		}
		cur := pc.Cursor()
		for r := range seg.Rows() {
			v, err := cur.At(r)
			require.NoError(t, err)
			require.Equal(t, v, metrics[k][r], "%s row %d", m.Name, r)
		}
		k++
		cur.Release()
	}

	// A part below crcViaFileMin is read through the mapping.
	crcViaFileMin = seg.src.size
	small := dc.Cursor().Sequential()
	require.NotNil(t, small.cr.src.data)
	small.Release()
}

// TestSequentialReadAhead: a Sequential cursor reading a large part through the descriptor
// asks for the part's bytes ahead of its reads (posix_fadvise WILLNEED, see readAhead), a span
// at a time, once it has read to within the lead of what it asked for: every byte it reads
// past its first window was asked for before, the spans follow one another, and none passes
// the part's end.
func TestSequentialReadAhead(t *testing.T) {
	seg, _ := openMappedPages(t, 200_000)
	crcViaFileMin = 0
	savedSpan, savedLead := readAheadSpan, readAheadLead
	t.Cleanup(func() { readAheadSpan, readAheadLead = savedSpan, savedLead })
	readAheadSpan, readAheadLead = 3*seqWindow, seqWindow // a lead of a window at least
	require.NotNil(t, seg.src.willNeed, "a mapped file's source asks for read-ahead")
	type event struct {
		hint   bool
		off, n int64
	}
	// The parts' checks first: a check through the descriptor asks for read-ahead too
	// (TestChecksumPassReadAhead), and the cursor's own requests are the point here.
	require.NoError(t, seg.VerifyChecksumsContext(context.Background()))
	var log []event
	seg.src.willNeed = func(off, n int64) { log = append(log, event{true, off, n}) }
	var col *Column[int64] // the long metric of the largest part
	for _, m := range seg.Schema().Metrics {
		if c, err := seg.Long(m.Name); err == nil && (col == nil || c.ix.part.Length > col.ix.part.Length) {
			col = c
		}
	}
	require.NotNil(t, col)
	tc := col.Cursor().Sequential()
	require.Nil(t, tc.cr.src.data, "the values through the file")
	tc.cr.src.r = readerFunc(func(p []byte, off int64) (int, error) {
		log = append(log, event{false, off, int64(len(p))})
		return seg.src.r.ReadAt(p, off)
	})
	for r := 0; r < seg.Rows(); {
		first, vals, err := tc.Chunk(r)
		require.NoError(t, err)
		r = first + len(vals)
	}
	tc.Release()
	part := tc.cr.ix.part
	require.Greater(t, part.Length, 4*readAheadSpan, "a part of many spans")
	var hinted int64 // the end of what was asked for
	hints := 0
	for i, e := range log {
		if e.hint {
			require.True(t, hinted == 0 || e.off == hinted, "event %d: a span from %d, the last ended at %d", i, e.off, hinted)
			require.LessOrEqual(t, e.off+e.n, part.Offset+part.Length, "event %d: past the part", i)
			hinted = e.off + e.n
			hints++
			continue
		}
		if i > 0 { // the first window is read before any hint
			require.LessOrEqual(t, e.off+e.n, hinted, "event %d: a read of [%d, %d) not asked for ahead", i, e.off, e.off+e.n)
		}
	}
	require.Equal(t, part.Offset+part.Length, hinted, "the spans reach the part's end")
	require.Greater(t, hints, 3)
}

// TestChecksumPassReadAhead: the checksum pass over a mapped file's parts, which reads them
// through the descriptor (VerifyChecksumsContext, a merge's pass over the parts it did not
// read), asks for each part's bytes ahead of its reads as a Sequential cursor does: every read
// of a part but its first was asked for before, the requests follow one another and stay
// within the part, and every byte of the large parts was asked for.
func TestChecksumPassReadAhead(t *testing.T) {
	seg, _ := openMappedPages(t, 200_000)
	savedSpan, savedLead := readAheadSpan, readAheadLead
	t.Cleanup(func() { readAheadSpan, readAheadLead = savedSpan, savedLead })
	readAheadSpan, readAheadLead = 2*crcPiece, crcPiece // a lead of a piece at least
	type event struct {
		hint   bool
		off, n int64
	}
	var log []event
	seg.src.willNeed = func(off, n int64) { log = append(log, event{true, off, n}) }
	r := seg.src.r
	seg.src.r = readerFunc(func(p []byte, off int64) (int, error) {
		log = append(log, event{false, off, int64(len(p))})
		return r.ReadAt(p, off)
	})
	require.NoError(t, seg.VerifyChecksumsContext(context.Background()))
	large := 0
	for i := range seg.checks {
		p := seg.checks[i].part
		var reads, hints []event
		for _, e := range log {
			if e.off >= p.Offset && e.off < p.Offset+p.Length {
				if e.hint {
					hints = append(hints, e)
				} else {
					reads = append(reads, e)
				}
			}
		}
		if len(reads) == 0 {
			continue // read through the mapping, or empty
		}
		hinted := reads[0].off + reads[0].n // read before any request
		for k, h := range hints {
			require.Equal(t, hinted, h.off, "part %d, request %d: a span from %d, the last ended at %d", i, k, h.off, hinted)
			require.LessOrEqual(t, h.off+h.n, p.Offset+p.Length, "part %d, request %d: past the part", i, k)
			hinted = h.off + h.n
		}
		for k, e := range log {
			if e.hint || e.off < p.Offset || e.off >= p.Offset+p.Length || e == reads[0] {
				continue
			}
			// Every later read lies within what was asked for before it.
			var asked int64
			for _, h := range log[:k] {
				if h.hint && h.off >= p.Offset && h.off < p.Offset+p.Length {
					asked = h.off + h.n
				}
			}
			require.LessOrEqual(t, e.off+e.n, asked, "part %d: a read of [%d, %d) not asked for ahead", i, e.off, e.off+e.n)
		}
		if len(reads) > 2 {
			require.Equal(t, p.Offset+p.Length, hinted, "part %d: the requests reach its end", i)
			large++
		}
	}
	require.Positive(t, large, "parts of several pieces")
}

type readerFunc func(p []byte, off int64) (int, error)

func (f readerFunc) ReadAt(p []byte, off int64) (int, error) { return f(p, off) }
