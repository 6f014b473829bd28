package columns

import "fmt"

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
	if s.dropFn == nil {
		return nil
	}
	return s.dropFn(0, s.src.size)
}
