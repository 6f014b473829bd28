package offheap

import (
	"sync"

	"github.com/writeout/writeout/internal/sys"
	"github.com/writeout/writeout/medium"
)

// DefaultPoolLimit is the pool's limit until SetPoolLimit changes it.
const DefaultPoolLimit = 64 << 20

// chunkPool keeps chunks of closed media mapped and resident, up to a limit, for later media.
type chunkPool struct {
	calls *sys.Calls

	mu    sync.Mutex
	limit int64
	free  [][]byte
}

var defaultPool = &chunkPool{calls: &sys.Default, limit: DefaultPoolLimit}

// SetPoolLimit sets how many bytes of free chunks the process-wide pool keeps mapped for reuse
// and returns the previous limit. Pooled chunks past the new limit are unmapped at once; the
// error joins the failed unmaps (the chunks are dropped from the pool either way). A limit
// below ChunkSize, 0 included, disables pooling: media unmap their chunks at Close.
func SetPoolLimit(limit int64) (previous int64, err error) {
	return defaultPool.setLimit(limit)
}

// TrimPool unmaps every chunk in the process-wide pool, leaving its limit as it is. Chunks held
// by open media are not touched.
func TrimPool() error { return defaultPool.trim(0) }

// PooledBytes returns the bytes of free chunks in the process-wide pool.
func PooledBytes() int64 { return defaultPool.pooled() }

func (p *chunkPool) setLimit(limit int64) (int64, error) {
	p.mu.Lock()
	prev := p.limit
	p.limit = max(limit, 0)
	p.mu.Unlock()
	return prev, p.trim(limit)
}

func (p *chunkPool) pooled() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return int64(len(p.free)) * ChunkSize
}

// trim unmaps pooled chunks until at most keep bytes are pooled.
func (p *chunkPool) trim(keep int64) error {
	p.mu.Lock()
	n := int(max(keep, 0) / ChunkSize)
	var drop [][]byte
	if len(p.free) > n {
		drop = append(drop, p.free[n:]...)
		clear(p.free[n:])
		p.free = p.free[:n]
	}
	p.mu.Unlock()
	return joinUnmaps(p.calls, drop)
}

// get returns a pooled chunk, or maps a new one.
func (p *chunkPool) get() ([]byte, error) {
	p.mu.Lock()
	if n := len(p.free); n > 0 {
		c := p.free[n-1]
		p.free[n-1] = nil
		p.free = p.free[:n-1]
		p.mu.Unlock()
		return c, nil
	}
	p.mu.Unlock()
	return mapChunk(p.calls)
}

// put pools the chunks up to the limit and unmaps the rest, returning the failed unmaps.
func (p *chunkPool) put(chunks [][]byte) []error {
	if len(chunks) == 0 {
		return nil
	}
	p.mu.Lock()
	room := max(int(p.limit/ChunkSize)-len(p.free), 0)
	k := min(room, len(chunks))
	p.free = append(p.free, chunks[:k]...)
	p.mu.Unlock()
	var errs []error
	for _, c := range chunks[k:] {
		if err := unmapChunk(p.calls, c); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

func joinUnmaps(calls *sys.Calls, chunks [][]byte) error {
	var errs []error
	for _, c := range chunks {
		if err := unmapChunk(calls, c); err != nil {
			errs = append(errs, err)
		}
	}
	return medium.JoinErrors(errs...)
}
