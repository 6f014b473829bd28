package bench

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/internal/multierr"
)

// BenchmarkReadPath reads the segments (*.seg) of the directory WRITEOUT_BENCH_SEGMENTS (the
// peers' /work/data/p3m, say) as a merge reads its inputs: each opened, and every time, every
// dimension's ids and every long metric read chunk by chunk through the columns cursors, the
// pages released every 2^17 rows. Each iteration opens the segments anew, so it pays the
// read-path checks (the parts' CRCs and structural checks) once, as a merge does. Skipped
// without the variable. Compare two commits' test binaries (go test -c) run alternately.
func BenchmarkReadPath(b *testing.B) {
	dir := os.Getenv("WRITEOUT_BENCH_SEGMENTS")
	if dir == "" {
		b.Skip("WRITEOUT_BENCH_SEGMENTS not set")
	}
	paths, err := filepath.Glob(filepath.Join(dir, "*.seg"))
	if err != nil || len(paths) == 0 {
		b.Fatalf("no segments in %s: %v", dir, err)
	}
	b.ReportAllocs()
	for b.Loop() {
		var rows int
		for _, p := range paths {
			n, err := readSegment(p)
			if err != nil {
				b.Fatal(err)
			}
			rows += n
		}
		b.ReportMetric(float64(rows), "rows/op")
	}
}

// readSegment reads the segment at path as BenchmarkReadPath says, and returns its row count.
func readSegment(path string) (n int, err error) {
	seg, err := columns.Open(path)
	if err != nil {
		return 0, err
	}
	defer func() { err = multierr.Join(err, seg.Close()) }()
	// A chunker reads the chunk holding row and returns the row after it.
	type chunker func(row int) (next int, err error)
	var releases []func()
	defer func() {
		for _, r := range releases {
			r()
		}
	}()
	tc := seg.Time().Cursor()
	releases = append(releases, tc.Release)
	cols := []chunker{func(row int) (int, error) {
		first, vals, err := tc.Chunk(row)
		return first + len(vals), err
	}}
	sc := seg.Schema()
	for _, d := range sc.Dimensions {
		if d.Raw {
			continue
		}
		c, err := seg.Dim(d.Name)
		if err != nil {
			return 0, err
		}
		cur := c.Cursor()
		releases = append(releases, cur.Release)
		cols = append(cols, func(row int) (int, error) {
			first, ids, offs, err := cur.Chunk(row)
			if offs != nil {
				return first + len(offs) - 1, err
			}
			return first + len(ids), err
		})
	}
	for _, m := range sc.Metrics {
		c, err := seg.Long(m.Name)
		if err != nil {
			continue // not a long metric
		}
		cur := c.Cursor()
		releases = append(releases, cur.Release)
		cols = append(cols, func(row int) (int, error) {
			first, vals, err := cur.Chunk(row)
			return first + len(vals), err
		})
	}
	rows := seg.Rows()
	release := 1 << 17
	// A range of rows at a time, as a merge: a chunk of times, then every column up to its end.
	for r := 0; r < rows; {
		end, err := cols[0](r)
		if err != nil {
			return 0, err
		}
		for _, col := range cols[1:] {
			for q := r; q < end; {
				if q, err = col(q); err != nil {
					return 0, err
				}
			}
		}
		r = end
		if r >= release {
			if err := seg.ReleasePages(); err != nil {
				return 0, err
			}
			release += 1 << 17
		}
	}
	return rows, nil
}
