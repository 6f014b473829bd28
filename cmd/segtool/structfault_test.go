package main

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/columns/agg"
	"github.com/writeout/writeout/internal/colwrite"
	"github.com/writeout/writeout/internal/gen"
	"github.com/writeout/writeout/internal/segsurgery"
	"github.com/writeout/writeout/medium"
	"github.com/writeout/writeout/merger"
)

// Issue 37, defect 1: damage that keeps every checksum valid must never read as a wrong answer.
//
// TestChecksumConsistentFaults makes, for a few small segments of different shapes (every part
// kind; compression none, zstd and s2; format versions 2 to 4; rollup; hyperUnique and
// quantiles sketches), faulted copies whose checksums all agree with the fault: a byte of a
// part's decoded content (a chunk's decompressed bytes, or the part's index and trailer, or a
// dictionary's, bitmap index's or null bitmap's bytes) changed, the part re-encoded with its
// own codec and every offset and CRC recomputed (internal/segsurgery). Each copy that verify
// rejects is then dumped, exported, queried and merged with a clean segment, and each command
// must either fail saying corrupt and naming the file, or give exactly what the clean file gives; a merge that
// succeeds must give an output that verify rejects or that dumps as the clean merge does, and a
// merge that fails must name the damaged input.
//
// Short mode (the default) makes a few hundred faults; WRITEOUT_FAULTS=N (N >= 1) makes up to N
// per part and xor value (every byte of parts no longer), three xor values each, and logs the
// counts.

// faultShape is one clean segment, a clean one to merge it with, and the queries to run.
type faultShape struct {
	name    string
	seg     []byte
	other   []byte
	queries [][]string // query flags; the segment's path follows
}

// faultCounts tallies the outcomes of one command over the faults verify rejects.
type faultCounts struct {
	corrupt, otherErr, same, wrong int
}

func (c faultCounts) String() string {
	return fmt.Sprintf("errors %d (corrupt %d), same answer %d, WRONG %d", c.corrupt+c.otherErr, c.corrupt, c.same, c.wrong)
}

// mergeCounts tallies the merges of the faults verify rejects.
type mergeCounts struct {
	failNamed, failUnnamed, outRejected, same, laundered int
}

func (c mergeCounts) String() string {
	return fmt.Sprintf("errors %d (naming the input %d), output rejected by verify %d, same output %d, LAUNDERED %d",
		c.failNamed+c.failUnnamed, c.failNamed, c.outRejected, c.same, c.laundered)
}

type faultTally struct {
	faults, verifyPasses, verifyRejects int
	cmds                                map[string]*faultCounts
	merge                               mergeCounts
	examples                            []string // the first wrong answers, for the log
}

func (t *faultTally) cmd(name string) *faultCounts {
	if t.cmds == nil {
		t.cmds = map[string]*faultCounts{}
	}
	if t.cmds[name] == nil {
		t.cmds[name] = &faultCounts{}
	}
	return t.cmds[name]
}

func (t *faultTally) example(s string) {
	if len(t.examples) < 40 {
		t.examples = append(t.examples, s)
	}
}

func TestChecksumConsistentFaults(t *testing.T) {
	perPart, long := 3, false
	if s := os.Getenv("WRITEOUT_FAULTS"); s != "" {
		n, err := strconv.Atoi(s)
		require.NoError(t, err, "WRITEOUT_FAULTS")
		require.Positive(t, n, "WRITEOUT_FAULTS")
		perPart, long = n, true
	}
	shapes := faultShapes(t)
	var total faultTally
	for _, sh := range shapes {
		t.Run(sh.name, func(t *testing.T) {
			var tl faultTally
			runFaultShape(t, sh, perPart, long, &tl)
			logTally(t, sh.name, &tl)
			total.faults += tl.faults
			total.verifyPasses += tl.verifyPasses
			total.verifyRejects += tl.verifyRejects
			for k, c := range tl.cmds {
				tc := total.cmd(k)
				tc.corrupt += c.corrupt
				tc.otherErr += c.otherErr
				tc.same += c.same
				tc.wrong += c.wrong
			}
			total.merge.failNamed += tl.merge.failNamed
			total.merge.failUnnamed += tl.merge.failUnnamed
			total.merge.outRejected += tl.merge.outRejected
			total.merge.same += tl.merge.same
			total.merge.laundered += tl.merge.laundered
			for _, e := range tl.examples {
				t.Errorf("%s", e)
			}
		})
	}
	logTally(t, "all shapes", &total)
}

