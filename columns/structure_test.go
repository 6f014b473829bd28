package columns

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/internal/segfmt"
	"github.com/writeout/writeout/internal/segsurgery"
)

// TestStructuralFaultsReadPath (issue 37, defect 1): every byte (a spread of 160 in a larger
// part) of the decoded content of every part of the flip segments (every part kind; none, zstd,
// s2, version 4 encodings; null metric values) changed in
// turn, the part re-encoded and every CRC recomputed, so that only the structure is wrong. When
// Verify rejects the file, reading every column through the public API must fail with an error
// wrapping ErrCorrupt that names the faulted part's column, or read exactly what
// the intact file reads; it never reads something else. Faults Verify accepts are counted.
func TestStructuralFaultsReadPath(t *testing.T) {
	segs := flipSegments(t)
	// With null metric values: the metrics' nulls parts (format version 3).
	rows := flipRows(12, 3)
	for i := range rows {
		if i%3 == 0 {
			rows[i].Metrics[1] = Value{Null: true}
		}
		if i%4 == 1 {
			rows[i].Metrics[3] = Value{Null: true}
			rows[i].Metrics[4] = Value{Null: true}
		}
	}
	segs["nulls"] = writeRows(t, flipSchema(), rows, writerOptions{ChunkRows: 4, Compression: CompressionS2})
	for _, name := range []string{"none", "zstd", "s2", "v4", "nulls"} {
		good := segs[name]
		seg, err := newSegmentBytes(good)
		require.NoError(t, err)
		want, err := readEveryColumn(seg)
		require.NoError(t, err)
		f, err := segsurgery.Parse(good)
		require.NoError(t, err)
		var faults, passes, failed, same int
		byKind := map[segfmt.PartKind]int{}
		for i, p := range f.Parts {
			col := seg.f.parts[i].Column
			dec, err := f.Decode(i)
			require.NoError(t, err)
			// Every byte of a small part; a spread of 160 bytes of a larger one.
			n, step := dec.Len(), 1
			if n > 160 {
				step = n / 160
			}
			for pos := 0; pos < n; pos += step {
				x := []byte{0x01, 0x80, 0xff, 0x10, 0x04}[pos%5]
				b := f.Faulted(i, dec, pos, x)
				what := fmt.Sprintf("%s: column %q part %s (%s): decoded byte %d ^ %#x", name, col, p.Kind, p.Enc, pos, x)
				faults++
				vs, err := newSegmentBytes(b)
				if err != nil {
					require.ErrorIs(t, err, ErrCorrupt, what)
					failed++
					continue
				}
				if vs.Verify() == nil {
					passes++
					continue
				}
				s, err := newSegmentBytes(b)
				require.NoError(t, err, what)
				got, err := readEveryColumn(s)
				if err == nil {
					require.Equal(t, want, got, "%s: Verify rejects the file, the read path read something else", what)
					same++
					continue
				}
				require.ErrorIs(t, err, ErrCorrupt, what)
				require.ErrorContains(t, err, fmt.Sprintf("column %q part ", col), what)
				failed++
				byKind[p.Kind]++
			}
		}
		t.Logf("%s: %d faults: Verify accepts %d; of the rest, the read path fails on %d (by part kind %v), reads the intact answer on %d",
			name, faults, passes, failed, byKind, same)
	}
}

// TestStructuralCheckOnce: a part's structural check runs once per open segment, its failure
// is remembered, and the error names the file, the column and the part.
func TestStructuralCheckOnce(t *testing.T) {
	good := flipSegments(t)["none"]
	f, err := segsurgery.Parse(good)
	require.NoError(t, err)
	// The dictionary of "tags" (column 2): its first value's first byte made to sort last.
	k := -1
	for i, p := range f.Parts {
		if p.Column == 2 && p.Kind == segfmt.PartDictionary {
			k = i
		}
	}
	require.GreaterOrEqual(t, k, 0)
	dec, err := f.Decode(k)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "bad.seg")
	require.NoError(t, os.WriteFile(path, f.Faulted(k, dec, 1, 0x80), 0o644))
	seg, err := Open(path)
	require.NoError(t, err)
	defer seg.Close()
	_, err = seg.Dim("tags")
	require.ErrorIs(t, err, ErrCorrupt)
	require.ErrorContains(t, err, "columns: "+path+`: column "tags" part dictionary: value 1 ("b") does not sort after "\xe1"`)
	_, err2 := seg.Dim("tags")
	require.Equal(t, err.Error(), err2.Error())
	var sc *structCheck
	for i := range seg.checks {
		if seg.checks[i].part.Column == "tags" && seg.checks[i].part.Kind == segfmt.PartDictionary {
			sc = seg.checks[i].sc
		}
	}
	require.NotNil(t, sc)
	require.Equal(t, structBad, sc.state.Load())
	// The other columns read.
	_, err = seg.Dim("page")
	require.NoError(t, err)
	require.True(t, errors.Is(seg.Verify(), ErrCorrupt))
}
