package columns

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/internal/segfmt"
)

// TestFusedCRC: on a mapped segment (or one over bytes), the first read of the times or of a
// dimension's ids has the structural check compute the part's CRC as it reads the chunks
// (one pass over the bytes, each part's CRC still computed once and judged before the read
// gets anything); a segment read with ReadAt computes it first, alone. Either way the rows
// read are the same, and a flip in a chunk reads as a bad CRC (TestFlipEveryByteReadPath
// flips every byte).
func TestFusedCRC(t *testing.T) {
	good := flipSegments(t)["zstd"]
	f := func(s *Segment, fused int64) {
		t.Helper()
		defer func() { require.NoError(t, s.Close()) }()
		v, err := s.Time().Cursor().At(3)
		require.NoError(t, err)
		require.Positive(t, v)
		whole := map[string]bool{TimeColumn: true}
		for _, p := range s.f.parts {
			if p.Kind == segfmt.PartIDs && p.Encoding != segfmt.EncIDChunksDerived {
				whole[p.Column] = true // a multi-value dimension's, a ranked one's
				c, err := s.Dim(p.Column)
				require.NoError(t, err)
				_, err = c.Cursor().IDs(s.Rows() - 1)
				require.NoError(t, err)
			}
		}
		require.Len(t, whole, 3)
		require.Equal(t, fused, s.fusedCRCs.Load(), "CRCs computed by the structural checks")
		for i, p := range s.f.parts {
			if whole[p.Column] && (p.Kind == segfmt.PartIDs || p.Column == TimeColumn) {
				st, got := s.checks[i].load()
				require.Equal(t, checkGood, st, "%s %s", p.Column, p.Kind)
				require.Equal(t, p.CRC, got, "%s %s", p.Column, p.Kind)
			}
		}
		got, err := readEveryColumn(s)
		require.NoError(t, err)
		want, err := readEveryColumn(mustSegmentBytes(t, good))
		require.NoError(t, err)
		require.Equal(t, want, got)
	}
	f(mustSegmentBytes(t, good), 3)
	r, err := NewSegment(bytes.NewReader(good), int64(len(good)))
	require.NoError(t, err)
	f(r, 0)

	// A mapped file whose parts are all large (crcViaFileMin 0): the checks read them through
	// the descriptor (forCheck) and compute their CRCs as they go, none alone.
	saved := crcViaFileMin
	t.Cleanup(func() { crcViaFileMin = saved })
	crcViaFileMin = 0
	path := filepath.Join(t.TempDir(), "fused.seg")
	require.NoError(t, os.WriteFile(path, good, 0o644))
	m, err := Open(path)
	require.NoError(t, err)
	f(m, map[bool]int64{true: 3, false: 0}[m.src.data != nil])
}

func mustSegmentBytes(t *testing.T, b []byte) *Segment {
	t.Helper()
	s, err := newSegmentBytes(b)
	require.NoError(t, err)
	return s
}
