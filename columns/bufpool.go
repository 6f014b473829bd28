package columns

import "github.com/writeout/writeout/internal/bufpool"

// Buffer pools (see internal/bufpool): the chunk buffers of cursors (a frame read, its
// decompressed bytes, the decoded values) and of writers (a chunk's values, its encoded frame, a
// blob chunk's bytes, a dictionary's blocks, a bitmap part's ends) are taken from process-wide
// pools and given back when their owner is done (a cursor's Release, a writer's finish). A merge
// inside a service holding a large Go heap then reuses the previous merge's buffers instead of
// allocating about 20 MB anew.
var (
	bytePool    = &bufpool.Bytes
	int64Pool   = &bufpool.Int64s
	float64Pool = &bufpool.Float64s
	uint32Pool  = &bufpool.Uint32s
	uint64Pool  = &bufpool.Uint64s
	intPool     = &bufpool.Ints
)

// numPool returns the pool of int64 or float64 slices.
func numPool[T Number]() *bufpool.Pool[T] {
	var zero T
	switch any(zero).(type) {
	case int64:
		return any(int64Pool).(*bufpool.Pool[T])
	default:
		return any(float64Pool).(*bufpool.Pool[T])
	}
}
