package columns

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/writeout/writeout/internal/segfmt"
)

// Benchmarks of the encodings, one chunk (or one dictionary, one bitmap index) at a time:
// encode and decode throughput per encoding and data shape, and the compression ratio of each
// codec. Run with: go test -run '^$' -bench . -benchtime 100x ./columns/
//
// Sizes are reported as bytes/value (encoded) besides the throughput, which is over the raw
// values (8 bytes per int64 or float64, 4 per id, the string bytes).

var (
	sinkBytes []byte
	sinkInts  []int64
	sinkF     []float64
	sinkIDs   []uint32
	sinkErr   error
)

const benchChunk = defaultChunkRows

// int64Shapes are chunks of int64 values shaped like real columns.
func int64Shapes() map[string][]int64 {
	rng := rand.New(rand.NewPCG(1, 1))
	out := map[string][]int64{}
	mk := func(name string, f func(i int) int64) {
		v := make([]int64, benchChunk)
		for i := range v {
			v[i] = f(i)
		}
		out[name] = v
	}
	t := int64(946684800000)
	mk("time", func(int) int64 { t += rng.Int64N(40); return t }) // sorted, a day over 75k rows
	mk("uniform500", func(int) int64 { return rng.Int64N(500) })
	mk("sequential", func(i int) int64 { return int64(i % 10000) })
	mk("constant", func(int) int64 { return 1 })
	mk("random", func(int) int64 { return int64(rng.Uint64()) })
	return out
}

func float64Shapes() map[string][]float64 {
	rng := rand.New(rand.NewPCG(2, 2))
	out := map[string][]float64{}
	mk := func(name string, f func() float64) {
		v := make([]float64, benchChunk)
		for i := range v {
			v[i] = f()
		}
		out[name] = v
	}
	mk("roundedNormal", func() float64 { return math.Round(5000 + rng.NormFloat64()) })
	mk("zipf", func() float64 { return float64(rand.NewZipf(rng, 1.0001, 1, 1000).Uint64()) })
	mk("normal", func() float64 { return 5000 + rng.NormFloat64() })
	return out
}

func BenchmarkInt64s(b *testing.B) {
	for name, vals := range int64Shapes() {
		enc := appendInt64s(nil, vals)
		b.Run("data="+name+"/op=encode", func(b *testing.B) {
			b.SetBytes(int64(8 * len(vals)))
			b.ReportAllocs()
			buf := make([]byte, 0, 16*len(vals))
			for b.Loop() {
				buf = appendInt64s(buf[:0], vals)
			}
			sinkBytes = buf
			b.ReportMetric(float64(len(enc))/float64(len(vals)), "bytes/value")
		})
		b.Run("data="+name+"/op=decode", func(b *testing.B) {
			b.SetBytes(int64(8 * len(vals)))
			b.ReportAllocs()
			out := make([]int64, 0, len(vals))
			for b.Loop() {
				out, _, sinkErr = decodeInt64s(out[:0], enc, -1)
			}
			sinkInts = out
		})
	}
}

func BenchmarkFloat64s(b *testing.B) {
	for name, vals := range float64Shapes() {
		enc := appendFloat64s(nil, vals, nil)
		b.Run("data="+name+"/op=encode", func(b *testing.B) {
			b.SetBytes(int64(8 * len(vals)))
			b.ReportAllocs()
			var buf []byte
			var ints []int64
			for b.Loop() {
				buf = appendFloat64s(buf[:0], vals, &ints)
			}
			sinkBytes = buf
			b.ReportMetric(float64(len(enc))/float64(len(vals)), "bytes/value")
		})
		b.Run("data="+name+"/op=decode", func(b *testing.B) {
			b.SetBytes(int64(8 * len(vals)))
			b.ReportAllocs()
			var out []float64
			var ints []int64
			for b.Loop() {
				out, _, sinkErr = decodeFloat64s(out[:0], enc, -1, &ints)
			}
			sinkF = out
		})
	}
}

