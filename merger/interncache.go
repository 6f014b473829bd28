package merger

import (
	"encoding/binary"
	"unsafe"
)

// internCache is a direct-mapped cache in front of a dictionary dimension's index (a Go map of
// strings): ingestion looks up every value of every row, and a map lookup hashes the value
// and probes the table, about 30-40 ns; most values of a skewed dimension are a few thousand
// frequent ones, found here by a cheap hash of the value's last 8 bytes and its length and one
// comparison. A miss (or a collision) goes to the map, which stays the index. The cache holds
// the dictionary's own copies of the values, never the caller's strings (a CSV record's, in
// memory that is reused). It has twice the slots of the dictionary's values, up to
// 1<<internCacheBits, so that it counts for little in a small Builder's memory.
type internCache struct {
	ents []internEnt
	bits uint
}

type internEnt struct {
	v  string
	id uint32
}

const (
	internCacheMinBits = 4
	internCacheBits    = 12
)

func (c *internCache) slot(v string) int {
	n := len(v)
	var x uint64
	if n >= 8 {
		x = binary.LittleEndian.Uint64(unsafe.Slice(unsafe.StringData(v[n-8:]), 8))
	} else {
		for i := range n {
			x = x<<8 | uint64(v[i])
		}
	}
	x ^= uint64(n) * 0xff51afd7ed558ccd
	return int((x * 0x9e3779b97f4a7c15) >> (64 - c.bits))
}

// get returns v's id if the cache holds v, and v's slot (for put).
func (c *internCache) get(v string) (id uint32, slot int, ok bool) {
	if c.ents == nil {
		c.bits = internCacheMinBits
		c.ents = make([]internEnt, 1<<c.bits)
	}
	s := c.slot(v)
	e := &c.ents[s]
	if e.id != 0 && e.v == v {
		return e.id, s, true
	}
	return 0, s, false
}

// put makes slot s hold id, whose value is v (the dictionary's copy).
func (c *internCache) put(s int, v string, id uint32) { c.ents[s] = internEnt{v: v, id: id} }

// fit doubles the slots, emptied, while the dictionary holds more than half as many values.
func (c *internCache) fit(values int) {
	if values*2 <= len(c.ents) || c.bits >= internCacheBits {
		return
	}
	for values*2 > 1<<c.bits && c.bits < internCacheBits {
		c.bits++
	}
	c.ents = make([]internEnt, 1<<c.bits)
}

// reset empties the cache, keeping its memory.
func (c *internCache) reset() { clear(c.ents) }
