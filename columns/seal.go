package columns

import (
	"fmt"
	"hash/crc32"
	"io"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/writeout/writeout/internal/multierr"
	"github.com/writeout/writeout/internal/segfmt"
	"github.com/writeout/writeout/medium"
)

// seal finishes every column and returns the footer.
func (w *writer) seal() (*footer, error) {
	if w.err != nil {
		return nil, w.err
	}
	if w.done {
		return nil, fmt.Errorf("columns: writer finished or aborted: %w", ErrState)
	}
	w.done = true
	rows := w.time.rows
	if rows > maxRows {
		return nil, w.fail(fmt.Errorf("columns: %d rows, at most %d in a segment: %w", rows, maxRows, ErrInvalid))
	}
	var errs []error
	check := func(name string, n int, err error) {
		if err != nil {
			errs = append(errs, err)
		} else if n != rows {
			errs = append(errs, fmt.Errorf("columns: column %q has %d rows, %s has %d: %w", name, n, TimeColumn, rows, ErrState))
		}
	}
	check(TimeColumn, rows, w.time.finish())
	for i, d := range w.schema.Dimensions {
		if d.Raw {
			check(d.Name, w.raws[i].rows, w.raws[i].finish())
		} else {
			check(d.Name, w.dims[i].rows, w.dims[i].finish())
		}
	}
	for i, m := range w.schema.Metrics {
		switch m.column() {
		case MetricLong:
			check(m.Name, w.longs[i].rows, w.longs[i].finish())
		case MetricDouble:
			check(m.Name, w.doubles[i].rows, w.doubles[i].finish())
		case MetricHyperUnique:
			check(m.Name, w.sketch[i].rows, w.sketch[i].finish())
		}
	}
	version := uint8(versionNoNulls)
	if len(errs) == 0 {
		var err error
		if version, err = w.stageMetricNulls(); err != nil {
			errs = append(errs, err)
		}
	}
	for _, s := range w.stages {
		if s.err != nil {
			errs = append(errs, s.err)
		}
	}
	if len(errs) > 0 {
		return nil, w.fail(multierr.Join(errs...))
	}
	for _, s := range w.stages {
		if isV4Encoding(s.spec.enc) && version < versionV4 {
			version = versionV4
		}
		if isV5Encoding(s.spec.enc) && version < versionV5 {
			version = versionV5
		}
		if isV6Encoding(s.spec.enc) {
			version = versionV6
		}
	}
	f := &footer{version: version, rows: rows, schema: w.schema}
	if rows > 0 {
		iv, ok := w.schema.Granularity.Interval(w.time.first, w.time.last)
		if !ok {
			return nil, w.fail(fmt.Errorf("columns: %s: time %d leaves no room for an exclusive interval end: %w", TimeColumn, w.time.last, ErrInvalid))
		}
		f.interval = iv
	}
	off := int64(headerSize)
	for _, s := range w.stages {
		f.parts = append(f.parts, segfmt.PartInfo{
			Column: s.name, Kind: s.spec.kind, Encoding: s.spec.enc,
			Offset: off, Length: s.n, CRC: s.crc, Index: s.spec.column,
		})
		off += s.n
	}
	return f, nil
}

// stageMetricNulls stages the nulls part of every long or double metric that has null rows,
// right after the metric's other parts, and returns the segment's format version: 3 when some
// metric has one, else 2 (the file is then what writers before version 3 wrote).
func (w *writer) stageMetricNulls() (uint8, error) {
	nulls := map[int]*roaring.Bitmap{}
	for i, m := range w.schema.Metrics {
		c := 1 + len(w.schema.Dimensions) + i
		var bm *roaring.Bitmap
		switch m.column() {
		case MetricLong:
			bm = w.longs[i].nulls
		case MetricDouble:
			bm = w.doubles[i].nulls
		case MetricHyperUnique:
		}
		if bm != nil && !bm.IsEmpty() {
			nulls[c] = bm
		}
	}
	if len(nulls) == 0 {
		return versionNoNulls, nil
	}
	stages := make([]*stage, 0, len(w.stages)+len(nulls))
	for k, s := range w.stages {
		stages = append(stages, s)
		c := s.spec.column
		bm := nulls[c]
		if bm == nil || (k+1 < len(w.stages) && w.stages[k+1].spec.column == c) {
			continue
		}
		b, err := w.med.NewBytes()
		if err != nil {
			return 0, fmt.Errorf("columns: column %q part %s: %w", s.name, segfmt.PartNulls, err)
		}
		ns := &stage{b: b, spec: partSpec{c, segfmt.PartNulls, segfmt.EncRoaring}, name: s.name}
		stages = append(stages, ns)
		bm.RunOptimize()
		if _, err := bm.WriteTo(ns); err != nil {
			_ = ns.fail(err) // kept in ns.err, which seal collects
		}
	}
	w.stages = stages
	return versionNulls, nil
}

// crcWriter passes bytes to w and checksums them.
type crcWriter struct {
	w   io.Writer
	crc uint32
	n   int64
}

func (c *crcWriter) Write(p []byte) (int, error) {
	k, err := c.w.Write(p)
	if k < 0 || k > len(p) {
		return 0, fmt.Errorf("columns: writer returned invalid count %d: %w", k, ErrInvalid)
	}
	c.crc = crc32.Update(c.crc, castagnoli, p[:k])
	c.n += int64(k)
	return k, err
}

// emitBuf is the size of the buffers emit reads the stages into, and emitBufs their number.
const (
	emitBuf  = 256 << 10
	emitBufs = 3
)

// emitGiveBack is how many bytes of a part emit reads between two DiscardPrefix calls of its
// stage (a variable for tests). A 300 M-row merge of the peers' events published in 4.14-4.50 s
// giving back every 16 MiB, against 4.88-5.21 s giving a part back only once it was read whole
// (bench/RESULTS.md).
var emitGiveBack int64 = 16 << 20

