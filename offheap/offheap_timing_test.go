package offheap

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/medium"
)

var sink int64

// BenchmarkWrite stages 256 MiB in writes of 64 KiB and of 64 B into:
//   - sink=offheap-fresh: a new offheap medium with no pooled chunk (the pool is trimmed before
//     each iteration and pools nothing): every chunk is mapped and first touched;
//   - sink=offheap-pooled: a new offheap medium whose chunks all come from the pool (hot pages);
//   - sink=bytes.Buffer: a bytes.Buffer grown from empty;
//   - sink=copy: copy into a preallocated, already touched []byte (the upper bound).
//
// Every iteration includes the medium's New and Close.
func BenchmarkWrite(b *testing.B) {
	const total = 256 << 20
	for _, w := range []struct {
		name string
		n    int
	}{{"64KiB", 64 << 10}, {"64B", 64}} {
		src := make([]byte, w.n)
		for i := range src {
			src[i] = byte(i*7 + 1)
		}
		stage := func(b *testing.B) {
			m, err := New(Options{})
			require.NoError(b, err)
			var x medium.Bytes
			x, err = m.NewBytes()
			require.NoError(b, err)
			for range total / w.n {
				if _, err := x.Write(src); err != nil {
					b.Fatal(err)
				}
			}
			sink += x.Size()
			require.NoError(b, m.Close())
		}

		b.Run("write="+w.name+"/sink=offheap-fresh", func(b *testing.B) {
			prev, err := setPoolLimit(0)
			require.NoError(b, err)
			defer func() { _, err := setPoolLimit(prev); require.NoError(b, err) }()
			b.SetBytes(total)
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				require.NoError(b, trimPool())
				b.StartTimer()
				stage(b)
			}
		})
		b.Run("write="+w.name+"/sink=offheap-pooled", func(b *testing.B) {
			prev, err := setPoolLimit(total + 8*chunkSize)
			require.NoError(b, err)
			defer func() {
				_, err := setPoolLimit(prev)
				require.NoError(b, err)
				require.NoError(b, trimPool())
			}()
			stage(b) // fills the pool
			b.SetBytes(total)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				stage(b)
			}
		})
		b.Run("write="+w.name+"/sink=bytes.Buffer", func(b *testing.B) {
			b.SetBytes(total)
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				var buf bytes.Buffer
				for range total / w.n {
					buf.Write(src)
				}
				sink += int64(buf.Len())
			}
		})
		b.Run("write="+w.name+"/sink=copy", func(b *testing.B) {
			dst := make([]byte, total)
			for off := 0; off < total; off += w.n {
				copy(dst[off:], src)
			}
			b.SetBytes(total)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for off := 0; off < total; off += w.n {
					copy(dst[off:], src)
				}
			}
			sink += int64(dst[total-1])
		})
	}
}
