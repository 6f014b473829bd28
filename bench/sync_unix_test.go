//go:build unix

package bench

import "syscall"

// syncAll flushes every file system, so that a benchmark iteration starts with no writeback in
// flight.
func syncAll() { syscall.Sync() }
