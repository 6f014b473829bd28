package offheap

import (
	"fmt"
	"sync/atomic"
)

// Budget is a memory budget shared by several media (and their children): the chunk memory they
// hold together stays at or below its maximum. Its methods are safe for concurrent use.
type Budget struct {
	max  int64
	used atomic.Int64
}

// NewBudget returns a budget of max bytes, counted in whole chunks of 2 MiB. A max below
// a chunk (zero or negative included) lets nothing stay in memory: every Bytes of a medium
// using it spills at its first write, or fails without a spill medium.
func NewBudget(max int64) *Budget {
	return &Budget{max: max}
}

// Used returns the bytes the media using the budget hold now (a multiple of the 2 MiB chunk).
func (b *Budget) Used() int64 { return b.used.Load() }

func (b *Budget) reserve(n int64) error {
	for {
		used := b.used.Load()
		if used+n > b.max {
			return fmt.Errorf("%w: %d of %d bytes in use, %d more needed", ErrBudget, used, b.max, n)
		}
		if b.used.CompareAndSwap(used, used+n) {
			return nil
		}
	}
}

func (b *Budget) release(n int64) { b.used.Add(-n) }
