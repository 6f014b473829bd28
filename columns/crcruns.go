package columns

import (
	"cmp"
	"context"
	"hash/crc32"
	"slices"
	"sync"
)

// CRCs from runs of frames. A merge reads most of a metric's values part whole, but not
// through one cursor: a rollup combines each hour of an input on whichever goroutine is free,
// through readers of its own, so the part's chunks come in several runs, each in order, some
// at once. Checking the part's CRC before the first read (checkSlow) read every byte of it
// once more, through the descriptor: 0.37 s of the 9.7 s of CPU of a 300 M-row rollup.
//
// A cursor taken with a Deferral (Column.DeferredCursor) of a part no reader checked yet
// instead hashes the frames it loads, a run of consecutive chunks at a time (crcRun), and
// Deferral.Judge puts the part's CRC together from the runs (crcCombine), hashing only the
// chunks no run covered, and the index and trailer. As with the other deferred checks, the
// merge publishes nothing it derived from the part before the verdict.

// crcRun is the CRC of chunks [a, b) of a part, in two pieces: chunk a's alone (head), and
// that of chunks a+1 to b-1 (rest, restLen bytes), so that a run starting on the last chunk
// of the run before it (two readers of adjacent row ranges both load the chunk between them)
// still joins it.
type crcRun struct {
	a, b    int
	head    uint32
	rest    uint32
	restLen int64
}

// maxCRCRuns bounds the runs kept of one part: past it (a reader that jumps about), the runs
// are dropped and Judge computes the part's CRC from its bytes (a variable for tests).
var maxCRCRuns = 1 << 12

// partRuns is what the deferred cursors of one part hashed: their runs, one a cursor's
// stretch of consecutive loads. Its methods are safe for concurrent use.
type partRuns struct {
	pc      *partCheck
	ix      *chunkIndex
	mu      sync.Mutex
	runs    []*crcRun
	dropped bool // more than maxCRCRuns: Judge reads the part whole
}

// took records chunk i, whose frame is fr, loaded by the cursor whose current run is *cur
// (nil: none yet): it goes on that run when it is the run's next chunk, does nothing when it
// is the run's last chunk again, and starts a new run otherwise.
func (r *partRuns) took(cur **crcRun, i int, fr []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.dropped {
		return
	}
	if c := *cur; c != nil {
		switch i {
		case c.b:
			c.rest = crc32.Update(c.rest, castagnoli, fr)
			c.restLen += int64(len(fr))
			c.b++
			return
		case c.b - 1:
			return
		}
	}
	if len(r.runs) >= maxCRCRuns {
		r.dropped, r.runs, *cur = true, nil, nil
		return
	}
	c := &crcRun{a: i, b: i + 1, head: crc32.Checksum(fr, castagnoli)}
	r.runs = append(r.runs, c)
	*cur = c
}

// judge returns the part's verdict, computing its CRC from the runs (and from the bytes no run
// covered) unless a reader checked it already, and records it (settle).
func (r *partRuns) judge() error {
	pc := r.pc
	if st, _ := pc.load(); st != checkNone || pc.seg.src.closed {
		return pc.checkCRC()
	}
	r.mu.Lock()
	runs, dropped := slices.Clone(r.runs), r.dropped
	r.mu.Unlock()
	if dropped {
		return pc.checkCRC()
	}
	got, err := r.combine(runs)
	if err != nil {
		return pc.seg.fileError(pc.part, err)
	}
	return pc.settle(got, &pc.seg.runCRCs)
}

// combine returns the CRC of the part: the runs' CRCs in chunk order, with the bytes between
// and after them (the index and the trailer at least) hashed from the file.
func (r *partRuns) combine(runs []*crcRun) (uint32, error) {
	slices.SortFunc(runs, func(x, y *crcRun) int { return cmp.Or(cmp.Compare(x.a, y.a), cmp.Compare(y.b, x.b)) })
	var crc uint32
	next := 0 // the chunks below it are in crc
	for _, c := range runs {
		if c.b <= next {
			continue // within what crc holds already
		}
		if c.a < next-1 {
			// Overlaps by more than its head: hash what it adds from the file.
			var err error
			if crc, err = r.hashChunks(crc, next, c.b); err != nil {
				return 0, err
			}
			next = c.b
			continue
		}
		if c.a > next {
			var err error
			if crc, err = r.hashChunks(crc, next, c.a); err != nil {
				return 0, err
			}
			next = c.a
		}
		if c.a == next {
			crc = crcCombine(crc, c.head, r.ix.off(c.a+1)-r.ix.off(c.a))
		}
		crc = crcCombine(crc, c.rest, c.restLen)
		next = c.b
	}
	crc, err := r.hashChunks(crc, next, r.ix.n)
	if err != nil {
		return 0, err
	}
	// The part's bytes after its chunks: the index and the trailer.
	return r.hashBytes(crc, r.ix.idxOff, r.pc.part.Length)
}

// hashChunks returns crc extended by the bytes of chunks [a, b), read from the file.
func (r *partRuns) hashChunks(crc uint32, a, b int) (uint32, error) {
	return r.hashBytes(crc, r.ix.off(a), r.ix.off(b))
}

// hashBytes returns crc extended by the part's bytes [lo, hi), read through the descriptor (as
// partCRC reads a part it does not read otherwise).
func (r *partRuns) hashBytes(crc uint32, lo, hi int64) (uint32, error) {
	return r.pc.seg.crcRange(context.Background(), crc, r.pc.part, lo, hi, true)
}

// crcCombine returns the CRC-32C of the bytes A then B from a, A's CRC, b, B's, and n, B's
// length: a carried over n bytes (times x^(8n), modulo the polynomial), added to b. The
// pre- and post-inversion of the two CRCs cancel out.
func crcCombine(a, b uint32, n int64) uint32 {
	if n == 0 {
		return a
	}
	return gf2Mul(x8nMod(n), a) ^ b
}

// castagnoliPoly is the Castagnoli polynomial, bit-reversed as crc32 uses it: bit 31 is the
// coefficient of x^0.
const castagnoliPoly = 0x82f63b78

// gf2Mul returns a times b modulo the polynomial, both bit-reversed.
func gf2Mul(a, b uint32) uint32 {
	var p uint32
	for bit := uint32(1) << 31; bit != 0 && a != 0; bit >>= 1 {
		if a&bit != 0 {
			p ^= b
			a &^= bit
		}
		// b times x.
		if b&1 != 0 {
			b = b>>1 ^ castagnoliPoly
		} else {
			b >>= 1
		}
	}
	return p
}

// x2k[k] is x^(2^k) modulo the polynomial (bit-reversed).
var x2k = func() (t [67]uint32) {
	t[0] = 1 << 30 // x
	for k := 1; k < len(t); k++ {
		t[k] = gf2Mul(t[k-1], t[k-1])
	}
	return t
}()

// x8nMod returns x^(8n) modulo the polynomial (bit-reversed).
func x8nMod(n int64) uint32 {
	p := uint32(1) << 31 // 1
	for k := 3; n != 0; k, n = k+1, n>>1 {
		if n&1 != 0 {
			p = gf2Mul(x2k[k], p)
		}
	}
	return p
}
