package columns

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/internal/segfmt"
)

// sortedRunIDs returns n ids below card, Zipf-distributed, ascending within runs of run ids:
// the ids of a dimension sorted within each time bucket.
func sortedRunIDs(rng *rand.Rand, n, card, run int) []uint32 {
	z := rand.NewZipf(rng, 1.1, 2, uint64(card-1))
	perm := rng.Perm(card)
	ids := make([]uint32, n)
	for i := range ids {
		ids[i] = uint32(perm[z.Uint64()])
	}
	for i := 0; i < n; i += run {
		slices.Sort(ids[i:min(i+run, n)])
	}
	return ids
}

func TestIDDeltasCodec(t *testing.T) {
	seed := seedFor(t, 0)
	rng := rand.New(rand.NewPCG(seed, 37))
	pc, pd := newPlaneCoder(), newPlaneDecoder()
	perm := make([]uint32, 300)
	for i := range perm {
		perm[i] = uint32(i)
	}
	w := idWidth(len(perm))
	ids := sortedRunIDs(rng, 4096, len(perm), 100)
	require.True(t, deltasWorthTrying(ids))
	var scratch []uint32
	b, ok := appendIDDeltas(nil, ids, len(perm), w, pc, &scratch, 1<<20)
	require.True(t, ok)
	ranked := appendRankedIDs(nil, ids, w, pc) // the identity ranks: ids in no useful order for planes
	t.Logf("seed %d: %d ids of 300 values in runs of 100: %d bytes as deltas, %d as ranks", seed, len(ids), len(b), len(ranked))
	require.Less(t, len(b)*2, len(ranked), "deltas of runs of sorted ids take less than half the bytes")

	got, rest, err := decodeRankedIDs([]uint32{7}, append(b, 1), len(ids), perm, true, pd)
	require.NoError(t, err)
	require.Equal(t, []byte{1}, rest)
	require.Equal(t, ids, got[1:])

	// A version 4 part has no id-deltas form.
	_, _, err = decodeRankedIDs(nil, b, len(ids), perm, false, pd)
	require.ErrorIs(t, err, ErrCorrupt)
	require.ErrorContains(t, err, "id-deltas form in a version 4 part")

	// The limit: declined, dst unchanged.
	out, ok := appendIDDeltas([]byte{9}, ids, len(perm), w, pc, &scratch, 10)
	require.False(t, ok)
	require.Equal(t, []byte{9}, out)

	// A difference at or past the cardinality is corrupt (the width holds up to 511).
	bad := make([]uint32, len(ids))
	bad[5] = 400
	b2, ok := appendPlanes(pc, append(appendUvarintLen(len(bad)), byte(w), idDeltas), bad, w, 1<<20)
	require.True(t, ok)
	_, _, err = decodeRankedIDs(nil, b2, len(bad), perm, true, pd)
	require.ErrorIs(t, err, ErrCorrupt)

	// Ids in no order are not worth trying.
	shuffled := slices.Clone(ids)
	rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	require.False(t, deltasWorthTrying(shuffled))
	require.False(t, deltasWorthTrying(ids[:minPlaneBytes-1]))
}

func appendUvarintLen(n int) []byte {
	var b []byte
	for v := uint64(n); ; v >>= 7 {
		if v < 0x80 {
			return append(b, byte(v))
		}
		b = append(b, byte(v)|0x80)
	}
}

// deltaRows returns rows in buckets of run rows with one time each, dimension "sorted"
// ascending within its bucket (as a merge sorts by time, then dimensions), "random" not.
func deltaRows(seed uint64, n, run int) (Schema, []Row) {
	s := Schema{Dimensions: []Dimension{{Name: "sorted"}, {Name: "random"}}}
	rng := rand.New(rand.NewPCG(seed, 5))
	ids := sortedRunIDs(rng, n, 300, run)
	rows := make([]Row, n)
	for i := range rows {
		rows[i] = Row{Time: int64(i/run) * 60_000, Dims: [][]string{{fmt.Sprintf("v%03d", ids[i])}, {fmt.Sprint("r", rng.IntN(300))}}}
	}
	return s, rows
}

// TestSegmentVersion5 writes a dimension sorted within time buckets: under zstd its ids part is
// id-chunks-v5 and the segment version 5, reading back the same rows and passing Verify; a
// dimension in no order stays id-chunks-v4; under s2 there is neither.
func TestSegmentVersion5(t *testing.T) {
	s, rows := deltaRows(seedFor(t, 0), 20_000, 115)
	for _, write := range []func(testing.TB, Schema, []Row, writerOptions) []byte{writeRows, writeColumns} {
		b := write(t, s, rows, writerOptions{Compression: CompressionZstd, ChunkRows: 4096, StoreIDs: true})
		seg, err := newSegmentBytes(b)
		require.NoError(t, err)
		require.Equal(t, byte(versionV5), seg.f.version)
		enc := partEncodings(seg)
		require.Equal(t, segfmt.EncIDChunksV5, enc["sorted/ids"])
		require.Equal(t, segfmt.EncIDChunksV4, enc["random/ids"])
		checkSegment(t, seg, s, rows, marshalSketches(t, s, rows))
		require.NoError(t, seg.Verify())

		s2 := write(t, s, rows, writerOptions{Compression: CompressionS2, ChunkRows: 4096})
		seg2, err := newSegmentBytes(s2)
		require.NoError(t, err)
		require.Less(t, seg2.f.version, byte(versionV5))
		require.Equal(t, segfmt.EncIDChunks, partEncodings(seg2)["sorted/ids"])

		t.Logf("%d rows: %d bytes under zstd (version 5), %d under s2", len(rows), len(b), len(s2))
	}
}

// TestGoldenVersion5 pins a version 5 segment (testdata/golden-v5.seg): it must keep reading to
// the same rows; the writer must keep writing the same bytes (run with -update after a
// deliberate change).
func TestGoldenVersion5(t *testing.T) {
	s, rows := deltaRows(1, 3000, 100)
	got := writeRows(t, s, rows, writerOptions{Compression: CompressionZstd, ChunkRows: 500, StoreIDs: true})
	want, seg := goldenFile(t, "golden-v5.seg", got)
	require.Equal(t, byte(versionV5), seg.f.version)
	require.Equal(t, segfmt.EncIDChunksV5, partEncodings(seg)["sorted/ids"])
	checkSegment(t, seg, s, rows, marshalSketches(t, s, rows))
	require.NoError(t, seg.Verify())
	require.True(t, bytes.Equal(want, got), "the version 5 segment bytes changed (run with -update if deliberate)")
}
