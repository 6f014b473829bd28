// Package lockedio serializes the calls of an io.ReaderAt: the files of an afero.Fs need not
// allow concurrent ReadAt calls (afero's MemMapFs moves a shared offset), and a segment is read
// from several goroutines (a merge's tasks, the checks of its parts).
package lockedio

import (
	"io"
	"sync"
)

// ReaderAt is R with one ReadAt at a time.
type ReaderAt struct {
	mu sync.Mutex
	R  io.ReaderAt
}

// ReadAt reads from R under the lock.
func (l *ReaderAt) ReadAt(p []byte, off int64) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.R.ReadAt(p, off)
}
