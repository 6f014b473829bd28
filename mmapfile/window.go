package mmapfile

import (
	"fmt"
	"math"
	"sync/atomic"

	"github.com/writeout/writeout/internal/sys"
	"github.com/writeout/writeout/medium"
)

// extent is one region of the file owned by a Bytes.
type extent struct {
	start  int64  // logical offset of mem[0] in the Bytes
	mem    []byte // the region in the window's mapping
	win    *window
	winOff int // offset of mem[0] in win.mem
}

// fileOff returns the file offset of e.mem[0].
func (e *extent) fileOff() int64 { return e.win.off + int64(e.winOff) }

// alloc hands out a region of want bytes (a positive multiple of the page size), or less where
// the current window ends. Its file space is reserved (where fallocate works) and its window
// mapped before it is returned; its bytes are prefilled by the Bytes, chunk by chunk (fill).
func (m *Medium) alloc(want int64) (extent, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.released || m.lc.Closed() {
		return extent{}, medium.ErrClosed
	}
	ws := m.opts.WindowSize
	off := m.next
	n := min(want, ws-off%ws)
	if err := m.reserve(off, n); err != nil {
		return extent{}, err
	}
	k := int(off / ws)
	if k == len(m.windows) {
		w, err := m.mapWindow(int64(k) * ws)
		if err != nil {
			return extent{}, err
		}
		m.windows = append(m.windows, w)
	}
	w := m.windows[k]
	wo := int(off - w.off)
	m.next = off + n
	return extent{mem: w.mem[wo : wo+int(n) : wo+int(n)], win: w, winOff: wo}, nil
}

// reserve makes sure [off, off+n) of the file has disk space, so that writing it through the
// mapping cannot fault. Where fallocate is unsupported it reserves nothing: the zeros of the
// prefill (prefill) reserve each chunk before a byte is written to it through the mapping (the
// file system allocates or reserves blocks for them and fails the pwrite with ENOSPC when it
// cannot).
func (m *Medium) reserve(off, n int64) error {
	if m.zeroFill {
		return nil
	}
	err := m.calls.Fallocate(m.f, off, n)
	if err != nil && !fallocateUnsupported(err) {
		return fmt.Errorf("mmapfile: reserve %d bytes at file offset %d: %w", n, off, err)
	}
	if err != nil {
		m.zeroFill = true
	}
	return nil
}

// prefillChunk is the most a Bytes prefills ahead of its writes (a multiple of any page size).
const prefillChunk = 64 << 10

// zeros is only ever read: untouched, it costs no memory.
var zeros [prefillChunk]byte

// prefill fills [off, off+n) of the file (n at most prefillChunk) with zeros through write(2),
// so that the first touch of each page through the mapping finds it in the page cache: pwrite
// fills the page cache several times faster than page faults on fresh pages of a shared mapping
// do. It is safe for concurrent use on disjoint ranges.
func (m *Medium) prefill(off int64, n int) error {
	if _, err := m.writeAt(zeros[:n], off); err != nil {
		return fmt.Errorf("mmapfile: reserve %d bytes at file offset %d: write zeros: %w", n, off, err)
	}
	return nil
}

// prefilled counts n bytes prefilled up to file offset end for pacing, and runs a step when the
// count reaches the next multiple of TrickleBytes. Without pacing, or below the next multiple,
// it costs an atomic add and a compare (and an atomic max of the extent).
func (m *Medium) prefilled(end int64, n int) error {
	p := &m.pace
	if p.every <= 0 {
		return nil
	}
	for e := p.extent.Load(); end > e && !p.extent.CompareAndSwap(e, end); e = p.extent.Load() {
	}
	if p.count.Add(int64(n)) < p.due.Load() {
		return nil
	}
	return m.step()
}

// step runs one pacing step (see Pacing in the package doc): WAIT_BEFORE on the range the
// previous step submitted, then WRITE on [0, extent). A writer that reaches it while another
// runs it waits, then finds the step done.
func (m *Medium) step() error {
	p := &m.pace
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.count.Load()
	if c < p.due.Load() {
		return nil // another writer ran the step
	}
	p.due.Store((c/p.every + 1) * p.every)
	if p.prev > 0 {
		if err := m.syncFileRange(0, p.prev, sys.SyncFileRangeWaitBefore); err != nil {
			return err
		}
	}
	end := p.extent.Load()
	if err := m.syncFileRange(0, end, sys.SyncFileRangeWrite); err != nil {
		return err
	}
	if m.noPacing.Load() {
		p.due.Store(math.MaxInt64) // never again: the count alone is kept
		return nil
	}
	p.prev = end
	return nil
}

func (m *Medium) mapWindow(off int64) (*window, error) {
	mem, err := m.calls.Mmap(int(m.f.Fd()), off, int(m.opts.WindowSize), sys.ProtRead|sys.ProtWrite, sys.MapShared)
	if err != nil {
		return nil, fmt.Errorf("mmapfile: map %d bytes at file offset %d: %w", m.opts.WindowSize, off, err)
	}
	return &window{mem: mem, off: off}, nil
}

// syncFileRange runs sync_file_range with flags on [off, off+n) of m's file, for pacing. Where
// the call is unsupported it counts nothing and turns pacing off for m; any other failure is a
// failed sync of the file: it wraps medium.ErrSync and is sticky.
func (m *Medium) syncFileRange(off, n int64, flags int) error {
	if m.noPacing.Load() {
		return nil
	}
	if err := m.failure(); err != nil {
		return err
	}
	err := m.calls.SyncFileRange(m.f, off, n, flags)
	if err != nil && syncFileRangeUnsupported(err) {
		m.noPacing.Store(true)
		return nil
	}
	m.countTrickle()
	if err != nil {
		err = fmt.Errorf("mmapfile: pace writeback of %d bytes at file offset %d: %w: %w", n, off, medium.ErrSync, err)
		m.fail(err)
		return err
	}
	return nil
}

// window is one mapping of the file.
type window struct {
	mem      []byte
	off      int64 // file offset of mem[0]
	unmapped atomic.Bool
}
