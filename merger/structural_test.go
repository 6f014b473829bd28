package merger

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/columns/agg"
	"github.com/writeout/writeout/internal/segfmt"
	"github.com/writeout/writeout/medium"
)

// A structural fault: a change to a segment's columns that its re-encoded parts carry with
// their CRCs recomputed, as a writer bug would make. apply changes the model and re-encodes
// the parts it changed into f; it returns false when the segment has nothing to change.
type structuralFault struct {
	name  string
	apply func(rng *rand.Rand, m *segModel, f *segFile) bool
}

// pick returns a random element of xs satisfying ok, or the zero value and false.
func pick[T any](rng *rand.Rand, xs []T, ok func(T) bool) (T, bool) {
	var zero T
	var cands []T
	for _, x := range xs {
		if ok(x) {
			cands = append(cands, x)
		}
	}
	if len(cands) == 0 {
		return zero, false
	}
	return cands[rng.IntN(len(cands))], true
}

func (m *segModel) pickDim(rng *rand.Rand, ok func(*dimModel) bool) (*dimModel, bool) {
	return pick(rng, m.dims, func(d *dimModel) bool { return d != nil && len(d.ids) > 0 && ok(d) })
}

// rowsWhere returns the rows of d satisfying ok.
func rowsWhere(d *dimModel, ok func(ids []uint32) bool) []int {
	var out []int
	for r, ids := range d.ids {
		if ok(ids) {
			out = append(out, r)
		}
	}
	return out
}

func distinctCount(ids []uint32) int {
	s := slices.Clone(ids)
	slices.Sort(s)
	return len(slices.Compact(s))
}

