package columns

import (
	"errors"
	"fmt"
	"math"
	"os"

	"github.com/writeout/writeout/internal/multierr"
	"github.com/writeout/writeout/internal/sys"
)

// OpenFile opens the segment in f, an open file, as Open opens a path: on Linux it maps the
// file (read-only, shared), elsewhere or if the mapping is unsupported it reads with ReadAt.
// name says what the segment is in errors and in Name (a path, or a description such as
// "intermediate segment 2 of phase 1" for an unnamed file). f must be open for reading.
//
// The segment takes f over, whatever the outcome: f is closed at Close (when mapped, the
// checksum pass reads through it), and on failure before OpenFile returns. This is how a merge reads back its intermediate segments, written by
// Finish into unnamed files (PublishOptions.File): they never have a name a crash could leave
// behind.
func OpenFile(f *os.File, name string) (*Segment, error) {
	return openFileWith(f, name, &sys.Default, OpenOptions{})
}

func openFileWith(f *os.File, name string, calls *sys.Calls, o OpenOptions) (*Segment, error) {
	if f == nil {
		return nil, fmt.Errorf("columns: OpenFile %s: nil file: %w", name, ErrInvalid)
	}
	fail := func(err error) (*Segment, error) {
		return nil, multierr.Join(fmt.Errorf("columns: open %s: %w", name, err), f.Close())
	}
	st, err := f.Stat()
	if err != nil {
		return fail(err)
	}
	if !st.Mode().IsRegular() {
		return fail(fmt.Errorf("not a regular file (%s): %w", st.Mode().Type(), ErrInvalid))
	}
	size := st.Size()
	var data []byte
	if size >= int64(headerSize+trailerSize) && size <= math.MaxInt {
		data, err = calls.Mmap(int(f.Fd()), 0, int(size), sys.ProtRead, sys.MapShared)
		if err != nil && !errors.Is(err, sys.ErrUnsupported) {
			return fail(fmt.Errorf("mmap: %w", err))
		}
	}
	if data == nil {
		// Too small to map usefully (a zero-length mapping is an error; let the checks say
		// why), or no mapping here: read with ReadAt.
		s, err := newSegment(source{r: f, size: size}, name, f.Close, o)
		if err != nil {
			return fail(err)
		}
		return s, nil
	}
	unmap := func() error {
		var err error
		if uerr := calls.Munmap(data); uerr != nil {
			err = fmt.Errorf("columns: munmap %s: %w", name, uerr)
		}
		return multierr.Join(err, f.Close())
	}
	willNeed := func(off, n int64) { _ = calls.WillNeed(f, off, n) } // a hint: nothing to do if it fails
	s, err := newSegment(source{data: data, r: f, size: size, willNeed: willNeed}, name, unmap, o)
	if err != nil {
		return nil, multierr.Join(fmt.Errorf("columns: open %s: %w", name, err), unmap())
	}
	s.dropFn = func(off, n int64) error {
		// madvise wants a page-aligned start: the range grows down to one (the pages of a
		// neighbour released too fault back in when read).
		lo, hi := off&^int64(os.Getpagesize()-1), min(off+n, size)
		if lo < 0 || hi <= lo {
			return nil
		}
		if err := calls.Madvise(data[lo:hi], sys.MadvDontneed); err != nil {
			return fmt.Errorf("columns: release the pages of %s: %w", name, err)
		}
		return nil
	}
	return s, nil
}
