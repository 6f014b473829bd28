package columns

import (
	"context"
	"fmt"
	"hash/crc32"
	"sync"
	"sync/atomic"

	"github.com/writeout/writeout/internal/segfmt"
)

// Read-path checksums. Every reader checks a part's CRC-32C against the footer the first time
// it touches the part's bytes, before it returns anything derived from them: once per part per
// open Segment, so a later read of the same part costs one atomic load. A mismatch is
// remembered, and every later read of the part returns the same error. Open parses the index of
// every chunked part, the table of every bitmap index and the trailer of every dictionary from
// unchecked bytes, but hands out nothing derived from them before the part is checked: a
// dictionary's cardinality and null flag (DimColumn.Cardinality, HasNull) are reached through
// Segment.Dim, which checks the dictionary part first. The one exception is a cursor taken
// with a Deferral (a merge's): it may compute its part's CRC from the frames it decodes, and
// its reader publishes nothing before Deferral.Judge gives the verdict.

// partCheck is the read-path checksum state of one part of an open segment. It is safe for
// concurrent use: two first reads may both compute the CRC, and store the same result.
type partCheck struct {
	seg  *Segment
	part *segfmt.PartInfo
	// state is the part's check state in one atomic word: the state (checkState) in the high
	// half, and for checkBad the CRC of the part's bytes in the low half.
	state atomic.Uint64
	// sc is the structural check the part's first read runs once its CRC matches (see
	// structure.go); nil for a part without one. Parts checked together share it.
	sc *structCheck
	// readWhole says that sc reads every chunk of the part, in order (the __time values, a
	// dimension's ids). On a mapped part, the first check lets sc compute the CRC as it reads
	// (fusedCRC): one pass over the part's bytes, through the mapping or, for a large part,
	// the descriptor (forCheck).
	readWhole bool
}

// checkState is what a part's check found.
type checkState uint64

const (
	checkNone    checkState = iota // not checked yet
	checkGood                      // the bytes match the footer's CRC
	checkTrusted                   // not checked: TrustChecksums or OpenOptions said so
	checkBad                       // the bytes do not match
)

func (pc *partCheck) load() (checkState, uint32) {
	w := pc.state.Load()
	return checkState(w >> 32), uint32(w)
}

// check returns nil when the part's bytes match the footer's CRC and pass its structural
// check (or were trusted), computing both on the first call; otherwise an error wrapping
// ErrCorrupt that names the file, the column and the part. After the first call it costs two
// atomic loads.
func (pc *partCheck) check() error {
	st := checkState(pc.state.Load() >> 32)
	if st == checkTrusted || st == checkGood && (pc.sc == nil || pc.sc.passed()) {
		return nil
	}
	if pc.sc != nil && pc.fusable() {
		// The structural check computes the part's CRC as it reads it, and judges the CRC
		// before anything it found.
		if err := pc.sc.run(); err != nil {
			return err
		}
	}
	if err := pc.checkCRC(); err != nil {
		return err
	}
	if pc.sc != nil && checkState(pc.state.Load()>>32) == checkGood {
		return pc.sc.run()
	}
	return nil
}

// fusedCRC is the CRC of a part whose structural check reads every chunk of it (readWhole),
// computed from the frames as the check's reader loads them, so that the part's bytes are
// read once (a CRC pass first would read them all, then the check again). The check hands
// out nothing, and the part's first read gets nothing, before the CRC is judged
// (finishFused); the check judges it before anything it found, so that damaged bytes read as
// a bad CRC, as when the CRC comes first.
type fusedCRC struct {
	crc  uint32
	next int // the chunk expected next
}

// add hashes frame, the bytes of chunk i, when it is the chunk expected next. A chunk out of
// order (a reader that looks ahead, then goes back) is not hashed: the CRC goes on from the
// next one when it comes, and is computed again (finishFused) when not every chunk did.
func (f *fusedCRC) add(i int, frame []byte) {
	if i != f.next {
		return
	}
	f.crc = crc32.Update(f.crc, castagnoli, frame)
	f.next++
}

// fusable reports whether the part's structural check is to compute its CRC (fuse).
func (pc *partCheck) fusable() bool {
	return pc.readWhole && pc.seg.src.data != nil && checkState(pc.state.Load()>>32) == checkNone
}