func BenchmarkIDs(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 3))
	for _, card := range []int{2, 100, 1000, 100000} {
		ids := make([]uint32, benchChunk)
		for i := range ids {
			ids[i] = uint32(rng.IntN(card))
		}
		w := idWidth(card)
		enc := appendIDs(nil, ids, w)
		b.Run(fmt.Sprintf("card=%d/op=encode", card), func(b *testing.B) {
			b.SetBytes(int64(4 * len(ids)))
			b.ReportAllocs()
			var buf []byte
			for b.Loop() {
				buf = appendIDs(buf[:0], ids, w)
			}
			sinkBytes = buf
			b.ReportMetric(float64(len(enc))/float64(len(ids)), "bytes/value")
		})
		b.Run(fmt.Sprintf("card=%d/op=decode", card), func(b *testing.B) {
			b.SetBytes(int64(4 * len(ids)))
			b.ReportAllocs()
			var out []uint32
			for b.Loop() {
				out, _, sinkErr = decodeIDs(out[:0], enc, len(ids), card)
			}
			sinkIDs = out
		})
	}
	// Multi-value: 1 to 4 values a row, cardinality 5 (dimMultivalEnumerated).
	counts := make([]uint32, benchChunk)
	var all []uint32
	for i := range counts {
		counts[i] = uint32(1 + rng.IntN(4))
		for k := uint32(0); k < counts[i]; k++ {
			all = append(all, uint32(rng.IntN(5)))
		}
	}
	enc := appendMultiIDs(nil, counts, all, idWidth(5))
	b.Run("card=5/multi/op=encode", func(b *testing.B) {
		b.SetBytes(int64(4 * len(all)))
		b.ReportAllocs()
		var buf []byte
		for b.Loop() {
			buf = appendMultiIDs(buf[:0], counts, all, idWidth(5))
		}
		sinkBytes = buf
		b.ReportMetric(float64(len(enc))/float64(len(counts)), "bytes/row")
	})
	b.Run("card=5/multi/op=decode", func(b *testing.B) {
		b.SetBytes(int64(4 * len(all)))
		b.ReportAllocs()
		var offs, ids []uint32
		for b.Loop() {
			ids, _, sinkErr = decodeMultiIDs(ids[:0], enc, len(counts), 5, &offs)
		}
		sinkIDs = ids
	})
}

func BenchmarkBlobs(b *testing.B) {
	rng := rand.New(rand.NewPCG(4, 4))
	for _, size := range []int{8, 64, 512} {
		var lens []int64
		var data []byte
		for i := 0; i < benchChunk; i++ {
			v := make([]byte, size)
			for k := range v {
				v[k] = "abcdefghijklmnopqrstuvwxyz0123456789"[rng.IntN(36)]
			}
			lens = append(lens, int64(size))
			data = append(data, v...)
		}
		enc := appendBlobs(nil, lens, data)
		b.Run(fmt.Sprintf("len=%d/op=encode", size), func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			var buf []byte
			for b.Loop() {
				buf = appendBlobs(buf[:0], lens, data)
			}
			sinkBytes = buf
		})
		b.Run(fmt.Sprintf("len=%d/op=decode", size), func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			var offs []int
			var ls []int64
			for b.Loop() {
				offs, sinkBytes, sinkErr = decodeBlobs(offs[:0], enc, benchChunk, &ls)
			}
		})
	}
}

func BenchmarkDictionary(b *testing.B) {
	for _, card := range []int{1000, 100000} {
		vals := make([]string, card)
		raw := 0
		for i := range vals {
			vals[i] = strconv.Itoa(i)
		}
		slicesSortStrings(vals)
		for _, v := range vals {
			raw += len(v)
		}
		var size int64
		b.Run(fmt.Sprintf("card=%d/op=encode", card), func(b *testing.B) {
			b.SetBytes(int64(raw))
			b.ReportAllocs()
			for b.Loop() {
				st := &stage{b: discardBytes{}}
				d := dictWriter{st: st}
				for _, v := range vals {
					if err := d.add(v); err != nil {
						b.Fatal(err)
					}
				}
				sinkErr = d.finish()
				size = st.n
			}
			b.ReportMetric(float64(size)/float64(card), "bytes/value")
		})
		st := &stage{b: newTestBytes(b)}
		d := dictWriter{st: st}
		for _, v := range vals {
			_ = d.add(v)
		}
		_ = d.finish()
		buf := make([]byte, st.n)
		_, _ = st.b.ReadAt(buf, 0)
		src := &source{data: buf, size: int64(len(buf))}
		dr, err := parseDict(src, &segfmt.PartInfo{Length: int64(len(buf))})
		if err != nil {
			b.Fatal(err)
		}
		seg := &Segment{}
		col := &DimColumn{seg: seg, dict: dr}
		b.Run(fmt.Sprintf("card=%d/op=iterate", card), func(b *testing.B) {
			b.SetBytes(int64(raw))
			b.ReportAllocs()
			for b.Loop() {
				it := col.Dictionary()
				for it.Next() {
				}
				sinkErr = it.Err()
			}
		})
		rng := rand.New(rand.NewPCG(5, 5))
		b.Run(fmt.Sprintf("card=%d/op=lookup", card), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_, _, sinkErr = dr.lookup(vals[rng.IntN(card)])
			}
		})
	}
}

