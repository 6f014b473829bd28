//go:build !linux

package fdlimit

import "fmt"

func open() (int, error) {
	return 0, fmt.Errorf("fdlimit: count open descriptors: %w", ErrUnknown)
}
