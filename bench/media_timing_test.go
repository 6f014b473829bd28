package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/writeout/writeout/internal/multierr"
	"github.com/writeout/writeout/medium"
	"github.com/writeout/writeout/mmapfile"
	"github.com/writeout/writeout/offheap"
	"github.com/writeout/writeout/tmpfile"
)

// A sink is one thing the write benchmarks write into: a medium's Bytes or a baseline.
type sink struct {
	w     io.Writer
	size  func() int64
	close func() error // flushes and releases; not timed
}

// sinkMaker makes a fresh sink for one benchmark iteration.
type sinkMaker struct {
	name string
	make func(b *testing.B) sink
}

// mediumSink wraps a medium's first Bytes.
func mediumSink(b *testing.B, m medium.Medium) sink {
	bs, err := m.NewBytes()
	if err != nil {
		b.Fatal(err)
	}
	return sink{w: bs, size: bs.Size, close: m.Close}
}

// countingWriter counts the bytes that reach w.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// sinks lists the media under test and the baselines: bytes.Buffer, and a 1 MiB bufio.Writer
// over an *os.File (the way a plain Go program stages bytes on disk).
func sinks(dir string) []sinkMaker {
	return []sinkMaker{
		{"heap", func(b *testing.B) sink { return mediumSink(b, medium.NewHeap()) }},
		{"tmpfile", func(b *testing.B) sink {
			m, err := tmpfile.New(tmpfile.Options{Dir: dir})
			if err != nil {
				b.Fatal(err)
			}
			return mediumSink(b, m)
		}},
		{"offheap", func(b *testing.B) sink {
			m, err := offheap.New(offheap.Options{})
			if err != nil {
				b.Fatal(err)
			}
			return mediumSink(b, m)
		}},
		{"mmapfile", func(b *testing.B) sink {
			m, err := mmapfile.New(mmapfile.Options{Dir: dir})
			if err != nil {
				b.Fatal(err)
			}
			return mediumSink(b, m)
		}},
		{"bytes.Buffer", func(b *testing.B) sink {
			var buf bytes.Buffer
			return sink{w: &buf, size: func() int64 { return int64(buf.Len()) }, close: func() error { return nil }}
		}},
		{"bufio-file", func(b *testing.B) sink {
			f, err := os.CreateTemp(dir, "bufio-*")
			if err != nil {
				b.Fatal(err)
			}
			cw := &countingWriter{w: f}
			bw := bufio.NewWriterSize(cw, 1<<20)
			return sink{
				w:    bw,
				size: func() int64 { return cw.n + int64(bw.Buffered()) },
				close: func() error {
					return multierr.Join(bw.Flush(), f.Close(), os.Remove(f.Name()))
				},
			}
		}},
	}
}

var sinkSize int64

// BenchmarkWrite writes 16 MiB per iteration, in writes of the given size, into a fresh sink.
func BenchmarkWrite(b *testing.B) {
	const total = 16 << 20
	dir := b.TempDir()
	for _, size := range []int{1, 4, 64, 4096, 65536} {
		p := bytes.Repeat([]byte{'x'}, size)
		for _, sm := range sinks(dir) {
			b.Run(fmt.Sprintf("size=%d/medium=%s", size, sm.name), func(b *testing.B) {
				b.SetBytes(total)
				b.ReportAllocs()
				for b.Loop() {
					b.StopTimer()
					s := sm.make(b)
					b.StartTimer()
					for n := 0; n < total; n += size {
						if _, err := s.w.Write(p); err != nil {
							b.Fatal(err)
						}
					}
					b.StopTimer()
					if err := s.close(); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
			})
		}
	}
}

// BenchmarkSize calls Size on a sink holding 1 MiB and a few small writes.
func BenchmarkSize(b *testing.B) {
	dir := b.TempDir()
	for _, sm := range sinks(dir) {
		b.Run("medium="+sm.name, func(b *testing.B) {
			s := sm.make(b)
			defer func() {
				if err := s.close(); err != nil {
					b.Error(err)
				}
			}()
			if _, err := s.w.Write(make([]byte, 1<<20+37)); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			var total int64
			for b.Loop() {
				total += s.size()
			}
			sinkSize = total
		})
	}
}

// BenchmarkStream1GiB writes 1 GiB in 64 KiB writes: tmpfile against a 1 MiB bufio.Writer over
// an *os.File (issue 2, bar 5).
func BenchmarkStream1GiB(b *testing.B) {
	const total, size = 1 << 30, 64 << 10
	dir := b.TempDir()
	p := bytes.Repeat([]byte{'y'}, size)
	for _, sm := range sinks(dir) {
		if sm.name != "tmpfile" && sm.name != "bufio-file" {
			continue
		}
		b.Run("medium="+sm.name, func(b *testing.B) {
			b.SetBytes(total)
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				s := sm.make(b)
				b.StartTimer()
				for n := 0; n < total; n += size {
					if _, err := s.w.Write(p); err != nil {
						b.Fatal(err)
					}
				}
				if f, ok := s.w.(*bufio.Writer); ok {
					if err := f.Flush(); err != nil { // the baseline's bytes must reach the file too
						b.Fatal(err)
					}
				}
				b.StopTimer()
				if err := s.close(); err != nil {
					b.Fatal(err)
				}
				// Start every iteration with no writeback in flight, so that one sink does not
				// pay for the dirty pages of the one before.
				syncAll()
				b.StartTimer()
			}
		})
	}
}

