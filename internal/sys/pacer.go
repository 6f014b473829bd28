package sys

import (
	"os"
	"sync"
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
type Pacer struct {
	Calls *Calls
	File  *os.File
	Every int64

	mu       sync.Mutex
	mark     int64 // start of the next range to submit
	probed   bool
	fallback bool
	trickles int
	syncs    int
	err      error
}

// Advance paces every full range below end, the offset up to which the file is written. A
// failed call is returned, by this and every later Advance (it is never retried).
func (p *Pacer) Advance(end int64) error {
	if p == nil || p.Every <= 0 || p.File == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
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

// Counts returns the sync_file_range calls made and the fallback fdatasyncs made.
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
