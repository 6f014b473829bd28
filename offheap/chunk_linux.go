//go:build linux

package offheap

import (
	"fmt"

	"github.com/writeout/writeout/internal/sys"
)

// mapChunk maps one anonymous private chunk and advises huge pages for it. A failed madvise is
// not an error: the chunk works with small pages.
func mapChunk(calls *sys.Calls) ([]byte, error) {
	c, err := calls.Mmap(-1, 0, chunkSize, sys.ProtRead|sys.ProtWrite, sys.MapPrivate|sys.MapAnon)
	if err != nil {
		return nil, fmt.Errorf("offheap: mmap %d bytes: %w", chunkSize, err)
	}
	if len(c) != chunkSize || cap(c) != chunkSize {
		// Only a broken sys layer (or a test's stand-in for it) gets here: no sentinel and no
		// system error fits, so the message says what happened.
		err := fmt.Errorf("offheap: mmap returned %d bytes, want %d", len(c), chunkSize)
		if len(c) > 0 {
			if uerr := calls.Munmap(c); uerr != nil {
				err = fmt.Errorf("%w (and munmap: %v)", err, uerr)
			}
		}
		return nil, err
	}
	_ = calls.Madvise(c, sys.MadvHugepage)
	return c, nil
}

// unmapChunk unmaps a chunk made by mapChunk.
func unmapChunk(calls *sys.Calls, c []byte) error {
	if err := calls.Munmap(c); err != nil {
		return fmt.Errorf("offheap: munmap chunk: %w", err)
	}
	return nil
}

// readaheadDefault: on Linux the process-wide pool prepares a spare chunk ahead, so that the
// kernel zeroes fresh pages on another core while a writer fills the chunk before.
const readaheadDefault = true
