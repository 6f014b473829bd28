package columns

import "testing"

// BenchmarkWriteBitmapPieces writes a value of 4 Mi rows into a stage that keeps nothing: whole
// (checkBitmapRows and addRows, as WriteBitmapRows does) and in pieces of 64 Ki rows
// (addPieces, as WriteBitmapPieces does), in the roaring form and in Elias-Fano.
func BenchmarkWriteBitmapPieces(b *testing.B) {
	for _, c := range bigBitmaps {
		rows := make([]uint32, bigRows)
		for i := range rows {
			rows[i] = c.row(i)
		}
		each := func(fn func([]uint32) error) error {
			for lo := 0; lo < len(rows); lo += bigPiece {
				if err := fn(rows[lo : lo+bigPiece]); err != nil {
					return err
				}
			}
			return nil
		}
		b.Run("form="+c.name+"/write=rows", func(b *testing.B) {
			w := bitmapsWriter{st: &stage{b: discardBytes{}}, compact: true}
			b.SetBytes(4 * bigRows)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := checkBitmapRows(1, rows, 1<<32, nil, false); err != nil {
					b.Fatal(err)
				}
				if err := w.addRows(rows); err != nil {
					b.Fatal(err)
				}
				w.ends = w.ends[:0]
			}
		})
		b.Run("form="+c.name+"/write=pieces", func(b *testing.B) {
			w := bitmapsWriter{st: &stage{b: discardBytes{}}, compact: true}
			b.SetBytes(4 * bigRows)
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := w.addPieces(1, each, 1<<32, nil, false); err != nil {
					b.Fatal(err)
				}
				w.ends = w.ends[:0]
			}
		})
	}
}
