package ingest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/medium"
	"github.com/writeout/writeout/merger"
)

var noSync = medium.Durability{Sync: medium.SyncNone}

// segRows returns the rows of the segment at path, rendered by rowString.
func segRows(t testing.TB, path string) []string {
	t.Helper()
	seg, err := columns.Open(path)
	require.NoError(t, err)
	defer seg.Close()
	rr := seg.RowReader()
	var row columns.Row
	out := make([]string, seg.Rows())
	for i := range out {
		require.NoError(t, rr.Read(i, &row))
		out[i] = rowString(row)
	}
	return out
}

// dirNames lists dir.
func dirNames(t testing.TB, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// trackBuilders records the Builders Run makes; the check it returns requires that every one
// was closed (its scratch arrays given back: a Builder not closed leaks its mappings).
func trackBuilders(t *testing.T) (check func()) {
	var mu sync.Mutex
	var bs []*merger.Builder
	testHookNewBuilder = func(b *merger.Builder) {
		mu.Lock()
		bs = append(bs, b)
		mu.Unlock()
	}
	t.Cleanup(func() { testHookNewBuilder = nil })
	return func() {
		t.Helper()
		mu.Lock()
		defer mu.Unlock()
		require.NotEmpty(t, bs)
		for i, b := range bs {
			require.ErrorIs(t, b.Add(columns.Row{}), medium.ErrClosed, "builder %d of %d was not closed", i+1, len(bs))
		}
		bs = nil
	}
}

func csvInput(name, body string) Input {
	return Input{Name: name, Reader: strings.NewReader(body)}
}

// The rows of the tour's test (segtool's ingest.txtar): rollup by hour.
const hourSpec = `{"timestamp": {"field": "ts", "format": "rfc3339"},
 "dimensions": [{"name": "page"}, {"name": "tags", "multiValue": true}, {"name": "body", "raw": true}],
 "metrics": [{"name": "rows", "aggregator": "count"}, {"name": "added", "aggregator": "longSum"},
             {"name": "users", "aggregator": "hyperUnique", "fieldName": "user"}],
 "rollup": true, "granularity": "hour"}`

const hourCSV = `ts,page,tags,body,added,user
2024-05-01T12:10:00Z,Main,a|b,hello,3,u1
2024-05-01T12:20:00Z,Main,b|a,hello,4,u2
2024-05-01T11:00:00Z,Talk,,x,1,u1
2024-05-01T13:00:00Z,,c,,2,
`

const hourNDJSON = `{"ts": "2024-05-01T12:10:00Z", "page": "Main", "tags": ["a", "b"], "body": "hello", "added": 3, "user": "u1"}
{"ts": "2024-05-01T14:20:00+02:00", "page": "Main", "tags": ["a", "b"], "body": "hello", "added": 4, "user": "u2"}
`

func TestRunOneSegment(t *testing.T) {
	dir := t.TempDir()
	sp, err := ParseSpec([]byte(hourSpec))
	require.NoError(t, err)
	ndPath := filepath.Join(dir, "b.ndjson")
	require.NoError(t, os.WriteFile(ndPath, []byte(hourNDJSON), 0o644))
	out := filepath.Join(dir, "out", "a.seg")
	require.NoError(t, os.Mkdir(filepath.Dir(out), 0o755))
	var progress []progressReport
	res, err := Run(context.Background(), sp, []Input{
		csvInput("a.csv", hourCSV),
		{Name: ndPath, open: func() (io.ReadCloser, error) { return openFile(context.Background(), ndPath) }},
	}, Options{Out: out, Durability: noSync, progress: func(p progressReport) { progress = append(progress, p) }, progressRows: 4})
	require.NoError(t, err)
	require.Equal(t, int64(6), res.InputRows)
	require.Zero(t, res.Skipped)
	require.Zero(t, res.runs)
	require.Len(t, res.Segments, 1)
	s := res.Segments[0]
	require.Equal(t, out, s.Path)
	require.Equal(t, int64(6), s.InputRows)
	require.Equal(t, int64(3), s.Rows)
	// The interval runs to the end of the last hour.
	require.Equal(t, "2024-05-01T11:00:00.000Z/2024-05-01T14:00:00.000Z", s.Interval.String())
	fi, err := os.Stat(out)
	require.NoError(t, err)
	require.Equal(t, fi.Size(), s.Bytes)
	require.Equal(t, []string{
		`1714561200000 ["Talk"] <nil> ["x"] 1 1 ~1`,
		`1714564800000 ["Main"] ["a" "b"] ["hello"] 4 14 ~2`,
		`1714568400000 <nil> ["c"] <nil> 1 2 ~0`,
	}, segRows(t, out))
	require.Equal(t, []string{"a.seg"}, dirNames(t, filepath.Dir(out)))
	require.Equal(t, []progressReport{
		{Input: "a.csv", InputRows: 1},
		{Input: ndPath, InputRows: 5},
		{Input: ndPath, InputRows: 6, Segments: 1},
	}, progress)

	// An existing output is an error without Replace, and replaced with it.
	_, err = Run(context.Background(), sp, []Input{csvInput("a.csv", hourCSV)}, Options{Out: out, Durability: noSync})
	require.ErrorIs(t, err, fs.ErrExist)
	res, err = Run(context.Background(), sp, []Input{csvInput("a.csv", hourCSV)}, Options{Out: out, Durability: noSync, Replace: true})
	require.NoError(t, err)
	require.Equal(t, int64(3), res.Segments[0].Rows)
}

func TestRunRowsPerSegment(t *testing.T) {
	sp, err := ParseSpec([]byte(hourSpec))
	require.NoError(t, err)
	for _, tc := range []struct {
		per  int
		want []int64 // input rows of each segment
	}{
		{2, []int64{2, 2, 2}}, // exactly divided: no empty segment at the end
		{4, []int64{4, 2}},
		{100, []int64{6}},
	} {
		t.Run(fmt.Sprint(tc.per), func(t *testing.T) {
			dir := t.TempDir()
			out := filepath.Join(dir, "day.seg")
			res, err := Run(context.Background(), sp, []Input{csvInput("a.csv", hourCSV), {Name: "b.json", Reader: strings.NewReader(hourNDJSON)}},
				Options{Out: out, RowsPerSegment: tc.per, Durability: noSync, MaxRowsInMemory: 1})
			require.NoError(t, err)
			var got []int64
			var names []string
			for k, s := range res.Segments {
				require.Equal(t, filepath.Join(dir, fmt.Sprintf("day-%04d.seg", k)), s.Path)
				require.Equal(t, s.Rows, int64(len(segRows(t, s.Path))))
				got = append(got, s.InputRows)
				names = append(names, filepath.Base(s.Path))
			}
			require.Equal(t, tc.want, got)
			require.Equal(t, names, dirNames(t, dir), "only the segments are left")
		})
	}
	require.Equal(t, "a/b-0012.seg", SegmentName("a/b.seg", 12))
	require.Equal(t, "out-0000", SegmentName("out", 0))
}

// genCSV writes n random rows of genSpec as CSV.
func genCSV(seed uint64, n int) string {
	r := rand.New(rand.NewPCG(seed, 7))
	var b strings.Builder
	b.WriteString("ts,page,tags,body,added,d,user\n")
	for i := range n {
		ts := 1_700_000_000_000 + int64(i)*997 - int64(r.IntN(600_000)) // roughly in time order
		page := fmt.Sprintf("p%d", r.IntN(40))
		if r.IntN(10) == 0 {
			page = ""
		}
		var tags []string
		for range r.IntN(4) {
			tags = append(tags, string(rune('a'+r.IntN(6))))
		}
		body := ""
		if r.IntN(3) > 0 {
			body = fmt.Sprintf("body %d", r.IntN(1000))
		}
		// Eighths below 2^23: every sum of a few thousand is exact in float64, so that sums
		// rounded per run (a run holds the rounded sum of its rows) equal sums rounded once.
		d := fmt.Sprint(math.Round(r.NormFloat64()*1e6*8) / 8)
		fmt.Fprintf(&b, "%d,%s,%s,%s,%d,%s,u%d\n", ts, page, strings.Join(tags, "|"), body, r.IntN(1000)-200, d, r.IntN(500))
	}
	return b.String()
}

const genSpecJSON = `{"timestamp": {"field": "ts"},
 "dimensions": [{"name": "page"}, {"name": "tags", "multiValue": true}, {"name": "body", "raw": true}],
 "metrics": [{"name": "rows", "aggregator": "count"}, {"name": "added", "aggregator": "longSum"},
             {"name": "mx", "aggregator": "longMax", "fieldName": "added"},
             {"name": "delta", "aggregator": "doubleSum", "fieldName": "d"},
             {"name": "dmin", "aggregator": "doubleMin", "fieldName": "d"},
             {"name": "users", "aggregator": "hyperUnique", "fieldName": "user"},
             {"name": "pages", "aggregator": "hyperUnique", "fieldName": "page"}]%s}`

// Spilling runs and merging them gives the rows (and, without rollup, the bytes) of one
// Builder holding every row; nothing is left in TmpDir.
func TestRunSpills(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	data, data2 := genCSV(seed, 3000), genCSV(seed+1, 3000)
	for _, rollup := range []string{"", `, "rollup": true, "granularity": "minute"`} {
		t.Run(fmt.Sprintf("rollup=%v", rollup != ""), func(t *testing.T) {
			sp, err := ParseSpec([]byte(fmt.Sprintf(genSpecJSON, rollup)))
			require.NoError(t, err)
			dir, tmp := t.TempDir(), t.TempDir()
			run := func(name string, o Options) Result {
				t.Helper()
				o.Out, o.TmpDir, o.Durability = filepath.Join(dir, name), tmp, noSync
				res, err := Run(context.Background(), sp, []Input{csvInput("a.csv", data), csvInput("b.csv", data2)}, o)
				require.NoError(t, err)
				require.Empty(t, dirNames(t, tmp))
				return res
			}
			one := run("one.seg", Options{MaxRowsInMemory: 1 << 30, MemoryLimit: -1})
			require.Zero(t, one.runs)
			want := segRows(t, filepath.Join(dir, "one.seg"))
			require.Equal(t, one.Segments[0].Rows, int64(len(want)))
			if rollup != "" {
				require.Less(t, len(want), 6000, "rows rolled up")
			}
			for _, tc := range []struct {
				name string
				o    Options
			}{
				{"rows", Options{MaxRowsInMemory: 700, MemoryLimit: -1}},
				{"bytes", Options{MemoryLimit: 64 << 10}},
			} {
				res := run(tc.name+".seg", tc.o)
				require.Greater(t, res.runs, 3, tc.name)
				// A builder that keeps its arrays from one run to the next (ResetKeep) is not full
				// at once: the runs do not shrink to a few rows each (46 runs before the arrays
				// were kept, 39 after; thousands if every run after the first held one row).
				require.Less(t, res.runs, 100, tc.name)
				require.Equal(t, res.runs, res.Segments[0].runs)
				require.Equal(t, one.InputRows, res.InputRows)
				require.Equal(t, one.Segments[0].Interval, res.Segments[0].Interval)
				require.Equal(t, want, segRows(t, filepath.Join(dir, tc.name+".seg")), tc.name)
				if rollup == "" {
					a, err := os.ReadFile(filepath.Join(dir, "one.seg"))
					require.NoError(t, err)
					b, err := os.ReadFile(filepath.Join(dir, tc.name+".seg"))
					require.NoError(t, err)
					require.True(t, bytes.Equal(a, b), "%s: the files differ", tc.name)
				}
			}
		})
	}
}

// The Builder keeps its row arrays from one run to the next (merger.Builder.ResetKeep), and
// MemBytes counts them: where the arrays are most of the memory (few distinct values, long
// metrics), a builder that kept them must not be full at once. Every run but the last holds
// about as many rows as the first.
func TestRunKeptArraysRuns(t *testing.T) {
	sp, err := ParseSpec([]byte(`{"timestamp": {"field": "ts"}, "dimensions": [{"name": "page"}],
	  "metrics": [{"name": "a", "aggregator": "longSum"}, {"name": "b", "aggregator": "longSum", "fieldName": "a"},
	              {"name": "c", "aggregator": "longMax", "fieldName": "a"}]}`))
	require.NoError(t, err)
	var b strings.Builder
	b.WriteString("ts,page,a\n")
	const rows = 20_000
	for i := range rows {
		fmt.Fprintf(&b, "%d,p%d,%d\n", 1714564800000+int64(i), i%3, i)
	}
	var ends []int64 // input rows at the end of each run
	res, err := Run(context.Background(), sp, []Input{csvInput("a.csv", b.String())}, Options{
		Out: filepath.Join(t.TempDir(), "o.seg"), Durability: noSync, MemoryLimit: 128 << 10,
		progress: func(p progressReport) {
			if p.Runs > len(ends) {
				ends = append(ends, p.InputRows)
			}
		}})
	require.NoError(t, err)
	require.Equal(t, res.runs, len(ends))
	require.Greater(t, res.runs, 4)
	first := ends[0]
	for k := 1; k < len(ends)-1; k++ {
		require.Greater(t, ends[k]-ends[k-1], first/2, "run %d of %d: %d rows, the first %d", k, len(ends), ends[k]-ends[k-1], first)
	}
}

// Runs are persisted in the background, one at a time, while a second Builder takes the next
// rows: with every persist slowed down (so that the reading side is always ahead), no two
// persists overlap, each run is handed off before the next fills (the reading side waits for
// the one before), and the segment is the bytes of an ingest without runs. A failing persist
// fails the run with its error and leaves nothing; so does a cancellation during one. (Run
// with -race: a Builder reused before its persist ended would race.)
func TestRunSpillsBackground(t *testing.T) {
	sp, err := ParseSpec([]byte(fmt.Sprintf(genSpecJSON, "")))
	require.NoError(t, err)
	data := genCSV(3, 4000)
	dir, tmp := t.TempDir(), t.TempDir()
	one := filepath.Join(dir, "one.seg")
	_, err = Run(context.Background(), sp, []Input{csvInput("a.csv", data)}, Options{Out: one, Durability: noSync, MemoryLimit: -1})
	require.NoError(t, err)
	defer func() { testHookPersist = nil }()
	closed := trackBuilders(t)

	var running, most, persists atomic.Int32
	var order []string
	var mu sync.Mutex
	testHookPersist = func(path string) error {
		n := running.Add(1)
		defer running.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		persists.Add(1)
		mu.Lock()
		order = append(order, filepath.Base(path))
		mu.Unlock()
		time.Sleep(5 * time.Millisecond)
		return nil
	}
	out := filepath.Join(dir, "bg.seg")
	res, err := Run(context.Background(), sp, []Input{csvInput("a.csv", data)}, Options{Out: out, TmpDir: tmp, Durability: noSync,
		MaxRowsInMemory: 300, MemoryLimit: -1})
	require.NoError(t, err)
	require.Equal(t, 13, res.runs) // 4000 rows: 13 runs of 300, the last 100 rows from the Builder
	require.Equal(t, int32(13), persists.Load())
	require.Equal(t, int32(1), most.Load(), "persists overlapped")
	for k, name := range order {
		require.Equal(t, fmt.Sprintf("run-%06d.seg", k), name)
	}
	a, err := os.ReadFile(one)
	require.NoError(t, err)
	b, err := os.ReadFile(out)
	require.NoError(t, err)
	require.True(t, bytes.Equal(a, b), "the segments differ")
	require.Empty(t, dirNames(t, tmp))
	closed()

	// A persist fails: the run fails with its error, nothing is left.
	boom := errors.New("boom")
	testHookPersist = func(path string) error {
		if strings.HasSuffix(path, "run-000004.seg") {
			return boom
		}
		return nil
	}
	fail := filepath.Join(dir, "fail.seg")
	_, err = Run(context.Background(), sp, []Input{csvInput("a.csv", data)}, Options{Out: fail, TmpDir: tmp, Durability: noSync,
		MaxRowsInMemory: 300, MemoryLimit: -1})
	require.ErrorIs(t, err, boom)
	require.NoFileExists(t, fail)
	require.Empty(t, dirNames(t, tmp))
	closed() // the failed persist's Builder too

	// Cancelled while a persist runs: Run waits for it, then removes its run.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	testHookPersist = func(path string) error {
		if strings.HasSuffix(path, "run-000002.seg") {
			cancel()
			time.Sleep(20 * time.Millisecond)
		}
		return nil
	}
	_, err = Run(ctx, sp, []Input{csvInput("a.csv", data)}, Options{Out: fail, TmpDir: tmp, Durability: noSync,
		MaxRowsInMemory: 300, MemoryLimit: -1})
	require.ErrorIs(t, err, context.Canceled)
	require.NoFileExists(t, fail)
	require.Empty(t, dirNames(t, tmp))
	closed()
}