var structuralFaults = []structuralFault{
	{"id past the dictionary", func(rng *rand.Rand, m *segModel, f *segFile) bool {
		d, ok := m.pickDim(rng, func(d *dimModel) bool { return 1<<idWidth(d.card()) > d.card() })
		if !ok {
			return false
		}
		r := rng.IntN(len(d.ids))
		k := rng.IntN(len(d.ids[r]))
		d.ids[r][k] = uint32(d.card() + rng.IntN(1<<idWidth(d.card())-d.card()))
		f.set(testingNop{}, d.col, segfmt.PartIDs, idsPart(d.ids, d.dim.MultiValue, d.card()))
		return true
	}},
	{"id changed, bitmaps not", func(rng *rand.Rand, m *segModel, f *segFile) bool {
		d, ok := m.pickDim(rng, func(d *dimModel) bool { return d.card() >= 2 })
		if !ok {
			return false
		}
		r := rng.IntN(len(d.ids))
		k := rng.IntN(len(d.ids[r]))
		low := 0
		if d.hasNull && len(d.ids[r]) > 1 {
			low = 1 // not the null id inside a multi-value row: another fault
		}
		if d.card()-low < 2 {
			return false
		}
		old := d.ids[r][k]
		for d.ids[r][k] == old {
			d.ids[r][k] = uint32(low + rng.IntN(d.card()-low))
		}
		f.set(testingNop{}, d.col, segfmt.PartIDs, idsPart(d.ids, d.dim.MultiValue, d.card()))
		return true
	}},
	{"bitmap missing a row", func(rng *rand.Rand, m *segModel, f *segFile) bool {
		d, ok := m.pickDim(rng, func(d *dimModel) bool { return d.bms != nil })
		if !ok {
			return false
		}
		bm, ok := pick(rng, d.bms, func(bm *roaring.Bitmap) bool { return !bm.IsEmpty() })
		if !ok {
			return false
		}
		rows := bm.ToArray()
		bm.Remove(rows[rng.IntN(len(rows))])
		f.set(testingNop{}, d.col, segfmt.PartBitmaps, bitmapsPart(testingNop{}, d.bms))
		return true
	}},
	{"bitmap with an extra row", func(rng *rand.Rand, m *segModel, f *segFile) bool {
		d, ok := m.pickDim(rng, func(d *dimModel) bool { return d.bms != nil && d.card() >= 2 })
		if !ok {
			return false
		}
		r := rng.IntN(len(d.ids))
		id := uint32(rng.IntN(d.card()))
		if slices.Contains(d.ids[r], id) {
			return false
		}
		d.bms[id].Add(uint32(r))
		f.set(testingNop{}, d.col, segfmt.PartBitmaps, bitmapsPart(testingNop{}, d.bms))
		return true
	}},
	{"row moved to another bitmap", func(rng *rand.Rand, m *segModel, f *segFile) bool {
		d, ok := m.pickDim(rng, func(d *dimModel) bool { return d.bms != nil && d.card() >= 2 && !d.dim.MultiValue })
		if !ok {
			return false
		}
		r := rng.IntN(len(d.ids))
		a, b := d.ids[r][0], uint32(rng.IntN(d.card()))
		if a == b {
			return false
		}
		d.bms[a].Remove(uint32(r))
		d.bms[b].Add(uint32(r))
		f.set(testingNop{}, d.col, segfmt.PartBitmaps, bitmapsPart(testingNop{}, d.bms))
		return true
	}},
	{"two rows swapped between bitmaps", func(rng *rand.Rand, m *segModel, f *segFile) bool {
		// The counts stay right: only the rows differ.
		d, ok := m.pickDim(rng, func(d *dimModel) bool { return d.bms != nil && d.card() >= 2 && !d.dim.MultiValue })
		if !ok {
			return false
		}
		r1, r2 := rng.IntN(len(d.ids)), rng.IntN(len(d.ids))
		a, b := d.ids[r1][0], d.ids[r2][0]
		if a == b {
			return false
		}
		d.bms[a].Remove(uint32(r1))
		d.bms[a].Add(uint32(r2))
		d.bms[b].Remove(uint32(r2))
		d.bms[b].Add(uint32(r1))
		f.set(testingNop{}, d.col, segfmt.PartBitmaps, bitmapsPart(testingNop{}, d.bms))
		return true
	}},
	{"null id's bitmap missing a null row", func(rng *rand.Rand, m *segModel, f *segFile) bool {
		d, ok := m.pickDim(rng, func(d *dimModel) bool { return d.bms != nil && d.hasNull && !d.bms[0].IsEmpty() })
		if !ok {
			return false
		}
		rows := d.bms[0].ToArray()
		d.bms[0].Remove(rows[rng.IntN(len(rows))])
		f.set(testingNop{}, d.col, segfmt.PartBitmaps, bitmapsPart(testingNop{}, d.bms))
		return true
	}},
	{"null rows part wrong", func(rng *rand.Rand, m *segModel, f *segFile) bool {
		d, ok := m.pickDim(rng, func(*dimModel) bool { return true })
		if !ok {
			return false
		}
		d.nulls.Flip(uint64(rng.IntN(len(d.ids))), uint64(rng.IntN(len(d.ids)))+1)
		f.set(testingNop{}, d.col, segfmt.PartNulls, bitmapBytes(testingNop{}, d.nulls))
		return true
	}},
	{"sketch that does not decode", func(rng *rand.Rand, m *segModel, f *segFile) bool {
		var cols []int
		for c, v := range m.sketches {
			if len(v) > 0 {
				cols = append(cols, c)
			}
		}
		if len(cols) == 0 {
			return false
		}
		slices.Sort(cols)
		col := cols[rng.IntN(len(cols))]
		vals := m.sketches[col]
		r := rng.IntN(len(vals))
		b := vals[r]
		switch rng.IntN(6) {
		case 0:
			b = nil
		case 1:
			b = b[:min(len(b), 1+rng.IntN(7))]
		case 2:
			b[0] = 9 // version
		case 3:
			b[1] = 40 // precision
		case 4:
			b[3] = 7 // sparse flag
		default:
			b = make([]byte, 8+rng.IntN(40))
			for i := range b {
				b[i] = byte(rng.IntN(256))
			}
			b[0] = 2
		}
		vals[r] = b
		f.set(testingNop{}, col, segfmt.PartValues, blobPart(vals))
		return true
	}},
	{"dictionary not sorted", func(rng *rand.Rand, m *segModel, f *segFile) bool {
		d, ok := m.pickDim(rng, func(d *dimModel) bool { return len(d.vals) >= 2 })
		if !ok {
			return false
		}
		i := rng.IntN(len(d.vals) - 1)
		d.vals[i], d.vals[i+1] = d.vals[i+1], d.vals[i]
		f.set(testingNop{}, d.col, segfmt.PartDictionary, dictPart(d.vals, d.hasNull))
		return true
	}},
	{"dictionary value repeated", func(rng *rand.Rand, m *segModel, f *segFile) bool {
		d, ok := m.pickDim(rng, func(d *dimModel) bool { return len(d.vals) >= 2 })
		if !ok {
			return false
		}
		i := rng.IntN(len(d.vals) - 1)
		d.vals[i+1] = d.vals[i]
		f.set(testingNop{}, d.col, segfmt.PartDictionary, dictPart(d.vals, d.hasNull))
		return true
	}},
	{"dictionary null flag flipped", func(rng *rand.Rand, m *segModel, f *segFile) bool {
		// (Only without a bitmap index, whose count Open checks against the cardinality.)
		d, ok := m.pickDim(rng, func(d *dimModel) bool { return len(d.vals) >= 1 && d.bms == nil })
		if !ok {
			return false
		}
		f.set(testingNop{}, d.col, segfmt.PartDictionary, dictPart(d.vals, !d.hasNull))
		return true
	}},
	{"times out of order", func(rng *rand.Rand, m *segModel, f *segFile) bool {
		if len(m.times) < 2 || m.times[0] == m.times[len(m.times)-1] {
			return false
		}
		i := rng.IntN(len(m.times) - 1)
		for m.times[i] == m.times[len(m.times)-1] {
			i = rng.IntN(len(m.times) - 1)
		}
		j := len(m.times) - 1 - rng.IntN(len(m.times)-1-i)
		if m.times[i] == m.times[j] {
			j = len(m.times) - 1
		}
		m.times[i], m.times[j] = m.times[j], m.times[i]
		m.encodeTime(f)
		return true
	}},
	{"time outside the interval", func(rng *rand.Rand, m *segModel, f *segFile) bool {
		if len(m.times) == 0 {
			return false
		}
		if rng.IntN(2) == 0 {
			m.times[len(m.times)-1] = f.IvEnd + rng.Int64N(5000)
		} else {
			m.times[0] = f.IvStart - 1 - rng.Int64N(5000)
		}
		m.encodeTime(f)
		return true
	}},
	{"interval not holding the rows", func(rng *rand.Rand, m *segModel, f *segFile) bool {
		if len(m.times) == 0 {
			return false
		}
		if rng.IntN(2) == 0 {
			f.IvEnd = m.times[len(m.times)-1] - rng.Int64N(3)
			f.IvStart = min(f.IvStart, f.IvEnd)
		} else {
			f.IvStart = m.times[0] + 1 + rng.Int64N(3)
			f.IvEnd = max(f.IvEnd, f.IvStart)
		}
		return true
	}},
	{"time past MaxTime, its interval right", func(rng *rand.Rand, m *segModel, f *segFile) bool {
		// The input verifies (granularity none: [first, last+1) fits), but a coarser
		// granularity would overflow the output's interval.
		if len(m.times) == 0 || m.schema.Granularity != columns.GranularityNone {
			return false
		}
		if rng.IntN(2) == 0 {
			m.times[len(m.times)-1] = math.MaxInt64 - 1 - rng.Int64N(1000)
			f.IvEnd = m.times[len(m.times)-1] + 1
		} else {
			m.times[0] = math.MinInt64 + rng.Int64N(1000)
			f.IvStart = m.times[0]
		}
		m.encodeTime(f)
		return true
	}},
	{"null id inside a multi-value row", func(rng *rand.Rand, m *segModel, f *segFile) bool {
		d, ok := m.pickDim(rng, func(d *dimModel) bool { return d.dim.MultiValue && d.hasNull && d.card() >= 2 })
		if !ok {
			return false
		}
		r := rng.IntN(len(d.ids))
		d.ids[r] = []uint32{uint32(1 + rng.IntN(d.card()-1)), 0}
		if rng.IntN(2) == 0 {
			slices.Reverse(d.ids[r])
		}
		f.set(testingNop{}, d.col, segfmt.PartIDs, idsPart(d.ids, true, d.card()))
		return true
	}},
	{"multi-value id repeated in its row", func(rng *rand.Rand, m *segModel, f *segFile) bool {
		d, ok := m.pickDim(rng, func(d *dimModel) bool { return d.dim.MultiValue })
		if !ok {
			return false
		}
		rows := rowsWhere(d, func(ids []uint32) bool { return distinctCount(ids) >= 2 })
		if len(rows) == 0 {
			return false
		}
		r := rows[rng.IntN(len(rows))]
		d.ids[r][1] = d.ids[r][0]
		f.set(testingNop{}, d.col, segfmt.PartIDs, idsPart(d.ids, true, d.card()))
		return true
	}},
	{"multi-value row reordered (valid)", func(rng *rand.Rand, m *segModel, f *segFile) bool {
		d, ok := m.pickDim(rng, func(d *dimModel) bool { return d.dim.MultiValue })
		if !ok {
			return false
		}
		rows := rowsWhere(d, func(ids []uint32) bool { return distinctCount(ids) >= 2 })
		if len(rows) == 0 {
			return false
		}
		r := rows[rng.IntN(len(rows))]
		slices.Reverse(d.ids[r])
		f.set(testingNop{}, d.col, segfmt.PartIDs, idsPart(d.ids, true, d.card()))
		return true
	}},
	{"raw null row holding bytes", func(rng *rand.Rand, m *segModel, f *segFile) bool {
		rd, ok := pick(rng, m.raws, func(r *rawModel) bool { return r != nil && !r.nulls.IsEmpty() })
		if !ok {
			return false
		}
		rows := rd.nulls.ToArray()
		rd.vals[rows[rng.IntN(len(rows))]] = []byte("not null")
		f.set(testingNop{}, rd.col, segfmt.PartValues, blobPart(rd.vals))
		return true
	}},
	{"doubleSum tail not finite", func(rng *rand.Rand, m *segModel, f *segFile) bool {
		var cols []int
		for c, v := range m.tails {
			if len(v) > 0 {
				cols = append(cols, c)
			}
		}
		if len(cols) == 0 {
			return false
		}
		slices.Sort(cols)
		col := cols[rng.IntN(len(cols))]
		vals := m.tails[col]
		bad := []float64{math.NaN(), math.Inf(1), 0}[rng.IntN(3)]
		vals[rng.IntN(len(vals))] = binaryFloat(bad)
		f.set(testingNop{}, col, segfmt.PartTails, blobPart(vals))
		return true
	}},
}

