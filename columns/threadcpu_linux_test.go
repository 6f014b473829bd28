package columns

import (
	"syscall"
	"time"
)

// threadCPU returns the CPU time the calling thread has used (lock the goroutine to its
// thread around the measured work): on a shared machine it leaves out the time spent waiting
// for a core.
func threadCPU() time.Duration {
	var ru syscall.Rusage
	const rusageThread = 1 // RUSAGE_THREAD
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