// The issue 10 regression: a rolled-up doubleSum is exact, rounded once, whether the rows meet
// in the Builder or in the merge of runs.
func TestRunDoubleSumExact(t *testing.T) {
	sp, err := ParseSpec([]byte(`{"dimensions": [{"name": "k"}], "metrics": [{"name": "s", "aggregator": "doubleSum", "fieldName": "v"}],
	  "rollup": true, "granularity": "day"}`))
	require.NoError(t, err)
	in := "__time,k,v\n1,a,1e16\n2,a,1\n3,a,-1e16\n"
	for _, maxRows := range []int{0, 1} {
		out := filepath.Join(t.TempDir(), "s.seg")
		res, err := Run(context.Background(), sp, []Input{csvInput("s.csv", in)}, Options{Out: out, Durability: noSync, MaxRowsInMemory: maxRows})
		require.NoError(t, err)
		require.Equal(t, []string{`0 ["a"] 1`}, segRows(t, out), "max rows %d, runs %d", maxRows, res.runs)
	}
}

func TestRunParseErrors(t *testing.T) {
	sp, err := ParseSpec([]byte(hourSpec))
	require.NoError(t, err)
	bad := "ts,page,tags,body,added,user\n" +
		"2024-05-01T12:10:00Z,Main,a|b,hello,3,u1\n" +
		"2024-05-01T12:20:00Z,Main,a|b,hello,lots,u2\n" +
		"2024-05-01T11:00:00Z,Talk,,x\n" +
		"yesterday,Talk,,x,1,u1\n" +
		"2024-05-01T13:00:00Z,,c,,2,\n"
	for _, tc := range []struct {
		max     int
		err     string
		skipped []string
	}{
		{0, `bad.csv:3: column added: not an integer: "lots"`, nil},
		{1, `bad.csv:4: 4 fields, the header has 6`, []string{`bad.csv:3: column added: not an integer: "lots"`}},
		{3, "", []string{`bad.csv:3: column added: not an integer: "lots"`, `bad.csv:4: 4 fields, the header has 6`,
			`bad.csv:5: column ts: not an RFC 3339 time: "yesterday"`}},
	} {
		dir := t.TempDir()
		out := filepath.Join(dir, "bad.seg")
		var skipped []string
		res, err := Run(context.Background(), sp, []Input{csvInput("bad.csv", bad)}, Options{Out: out, Durability: noSync, MaxParseErrors: tc.max,
			OnSkip: func(e *RowError) { skipped = append(skipped, e.Error()) }})
		require.Equal(t, tc.skipped, skipped)
		if tc.err != "" {
			require.EqualError(t, err, tc.err)
			var re *RowError
			require.ErrorAs(t, err, &re)
			require.Empty(t, dirNames(t, dir))
			continue
		}
		require.NoError(t, err)
		require.Equal(t, 3, res.Skipped)
		require.Equal(t, int64(2), res.InputRows)
	}
}

