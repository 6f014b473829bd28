//go:build !unix

package fdlimit

import "fmt"

func limit() (uint64, error) {
	return 0, fmt.Errorf("fdlimit: RLIMIT_NOFILE: %w", ErrUnknown)
}
