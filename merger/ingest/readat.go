package ingest

import (
	"io"
	"sync"
)

// blockReaderAt serves small ReadAt calls from a few blocks read ahead. Merging runs reads each
// run's bitmaps one at a time, in id order (a table entry, then the bitmap): without it each is
// a pread of a few bytes, over a million system calls for a million-row ingestion. Mapping the
// runs instead would count their pages in the process's resident set. Reads of blockBytes/2
// or more go straight to the file. Safe for concurrent use, as columns.NewSegment requires.
//
// Every run of a merge has one, so its blocks are few and small (readerBytes in all): a
// merge of 64 runs holds 4 MiB of them. The page cache, not these blocks, keeps the runs'
// bytes; a block only saves the system calls of reads smaller than it.
type blockReaderAt struct {
	r      io.ReaderAt
	size   int64
	mu     sync.Mutex
	blocks [readBlocks]readBlock
	tick   uint64
}

type readBlock struct {
	off  int64
	buf  []byte // the bytes at off; empty when unused
	used uint64
}

const (
	readBlocks = 4
	blockBytes = 16 << 10
	// readerBytes is the most memory a blockReaderAt holds.
	readerBytes = readBlocks * blockBytes
)

func newBlockReaderAt(r io.ReaderAt, size int64) *blockReaderAt {
	return &blockReaderAt{r: r, size: size}
}

// ReadAt implements io.ReaderAt.
func (b *blockReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if len(p) >= blockBytes/2 || off < 0 || off >= b.size {
		return b.r.ReadAt(p, off)
	}
	end := min(off+int64(len(p)), b.size)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.tick++
	victim := 0
	for i := range b.blocks {
		k := &b.blocks[i]
		if k.off <= off && end <= k.off+int64(len(k.buf)) {
			k.used = b.tick
			return b.done(p, copy(p, k.buf[off-k.off:end-k.off]))
		}
		if k.used < b.blocks[victim].used {
			victim = i
		}
	}
	k := &b.blocks[victim]
	if k.buf == nil {
		k.buf = make([]byte, blockBytes)
	}
	k.buf = k.buf[:min(blockBytes, b.size-off)]
	n, err := b.r.ReadAt(k.buf, off)
	k.off, k.buf, k.used = off, k.buf[:n], b.tick
	if n < int(end-off) {
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return copy(p, k.buf), err
	}
	return b.done(p, copy(p, k.buf[:end-off]))
}

// done ends a read served from a block: short only at the end of the file.
func (b *blockReaderAt) done(p []byte, n int) (int, error) {
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}
