package merger

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/internal/segfmt"
)

// flipInPart flips one byte a quarter into the named part of the segment file at path.
func flipInPart(t *testing.T, path, column string, kind segfmt.PartKind) {
	t.Helper()
	seg, err := columns.Open(path)
	require.NoError(t, err)
	var off int64 = -1
	for _, p := range seg.Info().Parts {
		if p.Column == column && p.Kind == kind {
			off = p.Offset + p.Length/4
		}
	}
	require.NoError(t, seg.Close())
	require.GreaterOrEqual(t, off, int64(0), "no part %s %s", column, kind)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	var b [1]byte
	_, err = f.ReadAt(b[:], off)
	require.NoError(t, err)
	b[0] ^= 0x10
	_, err = f.WriteAt(b[:], off)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

// TestMergeChecksInputChecksums: a byte flipped inside a metric's values (which decode to a
// plausible, wrong value) fails the merge with ErrCorrupt naming the input and the part, and
// nothing is written; Open alone does not see it, and a merge told to skip the upfront check
// still finds it on the read path.
func TestMergeChecksInputChecksums(t *testing.T) {
	dir := t.TempDir()
	a := genSegment(t, dir, 1, 5000)
	bad := genSegment(t, dir, 2, 5000)
	path := filepath.Join(dir, "basic-2-5000.seg")
	require.NoError(t, bad.Close())
	flipInPart(t, path, "sumLongSequential", segfmt.PartValues)
	bad = openSeg(t, path) // opens: the footer and the index are intact

	dst := filepath.Join(dir, "out.seg")
	before := dirNames(t, dir)
	_, err := Merge(context.Background(), []*columns.Segment{a, bad}, dst, Options{InputNames: []string{"a.seg", "bad.seg"}})
	require.ErrorIs(t, err, columns.ErrCorrupt)
	require.ErrorContains(t, err, "bad.seg")
	require.ErrorContains(t, err, `"sumLongSequential"`)
	require.Equal(t, before, dirNames(t, dir), "nothing written")

	require.ErrorContains(t, err, "CRC")

	// Without the upfront pass, the read path still checks each part the first time the merge
	// touches it: the merge fails with the same checksum error, never a rewritten wrong value.
	_, err = Merge(context.Background(), []*columns.Segment{a, bad}, dst, Options{SkipChecksums: true, Replace: true})
	require.ErrorIs(t, err, columns.ErrCorrupt)
	require.ErrorContains(t, err, "CRC")
	require.ErrorContains(t, err, path)
	require.NoFileExists(t, dst)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	// A fresh segment: a's parts are all checked by now, and a checked part is not read again.
	fresh := openSeg(t, filepath.Join(dir, "basic-1-5000.seg"))
	require.ErrorIs(t, fresh.VerifyChecksumsContext(ctx), context.Canceled)
	require.NoError(t, fresh.VerifyChecksumsContext(context.Background()))
}

// TestMergeChecksUnreadParts: a byte flipped in a part the merge never reads (the bitmap index
// of a single-value dimension, which the merge rebuilds from the ids) fails it too, before
// anything is published, naming the input and the part; with SkipChecksums, which leaves the
// checks to the read path, the same merge fails too: reading the dimension's ids runs its
// structural check, which reads its bitmaps (columns/structure.go).
func TestMergeChecksUnreadParts(t *testing.T) {
	dir := t.TempDir()
	a := genSegment(t, dir, 1, 5000)
	bad := genSegment(t, dir, 2, 5000)
	path := filepath.Join(dir, "basic-2-5000.seg")
	var dim string
	for _, d := range bad.Schema().Dimensions {
		if !d.MultiValue && !d.Raw && !d.NoBitmapIndex {
			dim = d.Name
			break
		}
	}
	require.NotEmpty(t, dim, "a single-value dimension with a bitmap index")
	require.NoError(t, bad.Close())
	flipInPart(t, path, dim, segfmt.PartBitmaps)
	bad = openSeg(t, path)

	dst := filepath.Join(dir, "out.seg")
	before := dirNames(t, dir)
	_, err := Merge(context.Background(), []*columns.Segment{a, bad}, dst, Options{InputNames: []string{"a.seg", "bad.seg"}})
	require.ErrorIs(t, err, columns.ErrCorrupt)
	require.ErrorContains(t, err, "bad.seg")
	require.ErrorContains(t, err, fmt.Sprintf("%q", dim))
	require.ErrorContains(t, err, segfmt.PartBitmaps.String())
	require.Equal(t, before, dirNames(t, dir), "nothing written")

	bad = openSeg(t, path)
	_, err = Merge(context.Background(), []*columns.Segment{a, bad}, dst, Options{SkipChecksums: true})
	require.ErrorIs(t, err, columns.ErrCorrupt)
	require.ErrorContains(t, err, path)
	require.ErrorContains(t, err, fmt.Sprintf("column %q part %s: CRC ", dim, segfmt.PartBitmaps))
	require.Equal(t, before, dirNames(t, dir), "nothing written")
}

// TestMergeMetricCRCsFromReads: a merge reads its mapped inputs' numeric metrics' parts (values,
// and the times of first/last) once: their CRCs are put together from the chunks its cursors
// load (columns.Deferral), not computed by a read of their own first; every other part's CRC
// is computed too (the times' and ids' by their structural checks, the parts it does not read
// in the pass before it publishes). Rolled up or not.
func TestMergeMetricCRCsFromReads(t *testing.T) {
	for _, rollup := range []bool{false, true} {
		dir := t.TempDir()
		ins := []*columns.Segment{genSegment(t, dir, 1, 20_000), genSegment(t, dir, 2, 20_000)}
		opts := Options{Rollup: rollup, Granularity: columns.GranularityHour}
		_, err := Merge(t.Context(), ins, filepath.Join(dir, "out.seg"), opts)
		require.NoError(t, err)
		for _, in := range ins {
			numeric := 0
			parts := in.Info().Parts
			for _, p := range parts {
				if p.Kind != segfmt.PartValues && p.Kind != segfmt.PartTimes || p.Column == columns.TimeColumn {
					continue
				}
				_, lerr := in.Long(p.Column)
				_, derr := in.Double(p.Column)
				if lerr == nil || derr == nil {
					numeric++
				}
			}
			require.Positive(t, numeric)
			st := in.ChecksumStats()
			require.Equal(t, int64(numeric), st.FromRuns, "rollup %v: %s: the numeric parts' CRCs from the merge's reads", rollup, in.Name())
			// Every part's at least once: two first reads of a part may both compute its CRC
			// (a multi-value dimension's ids, read by two structural checks at once).
			require.GreaterOrEqual(t, st.Computed, int64(len(parts)), "rollup %v: %s: every part's CRC computed", rollup, in.Name())
		}
	}
}

// TestInputVerifierEarly: the checksum pass's early part (the inputs' parts a merge never
// reads, checked beside its rows) finds a flipped byte in a bitmap index of a single-value
// dimension, or in a metric the output drops, and run returns it, naming the input and the
// part; an index the merge reads (a multi-value dimension's) is left to the pass after the
// rows, and so is damage in a column the output has: the early part passes and the whole pass
// fails; stop ends an early part that runs and waits for it, and a second stop does nothing.
func TestInputVerifierEarly(t *testing.T) {
	dir := t.TempDir()
	a := genSegment(t, dir, 1, 5000)
	bad := genSegment(t, dir, 2, 5000)
	path := filepath.Join(dir, "basic-2-5000.seg")
	var dims []string
	for _, d := range bad.Schema().Dimensions {
		if !d.MultiValue && !d.Raw && !d.NoBitmapIndex {
			dims = append(dims, d.Name)
		}
	}
	require.NotEmpty(t, dims)
	out := bad.Schema()
	require.NoError(t, bad.Close())
	flipInPart(t, path, dims[0], segfmt.PartBitmaps)
	bad = openSeg(t, path)
	ctx := context.Background()

	v := &inputVerifier{inputs: []*columns.Segment{a, bad}, names: []string{"a.seg", "bad.seg"}, par: 2}
	v.start(ctx, out)
	err := <-v.early
	require.ErrorIs(t, err, columns.ErrCorrupt, "found by the early part")
	v.early <- err // as it was
	err = v.run(ctx)
	require.ErrorIs(t, err, columns.ErrCorrupt)
	require.ErrorContains(t, err, "bad.seg")
	require.ErrorContains(t, err, fmt.Sprintf("column %q part %s", dims[0], segfmt.PartBitmaps))
	v.stop()

	// The damaged index is one the merge reads (a multi-value dimension's in the output): the
	// pass after the rows finds it.
	require.NoError(t, bad.Close())
	bad = openSeg(t, path)
	multi := out.Clone()
	for k := range multi.Dimensions {
		if multi.Dimensions[k].Name == dims[0] {
			multi.Dimensions[k].MultiValue = true
		}
	}
	v = &inputVerifier{inputs: []*columns.Segment{a, bad}, names: []string{"a.seg", "bad.seg"}, par: 2}
	v.start(ctx, multi)
	require.NoError(t, <-v.early, "not the early part's")
	v.early <- nil // as it was
	err = v.run(ctx)
	require.ErrorIs(t, err, columns.ErrCorrupt)
	require.ErrorContains(t, err, fmt.Sprintf("column %q part %s", dims[0], segfmt.PartBitmaps))

	// Damage in a metric's values: not the early part's while the output has the metric, its
	// when the output drops it.
	require.NoError(t, bad.Close())
	bad = genSegment(t, dir, 3, 5000)
	path = filepath.Join(dir, "basic-3-5000.seg")
	require.NoError(t, bad.Close())
	flipInPart(t, path, "sumLongSequential", segfmt.PartValues)
	bad = openSeg(t, path)
	v = &inputVerifier{inputs: []*columns.Segment{bad}, names: []string{"bad.seg"}, par: 1}
	v.start(ctx, out)
	require.NoError(t, <-v.early, "the early part's parts are intact")
	v.early <- nil // as it was
	err = v.run(ctx)
	require.ErrorIs(t, err, columns.ErrCorrupt)
	require.ErrorContains(t, err, `"sumLongSequential"`)
	require.NoError(t, bad.Close())
	bad = openSeg(t, path)
	dropped := out.Clone()
	dropped.Metrics = slices.DeleteFunc(dropped.Metrics, func(m columns.Metric) bool { return m.Name == "sumLongSequential" })
	require.Len(t, dropped.Metrics, len(out.Metrics)-1)
	v = &inputVerifier{inputs: []*columns.Segment{bad}, names: []string{"bad.seg"}, par: 1}
	v.start(ctx, dropped)
	err = <-v.early
	require.ErrorIs(t, err, columns.ErrCorrupt, "a metric the output drops: the early part's")
	require.ErrorContains(t, err, `"sumLongSequential"`)
	v.early <- err
	v.stop()

	// stop: the early part cancelled and waited for, whatever it found.
	v = &inputVerifier{inputs: []*columns.Segment{openSeg(t, path)}, names: []string{"bad.seg"}, par: 1}
	v.start(ctx, out)
	v.stop()
	require.Nil(t, v.early)
	v.stop()
}
