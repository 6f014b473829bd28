package columns

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkDerivedIDs reads a dimension's ids front to back through a cursor (Chunk), and
// writes the segment, with the ids stored (ids=stored: StoreIDs, id-chunks-v4) and derived
// from the bitmaps (ids=derived), for Zipf ids over card values in rows of time order (the
// peers' events: the dimension independent of the time), mapped and through ReadAt:
//
//	go test -run '^$' -bench DerivedIDs -count 6 ./columns/ | tee /tmp/d.txt; benchstat -col /ids /tmp/d.txt
func BenchmarkDerivedIDs(b *testing.B) {
	const n = 1_000_000
	for _, card := range []int{200, 1000} {
		rng := rand.New(rand.NewPCG(3, uint64(card)))
		ids := zipfIDs(rng, n, card)
		s := Schema{Dimensions: []Dimension{{Name: "d"}}}
		rows := make([]Row, n)
		for i := range rows {
			rows[i] = Row{Time: int64(i), Dims: [][]string{{fmt.Sprintf("v%04d", ids[i])}}}
		}
		exp := expectDims(s, rows)
		for _, store := range []bool{true, false} {
			name := map[bool]string{true: "stored", false: "derived"}[store]
			opts := writerOptions{Compression: CompressionZstd, StoreIDs: store}
			data := writeColumnsWith(b, s, rows, exp, opts)
			for _, via := range []string{"view", "readat"} {
				b.Run(fmt.Sprintf("card=%d/op=read/via=%s/ids=%s", card, via, name), func(b *testing.B) {
					var seg *Segment
					var err error
					if via == "view" {
						seg, err = newSegmentBytes(data)
					} else {
						seg, err = NewSegment(bytes.NewReader(data), int64(len(data)))
					}
					if err != nil {
						b.Fatal(err)
					}
					col, err := seg.Dim("d")
					if err != nil {
						b.Fatal(err)
					}
					b.SetBytes(4 * n)
					for b.Loop() {
						cur := col.Cursor()
						for r := 0; r < n; {
							first, ids, _, err := cur.Chunk(r)
							if err != nil {
								b.Fatal(err)
							}
							r = first + len(ids)
						}
						cur.Release()
					}
					b.ReportMetric(float64(len(data)), "bytes")
				})
			}
			b.Run(fmt.Sprintf("card=%d/op=write/ids=%s", card, name), func(b *testing.B) {
				b.SetBytes(4 * n)
				for b.Loop() {
					writeColumnsWith(b, s, rows, exp, opts)
				}
			})
		}
	}
}
