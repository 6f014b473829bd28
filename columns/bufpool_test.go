package columns

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// readCursors reads every column of seg through cursors, row by row and chunk by chunk, and
// returns what it read as text. With release set it releases every cursor once half way
// through and once at the end, so that the second half is read into buffers taken anew.
func readCursors(t testing.TB, seg *Segment, release bool) string {
	var b strings.Builder
	rows := seg.Rows()
	half := func(r int, rel interface{ Release() }) {
		if release && r == rows/2 {
			rel.Release()
		}
	}
	longs := func(c *Column[int64]) {
		cur := c.Cursor()
		for r := 0; r < rows; r++ {
			half(r, cur)
			v, err := cur.At(r)
			require.NoError(t, err)
			fmt.Fprint(&b, v, " ")
		}
		if release {
			cur.Release()
		}
	}
	longs(seg.Time())
	sc := seg.Schema()
	for _, d := range sc.Dimensions {
		if d.Raw {
			c, err := seg.Raw(d.Name)
			require.NoError(t, err)
			cur := c.Cursor()
			for r := 0; r < rows; r++ {
				half(r, cur)
				v, ok, err := cur.Bytes(r)
				require.NoError(t, err)
				fmt.Fprintf(&b, "%q %v ", v, ok)
			}
			if release {
				cur.Release()
			}
			continue
		}
		c, err := seg.Dim(d.Name)
		require.NoError(t, err)
		cur := c.Cursor()
		for r := 0; r < rows; r++ {
			half(r, cur)
			first, ids, offs, err := cur.Chunk(r)
			require.NoError(t, err)
			if offs != nil {
				fmt.Fprint(&b, ids[offs[r-first]:offs[r-first+1]], " ")
			} else {
				fmt.Fprint(&b, ids[r-first], " ")
			}
		}
		if release {
			cur.Release()
		}
	}
	for _, m := range sc.Metrics {
		if l, err := seg.Long(m.Name); err == nil {
			longs(l)
			if l.Times() != nil {
				longs(l.Times())
			}
			continue
		}
		if d, err := seg.Double(m.Name); err == nil {
			cur := d.Cursor()
			var tails *TailCursor
			if d.Tails() != nil {
				tails = d.Tails().Cursor()
			}
			var tail []float64
			for r := 0; r < rows; r++ {
				half(r, cur)
				first, vals, err := cur.Chunk(r)
				require.NoError(t, err)
				fmt.Fprint(&b, vals[r-first], " ")
				if tails != nil {
					half(r, tails)
					tail, err = tails.Tail(r, tail[:0])
					require.NoError(t, err)
					fmt.Fprint(&b, tail, " ")
				}
			}
			if release {
				cur.Release()
				if tails != nil {
					tails.Release()
				}
			}
			if d.Times() != nil {
				longs(d.Times())
			}
			continue
		}
		s, err := seg.Sketch(m.Name)
		require.NoError(t, err, m.Name)
		cur := s.Cursor()
		for r := 0; r < rows; r++ {
			half(r, cur)
			v, err := cur.Bytes(r)
			require.NoError(t, err)
			fmt.Fprintf(&b, "%x ", v)
		}
		if release {
			cur.Release()
		}
	}
	return b.String()
}

// TestCursorRelease reads a segment of every column kind, in small compressed chunks, both
// mapped and through ReadAt, with cursors that give their buffers back half way and at the end,
// from several goroutines at once: every read must equal a read that releases nothing. Run with
// the invariants tag, released buffers are poisoned, so a cursor that kept a view of one, or
// decoded a chunk without writing all of a taken buffer, reads garbage and fails.
func TestCursorRelease(t *testing.T) {
	s := allSchema()
	g := newRowGen(seedFor(t, 0), s)
	rows := make([]Row, 3*256+17)
	for i := range rows {
		rows[i] = g.next()
	}
	for _, comp := range []Compression{CompressionNone, CompressionS2, CompressionZstd} {
		data := writeRows(t, s, rows, writerOptions{ChunkRows: 256, Compression: comp})
		for _, how := range []string{"bytes", "readat"} {
			t.Run(fmt.Sprintf("compression=%d/%s", comp, how), func(t *testing.T) {
				open := func() *Segment {
					var seg *Segment
					var err error
					if how == "bytes" {
						seg, err = newSegmentBytes(data)
					} else {
						seg, err = NewSegment(bytes.NewReader(data), int64(len(data)))
					}
					require.NoError(t, err)
					return seg
				}
				seg := open()
				want := readCursors(t, seg, false)
				require.NoError(t, seg.Close())
				var wg sync.WaitGroup
				for range 3 {
					wg.Go(func() {
						seg := open()
						defer func() { require.NoError(t, seg.Close()) }()
						for range 3 {
							require.Equal(t, want, readCursors(t, seg, true))
						}
					})
				}
				wg.Wait()
			})
		}
	}
}
