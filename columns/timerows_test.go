package columns

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestTimeRows(t *testing.T) {
	times := []int64{10, 10, 20, 30, 30, 30, 40, 55, 55, 90}
	rows := make([]Row, len(times))
	for i, ts := range times {
		rows[i] = Row{Time: ts}
	}
	seg, err := newSegmentBytes(writeRows(t, Schema{}, rows, writerOptions{ChunkRows: 3}))
	require.NoError(t, err)
	naive := func(start, end int64) (int, int) {
		lo := 0
		for lo < len(times) && times[lo] < start {
			lo++
		}
		hi := lo
		for hi < len(times) && times[hi] < end {
			hi++
		}
		return lo, hi
	}
	for start := int64(0); start <= 100; start += 5 {
		for end := start; end <= 105; end += 5 {
			lo, hi, err := seg.TimeRows(start, end)
			require.NoError(t, err)
			wlo, whi := naive(start, end)
			require.Equal(t, [2]int{wlo, whi}, [2]int{lo, hi}, "[%d, %d)", start, end)
		}
	}
	_, _, err = seg.TimeRows(5, 4)
	require.ErrorIs(t, err, ErrInvalid)
}