func logTally(t *testing.T, name string, tl *faultTally) {
	t.Logf("%s: %d faults, verify passes %d, rejects %d", name, tl.faults, tl.verifyPasses, tl.verifyRejects)
	for _, k := range []string{"dump", "export", "query"} {
		if c := tl.cmds[k]; c != nil {
			t.Logf("%s:   %-6s %s", name, k, c)
		}
	}
	t.Logf("%s:   merge  %s", name, tl.merge)
}

// faultShapes writes the clean segments.
func faultShapes(t *testing.T) []faultShape {
	flipQueries := [][]string{
		{"--filter", "page = 'Paris' or tags in ('a', 'c') or country = 'de'", "--group-by", "country"},
		{"--group-by", "page,tags,country", "--granularity", "minute"},
		{"--filter", "body is not null and tags is not null"},
	}
	basicQueries := [][]string{
		{"--filter", "dimZipf = '1' or dimMultivalEnumerated = 'Foo' or dimSequentialHalfNull is null", "--group-by", "dimMultivalEnumerated2"},
		{"--group-by", "dimMultivalSequentialWithNulls,dimNull", "--granularity", "hour"},
		{"--filter", "dimUniform <> '5'"},
	}
	quantQueries := [][]string{
		{"--filter", "svc in ('api', 'db')", "--group-by", "svc", "--quantiles", "0.5,0.9"},
		{"--group-by", "host", "--granularity", "minute", "--quantiles", "0.99"},
		{},
	}
	none := colwrite.Options{ChunkRows: 4, Compression: columns.CompressionNone}
	zstd := colwrite.Options{ChunkRows: 5, Compression: columns.CompressionZstd}
	s2 := colwrite.Options{ChunkRows: 3, Compression: columns.CompressionS2}
	return []faultShape{
		{"flip-none", writeFlipSegment(t, 12, 0, none), writeFlipSegment(t, 7, 5, none), flipQueries},
		{"flip-zstd", writeFlipSegment(t, 16, 1, zstd), writeFlipSegment(t, 7, 6, zstd), flipQueries},
		{"flip-s2", writeFlipSegment(t, 10, 2, s2), writeFlipSegment(t, 7, 7, s2), flipQueries},
		{"basic-rollup-s2", writeBasicSegment(t, 40, gen.BasicSeed, s2), writeBasicSegment(t, 9, gen.BasicSeed+1, s2), basicQueries},
		{"quantiles-zstd", writeQuantSegment(t, 30, 0, zstd), writeQuantSegment(t, 6, 3, zstd), quantQueries},
	}
}

// writeBasicSegment writes rows rows of the basic schema (gen.Basic), rolled up by minute.
func writeBasicSegment(t *testing.T, rows int, seed int64, opts colwrite.Options) []byte {
	g, err := gen.Basic(seed, rows)
	require.NoError(t, err)
	m, err := newGenMapping(g, true, columns.GranularityMinute)
	require.NoError(t, err)
	gr := &genRows{g: g, m: m}
	b, err := merger.NewBuilder(m.schema, merger.BuilderOptions{})
	require.NoError(t, err)
	defer b.Close()
	for {
		r := columns.Row{Dims: make([][]string, len(m.schema.Dimensions)), Metrics: make([]columns.Value, len(m.schema.Metrics))}
		if gr.ReadRow(&r) != nil {
			break
		}
		// The builder sketches a hyperUnique metric's source dimension; a segment written here
		// gets the sketch from the row.
		for i, met := range m.schema.Metrics {
			if met.Aggregator == agg.HyperUnique {
				a, _ := agg.Lookup(agg.HyperUnique)
				sks, err := a.SketchesOf(nil)
				require.NoError(t, err)
				sk := sks.New()
				require.NoError(t, sk.Insert(fmt.Appendf(nil, "u%d", r.Time%97)))
				r.Metrics[i].Sketch = sk
			}
		}
		require.NoError(t, b.Add(r))
	}
	return persistBuilder(t, b, opts)
}

func persistBuilder(t *testing.T, b *merger.Builder, opts colwrite.Options) []byte {
	dst := filepath.Join(t.TempDir(), "clean.seg")
	_, err := b.Persist(context.Background(), dst, merger.PersistOptions{ChunkRows: opts.ChunkRows, Compression: opts.Compression,
		Durability: medium.Durability{Sync: medium.SyncNone}})
	require.NoError(t, err)
	data, err := os.ReadFile(dst)
	require.NoError(t, err)
	return data
}

