package ingest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/internal/gen"
	"github.com/writeout/writeout/medium"
	"github.com/writeout/writeout/merger"
)

// Memory: what ingestion holds is bounded by Options.MemoryLimit (the Builders, the runs merged
// at once), and none of it changes a byte of the outputs.

// basicRows is the number of rows of the golden inputs: the basic schema of internal/gen, seed
// gen.BasicSeed.
const basicRows = 20_000

// The SHA-256 of the segment that segtool at a0bede2 (before issue 34) wrote from the CSV of
// basicRows rows (segtool gen --rows 20000 --format csv, ingested with its spec): without
// rollup, and with rollup by hour. Every way of spilling gave these bytes then.
const (
	goldenBasic       = "c85155c2b69fdc8b3363e29c0df45a56f869ffa4164ad0a342b529a9b7dbe9ca"
	goldenBasicRollup = "219143b8cd969f2e80782842de222c3218eeee7329e9b8b873dd5378867e2829"
)

// basicSpec reads the spec of the basic CSV (testdata/basic-spec.json, as segtool gen writes
// it), rolled up by hour when rollup is set.
func basicSpec(t testing.TB, rollup bool) *Spec {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "basic-spec.json"))
	require.NoError(t, err)
	sp, err := ParseSpec(data)
	require.NoError(t, err)
	if rollup {
		sp.Schema.Rollup, sp.Schema.Granularity = true, columns.GranularityHour
	}
	return sp
}

// basicCSV is the CSV of basicRows generated rows, made once.
var basicCSV = sync.OnceValues(func() ([]byte, error) {
	g, err := gen.Basic(gen.BasicSeed, basicRows)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	err = gen.WriteCSV(&b, g)
	return b.Bytes(), err
})