// BenchmarkBitmaps writes and reads the bitmap index of a dimension of cardinality card over
// 75,000 rows (rows spread at random: almost all roaring array containers), in the roaring
// form (version 2, Compression none) and in the version 4 forms: decode builds each value's
// roaring.Bitmap (queries), each hands out its rows (EachBitmapRows, the merger).
func BenchmarkBitmaps(b *testing.B) {
	rng := rand.New(rand.NewPCG(6, 6))
	const rows = 75000
	for _, card := range []int{5, 1000, 100000} {
		bms := make([]*roaring.Bitmap, card)
		for i := range bms {
			bms[i] = roaring.New()
		}
		for r := 0; r < rows; r++ {
			bms[rng.IntN(card)].Add(uint32(r))
		}
		for _, bm := range bms {
			bm.RunOptimize()
		}
		for _, form := range []string{"roaring", "v4"} {
			compact := form == "v4"
			var size int64
			b.Run(fmt.Sprintf("card=%d/form=%s/op=encode", card, form), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					st := &stage{b: discardBytes{}}
					w := bitmapsWriter{st: st, compact: compact}
					for _, bm := range bms {
						sinkErr = w.add(bm)
					}
					sinkErr = w.finish()
					size = st.n
				}
				b.SetBytes(size)
				b.ReportMetric(float64(size)/rows, "bytes/row")
			})
			st := &stage{b: newTestBytes(b), spec: partSpec{1, segfmt.PartBitmaps, segfmt.EncRoaringTable}}
			w := bitmapsWriter{st: st, compact: compact}
			for _, bm := range bms {
				_ = w.add(bm)
			}
			_ = w.finish()
			buf := make([]byte, st.n)
			_, _ = st.b.ReadAt(buf, 0)
			br, err := parseBitmaps(&source{data: buf, size: int64(len(buf))}, &segfmt.PartInfo{Length: int64(len(buf)), Encoding: st.spec.enc}, card, rows)
			if err != nil {
				b.Fatal(err)
			}
			b.Run(fmt.Sprintf("card=%d/form=%s/op=decode-each", card, form), func(b *testing.B) {
				b.SetBytes(int64(len(buf)))
				b.ReportAllocs()
				for b.Loop() {
					for id := 0; id < card; id++ {
						_, sinkErr = br.bitmap(id)
					}
				}
			})
			piece := make([]uint32, 4096)
			b.Run(fmt.Sprintf("card=%d/form=%s/op=rows", card, form), func(b *testing.B) {
				b.SetBytes(int64(len(buf)))
				b.ReportAllocs()
				for b.Loop() {
					for id := 0; id < card; id++ {
						raw, err := br.raw(id)
						if err != nil {
							b.Fatal(err)
						}
						d := roaringDecoder{out: piece[:0], piece: len(piece)}
						sinkErr = d.eachStored(raw, br.v4, rows, func([]uint32) error { return nil })
					}
				}
			})
		}
	}
}

// BenchmarkCompression compresses raw chunks of several shapes with each codec: ratio is raw
// bytes over stored bytes (a chunk is stored raw when compression does not help).
func BenchmarkCompression(b *testing.B) {
	chunks := map[string][]byte{}
	for name, vals := range int64Shapes() {
		chunks["int64-"+name] = appendInt64s(nil, vals)
	}
	for name, vals := range float64Shapes() {
		chunks["float64-"+name] = appendFloat64s(nil, vals, nil)
	}
	rng := rand.New(rand.NewPCG(7, 7))
	ids := make([]uint32, benchChunk)
	for i := range ids {
		ids[i] = uint32(rand.NewZipf(rng, 1.0001, 1, 99).Uint64())
	}
	chunks["ids-zipf100"] = appendIDs(nil, ids, idWidth(100))
	words := []string{"the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "segment", "column"}
	var text bytes.Buffer
	var lens []int64
	for i := 0; i < 2000; i++ {
		n := text.Len()
		for text.Len()-n < 64 {
			text.WriteString(words[rng.IntN(len(words))])
			text.WriteByte(' ')
		}
		lens = append(lens, int64(text.Len()-n))
	}
	chunks["blobs-text64"] = appendBlobs(nil, lens, text.Bytes())
	for name, raw := range chunks {
		for _, c := range []Compression{CompressionNone, CompressionS2, CompressionZstd} {
			frame, err := appendChunk(nil, raw, c)
			if err != nil {
				b.Fatal(err)
			}
			b.Run(fmt.Sprintf("data=%s/codec=%s/op=compress", name, c), func(b *testing.B) {
				b.SetBytes(int64(len(raw)))
				b.ReportAllocs()
				buf := make([]byte, 0, 2*len(raw)+64)
				for b.Loop() {
					buf, sinkErr = appendChunk(buf[:0], raw, c)
				}
				sinkBytes = buf
				b.ReportMetric(float64(len(raw))/float64(len(frame)), "ratio")
			})
			b.Run(fmt.Sprintf("data=%s/codec=%s/op=decompress", name, c), func(b *testing.B) {
				b.SetBytes(int64(len(raw)))
				b.ReportAllocs()
				var buf []byte
				for b.Loop() {
					sinkBytes, buf, sinkErr = decodeChunk(buf, frame, len(raw))
				}
			})
		}
	}
}

// discardBytes is a medium.Bytes that keeps nothing: for benchmarks of encoders alone.
type discardBytes struct{}

func (discardBytes) Write(p []byte) (int, error)             { return len(p), nil }
func (discardBytes) WriteByte(byte) error                    { return nil }
func (discardBytes) WriteString(s string) (int, error)       { return len(s), nil }
func (discardBytes) ReadFrom(io.Reader) (int64, error)       { return 0, nil }
func (discardBytes) WriteTo(io.Writer) (int64, error)        { return 0, nil }
func (discardBytes) ReadAt(p []byte, off int64) (int, error) { return 0, nil }
func (discardBytes) Size() int64                             { return 0 }
