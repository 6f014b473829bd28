//go:build unix

package fdlimit

import (
	"fmt"

	"golang.org/x/sys/unix"
)

func limit() (uint64, error) {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		return 0, fmt.Errorf("fdlimit: getrlimit RLIMIT_NOFILE: %w", err)
	}
	if rl.Cur == unix.RLIM_INFINITY {
		return Unlimited, nil
	}
	return uint64(rl.Cur), nil
}
