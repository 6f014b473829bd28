//go:build linux

package scratch

import (
	"fmt"

	"github.com/writeout/writeout/internal/sys"
)

func mapAnon(size int) ([]byte, bool) {
	m, err := sys.Default.Mmap(-1, 0, size, sys.ProtRead|sys.ProtWrite, sys.MapPrivate|sys.MapAnon)
	if err != nil || len(m) != size {
		if err == nil && len(m) > 0 {
			_ = sys.Default.Munmap(m)
		}
		return nil, false
	}
	// No MADV_HUGEPAGE: see the package doc.
	return m, true
}

func unmap(m []byte) error {
	if err := sys.Default.Munmap(m); err != nil {
		return fmt.Errorf("merger: munmap scratch: %w", err)
	}
	return nil
}
