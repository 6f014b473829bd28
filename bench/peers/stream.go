package peers

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"os"
	"path/filepath"
)

// Streaming generation: any number of rows in bounded memory.
//
// GenerateRows draws every row, then sorts them all (a stable sort by (time, dimensions) in
// effect: ties keep the order they were drawn in). Stream gives the same rows in the same
// order without holding them: it draws every row once and appends it, encoded, to the bucket
// file of its time range (BatchRows rows a bucket on average, the shape's time range cut into
// equal parts); then it reads the buckets back in time order, each one sorted in memory with
// its rows' draw order as the last key. A bucket's rows are exactly the rows of its time range,
// in draw order, so sorting each and concatenating them gives the whole sort.

// DefaultBatchRows is Stream's default batch: 12 MiB of Rows (Stream holds two).
const DefaultBatchRows = 1 << 18

// maxBuckets bounds the bucket files open at once (each with a 32 KiB buffer): past it, the
// batch grows.
const maxBuckets = 1024

// StreamOptions configure Stream. The zero value is the default.
type StreamOptions struct {
	// BatchRows is about how many rows Stream holds in memory at once (a batch is one
	// bucket, whose size varies a little around the mean); 0 means DefaultBatchRows. It grows
	// so that there are at most 1024 buckets.
	BatchRows int
	// TempDir is the directory of the bucket files (a directory of its own is made in it
	// and removed); "" means os.TempDir(). With rows <= BatchRows no file is written.
	TempDir string
}

func (o *StreamOptions) batch(rows int) int {
	b := o.BatchRows
	if b <= 0 {
		b = DefaultBatchRows
	}
	return max(b, (rows+maxBuckets-1)/maxBuckets)
}

// Stream draws rows rows of s and hands them to fn in (time, dimensions) order, exactly the
// rows of GenerateRows(s, rows) in its order, in consecutive batches. fn must not keep the
// slice after it returns (Stream reuses it), and may modify it. An error of fn stops Stream,
// which returns it.
func Stream(s *Shape, rows int, o StreamOptions, fn func([]Row) error) (err error) {
	if rows < 0 {
		return fmt.Errorf("peers: stream: %d rows", rows)
	}
	batch := o.batch(rows)
	if rows <= batch {
		if rows == 0 {
			return nil
		}
		return fn(GenerateRows(s, rows))
	}
	k := (rows + batch - 1) / batch
	tmp, err := os.MkdirTemp(o.TempDir, "peers-buckets-*")
	if err != nil {
		return fmt.Errorf("peers: stream: %w", err)
	}
	defer func() {
		if rerr := os.RemoveAll(tmp); rerr != nil && err == nil {
			err = fmt.Errorf("peers: stream: %w", rerr)
		}
	}()
	paths, err := writeBuckets(s, rows, k, tmp)
	if err != nil {
		return err
	}
	return readBuckets(s, paths, batch, fn)
}

// writeBuckets draws rows rows of s into k bucket files under dir, a row to the bucket of its
// time, and returns their paths in time order.
func writeBuckets(s *Shape, rows, k int, dir string) (paths []string, err error) {
	files := make([]*os.File, k)
	ws := make([]*bufio.Writer, k)
	defer func() {
		for _, f := range files {
			if f == nil {
				continue
			}
			if cerr := f.Close(); cerr != nil && err == nil {
				err = fmt.Errorf("peers: stream: %w", cerr)
			}
		}
	}()
	for b := range k {
		p := filepath.Join(dir, fmt.Sprintf("bucket-%05d", b))
		f, err := os.Create(p)
		if err != nil {
			return nil, fmt.Errorf("peers: stream: %w", err)
		}
		files[b], ws[b] = f, bufio.NewWriterSize(f, 32<<10)
		paths = append(paths, p)
	}
	g := s.newGen()
	var r Row
	buf := make([]byte, 0, 64)
	for range rows {
		g.next(&r)
		off := r.Time - s.Start
		if off < 0 || off >= s.Span {
			return nil, fmt.Errorf("peers: stream: shape %s: time %d outside [%d, %d)", s.Name, r.Time, s.Start, s.Start+s.Span)
		}
		// bucket = off*k/Span, in 128 bits: off < Span, so the quotient is below k.
		hi, lo := bits.Mul64(uint64(off), uint64(k))
		b, _ := bits.Div64(hi, lo, uint64(s.Span))
		buf = appendRow(buf[:0], s, &r)
		if _, err := ws[b].Write(buf); err != nil {
			return nil, fmt.Errorf("peers: stream: bucket %d: %w", b, err)
		}
	}
	for b, w := range ws {
		if err := w.Flush(); err != nil {
			return nil, fmt.Errorf("peers: stream: bucket %d: %w", b, err)
		}
	}
	return paths, nil
}

// appendRow appends r's encoding: the time after s.Start and the dimension ids as uvarints,
// the metrics as varints, only the shape's own.
func appendRow(dst []byte, s *Shape, r *Row) []byte {
	dst = binary.AppendUvarint(dst, uint64(r.Time-s.Start))
	for d := range s.Dims {
		dst = binary.AppendUvarint(dst, uint64(r.Dims[d]))
	}
	for m := range s.Metrics {
		dst = binary.AppendVarint(dst, r.Mets[m])
	}
	return dst
}

var errBucket = errors.New("bad row encoding")

// decodeRows appends the rows encoded in b to dst, seq numbering them from len(dst).
func decodeRows(dst []Row, s *Shape, b []byte) ([]Row, error) {
	nd, nm := len(s.Dims), len(s.Metrics)
	for len(b) > 0 {
		var r Row
		v, n := binary.Uvarint(b)
		if n <= 0 {
			return dst, errBucket
		}
		r.Time, b = s.Start+int64(v), b[n:]
		for d := range nd {
			if v, n = binary.Uvarint(b); n <= 0 || v > 1<<32-1 {
				return dst, errBucket
			}
			r.Dims[d], b = uint32(v), b[n:]
		}
		for m := range nm {
			x, n := binary.Varint(b)
			if n <= 0 {
				return dst, errBucket
			}
			r.Mets[m], b = x, b[n:]
		}
		r.seq = uint32(len(dst))
		dst = append(dst, r)
	}
	return dst, nil
}

// readBuckets reads the buckets at paths in order, each into memory, sorted, and hands it to
// fn, removing its file. The next bucket is read and sorted while fn works on one.
func readBuckets(s *Shape, paths []string, batch int, fn func([]Row) error) error {
	type loaded struct {
		rows []Row
		err  error
	}
	free := make(chan []Row, 2)
	ready := make(chan loaded)
	stop := make(chan struct{})
	for range 2 {
		free <- make([]Row, 0, batch+batch/16)
	}
	go func() {
		defer close(ready)
		for b, p := range paths {
			var buf []Row
			select {
			case buf = <-free:
			case <-stop:
				return
			}
			data, err := os.ReadFile(p)
			if err == nil {
				err = os.Remove(p)
			}
			if err == nil {
				if buf, err = decodeRows(buf[:0], s, data); err != nil {
					err = fmt.Errorf("bucket %d: %w", b, err)
				}
			}
			if err == nil {
				sortRows(buf)
			}
			select {
			case ready <- loaded{buf, err}:
			case <-stop:
				return
			}
			if err != nil {
				return
			}
		}
	}()
	defer func() {
		close(stop)
		for range ready { // until the reader has returned
		}
	}()
	for l := range ready {
		if l.err != nil {
			return fmt.Errorf("peers: stream: %w", l.err)
		}
		if err := fn(l.rows); err != nil {
			return err
		}
		free <- l.rows
	}
	return nil
}