// fuse returns the fusedCRC a structural check reading the part whole fills as it reads, or
// nil when the part is checked already, or trusted, or not mapped: then the check calls
// checkCRC first.
func (pc *partCheck) fuse() *fusedCRC {
	if !pc.fusable() {
		return nil
	}
	return &fusedCRC{}
}

// finishFused judges the CRC fc computed over the chunks of ix, the part's index, with the
// index and trailer after them, and records it as compute does; when fc did not take every
// chunk in order (the check stopped early), it computes the CRC alone. It returns checkCRC's
// verdict.
func (pc *partCheck) finishFused(fc *fusedCRC, ix *chunkIndex) error {
	if fc.next != ix.n || pc.seg.src.closed {
		return pc.checkCRC()
	}
	tail, err := pc.seg.src.view(pc.part.Offset+ix.idxOff, pc.part.Length-ix.idxOff, nil)
	if err != nil {
		return pc.seg.fileError(pc.part, err)
	}
	return pc.settle(crc32.Update(fc.crc, castagnoli, tail), &pc.seg.fusedCRCs)
}

// settle records got, the part's CRC computed from what its readers read (counted in how as
// well as in crcPasses), as compute does, and returns checkCRC's verdict.
func (pc *partCheck) settle(got uint32, how *atomic.Int64) error {
	pc.seg.crcPasses.Add(1)
	how.Add(1)
	st := checkGood
	if got != pc.part.CRC {
		st = checkBad
	}
	// Unless a concurrent reader recorded it first (the same verdict) or trustChecksums ran.
	pc.state.CompareAndSwap(uint64(checkNone)<<32, uint64(st)<<32|uint64(got))
	return pc.checkCRC()
}

// checkCRC is check without the structural check: for the structural checks themselves,
// which read the parts they check.
func (pc *partCheck) checkCRC() error {
	if st := checkState(pc.state.Load() >> 32); st == checkGood || st == checkTrusted {
		return nil
	}
	return pc.checkSlow()
}

// thenRelease returns a structural check that runs fn and, once it passed, takes the mapped
// segment's pages out of the resident set (ReleasePages). A structural check reads its parts
// whole, through the mapping (and a dimension's the header of every bitmap), on their first
// read: kept, a large column would count in the reader's RSS by its whole size until the
// reader's next release, if it ever releases. The reader faults back in what it reads next.
func (s *Segment) thenRelease(fn func() error) func() error {
	return func() error {
		if err := fn(); err != nil {
			return err
		}
		return s.ReleasePages()
	}
}

func (pc *partCheck) checkSlow() error {
	st, got := pc.load()
	if st == checkNone {
		var err error
		// A large part is read through the descriptor: through the mapping, its whole length
		// would be resident at once (every input's, when inputs interleave), where its
		// reader faults in and releases (Segment.ReleasePages) a chunk at a time (a structural
		// check reads it through the descriptor too, see forCheck).
		viaFile := pc.part.Length > crcViaFileMin
		if st, got, err = pc.compute(context.Background(), viaFile); err != nil {
			// A read error or a closed segment: not a verdict on the bytes, so not remembered.
			return pc.seg.fileError(pc.part, err)
		}
	}
	if st == checkBad {
		return pc.seg.fileError(pc.part, crcError(got, pc.part.CRC))
	}
	return nil
}

// compute computes the part's CRC and records the result: checkGood or checkBad, and the CRC.
// viaFile: see partCRC.
func (pc *partCheck) compute(ctx context.Context, viaFile bool) (checkState, uint32, error) {
	got, err := pc.seg.partCRC(ctx, pc.part, viaFile)
	if err != nil {
		return checkNone, 0, err
	}
	st := checkGood
	if got != pc.part.CRC {
		st = checkBad
	}
	pc.state.Store(uint64(st)<<32 | uint64(got))
	return st, got, nil
}

// partCRC returns the CRC-32C of a part's bytes, reading them a MiB at a time and stopping
// with an error wrapping ctx.Err() when ctx is done.
//
// viaFile reads a mapped file's part through its descriptor, for a pass that checks parts it
// will not read (VerifyChecksumsContext): a read copies from the page cache, where touching the
// mapping costs the kernel a page-table entry a page (on a virtual machine, three times the
// copy) and leaves the pages in the RSS. The read path's check of a part it is about to read
// goes through the mapping, which it then finds ready.
func (s *Segment) partCRC(ctx context.Context, p *segfmt.PartInfo, viaFile bool) (uint32, error) {
	s.crcPasses.Add(1)
	if viaFile && s.src.file() != nil {
		s.fileCRCs.Add(1)
	}
	return s.crcRange(ctx, 0, p, 0, p.Length, viaFile)
}

