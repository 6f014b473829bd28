//go:build !linux

package offheap

import "github.com/writeout/writeout/internal/sys"

// mapChunk returns a chunk from the Go heap.
func mapChunk(*sys.Calls) ([]byte, error) { return make([]byte, chunkSize), nil }

// unmapChunk drops a chunk; the garbage collector frees it.
func unmapChunk(*sys.Calls, []byte) error { return nil }

// readaheadDefault: heap chunks gain nothing from being prepared ahead.
const readaheadDefault = false