func fileSHA(t testing.TB, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// Ingestion writes the bytes it wrote before its memory was bounded, whether its rows fit in
// memory or are spilled as runs (by rows or by bytes) and merged in one phase or several
// (MaxFanIn, or a MemoryLimit that fits few runs in a merge), with rollup or without.
func TestRunGoldenBytes(t *testing.T) {
	data, err := basicCSV()
	require.NoError(t, err)
	for _, rollup := range []bool{false, true} {
		want := goldenBasic
		if rollup {
			want = goldenBasicRollup
		}
		sp := basicSpec(t, rollup)
		for _, tc := range []struct {
			name string
			o    Options
			runs bool
		}{
			{"memory", Options{MaxRowsInMemory: 1 << 30, MemoryLimit: -1}, false},
			{"rows", Options{MaxRowsInMemory: 3000}, true},
			{"bytes", Options{MemoryLimit: 1 << 20}, true},
			{"fan-in", Options{MaxRowsInMemory: 1500, MaxFanIn: 2}, true},
			{"fan-in-by-memory", Options{MaxRowsInMemory: 1000, MemoryLimit: 2 << 20}, true},
		} {
			t.Run(fmt.Sprintf("rollup=%v/%s", rollup, tc.name), func(t *testing.T) {
				dir, tmp := t.TempDir(), t.TempDir()
				o := tc.o
				o.Out, o.TmpDir, o.Durability = filepath.Join(dir, "out.seg"), tmp, noSync
				res, err := Run(context.Background(), sp, []Input{{Name: "basic.csv", Reader: bytes.NewReader(data)}}, o)
				require.NoError(t, err)
				require.Equal(t, tc.runs, res.Runs() > 0, "runs: %d", res.Runs())
				require.Equal(t, want, fileSHA(t, o.Out))
				require.Empty(t, dirNames(t, tmp))
			})
		}
	}
}

// basicRowReader reads the rows of gen.Basic as Input.Rows, mapped to the basic spec: the
// String columns are its dimensions, in order; each aggregator reads its Source column.
type basicRowReader struct {
	g       gen.Generator
	src     gen.Row
	dimSlot []int
	metrics []gen.Column // of the aggregators' sources; Kind 0 for count
	fail    int          // when positive, the row that fails (1 the first)
	n       int
}

func newBasicRowReader(t testing.TB, sp *Spec) *basicRowReader {
	t.Helper()
	g, err := gen.Basic(gen.BasicSeed, basicRows)
	require.NoError(t, err)
	r := &basicRowReader{g: g}
	byName := map[string]gen.Column{}
	for _, c := range g.Schema() {
		byName[c.Name] = c
	}
	for _, d := range sp.Schema.Dimensions {
		c, ok := byName[d.Name]
		require.True(t, ok, d.Name)
		r.dimSlot = append(r.dimSlot, c.Slot)
	}
	for _, m := range sp.Schema.Metrics {
		r.metrics = append(r.metrics, byName[m.Field]) // count: no field, the zero Column
	}
	return r
}

var errRowSource = errors.New("row source broke")

func (r *basicRowReader) ReadRow(row *columns.Row) error {
	r.n++
	if r.n == r.fail {
		return errRowSource
	}
	if !r.g.Next(&r.src) {
		return io.EOF
	}
	row.Time = r.src.Time
	for i, slot := range r.dimSlot {
		row.Dims[i] = append(row.Dims[i][:0], r.src.Strings[slot].Values...)
	}
	for i, c := range r.metrics {
		v := columns.Value{}
		switch c.Kind {
		case 0:
			v.Long = 1
		case gen.Long:
			v.Long = r.src.Longs[c.Slot]
		case gen.Double:
			v.Double = r.src.Doubles[c.Slot]
		case gen.String, gen.Time, gen.Sketch: // hyperUnique over a dimension: the Builder sketches it
		}
		row.Metrics[i] = v
	}
	return nil
}

// Rows given as Input.Rows are ingested as the same rows parsed from a file are: the bytes of
// the CSV's ingestion, spilled or not. An error of the row source fails the run, naming the
// input, and leaves nothing.
func TestRunRowsInput(t *testing.T) {
	sp := basicSpec(t, false)
	for _, o := range []Options{{MemoryLimit: -1, MaxRowsInMemory: 1 << 30}, {MaxRowsInMemory: 2500}} {
		dir := t.TempDir()
		o.Out, o.Durability = filepath.Join(dir, "rows.seg"), noSync
		res, err := Run(context.Background(), sp, []Input{{Name: "generated", Rows: newBasicRowReader(t, sp).ReadRow}}, o)
		require.NoError(t, err)
		require.Equal(t, int64(basicRows), res.InputRows)
		require.Equal(t, goldenBasic, fileSHA(t, o.Out))
		require.Equal(t, o.MaxRowsInMemory < basicRows, res.Runs() > 0)
	}

	dir := t.TempDir()
	rr := newBasicRowReader(t, sp)
	rr.fail = 7000
	_, err := Run(context.Background(), sp, []Input{{Name: "generated", Rows: rr.ReadRow}},
		Options{Out: filepath.Join(dir, "x.seg"), Durability: noSync, MaxRowsInMemory: 1000})
	require.ErrorIs(t, err, errRowSource)
	require.ErrorContains(t, err, "generated: row source broke")
	require.Empty(t, dirNames(t, dir))

	_, err = Run(context.Background(), sp, []Input{{Name: "nothing"}}, Options{Out: filepath.Join(dir, "x.seg")})
	require.ErrorIs(t, err, ErrInvalid)
}

// A merge of runs opens no more runs than MemoryLimit has room for beside the Builder's rows,
// by the runs' estimates (runOpenBytes): with room for a few, they are merged in phases of a
// few at a time; without a limit, all at once. The bytes are the same.
func TestRunFanInFitsMemoryLimit(t *testing.T) {
	data, err := basicCSV()
	require.NoError(t, err)
	sp := basicSpec(t, false)
	type merge struct {
		runs    int
		least   int64 // the smallest run's estimate
		budget  int64
		unknown bool // a run without an estimate
	}
	run := func(limit int64) ([]merge, Result) {
		t.Helper()
		var merges []merge
		testHookMergeRuns = func(group []runFile, budget int64) {
			m := merge{runs: len(group), least: group[0].open, budget: budget}
			for _, rf := range group {
				m.least = min(m.least, rf.open)
				m.unknown = m.unknown || rf.open <= 0
			}
			merges = append(merges, m)
		}
		defer func() { testHookMergeRuns = nil }()
		out := filepath.Join(t.TempDir(), "out.seg")
		res, err := Run(context.Background(), sp, []Input{{Name: "basic.csv", Reader: bytes.NewReader(data)}},
			Options{Out: out, Durability: noSync, Medium: medium.NewHeap(), MaxRowsInMemory: 1000, MemoryLimit: limit})
		require.NoError(t, err)
		require.Equal(t, goldenBasic, fileSHA(t, out))
		return merges, res
	}

	merges, res := run(-1)
	require.Equal(t, basicRows/1000-1, res.Runs()) // the last 1,000 rows are merged from the Builder
	require.Equal(t, []merge{{runs: res.Runs(), least: merges[0].least, budget: merges[0].budget}}, merges, "one merge of every run")

	merges, res = run(2 << 20)
	require.Equal(t, basicRows/1000-1, res.Runs())
	t.Logf("merges: %+v", merges)
	require.Greater(t, len(merges), 2, "merged in phases")
	most := 0
	for i, m := range merges {
		require.False(t, m.unknown, "merge %d: a run without its estimate", i)
		require.Positive(t, m.budget, "merge %d", i)
		// fanIn takes as many runs as their mean estimate fits in the budget, so as many as
		// the smallest fits at most.
		require.True(t, m.runs == 2 || int64(m.runs)*m.least <= m.budget,
			"merge %d: %d runs of %d bytes at least, budget %d", i, m.runs, m.least, m.budget)
		most = max(most, m.runs)
	}
	require.Greater(t, most, 2, "the budget fits more than the minimum")
	require.Less(t, most, res.Runs())
}

// runOpenBytes counts a run's dictionaries' id maps (4 bytes an id, rounded up to a power of
// two), a chunk of each column and the run's read blocks.
func TestRunOpenBytes(t *testing.T) {
	schema := columns.Schema{
		Dimensions: []columns.Dimension{{Name: "a"}, {Name: "b"}, {Name: "tags", MultiValue: true}, {Name: "body", Raw: true}},
		Metrics:    []columns.Metric{{Name: "rows", Aggregator: "count"}, {Name: "sum", Aggregator: "longSum", Field: "v"}},
	}
	sp := NewSpec(schema)
	require.NoError(t, sp.Validate())
	b, err := newBuilder(sp)
	require.NoError(t, err)
	defer func() { require.NoError(t, b.Close()) }()
	for i := range 3000 {
		require.NoError(t, b.Add(columns.Row{Time: int64(i),
			Dims:    [][]string{{fmt.Sprint("a", i%3)}, {fmt.Sprint("b", i%1000)}, {"x", fmt.Sprint("t", i%5)}, {strings.Repeat("z", i%7)}},
			Metrics: []columns.Value{{Long: 1}, {Long: int64(i)}}}))
	}
	path := filepath.Join(t.TempDir(), "run.seg")
	_, err = b.Persist(context.Background(), path, merger.PersistOptions{Durability: noSync, Runs: true, ChunkRows: runChunkRows})
	require.NoError(t, err)
	got, err := estimateRun(path)
	require.NoError(t, err)
	const cols = 1 + 4 + 2
	// Dictionaries: a 3 values, b 1,000, tags 6 ("x", t0..t4); raw body none.
	want := int64(readerBytes) + cols*runChunkRows*16 + 4*(4+1024+8)
	require.Equal(t, want, got)
}

// The staging medium's buffers get a quarter of MemoryLimit, from 4 MiB to 64 MiB.
func TestStagingBudget(t *testing.T) {
	f := func(limit, want int64) {
		t.Helper()
		require.Equal(t, want, StagingBudget(limit), "limit %d", limit)
	}
	f(0, 16<<20)
	f(64<<20, 16<<20)
	f(8<<20, 4<<20)
	f(1<<30, 64<<20)
	f(-1, 64<<20)
}