// writeQuantSegment writes n rows with a quantiles sketch, a multi-value dimension and nulls.
func writeQuantSegment(t *testing.T, n, seed int, opts colwrite.Options) []byte {
	schema := columns.Schema{
		Dimensions: []columns.Dimension{{Name: "svc"}, {Name: "host", MultiValue: true}},
		Metrics: []columns.Metric{
			{Name: "n", Aggregator: agg.Count},
			{Name: "lat_q", Aggregator: "quantiles", Field: "lat"},
			{Name: "lat_max", Aggregator: agg.DoubleMax, Field: "lat"},
		},
	}
	b, err := merger.NewBuilder(schema, merger.BuilderOptions{})
	require.NoError(t, err)
	defer b.Close()
	qa, ok := agg.Lookup("quantiles")
	require.True(t, ok)
	sks, err := qa.SketchesOf(nil)
	require.NoError(t, err)
	svcs := []string{"api", "db", "web"}
	for i := range n {
		k := i + seed
		r := columns.Row{Time: 1_700_000_000_000 + int64(i)*20_000, Dims: make([][]string, 2), Metrics: make([]columns.Value, 3)}
		if k%5 != 4 {
			r.Dims[0] = []string{svcs[k%3]}
		}
		if k%3 != 0 {
			r.Dims[1] = []string{fmt.Sprintf("h%d", k%4), fmt.Sprintf("h%d", (k+1)%4)}
		}
		lat := float64(k*7%50) + 0.5
		r.Metrics[0].Long = 1
		sk := sks.New()
		require.NoError(t, sk.Insert(strconv.AppendFloat(nil, lat, 'g', -1, 64)))
		r.Metrics[1].Sketch = sk
		if k%4 == 1 {
			r.Metrics[2].Null = true
		} else {
			r.Metrics[2].Double = lat
		}
		require.NoError(t, b.Add(r))
	}
	return persistBuilder(t, b, opts)
}

// faultRun runs the commands on one path and keeps their outputs.
type faultRun struct {
	t        *testing.T
	dir      string
	path     string // the segment the commands read
	other    string // the clean segment merged with it
	sh       faultShape
	n        int // outputs made, for unique names
	wantDump string
	wantPQ   []byte
	wantQ    []string
	wantMrg  string
}

func (r *faultRun) out(ext string) string {
	r.n++
	return filepath.Join(r.dir, fmt.Sprintf("out-%d.%s", r.n, ext))
}

func (r *faultRun) dump() (int, string, string) { return segtool(r.t, "dump", r.path) }

func (r *faultRun) export() (int, []byte, string) {
	out := r.out("parquet")
	defer os.Remove(out)
	code, _, errs := segtool(r.t, "export", "--out", out, "--medium", "heap", "--durability", "none", "--quiet", r.path)
	if code != 0 {
		return code, nil, errs
	}
	b, err := os.ReadFile(out)
	require.NoError(r.t, err)
	return code, b, errs
}

func (r *faultRun) query(k int) (int, string, string) {
	return segtool(r.t, append(append([]string{"query"}, r.sh.queries[k]...), r.path)...)
}

// merge merges the segment with the clean one; on success it verifies the output and, when it
// passes, returns its dump (verified false otherwise).
func (r *faultRun) merge() (code int, errs string, verified bool, dump string) {
	out := r.out("seg")
	defer os.Remove(out)
	code, _, errs = segtool(r.t, "merge", "--out", out, "--medium", "heap", "--durability", "none", "--quiet", r.path, r.other)
	if code != 0 {
		return code, errs, false, ""
	}
	if vc, _, _ := segtool(r.t, "verify", out); vc != 0 {
		return 0, "", false, ""
	}
	dc, d, derrs := segtool(r.t, "dump", out)
	require.Equal(r.t, 0, dc, "dump of a merge output that verifies: %s", derrs)
	return 0, "", true, d
}

