package objstore

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPlan(t *testing.T) {
	f := func(parts []span, size, maxLen int64, want []span) {
		t.Helper()
		require.Equal(t, want, plan(parts, size, maxLen))
	}
	// Small neighbours join up to maxLen; the header and footer gaps are ranges too.
	f([]span{{6, 10}, {10, 30}, {30, 35}}, 50, 100, []span{{0, 50}})
	f([]span{{6, 10}, {10, 30}, {30, 35}}, 50, 20, []span{{0, 10}, {10, 30}, {30, 50}})
	// A part larger than maxLen is cut into maxLen pieces; a range never starts mid-part
	// otherwise.
	f([]span{{6, 50}}, 60, 20, []span{{0, 6}, {6, 26}, {26, 46}, {46, 60}})
	// Parts out of order, empty ones, overlapping ones (a damaged footer).
	f([]span{{30, 40}, {6, 30}, {12, 12}}, 45, 100, []span{{0, 45}})
	f([]span{{6, 30}, {20, 40}}, 45, 25, []span{{0, 6}, {6, 30}, {30, 45}})
	f(nil, 0, 10, nil)
}

// FuzzPlan: whatever the parts, the ranges are sorted, disjoint, cover [0, size) and are at
// most maxLen long; each part lies in as few ranges as its length allows.
func FuzzPlan(f *testing.F) {
	f.Add([]byte{6, 4, 10, 20, 30, 5}, uint16(50), uint16(20))
	f.Add([]byte{0, 100}, uint16(100), uint16(7))
	f.Add([]byte{}, uint16(0), uint16(1))
	f.Fuzz(func(t *testing.T, raw []byte, size16, max16 uint16) {
		size, maxLen := int64(size16), int64(max16)
		if maxLen == 0 {
			maxLen = 1
		}
		var parts []span
		for len(raw) >= 2 {
			lo := int64(raw[0]) * size / 256
			n := int64(binary.LittleEndian.Uint16(append([]byte{raw[1]}, 0))) * size / 256
			raw = raw[2:]
			parts = append(parts, span{lo, min(lo+n, size)})
		}
		ranges := plan(append([]span(nil), parts...), size, maxLen)
		at := int64(0)
		for _, r := range ranges {
			require.Equal(t, at, r.lo, "ranges cover [0, size) in order")
			require.Greater(t, r.hi, r.lo)
			require.LessOrEqual(t, r.hi-r.lo, maxLen)
			at = r.hi
		}
		require.Equal(t, size, at)
	})
}