// cancelReader cancels a context once n bytes have been read through it.
type cancelReader struct {
	r      io.Reader
	n      int
	cancel context.CancelFunc
}

func (c *cancelReader) Read(p []byte) (int, error) {
	k, err := c.r.Read(p[:min(len(p), 512)])
	if c.n -= k; c.n <= 0 {
		c.cancel()
	}
	return k, err
}

// On failure and cancellation, Run leaves nothing: no output (earlier segments included), no
// run, no temp directory.
func TestRunLeavesNothing(t *testing.T) {
	data := genCSV(1, 4000)
	sp, err := ParseSpec([]byte(fmt.Sprintf(genSpecJSON, "")))
	require.NoError(t, err)
	for _, tc := range []struct {
		name  string
		in    func(cancel context.CancelFunc) []Input
		opts  Options
		check func(t *testing.T, err error)
	}{
		{"bad row after runs and a segment", func(context.CancelFunc) []Input {
			return []Input{csvInput("a.csv", data), csvInput("b.csv", "ts,page,tags,body,added,d,user\n1,p,,,x,,\n")}
		}, Options{RowsPerSegment: 3000, MaxRowsInMemory: 500}, func(t *testing.T, err error) {
			require.EqualError(t, err, `b.csv:2: column added: not an integer: "x"`)
		}},
		{"cancelled while reading", func(cancel context.CancelFunc) []Input {
			return []Input{{Name: "a.csv", Reader: &cancelReader{r: strings.NewReader(data), n: len(data) / 2, cancel: cancel}}}
		}, Options{MaxRowsInMemory: 500}, func(t *testing.T, err error) {
			require.ErrorIs(t, err, context.Canceled)
		}},
		{"cancelled before the merge", func(cancel context.CancelFunc) []Input {
			return []Input{{Name: "a.csv", Reader: &cancelReader{r: strings.NewReader(data), n: len(data), cancel: cancel}}}
		}, Options{MaxRowsInMemory: 500}, func(t *testing.T, err error) {
			require.ErrorIs(t, err, context.Canceled)
		}},
		{"cancelled before the only persist", func(cancel context.CancelFunc) []Input {
			return []Input{{Name: "a.csv", Reader: &cancelReader{r: strings.NewReader(data), n: len(data), cancel: cancel}}}
		}, Options{}, func(t *testing.T, err error) {
			require.ErrorIs(t, err, context.Canceled)
		}},
		{"input fails to open", func(context.CancelFunc) []Input {
			return []Input{csvInput("a.csv", data), {Name: "b.csv", open: func() (io.ReadCloser, error) { return nil, errBoom }}}
		}, Options{MaxRowsInMemory: 500}, func(t *testing.T, err error) {
			require.ErrorIs(t, err, errBoom)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			dir, tmp := t.TempDir(), t.TempDir()
			o := tc.opts
			o.Out, o.TmpDir, o.Durability = filepath.Join(dir, "x.seg"), tmp, noSync
			closed := trackBuilders(t)
			_, err := Run(ctx, sp, tc.in(cancel), o)
			tc.check(t, err)
			closed()
			require.Empty(t, dirNames(t, dir))
			require.Empty(t, dirNames(t, tmp))
		})
	}
}