func binaryFloat(x float64) []byte {
	b := make([]byte, 8)
	u := math.Float64bits(x)
	for i := range b {
		b[i] = byte(u >> (8 * i))
	}
	return b
}

// testingNop is a testing.TB for encoders called where no test is at hand: the surgery
// encoders only fail on a bug of the test, which then panics.
type testingNop struct{ testing.TB }

func (testingNop) Helper() {}
func (testingNop) Errorf(format string, args ...any) {
	panic(fmt.Sprintf(format, args...))
}
func (testingNop) FailNow()                          { panic("FailNow") }
func (testingNop) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }

// TestMergeStructuralFaults (issue 11, bar 2): inputs holding structural faults whose CRCs
// agree (ids past the dictionary, ids that disagree with the bitmaps, sketches that do not
// decode, unsorted dictionaries, times out of order or outside the interval, ...), each
// merged alone, with a clean input, with rollup, and with MaxFanIn 2 across three inputs:
// every merge either fails with an error wrapping columns.ErrCorrupt that names the faulty
// input's file, or publishes an output that passes Verify. Never an output that fails it,
// and nothing left behind on failure.
func TestMergeStructuralFaults(t *testing.T) {
	inputs := 520
	if testing.Short() || raceEnabled {
		inputs = 100
	}
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 11))
	dir, outDir := t.TempDir(), t.TempDir()
	grans := []columns.Granularity{columns.GranularityNone, columns.GranularityHour, columns.GranularityDay}
	// outcomes[kind][outcome]
	outcomes := map[string]map[string]int{}
	count := func(kind, outcome string) {
		if outcomes[kind] == nil {
			outcomes[kind] = map[string]int{}
		}
		outcomes[kind][outcome]++
	}
	file := 0
	examples := map[string]string{} // an error per kind, for the log
	for made := 0; made < inputs; made++ {
		fault := structuralFaults[made%len(structuralFaults)]
		var path string
		var base *columns.Segment
		var clean []*columns.Segment
		for try := 0; ; try++ {
			require.Less(t, try, 200, "no case for fault %q", fault.name)
			rc := newRandCase(rng, 3, 120)
			if len(rc.Rows[0]) < 2 {
				continue
			}
			file++
			base = writeSegment(t, dir, fmt.Sprintf("base-%d.seg", file), rc.Schemas[0], rc.Rows[0])
			m := readModel(t, base)
			if !fault.apply(rng, m, m.file) {
				continue
			}
			path = filepath.Join(dir, fmt.Sprintf("fault-%d-%s.seg", file, strings.ReplaceAll(fault.name, " ", "-")))
			require.NoError(t, os.WriteFile(path, m.file.assemble(), 0o644))
			clean = []*columns.Segment{
				writeSegment(t, dir, fmt.Sprintf("clean-%d-a.seg", file), rc.Schemas[1], rc.Rows[1]),
				writeSegment(t, dir, fmt.Sprintf("clean-%d-b.seg", file), rc.Schemas[2], rc.Rows[2]),
			}
			break
		}
		bad, err := columns.Open(path)
		if err != nil {
			require.ErrorIs(t, err, columns.ErrCorrupt, "%s", fault.name)
			require.ErrorContains(t, err, path)
			count(fault.name, "Open fails")
			continue
		}
		// Whether Verify refuses the faulty input (on a segment of its own: a verdict found
		// counts for every reader of the one merged).
		vs, err := columns.Open(path)
		require.NoError(t, err)
		corrupt := vs.Verify() != nil
		require.NoError(t, vs.Close())
		type scenario struct {
			name string
			ins  []*columns.Segment
			opts Options
		}
		two := []*columns.Segment{bad, clean[0]}
		if rng.IntN(2) == 0 {
			two[0], two[1] = two[1], two[0]
		}
		three := []*columns.Segment{bad, clean[0], clean[1]}
		rng.Shuffle(3, func(i, j int) { three[i], three[j] = three[j], three[i] })
		scenarios := []scenario{
			{"alone", []*columns.Segment{bad}, Options{}},
			{"with a clean input", two, Options{}},
			{"rollup", two, Options{Rollup: true, Granularity: grans[rng.IntN(len(grans))]}},
			{"MaxFanIn 2 of 3", three, Options{MaxFanIn: 2, Rollup: rng.IntN(2) == 0}},
		}
		for k, sc := range scenarios {
			sc.opts.Durability = medium.Durability{Sync: medium.SyncNone}
			dst := filepath.Join(outDir, fmt.Sprintf("out-%d-%d.seg", made, k))
			_, err := Merge(t.Context(), sc.ins, dst, sc.opts)
			if strings.HasSuffix(fault.name, "(valid)") {
				require.NoError(t, err, "%s, %s: a valid input", fault.name, sc.name)
			}
			if err != nil {
				require.ErrorIs(t, err, columns.ErrCorrupt, "%s, %s", fault.name, sc.name)
				require.ErrorContains(t, err, path, "%s, %s", fault.name, sc.name)
				count(fault.name, sc.name+": error")
				if _, ok := examples[fault.name]; !ok {
					examples[fault.name] = err.Error()
				}
			} else {
				out, err := columns.Open(dst)
				require.NoError(t, err)
				require.NoError(t, out.Verify(), "%s, %s: the output fails Verify (input %s)", fault.name, sc.name, path)
				require.NoError(t, out.Close())
				if corrupt {
					// A merge of an input Verify refuses that publishes wrote what the input
					// held before the fault: never an output that verifies and differs.
					ins := slices.Clone(sc.ins)
					ins[slices.Index(ins, bad)] = base
					cleanDst := dst + ".clean"
					_, err := Merge(t.Context(), ins, cleanDst, sc.opts)
					require.NoError(t, err)
					requireSameFiles(t, cleanDst, dst, fmt.Sprintf("%s, %s: an output that verifies, from a faulty input, must be the merge of the input before the fault", fault.name, sc.name))
					require.NoError(t, os.Remove(cleanDst))
				}
				require.NoError(t, os.Remove(dst))
				count(fault.name, sc.name+": verified")
			}
			require.Empty(t, dirNames(t, outDir), "%s, %s: left behind", fault.name, sc.name)
		}
		require.NoError(t, bad.Close())
	}
	kinds := make([]string, 0, len(outcomes))
	for k := range outcomes {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	t.Logf("%d faulty inputs, 4 merges each:", inputs)
	for _, k := range kinds {
		var parts []string
		for o, n := range outcomes[k] {
			parts = append(parts, fmt.Sprintf("%s %d", o, n))
		}
		sort.Strings(parts)
		t.Logf("  %-40s %s", k, strings.Join(parts, ", "))
	}
	for _, k := range kinds {
		if e, ok := examples[k]; ok {
			t.Logf("  %s: %s", k, strings.ReplaceAll(e, dir+"/", ""))
		}
	}
}