func runFaultShape(t *testing.T, sh faultShape, perPart int, long bool, tl *faultTally) {
	dir := t.TempDir()
	r := &faultRun{t: t, dir: dir, path: filepath.Join(dir, "fault.seg"), other: filepath.Join(dir, "other.seg"), sh: sh}
	require.NoError(t, os.WriteFile(r.other, sh.other, 0o644))
	require.NoError(t, os.WriteFile(r.path, sh.seg, 0o644))
	// The clean answers.
	mustSegtool(t, "verify", r.path)
	mustSegtool(t, "verify", r.other)
	code, d, errs := r.dump()
	require.Equal(t, 0, code, errs)
	r.wantDump = d
	code, pq, errs := r.export()
	require.Equal(t, 0, code, errs)
	_, pq2, _ := r.export()
	require.Equal(t, pq, pq2, "export is deterministic")
	r.wantPQ = pq
	for k := range sh.queries {
		code, out, errs := r.query(k)
		require.Equal(t, 0, code, errs)
		require.Greater(t, strings.Count(out, "\n"), 1, "query %v: some groups", sh.queries[k])
		r.wantQ = append(r.wantQ, out)
	}
	code, errs, ok, md := r.merge()
	require.Equal(t, 0, code, errs)
	require.True(t, ok)
	r.wantMrg = md

	f, err := segsurgery.Parse(sh.seg)
	require.NoError(t, err)
	require.Equal(t, sh.seg, f.Assemble(), "surgery round trip")
	xors := []byte{0x01, 0x80, 0xff, 0x10, 0x04, 0x40}
	nx := 1
	if long {
		nx = 3
	}
	rng := rand.New(rand.NewPCG(37, uint64(len(sh.seg))))
	for i, p := range f.Parts {
		dec, err := f.Decode(i)
		require.NoError(t, err)
		n := dec.Len()
		for xi := range nx {
			for _, pos := range faultPositions(rng, n, perPart) {
				x := xors[(pos+xi)%len(xors)]
				if xi > 0 {
					x = xors[(pos+xi*2+1)%len(xors)]
				}
				what := fmt.Sprintf("%s: column %d part %s (%s, %d decoded bytes): byte %d ^ %#x", sh.name, p.Column, p.Kind, p.Enc, n, pos, x)
				r.fault(f.Faulted(i, dec, pos, x), what, tl)
			}
		}
	}
	require.NoError(t, os.WriteFile(r.path, sh.seg, 0o644))
}

// faultPositions picks up to k positions of n bytes: every one when n <= k, else the first,
// the last and k-2 more at random.
func faultPositions(rng *rand.Rand, n, k int) []int {
	if n <= k {
		out := make([]int, n)
		for i := range out {
			out[i] = i
		}
		return out
	}
	out := []int{0, n - 1}
	for len(out) < k {
		out = append(out, 1+rng.IntN(n-2))
	}
	return out[:k]
}

// fault runs the commands on one faulted file.
func (r *faultRun) fault(b []byte, what string, tl *faultTally) {
	t := r.t
	require.NoError(t, os.WriteFile(r.path, b, 0o644))
	tl.faults++
	code, _, verr := segtool(t, "verify", r.path)
	if code == 0 {
		tl.verifyPasses++
		return
	}
	what += " (verify: " + strings.TrimSpace(verr) + ")"
	tl.verifyRejects++
	tally := func(cmd string, code int, same bool, errs string) {
		c := tl.cmd(cmd)
		switch {
		case code != 0 && strings.Contains(errs, "corrupt") && strings.Contains(errs, r.path):
			c.corrupt++
		case code != 0:
			c.otherErr++
			tl.example(fmt.Sprintf("%s: %s fails without saying corrupt and naming the file: %s", what, cmd, errs))
		case same:
			c.same++
		default:
			c.wrong++
			tl.example(fmt.Sprintf("%s: %s exits 0 with a WRONG answer", what, cmd))
		}
	}
	code, d, errs := r.dump()
	tally("dump", code, d == r.wantDump, errs)
	code, pq, errs := r.export()
	tally("export", code, bytes.Equal(pq, r.wantPQ), errs)
	for k := range r.sh.queries {
		code, out, errs := r.query(k)
		tally("query", code, out == r.wantQ[k], errs)
	}
	code, errs, verified, md := r.merge()
	switch {
	case code != 0 && strings.Contains(errs, r.path) && strings.Contains(errs, "corrupt"):
		tl.merge.failNamed++
	case code != 0:
		tl.merge.failUnnamed++
		tl.example(fmt.Sprintf("%s: merge fails without naming the damaged input as corrupt: %s", what, errs))
	case !verified:
		tl.merge.outRejected++
		tl.example(fmt.Sprintf("%s: merge exits 0 with an output verify rejects", what))
	case md == r.wantMrg:
		tl.merge.same++
	default:
		tl.merge.laundered++
		tl.example(fmt.Sprintf("%s: merge LAUNDERS the fault: its output verifies and differs from the clean merge", what))
	}
}
