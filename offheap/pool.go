package offheap

import (
	"sync"

	"github.com/writeout/writeout/internal/multierr"
	"github.com/writeout/writeout/internal/sys"
)

// defaultPoolLimit is the pool's limit until setPoolLimit changes it.
const defaultPoolLimit = 64 << 20

// chunkPool keeps chunks of closed media mapped and resident, up to a limit, for later media.
//
// With readahead on, a pool that has to map a fresh chunk also prepares the next one on another
// goroutine: it maps it and touches its pages, so that the kernel zeroes them while the writer
// fills the chunk it just got. At most one such spare chunk exists; it counts against no limit
// and trimPool unmaps it too.
type chunkPool struct {
	calls     *sys.Calls
	readahead bool

	mu       sync.Mutex
	limit    int64
	free     [][]byte
	spare    []byte // a fresh chunk prepared ahead, with its pages touched
	inflight sync.WaitGroup
	busy     bool // a spare is being prepared
	halts    int  // trims waiting for the spare being prepared: no new one starts meanwhile
}

var defaultPool = &chunkPool{calls: &sys.Default, limit: defaultPoolLimit, readahead: readaheadDefault}

// setPoolLimit sets how many bytes of free chunks the process-wide pool keeps mapped for reuse
// and returns the previous limit. Pooled chunks past the new limit are unmapped at once; the
// error joins the failed unmaps (the chunks are dropped from the pool either way). A limit
// below chunkSize, 0 included, disables pooling: media unmap their chunks at Close.
func setPoolLimit(limit int64) (previous int64, err error) {
	return defaultPool.setLimit(limit)
}

// trimPool unmaps every chunk in the process-wide pool, leaving its limit as it is. Chunks held
// by open media are not touched.
func trimPool() error { return defaultPool.trim(0) }

// pooledBytes returns the bytes of free chunks in the process-wide pool.
func pooledBytes() int64 { return defaultPool.pooled() }

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
	return int64(len(p.free)) * chunkSize
}

// trim unmaps pooled chunks until at most keep bytes are pooled. It waits for a spare being
// prepared and unmaps it as well, so that after trim(0) the pool holds no mapping at all. While
// it waits no new spare starts: a get meanwhile maps its own chunk (so the WaitGroup is never
// added to during its Wait, and no spare appears after trim(0) has looked).
func (p *chunkPool) trim(keep int64) error {
	p.mu.Lock()
	p.halts++
	p.mu.Unlock()
	p.inflight.Wait()
	p.mu.Lock()
	p.halts--
	n := int(max(keep, 0) / chunkSize)
	var drop [][]byte
	if len(p.free) > n {
		drop = append(drop, p.free[n:]...)
		clear(p.free[n:])
		p.free = p.free[:n]
	}
	if keep <= 0 && p.spare != nil {
		drop = append(drop, p.spare)
		p.spare = nil
	}
	p.mu.Unlock()
	return joinUnmaps(p.calls, drop)
}

// get returns a pooled chunk, the spare prepared ahead, or a newly mapped chunk. When it has to
// use fresh memory it starts preparing the next spare.
func (p *chunkPool) get() ([]byte, error) {
	p.mu.Lock()
	if n := len(p.free); n > 0 {
		c := p.free[n-1]
		p.free[n-1] = nil
		p.free = p.free[:n-1]
		p.mu.Unlock()
		return c, nil
	}
	c := p.spare
	p.spare = nil
	p.startSpareLocked()
	p.mu.Unlock()
	if c != nil {
		return c, nil
	}
	return mapChunk(p.calls)
}

// startSpareLocked starts preparing a spare chunk on another goroutine unless one exists, is
// being prepared, or a trim is waiting. A failure to map it is not an error: the next get maps
// its own chunk and reports what goes wrong then.
func (p *chunkPool) startSpareLocked() {
	if !p.readahead || p.busy || p.spare != nil || p.halts > 0 {
		return
	}
	p.busy = true
	p.inflight.Add(1)
	go func() {
		defer p.inflight.Done()
		c, err := mapChunk(p.calls)
		if err == nil {
			touchPages(c)
		}
		p.mu.Lock()
		p.busy = false
		if err == nil {
			p.spare = c // nil until now: no spare starts while one exists, and only this goroutine sets it
		}
		p.mu.Unlock()
	}()
}

// touchPages writes one byte of every page, so the kernel backs (and zeroes) them now.
func touchPages(c []byte) {
	for i := 0; i < len(c); i += 4096 {
		c[i] = 0
	}
}

// put pools the chunks up to the limit and unmaps the rest, returning the failed unmaps.
func (p *chunkPool) put(chunks [][]byte) []error {
	if len(chunks) == 0 {
		return nil
	}
	p.mu.Lock()
	room := max(int(p.limit/chunkSize)-len(p.free), 0)
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
	return multierr.Join(errs...)
}
