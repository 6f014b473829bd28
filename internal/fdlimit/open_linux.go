//go:build linux

package fdlimit

import (
	"fmt"
	"os"

	"github.com/writeout/writeout/internal/multierr"
)

func open() (int, error) {
	d, err := os.Open("/proc/self/fd")
	if err != nil {
		return 0, fmt.Errorf("fdlimit: count open descriptors: %w", err)
	}
	names, err := d.Readdirnames(-1)
	if err := multierr.Join(err, d.Close()); err != nil {
		return 0, fmt.Errorf("fdlimit: count open descriptors: %w", err)
	}
	return max(0, len(names)-1), nil // not the directory's own descriptor
}
