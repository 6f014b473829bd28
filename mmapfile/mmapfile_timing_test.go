//go:build linux

package mmapfile_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/writeout/writeout/mmapfile"
)

// BenchmarkWrite256MiB stages 256 MiB in one Bytes of a fresh medium per iteration, in writes of
// 64 KiB and of 64 B. New and Close are not timed (Close unmaps and frees the dirty pages); the
// first touch of every page of the shared file mapping is.
//
//	go test ./mmapfile -run '^$' -bench Write256MiB -benchtime 5x
func BenchmarkWrite256MiB(b *testing.B) {
	const total = 256 << 20
	dir := b.TempDir()
	for _, size := range []int{64 << 10, 64} {
		name := fmt.Sprintf("write=%dB", size)
		if size >= 1<<10 {
			name = fmt.Sprintf("write=%dKiB", size>>10)
		}
		p := bytes.Repeat([]byte{'x'}, size)
		b.Run(name+"/medium=mmapfile", func(b *testing.B) {
			b.SetBytes(total)
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				m, err := mmapfile.New(mmapfile.Options{Dir: dir})
				if err != nil {
					b.Fatal(err)
				}
				bs, err := m.NewBytes()
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				for n := 0; n < total; n += size {
					if _, err := bs.Write(p); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				if bs.Size() != total {
					b.Fatalf("size %d, want %d", bs.Size(), total)
				}
				if err := m.Close(); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
	}
}