// emit writes the whole segment to out: the header, every part read out of its stage and
// checked against the CRC and size computed when it was staged, the footer and the trailer.
// A goroutine reads the header and the parts, back to back, into buffers of emitBuf bytes
// (ReadAt) and checksums them, while this one writes the buffers before: reading a staged part
// back (a copy out of a temp file's cache, say) and writing the segment (a copy into the
// output's) take turns on two cores, and every write but the last is a whole buffer, which a
// bufio.Writer of that size passes on without copying it (the parts' own WriteTo, a part at a
// time, left a buffered writer copying every byte). The reading goroutine gives each stage's
// bytes back as it reads them: every emitGiveBack bytes where the stage can give back a prefix
// (medium.PrefixDiscarder), and the whole stage once its CRC is checked (medium.Discarder).
func (w *writer) emit(out io.Writer, f *footer) (int64, error) {
	type filled struct {
		b   []byte
		err error
	}
	full := make(chan filled, emitBufs)
	free := make(chan []byte, emitBufs)
	for range emitBufs {
		free <- bytePool.Get(emitBuf)[:0]
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(full)
		var buf []byte
		select {
		case buf = <-free:
		case <-stop:
			return
		}
		send := func(fb filled) bool {
			select {
			case full <- fb:
				return true
			case <-stop:
				return false
			}
		}
		buf = appendHeader(buf, f.version)
		for _, s := range w.stages {
			if s.b.Size() != s.n {
				send(filled{err: fmt.Errorf("columns: column %q part %s: the encoders wrote %d bytes, the stage holds %d: %w",
					s.name, s.spec.kind, s.n, s.b.Size(), ErrCorrupt)})
				return
			}
			crc := uint32(0)
			pd, _ := s.b.(medium.PrefixDiscarder)
			given := int64(0) // the part's bytes given back (pd)
			for off := int64(0); off < s.n; {
				if len(buf) == emitBuf {
					if !send(filled{b: buf}) {
						return
					}
					select {
					case buf = <-free:
					case <-stop:
						return
					}
				}
				p := buf[len(buf) : len(buf)+int(min(int64(emitBuf-len(buf)), s.n-off))]
				k, err := s.b.ReadAt(p, off)
				if k == len(p) {
					err = nil // ReadAt may say io.EOF with the part's last bytes
				} else if err == nil || err == io.EOF {
					err = io.ErrUnexpectedEOF
				}
				if err != nil {
					send(filled{err: fmt.Errorf("columns: column %q part %s: copy: %w", s.name, s.spec.kind, err)})
					return
				}
				crc = crc32.Update(crc, castagnoli, p)
				buf = buf[:len(buf)+len(p)]
				off += int64(len(p))
				if pd != nil && off-given >= emitGiveBack && off < s.n {
					// Read, so given back as the copy goes (see medium.PrefixDiscarder). A
					// failure loses nothing: the bytes go with the stage.
					_ = pd.DiscardPrefix(off)
					given = off
				}
			}
			if crc != s.crc {
				send(filled{err: corruptf("columns: column %q part %s: copied %d bytes with CRC %08x, staged %d bytes with CRC %08x",
					s.name, s.spec.kind, s.n, crc, s.n, s.crc)})
				return
			}
			// Copied and checked: the stage's memory (a temp file's pages) goes back now, for
			// the output's next pages to take. A failure to give it back early loses nothing:
			// it is given back when the medium closes.
			if d, ok := s.b.(medium.Discarder); ok {
				_ = d.Discard()
			}
		}
		if len(buf) > 0 {
			send(filled{b: buf})
		}
	}()
	var total int64
	put := func(b []byte) error {
		n, err := out.Write(b)
		total += int64(n)
		if err == nil && n != len(b) {
			err = io.ErrShortWrite
		}
		return err
	}
	var err error
	for fb := range full {
		if err = fb.err; err != nil {
			break
		}
		if err = put(fb.b); err != nil {
			err = fmt.Errorf("columns: write: %w", err)
			break
		}
		free <- fb.b[:0]
	}
	// The reader stops at its next buffer and is waited for: it reads the stages, which are
	// released once emit returns.
	close(stop)
	<-done
	for len(free) > 0 {
		bytePool.Put(<-free)
	}
	if err != nil {
		return total, err
	}
	fb, err := appendFooter(nil, f)
	if err != nil {
		return total, err
	}
	if len(fb) > maxFooter {
		return total, fmt.Errorf("columns: footer of %d bytes, at most %d: %w", len(fb), maxFooter, ErrInvalid)
	}
	if err := put(appendTrailer(fb, fb)); err != nil {
		return total, fmt.Errorf("columns: write footer: %w", err)
	}
	return total, nil
}

// Info describes a finished segment.
type Info struct {
	Path     string // the published file; empty for FinishTo
	Rows     int
	Interval Interval
	Size     int64 // bytes of the segment file
	Parts    []segfmt.PartInfo
	// Syncs counts the fdatasync and fsync calls made (file, directory, stages); Trickles the
	// sync_file_range calls.
	Syncs    int
	Trickles int
}

func (f *footer) info(size int64) Info {
	return Info{Rows: f.rows, Interval: f.interval, Size: size, Parts: f.parts}
}

// FinishTo implements segwrite.Writer.
func (w *writer) FinishTo(out io.Writer) (Info, error) {
	f, err := w.seal()
	if err != nil {
		return Info{}, multierr.Join(err, w.release())
	}
	n, err := w.emit(out, f)
	if err := multierr.Join(err, w.release()); err != nil {
		return Info{}, err
	}
	return f.info(n), nil
}