func TestRunInvalid(t *testing.T) {
	sp, err := ParseSpec([]byte(hourSpec))
	require.NoError(t, err)
	dir := t.TempDir()
	out := filepath.Join(dir, "x.seg")
	in := []Input{csvInput("a.csv", hourCSV)}
	bad := func(sp *Spec, in []Input, o Options, want string) {
		t.Helper()
		_, err := Run(context.Background(), sp, in, o)
		require.ErrorContains(t, err, want)
		require.Empty(t, dirNames(t, dir))
	}
	bad(nil, in, Options{Out: out}, "nil spec")
	bad(&Spec{input: inputSpec{Format: "xml"}}, in, Options{Out: out}, `input.format "xml"`)
	bad(sp, in, Options{}, "no output path")
	bad(sp, nil, Options{Out: out}, "no inputs")
	bad(sp, in, Options{Out: out, RowsPerSegment: -1}, "RowsPerSegment -1")
	bad(sp, in, Options{Out: out, MaxParseErrors: -1}, "MaxParseErrors -1")
	bad(sp, in, Options{Out: out, MaxRowsInMemory: -1}, "MaxRowsInMemory -1")
	bad(sp, in, Options{Out: out, Durability: medium.Durability{Sync: 9}}, "ingest: ")
	bad(sp, []Input{{Name: "a.csv"}}, Options{Out: out}, `input "a.csv" has neither a Reader nor a Path`)
	bad(sp, []Input{{Name: "a.txt", Reader: strings.NewReader("")}}, Options{Out: out}, "a.txt: cannot tell the format from the name")
	bad(sp, []Input{{Name: "a.csv", Format: "xml", Reader: strings.NewReader("")}}, Options{Out: out}, `a.csv: unknown input format "xml"`)
	_, err = Run(context.Background(), nil, in, Options{Out: out})
	require.ErrorIs(t, err, ErrInvalid)

	// The spec's format wins over the name; the input's own over both.
	nd := *sp
	nd.input.Format = NDJSON
	_, err = Run(context.Background(), &nd, []Input{{Name: "a.csv", Reader: strings.NewReader(hourNDJSON)}}, Options{Out: out, Durability: noSync})
	require.NoError(t, err)
	_, err = Run(context.Background(), &nd, []Input{{Name: "a.txt", Format: CSV, Reader: strings.NewReader(hourCSV)}}, Options{Out: out, Durability: noSync, Replace: true})
	require.NoError(t, err)
	require.Len(t, segRows(t, out), 3)
}

