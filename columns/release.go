package columns

import (
	"fmt"
	"sync/atomic"
)

// releaseBack is how far before a part checked by VerifyChecksumsContext its release reaches, within
// the parts it read: past the kernel's fault-around (64 KiB by default), which maps a faulting
// page's neighbours, those of the part before included.
const releaseBack = 1 << 20

// releaseBatch is how many bytes of parts VerifyChecksumsContext reads before it releases them.
const releaseBatch = 4 << 20

// ReleasePages takes the pages of a mapped segment (one opened with Open or OpenFile where the
// file could be mapped) out of the process's resident set: madvise(MADV_DONTNEED) on the whole
// read-only shared file mapping. The bytes stay in the page cache (and in the file), and a
// later read faults them back in, minor faults unless the kernel evicted them meanwhile; views
// returned before stay valid and read the same bytes. It is for a long reader such as a merge,
// which reads each part of its inputs once, in turn: released behind it, the inputs count in
// its RSS (RssFile) by what it read since, not by their whole size.
//
// A segment read with ReadAt, or over caller's bytes (newSegmentBytes), has no mapping of its
// own: ReleasePages does nothing there. Like every read, it must not run concurrently with
// Close; it may run concurrently with reads.
func (s *Segment) ReleasePages() error {
	if s.closed.Load() {
		return fmt.Errorf("columns: release the pages of %s: %w", s.name, errClosed)
	}
	if s.dropFn == nil || s.src.viewed != nil && !s.release.due() {
		return nil
	}
	return s.dropFn(0, s.src.size)
}

// releaseState is what ReleasePages knows of a mapped segment's use of its mapping (a
// segment read through ReadAt that drops pages, an object store's, releases each time). A
// release is a madvise over the whole mapping and a TLB flush on every CPU the process ran
// on, and a merge releases its inputs every 2^17 rows while it reads their large parts
// through the descriptor, not the mapping (a 300 M-row rollup spent 3% of its CPU releasing
// nothing). So a release is skipped when nothing viewed the mapping since the one before the
// last (a view taken just before a release may be read after it), except every
// releaseForceEvery-th: a view held long, read again and again, faults its pages back in
// without a new view.
type releaseState struct {
	viewed  atomic.Bool   // set by a view of the mapping (source.viewed)
	before  atomic.Bool   // viewed, as the last release found it
	skipped atomic.Uint32 // releases skipped since the last done
}

// releaseForceEvery bounds the releases skipped in a row.
const releaseForceEvery = 8

// due reports whether a release is to be done now, and starts the next epoch.
func (r *releaseState) due() bool {
	now := r.viewed.Swap(false)
	before := r.before.Swap(now)
	if now || before || r.skipped.Add(1) >= releaseForceEvery {
		r.skipped.Store(0)
		return true
	}
	releasesSkipped.Add(1)
	return false
}

// For tests: releasesSkipped counts the releases ReleasePages skipped.
var releasesSkipped atomic.Int64