// TestMergeNamesInputFiles: an error about an input names it by InputNames when given, else by
// the path it was opened from, else "input N".
func TestMergeNamesInputFiles(t *testing.T) {
	dir := t.TempDir()
	schema := columns.Schema{Dimensions: []columns.Dimension{{Name: "page"}}, Metrics: []columns.Metric{{Name: "n", Aggregator: agg.Count}}}
	var rows []columns.Row
	for i, v := range []string{"a", "b", "c", "a"} {
		rows = append(rows, columns.Row{Time: int64(i), Dims: [][]string{{v}}, Metrics: []columns.Value{{Long: 1}}})
	}
	m := readModel(t, writeSegment(t, dir, "clean.seg", schema, rows))
	m.dims[0].vals[0], m.dims[0].vals[1] = m.dims[0].vals[1], m.dims[0].vals[0]
	m.file.set(t, m.dims[0].col, segfmt.PartDictionary, dictPart(m.dims[0].vals, m.dims[0].hasNull))
	b := m.file.assemble()
	path := filepath.Join(dir, "unsorted.seg")
	require.NoError(t, os.WriteFile(path, b, 0o644))
	bad := openSeg(t, path)
	noPath, err := columns.NewSegment(bytes.NewReader(b), int64(len(b)))
	require.NoError(t, err)
	good := writeSegment(t, dir, "good.seg", schema, rows)

	f := func(ins []*columns.Segment, names []string, want string) {
		t.Helper()
		_, err := Merge(t.Context(), ins, filepath.Join(dir, "out.seg"), Options{InputNames: names, MaxFanIn: 2})
		require.ErrorIs(t, err, columns.ErrCorrupt)
		// The read path's check of the dictionary (columns) finds it, the merge names the input.
		require.ErrorContains(t, err, `merger: `+want+`: columns: `)
		require.ErrorContains(t, err, `column "page" part dictionary: value 1 ("a") does not sort after "b"`)
	}
	f([]*columns.Segment{bad}, nil, path)
	f([]*columns.Segment{good, good, bad}, nil, path) // read in phase 2, as it is
	f([]*columns.Segment{good, bad}, []string{"", "mine.seg"}, "mine.seg")
	f([]*columns.Segment{good, noPath}, nil, "input 1")
	f([]*columns.Segment{good, noPath}, []string{"", "input 1"}, "input 1")
}

