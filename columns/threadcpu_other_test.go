//go:build !linux

package columns

import "time"

// threadCPU is not measured here.
func threadCPU() time.Duration { return 0 }
