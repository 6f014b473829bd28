package columns

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
)

// Benchmarks of the bit-packing and Elias-Fano kernels alone, with the CPU time of the
// benchmark's thread per value (cpu-ns/value) beside the wall time: on a shared machine the
// wall time also counts the time spent waiting for a core. Run with:
//
//	go test -run '^$' -bench Kernel -benchtime 2000x ./columns/

// kernelLoop runs f b.N times on a locked thread and reports its CPU time per value.
var sinkPlan intPlan

func kernelLoop(b *testing.B, values int, f func()) {
	b.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b.ReportAllocs()
	b.SetBytes(int64(8 * values))
	start := threadCPU()
	for b.Loop() {
		f()
	}
	b.ReportMetric(float64(threadCPU()-start)/float64(b.N)/float64(values), "cpu-ns/value")
}

func BenchmarkKernelPacked(b *testing.B) {
	rng := rand.New(rand.NewPCG(14, 1))
	for _, w := range []int{1, 7, 8, 10, 12, 17, 20, 32} {
		vals := make([]uint32, benchChunk)
		for i := range vals {
			vals[i] = uint32(rng.Uint64() >> (64 - w))
		}
		enc := appendPacked(nil, vals, w)
		buf := make([]byte, 0, len(enc)+64)
		b.Run(fmt.Sprintf("w=%d/op=pack", w), func(b *testing.B) {
			kernelLoop(b, len(vals), func() { buf = appendPacked(buf[:0], vals, w) })
		})
		out := make([]uint32, 0, len(vals))
		b.Run(fmt.Sprintf("w=%d/op=unpack", w), func(b *testing.B) {
			kernelLoop(b, len(vals), func() { out, _, sinkErr = decodePacked(out[:0], enc, len(vals), w) })
		})
	}
}

func BenchmarkKernelInt64s(b *testing.B) {
	for name, vals := range int64Shapes() {
		if name == "constant" {
			continue
		}
		enc := appendInt64s(nil, vals)
		buf := make([]byte, 0, 16*len(vals))
		b.Run("data="+name+"/op=plan", func(b *testing.B) {
			kernelLoop(b, len(vals), func() { sinkPlan = planInt64s(vals) })
		})
		b.Run("data="+name+"/op=encode", func(b *testing.B) {
			kernelLoop(b, len(vals), func() { buf = appendInt64s(buf[:0], vals) })
		})
		out := make([]int64, 0, len(vals))
		b.Run("data="+name+"/op=decode", func(b *testing.B) {
			kernelLoop(b, len(vals), func() { out, _, sinkErr = decodeInt64s(out[:0], enc, -1) })
		})
	}
}

func BenchmarkKernelEF(b *testing.B) {
	rng := rand.New(rand.NewPCG(14, 2))
	const rows = 1 << 20
	for _, n := range []int{100, 10000, 300000} {
		// n rows of rows, in order.
		var vals []uint32
		for r := uint32(0); r < rows; r++ {
			if rng.IntN(rows) < n {
				vals = append(vals, r)
			}
		}
		buf := make([]byte, 0, efSize(len(vals), vals[len(vals)-1])+64)
		b.Run(fmt.Sprintf("n=%d/op=rows", n), func(b *testing.B) {
			kernelLoop(b, len(vals), func() { buf = appendEFRows(buf[:0], vals) })
		})
	}
}
