// Package fdlimit reads how many file descriptors the process may open (RLIMIT_NOFILE) and how
// many it has open, so that a merge can size its phases to fit.
//
// Limit reads the soft limit with getrlimit(2) on Unix (limit_unix.go); elsewhere it reports
// ErrUnknown. Open counts the entries of /proc/self/fd on Linux (open_linux.go); elsewhere,
// where no count is that cheap, it reports ErrUnknown and the caller leaves a margin instead.
package fdlimit

import "errors"

// ErrUnknown is returned where the platform does not tell.
var ErrUnknown = errors.New("fdlimit: not known on this platform")

// Unlimited is what Limit returns for a process without a limit (RLIM_INFINITY).
const Unlimited = ^uint64(0)

// Limit returns the process's soft limit on open file descriptors: one more than the highest
// descriptor it may open. It is Unlimited when there is none, and an error wrapping ErrUnknown
// where the platform has no such limit to read.
func Limit() (uint64, error) { return limit() }

// Open returns the number of file descriptors the process has open now, not counting the one
// used to count them. It is an error wrapping ErrUnknown where that cannot be counted cheaply.
func Open() (int, error) { return open() }
