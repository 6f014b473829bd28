package columns

import (
	"fmt"

	"github.com/RoaringBitmap/roaring/v2"
)

// blobWriter appends byte strings in chunks closed at chunkRows rows or blobChunkTarget bytes.
type blobWriter struct {
	cw        chunkedWriter
	chunkRows int
	lens      []int64
	data      []byte
	raw       []byte
	rows      int
	err       error
	finished  bool
}

func (b *blobWriter) append(v []byte) error {
	if b.err != nil {
		return b.err
	}
	if b.finished {
		return fmt.Errorf("columns: column %q: append after finish: %w", b.cw.st.name, ErrState)
	}
	if len(v) > MaxValueBytes {
		b.err = fmt.Errorf("columns: column %q: row %d: value of %d bytes, at most %d: %w", b.cw.st.name, b.rows, len(v), MaxValueBytes, ErrInvalid)
		return b.err
	}
	if b.lens == nil {
		b.lens = int64Pool.Get(b.chunkRows)
	}
	b.lens = append(b.lens, int64(len(v)))
	if b.data == nil {
		b.data = bytePool.Get(max(len(v), 4096))
	}
	// Double (the pool's grow): append's growth by a quarter at chunk sizes leaves four times
	// the chunk behind as garbage, per raw column.
	b.data = bytePool.Grow(b.data, len(v))
	b.data = append(b.data, v...)
	b.rows++
	if len(b.lens) == b.chunkRows || len(b.data) >= blobChunkTarget {
		return b.flush()
	}
	return nil
}

func (b *blobWriter) flush() error {
	if len(b.lens) == 0 {
		return b.err
	}
	b.raw = bytePool.Regrow(b.raw, len(b.data)+9*len(b.lens)+16)
	b.raw = appendBlobs(b.raw, b.lens, b.data)
	if err := b.cw.writeChunk(b.raw, len(b.lens)); err != nil && b.err == nil {
		b.err = err
	}
	b.lens, b.data = b.lens[:0], b.data[:0]
	if cap(b.raw) > 4*blobChunkTarget {
		// Do not keep one huge value's buffers (the pool drops those past its largest class).
		bytePool.Put(b.raw)
		bytePool.Put(b.data)
		b.raw, b.data = nil, nil
	}
	return b.err
}

// Rows returns the rows appended so far.
func (b *blobWriter) Rows() int { return b.rows }

// Size returns the bytes staged so far for the column's values part.
func (b *blobWriter) Size() int64 { return b.cw.st.n }

func (b *blobWriter) finishBlobs() error {
	if b.finished {
		return b.err
	}
	b.finished = true
	if err := b.flush(); err != nil {
		return err
	}
	b.err = b.cw.finish()
	int64Pool.Put(b.lens)
	bytePool.Put(b.data)
	bytePool.Put(b.raw)
	b.lens, b.data, b.raw = nil, nil, nil
	return b.err
}

// rawWriter appends the strings of a raw dimension.
type rawWriter struct {
	blobWriter
	nullsSt *stage
	nulls   *roaring.Bitmap
}

// Append implements segwrite.RawWriter.
func (r *rawWriter) Append(v string) error {
	return r.append(unsafeBytes(v))
}

// AppendBytes implements segwrite.RawWriter.
func (r *rawWriter) AppendBytes(v []byte) error { return r.append(v) }

// AppendNull implements segwrite.RawWriter.
func (r *rawWriter) AppendNull() error {
	if r.err == nil && !r.finished {
		r.nulls.Add(uint32(r.rows))
	}
	return r.append(nil)
}

func (r *rawWriter) finish() error {
	if r.finished {
		return r.err
	}
	if err := r.finishBlobs(); err != nil {
		return err
	}
	r.nulls.RunOptimize()
	if _, err := r.nulls.WriteTo(r.nullsSt); err != nil {
		r.err = r.nullsSt.fail(err)
	}
	r.nulls = nil
	return r.err
}
