package ingest

import "unsafe"

// blockRing recycles the memory of fast's blocks when the reader's user says which blocks
// it no longer uses (reuseBlocks, releaseBefore): without it each block is a new string, 157
// MB of fresh memory for 157 MB of CSV, a page fault every 4 KiB of it. Blocks are numbered
// from 1 in the order they are taken; the strings of a record read by fast point into block
// seq (the one taken last). Blocks are carved one after the other from chunks of at least
// chunkBytes; a chunk is recycled once every block carved from it is released.
type blockRing struct {
	on   bool
	seq  uint64      // the number of the block taken last
	cur  []byte      // the chunk blocks are carved from: its length is the bytes carved
	live []ringChunk // chunks carved full, oldest first
	free [][]byte    // released chunks, for the next
	kept int         // the bytes of free
	made int         // chunks allocated (tests check they are recycled)
}

// ringChunk is a chunk carved full; last is the number of the last block carved from it.
type ringChunk struct {
	last uint64
	buf  []byte
}

// chunkBytes is the least a chunk holds (a block is most often what the reader's 64 KiB
// buffer holds; tests make it small); maxFreeBytes bounds the released chunks kept for reuse.
var chunkBytes = 256 << 10

const maxFreeBytes = 1 << 20

// take returns b's bytes as a string: a copy, carved from a recycled chunk when the ring is on.
func (r *blockRing) take(b []byte) string {
	r.seq++
	if !r.on {
		return string(b)
	}
	if len(b) > cap(r.cur)-len(r.cur) {
		if r.cur != nil {
			r.live = append(r.live, ringChunk{last: r.seq - 1, buf: r.cur})
		}
		r.cur = nil
		for i := len(r.free) - 1; i >= 0; i-- { // the chunk released last: still in the cache
			if f := r.free[i]; cap(f) >= len(b) {
				r.cur = f[:0]
				r.kept -= cap(f)
				r.free = append(r.free[:i], r.free[i+1:]...)
				break
			}
		}
		if r.cur == nil {
			r.cur = make([]byte, 0, max(len(b), chunkBytes))
			r.made++
		}
	}
	start := len(r.cur)
	r.cur = append(r.cur, b...)
	return unsafe.String(unsafe.SliceData(r.cur[start:]), len(b))
}

// releaseBefore lets the blocks numbered below seq be overwritten.
func (r *blockRing) releaseBefore(seq uint64) {
	k := 0
	for k < len(r.live) && r.live[k].last < seq {
		if c := r.live[k].buf; r.kept+cap(c) <= maxFreeBytes {
			r.free = append(r.free, c)
			r.kept += cap(c)
		}
		r.live[k] = ringChunk{}
		k++
	}
	if k > 0 {
		r.live = append(r.live[:0], r.live[k:]...)
	}
}

// reuseBlocks makes the reader recycle the memory of its blocks: the strings of a row it
// reads stay valid only until its user calls releaseBefore with a number above blockSeq's
// when it read the row. This breaks Reader's promise that strings may be kept, so only a
// user that copies what it keeps may ask for it (the read-ahead for a Builder without raw
// dimensions, which copies every new dictionary value).
func (x *csvReader) reuseBlocks() { x.sc.ring.on = true }

// blockSeq is the number of the block the strings of the row read last point into (at most).
func (x *csvReader) blockSeq() uint64 { return x.sc.ring.seq }

// releaseBefore lets the reader overwrite the blocks numbered below seq: no string of the rows
// read from them is used any more.
func (x *csvReader) releaseBefore(seq uint64) { x.sc.ring.releaseBefore(seq) }
