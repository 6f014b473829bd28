//go:build !linux

package mmapfile

import (
	"errors"
	"fmt"

	"github.com/writeout/writeout/internal/sys"
	"github.com/writeout/writeout/medium"
)

// platformErr reports why mmapfile cannot run here: it needs Linux's fallocate and shared file
// mappings through internal/sys.
func platformErr() error {
	return fmt.Errorf("%w: %w: the mmap file medium needs Linux", medium.ErrInvalid, sys.ErrUnsupported)
}

func fallocateUnsupported(err error) bool { return errors.Is(err, sys.ErrUnsupported) }

func syncFileRangeUnsupported(err error) bool { return errors.Is(err, sys.ErrUnsupported) }