// crcRange returns crc extended by the bytes [lo, hi) of part p, read as partCRC reads them.
func (s *Segment) crcRange(ctx context.Context, crc uint32, p *segfmt.PartInfo, lo, hi int64, viaFile bool) (uint32, error) {
	var buf []byte
	src := &s.src
	if f := src.file(); viaFile && f != nil {
		src = f
	}
	// A ReaderAt that holds what it read (a PageDropper: an object store reader's mapped
	// cache) gives each piece back once hashed, as the descriptor would have: else a large
	// part's whole length stays resident until its reader releases it (an s3:// merge's peak
	// held 50 MB of one).
	dropEach := viaFile && s.src.data == nil && s.dropFn != nil
	if src.data == nil && hi > lo {
		// Read through a buffer: one from the pool, so that checking a whole file (Verify,
		// VerifyChecksumsContext, a publish's read-back) costs one buffer (crcPiece), not one
		// per part.
		bp := crcBuffers.Get().(*[]byte)
		defer crcBuffers.Put(bp)
		buf = *bp
	}
	hinted := lo // the part's bytes below it were asked for ahead (readAhead)
	for off := lo; off < hi; off += crcPiece {
		if err := ctx.Err(); err != nil {
			return 0, fmt.Errorf("columns: verify checksums: %w", err)
		}
		n := min(crcPiece, hi-off)
		b, err := src.view(p.Offset+off, n, buf)
		if err != nil {
			return 0, err
		}
		if src.data == nil {
			hinted = readAhead(src, p.Offset, off+n, hi, hinted)
		}
		crc = crc32.Update(crc, castagnoli, b)
		if dropEach {
			if err := s.dropFn(p.Offset+off, n); err != nil {
				return 0, err
			}
		}
	}
	return crc, nil
}

// crcPiece is how much of a part partCRC reads at a time: 256 KiB, four reads where one MiB
// made one, and a MiB less a goroutine that checks parts through the file.
const crcPiece = 256 << 10

// crcViaFileMin is the length past which the read path checks a mapped part through the file
// (a variable for tests).
var crcViaFileMin int64 = 4 << 20

var crcBuffers = sync.Pool{New: func() any { b := make([]byte, crcPiece); return &b }}

func crcError(got, want uint32) error {
	return corruptf("CRC %08x, the footer says %08x", got, want)
}

// fileError names the file, the column and the part of err:
// columns: data/a.seg: column "page" part bitmaps: <err>.
func (s *Segment) fileError(p *segfmt.PartInfo, err error) error {
	name := s.name
	if name == "" {
		name = "unnamed segment"
	}
	return fmt.Errorf("columns: %s: column %q part %s: %w", name, p.Column, p.Kind, err)
}

// checkOf returns the check state of p, one of s.f.parts.
func (s *Segment) checkOf(p *segfmt.PartInfo) *partCheck {
	for i := range s.f.parts {
		if &s.f.parts[i] == p {
			return &s.checks[i]
		}
	}
	panic("columns: checkOf: not a part of the segment") // a programmer bug
}

// openError is the error Open returns for a part it could not parse: when the part's bytes do
// not match its CRC, that mismatch (the cause), else err. Parsing at Open reads unchecked
// bytes; this only makes its errors say why.
func (s *Segment) openError(p *segfmt.PartInfo, err error) error {
	if got, cerr := s.partCRC(context.Background(), p, false); cerr == nil && got != p.CRC {
		return partError(p.Column, p.Kind, crcError(got, p.CRC))
	}
	return partError(p.Column, p.Kind, err)
}

// trustChecksums marks every part not checked yet as checked, without reading it: later reads
// skip the CRC check, and cost nothing more. It is for a caller that has just checked the bytes
// another way (the file it wrote and read back, Verify on another Segment of the same file) or
// knowingly takes damaged bytes for good ones. A part already found bad stays bad. Verify and
// VerifyChecksumsContext still compute the CRC of a trusted part. Safe to call concurrently with reads.
func (s *Segment) trustChecksums() {
	for i := range s.checks {
		s.checks[i].state.CompareAndSwap(uint64(checkNone)<<32, uint64(checkTrusted)<<32)
	}
}