func TestRunEmptyInput(t *testing.T) {
	sp, err := ParseSpec([]byte(hourSpec))
	require.NoError(t, err)
	out := filepath.Join(t.TempDir(), "e.seg")
	res, err := Run(context.Background(), sp, []Input{csvInput("e.csv", "ts,page,tags,body,added,user\n")}, Options{Out: out, Durability: noSync})
	require.NoError(t, err)
	require.Len(t, res.Segments, 1)
	require.Zero(t, res.Segments[0].Rows)
	require.Empty(t, segRows(t, out))
	_ = errors.New
}

// The Builder keeps raw values as they are given, so a spec with a raw dimension reads CSV
// without block reuse (readAhead.start's reuse): with small chunks recycled under them, the
// raw values kept would be overwritten. The dictionary dimension beside it is copied and
// right either way.
func TestRunRawValuesKept(t *testing.T) {
	sp, err := ParseSpec([]byte(`{"timestamp": {"field": "ts"}, "dimensions": [{"name": "page"}, {"name": "body", "raw": true}],
	  "metrics": [{"name": "n", "aggregator": "count"}]}`))
	require.NoError(t, err)
	defer func(n int) { chunkBytes = n }(chunkBytes)
	chunkBytes = 512
	var b strings.Builder
	b.WriteString("ts,page,body\n")
	var want []string
	const rows = 5000
	for i := range rows {
		fmt.Fprintf(&b, "%d,p%d,body-%d\n", 1714564800000+int64(i), i%13, i)
		want = append(want, fmt.Sprintf(`%d ["p%d"] ["body-%d"] 1`, 1714564800000+int64(i), i%13, i))
	}
	out := filepath.Join(t.TempDir(), "o.seg")
	_, err = Run(context.Background(), sp, []Input{{Name: "a.csv", Reader: &chunkReader{r: strings.NewReader(b.String()), rng: rand.New(rand.NewPCG(1, 2))}}},
		Options{Out: out, Durability: noSync})
	require.NoError(t, err)
	require.Equal(t, want, segRows(t, out))
}