// BenchmarkWriteTo copies 256 MiB staged in a medium out to io.Discard and to a fresh
// *os.File; the baseline is io.Copy from one *os.File to another (copy_file_range on Linux).
func BenchmarkWriteTo(b *testing.B) {
	const total = 256 << 20
	dir := b.TempDir()
	chunk := bytes.Repeat([]byte("0123456789abcdef"), 4096)
	fill := func(w io.Writer) {
		for n := 0; n < total; n += len(chunk) {
			if _, err := w.Write(chunk); err != nil {
				b.Fatal(err)
			}
		}
	}
	media := map[string]func() medium.Medium{
		"heap": medium.NewHeap,
		"offheap": func() medium.Medium {
			m, err := offheap.New(offheap.Options{})
			if err != nil {
				b.Fatal(err)
			}
			return m
		},
		"mmapfile": func() medium.Medium {
			m, err := mmapfile.New(mmapfile.Options{Dir: dir})
			if err != nil {
				b.Fatal(err)
			}
			return m
		},
		"tmpfile": func() medium.Medium {
			m, err := tmpfile.New(tmpfile.Options{Dir: dir})
			if err != nil {
				b.Fatal(err)
			}
			return m
		},
	}
	for _, name := range []string{"heap", "offheap", "tmpfile", "mmapfile"} {
		m := media[name]()
		bs, err := m.NewBytes()
		if err != nil {
			b.Fatal(err)
		}
		fill(bs)
		b.Run("dst=discard/medium="+name, func(b *testing.B) {
			b.SetBytes(total)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := bs.WriteTo(io.Discard); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("dst=file/medium="+name, func(b *testing.B) {
			b.SetBytes(total)
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				out := createOut(b, dir)
				b.StartTimer()
				if _, err := bs.WriteTo(out); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				removeOut(b, out)
				b.StartTimer()
			}
		})
		if err := m.Close(); err != nil {
			b.Fatal(err)
		}
	}
	src, err := os.Create(filepath.Join(dir, "src"))
	if err != nil {
		b.Fatal(err)
	}
	defer os.Remove(src.Name())
	defer src.Close()
	fill(src)
	b.Run("dst=file/medium=os.File-io.Copy", func(b *testing.B) {
		b.SetBytes(total)
		b.ReportAllocs()
		for b.Loop() {
			b.StopTimer()
			out := createOut(b, dir)
			if _, err := src.Seek(0, io.SeekStart); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			if _, err := io.Copy(out, src); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			removeOut(b, out)
			b.StartTimer()
		}
	})
}

func createOut(b *testing.B, dir string) *os.File {
	out, err := os.CreateTemp(dir, "out-*")
	if err != nil {
		b.Fatal(err)
	}
	return out
}

func removeOut(b *testing.B, out *os.File) {
	if err := multierr.Join(out.Close(), os.Remove(out.Name())); err != nil {
		b.Fatal(err)
	}
}
