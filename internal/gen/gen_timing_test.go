package gen

import (
	"fmt"
	"io"
	"testing"
)

var sinkRow Row

// rowBytes is the size of a row's values: 8 bytes per number and the time,
// the bytes of every string.
func rowBytes(r *Row) int64 {
	n := int64(8 * (1 + len(r.Longs) + len(r.Doubles)))
	for i := range r.Strings {
		for _, v := range r.Strings[i].Values {
			n += int64(len(v))
		}
	}
	return n
}

// dataBytes returns the total rowBytes of every row g makes.
func dataBytes(g Generator) int64 {
	var r Row
	var n int64
	for g.Next(&r) {
		n += rowBytes(&r)
	}
	return n
}

// benchGen generates every row of a fresh generator per iteration and
// reports rows/s; SetBytes is the size of the values generated.
func benchGen(b *testing.B, rows int, make func() (Generator, error)) {
	g, err := make()
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(dataBytes(g))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		g, _ := make()
		var r Row
		for g.Next(&r) {
		}
		sinkRow = r
	}
	b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}

func BenchmarkBasic(b *testing.B) {
	const rows = 75_000
	b.Run(fmt.Sprintf("rows=%d", rows), func(b *testing.B) {
		benchGen(b, rows, func() (Generator, error) { return Basic(BasicSeed, rows) })
	})
}

func BenchmarkWide(b *testing.B) {
	const rows = 50_000
	for _, p := range []int{64, 512} {
		b.Run(fmt.Sprintf("rows=%d/payload=%d", rows, p), func(b *testing.B) {
			benchGen(b, rows, func() (Generator, error) { return Wide(1, rows, WideOptions{PayloadLen: p}) })
		})
	}
}

// countWriter counts bytes, for SetBytes of the text benchmarks.
type countWriter struct{ n int64 }

func (w *countWriter) Write(p []byte) (int, error) { w.n += int64(len(p)); return len(p), nil }

func BenchmarkWriteText(b *testing.B) {
	const rows = 75_000
	for _, f := range []struct {
		name  string
		write func(io.Writer, Generator) error
	}{{"csv", WriteCSV}, {"ndjson", WriteNDJSON}} {
		b.Run(fmt.Sprintf("format=%s/schema=basic/rows=%d", f.name, rows), func(b *testing.B) {
			var cw countWriter
			g, _ := Basic(BasicSeed, rows)
			if err := f.write(&cw, g); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(cw.n)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				g, _ := Basic(BasicSeed, rows)
				if err := f.write(io.Discard, g); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}
