package sys

import (
	"errors"
	"os"
	"sync"
	"sync/atomic"
)

// Pacer paces the writeback of a file written from its start, every Every bytes (Cassandra's
// trickle fsync): when the range N = [N*Every, (N+1)*Every) is complete it submits N with
// sync_file_range(WRITE), which starts writeback without waiting, then waits with WAIT_BEFORE
// for range N-1 only, submitted one interval earlier and by then mostly written; so a writer
// blocks for the disk only when it gets more than one interval ahead of it, and the file's
// dirty pages stay within about two intervals.
//
// Where the process has no sync_file_range (Calls.TrickleSupported) or the file's file system
// refuses it (RangeUnsupported on the first call), it fdatasyncs the file every interval
// instead: that blocks for each interval's writeback, but keeps dirty pages bounded, which is
// what the setting asks for. Trickles counts the sync_file_range calls made, Syncs those
// fdatasyncs. A Pacer is safe for concurrent use; its zero Every paces nothing.
//
// With Background set, the calls are made by a goroutine of the Pacer's, in the same order:
// Advance hands it the new end and returns at once, blocking only while the goroutine is still
// busy with the range before (so the writer is never more than one handover ahead, and the
// dirty pages stay within about three intervals). Submitting a range costs the kernel about
// 0.25 ms per 8 MiB on the development machine (walking the pages, building the requests):
// work that, without pacing, a flusher thread does outside the writer's time. Background
// keeps it outside too, on another core. Close must then be called once the writing is done
// (before the file's final fdatasync, so that it comes after every pacing call) and on every
// failure path; it waits for the goroutine and returns its first error. Advance must not be
// called after Close.
type Pacer struct {
	Calls      *Calls
	File       *os.File
	Every      int64
	Background bool

	mu       sync.Mutex // the pacing state below; in the background, held by the goroutine
	mark     int64      // start of the next range to submit
	probed   bool
	fallback bool
	trickles int
	syncs    int
	err      error

	// Background handover.
	start    sync.Once
	handed   atomic.Int64          // the largest end handed over
	failed   atomic.Pointer[error] // the goroutine's first error, for Advance
	work     chan int64
	done     chan struct{}
	isClosed atomic.Bool
}

// Advance paces every full range below end, the offset up to which the file is written. A
// failed call is returned, by this and every later Advance (it is never retried); in the
// background, by the first Advance after the goroutine met it, and by Close.
func (p *Pacer) Advance(end int64) error {
	if p == nil || p.Every <= 0 || p.File == nil {
		return nil
	}
	if p.isClosed.Load() {
		return errPacerClosed
	}
	if !p.Background {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.advance(end)
	}
	if err := p.failed.Load(); err != nil {
		return *err
	}
	for {
		h := p.handed.Load()
		if end/p.Every <= h/p.Every {
			return nil // no range completed since the last handover
		}
		if p.handed.CompareAndSwap(h, end) {
			break
		}
	}
	p.start.Do(p.run)
	if p.work == nil {
		return errPacerClosed
	}
	p.work <- end
	return nil
}

var errPacerClosed = errors.New("sys: Pacer.Advance after Close")

// run starts the background goroutine.
func (p *Pacer) run() {
	p.work = make(chan int64)
	p.done = make(chan struct{})
	go func() {
		defer close(p.done)
		for end := range p.work {
			p.mu.Lock()
			if err := p.advance(end); err != nil && p.failed.Load() == nil {
				p.failed.Store(&err)
			}
			p.mu.Unlock()
		}
	}()
}

// Close waits for the background goroutine to finish the ranges handed to it and returns the
// first error of a pacing call. Without Background it only returns that error. A second Close
// returns the same.
func (p *Pacer) Close() error {
	if p == nil {
		return nil
	}
	if !p.isClosed.Swap(true) {
		p.start.Do(func() {}) // no goroutine from now on, if none was started
		if p.work != nil {
			close(p.work)
			<-p.done
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// Err returns the first error of a pacing call so far, without waiting for the background
// goroutine (the calls it has not made yet may still fail: Close says).
func (p *Pacer) Err() error {
	if p == nil {
		return nil
	}
	if err := p.failed.Load(); err != nil {
		return *err
	}
	if p.Background {
		return nil // p.mu may be held by the goroutine, in a call
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// advance paces every full range below end; p.mu is held.
func (p *Pacer) advance(end int64) error {
	if p.err != nil {
		return p.err
	}
	if !p.probed {
		p.probed = true
		p.fallback = p.Calls.TrickleSupported != nil && !p.Calls.TrickleSupported()
	}
	for end-p.mark >= p.Every {
		if err := p.pace(); err != nil {
			p.err = err
			return err
		}
		p.mark += p.Every
	}
	return nil
}

// pace paces the range [mark, mark+Every), just completed.
func (p *Pacer) pace() error {
	if !p.fallback {
		err := p.Calls.SyncFileRange(p.File, p.mark, p.Every, SyncFileRangeWrite)
		switch {
		case err == nil:
			p.trickles++
			if p.mark < p.Every {
				return nil
			}
			if err := p.Calls.SyncFileRange(p.File, p.mark-p.Every, p.Every, SyncFileRangeWaitBefore); err != nil {
				return err
			}
			p.trickles++
			return nil
		case p.trickles == 0 && RangeUnsupported(err):
			// The file system does not do it: nothing was submitted.
			p.fallback = true
		default:
			return err
		}
	}
	p.syncs++
	return p.Calls.Fdatasync(p.File)
}

// Counts returns the sync_file_range calls made and the fallback fdatasyncs made (in the
// background, those made so far: all of them after Close).
func (p *Pacer) Counts() (trickles, syncs int) {
	if p == nil {
		return 0, 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.trickles, p.syncs
}

// Fallback reports whether the pacer paces with fdatasync.
func (p *Pacer) Fallback() bool {
	if p == nil {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.fallback
}