// TestMergeChecksTimesTrusted: an input opened with TrustChecksums gets no structural check
// from columns, so the merge's own check of the times (cursor.fillTimes, whose runs of rows in
// order go over at once) is what refuses times out of order or outside the interval: every
// such merge fails with an error wrapping columns.ErrCorrupt that names the input.
func TestMergeChecksTimesTrusted(t *testing.T) {
	rng := rand.New(rand.NewPCG(testSeed(t), 41))
	dir := t.TempDir()
	var faults []structuralFault
	for _, f := range structuralFaults {
		if f.name == "times out of order" || f.name == "time outside the interval" {
			faults = append(faults, f)
		}
	}
	require.Len(t, faults, 2)
	for k := range 40 {
		fault := faults[k%len(faults)]
		rc := newRandCase(rng, 1, 5000)
		if len(rc.Rows[0]) < 2 {
			continue
		}
		base := writeSegment(t, dir, fmt.Sprintf("base-%d.seg", k), rc.Schemas[0], rc.Rows[0])
		m := readModel(t, base)
		if !fault.apply(rng, m, m.file) {
			continue
		}
		path := filepath.Join(dir, fmt.Sprintf("fault-%d.seg", k))
		require.NoError(t, os.WriteFile(path, m.file.assemble(), 0o644))
		bad, err := columns.OpenWith(path, columns.OpenOptions{TrustChecksums: true})
		require.NoError(t, err)
		_, err = Merge(t.Context(), []*columns.Segment{bad}, filepath.Join(dir, fmt.Sprintf("out-%d.seg", k)),
			Options{Durability: medium.Durability{Sync: medium.SyncNone}, ChunkRows: 64})
		require.Error(t, err, "%s: case %d", fault.name, k)
		require.ErrorIs(t, err, columns.ErrCorrupt, fault.name)
		require.ErrorContains(t, err, path, fault.name)
		require.NoError(t, bad.Close())
	}
}
