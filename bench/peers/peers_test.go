package peers

import (
	"hash/maphash"
	"path/filepath"
	"slices"
	"testing"

	"github.com/writeout/writeout/columns"
)

// digest is what TestPeersAgree compares between systems: rows, the sum of each metric, and
// an order-free digest of the rows (the sum of a hash of each).
type digest struct {
	rows       int
	m1, m2, m3 int64
	rowsHash   uint64
}

var seed = maphash.MakeSeed()

func digestOf(ev []Event) digest {
	d := digest{rows: len(ev)}
	for i := range ev {
		e := &ev[i]
		d.m1 += e.M1
		d.m2 += e.M2
		d.m3 += e.M3
		d.rowsHash += maphash.Comparable(seed, *e)
	}
	return d
}

// unsorted returns the first row out of (time, d1, d2, d3) order, or -1.
func unsorted(ev []Event) int {
	for i := 1; i < len(ev); i++ {
		if CompareEvents(&ev[i-1], &ev[i]) > 0 {
			return i
		}
	}
	return -1
}

// rollupHour is the rollup-hour job computed in Go: rows grouped by (hour, d1, d2), d3 "",
// metrics summed, in group order.
func rollupHour(ev []Event) []Event {
	type key struct {
		t      int64
		d1, d2 string
	}
	m := map[key]*Event{}
	for _, e := range ev {
		k := key{e.Time - e.Time%3_600_000, e.D1, e.D2}
		g := m[k]
		if g == nil {
			g = &Event{Time: k.t, D1: k.d1, D2: k.d2}
			m[k] = g
		}
		g.M1 += e.M1
		g.M2 += e.M2
		g.M3 += e.M3
	}
	out := make([]Event, 0, len(m))
	for _, g := range m {
		out = append(out, *g)
	}
	slices.SortFunc(out, func(a, b Event) int { return CompareEvents(&a, &b) })
	return out
}

// TestPeersAgree runs every job on every system on 20,000 rows and checks that the outputs
// hold the same rows: for the merges the same row count, metric sums and multiset of rows, in
// (time, d1, d2, d3) order; for rollup-hour (writeout and DuckDB) exactly the rows computed in
// Go. So BenchmarkPeers compares equal work.
func TestPeersAgree(t *testing.T) {
	dir := t.TempDir()
	fxs, ev := makeFixtures(t, dir, 20_000)
	want := digestOf(ev)
	wantRollup := rollupHour(ev)
	db, err := OpenDuckDB()
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, layout := range []Layout{Contiguous, Overlapping} {
		fx := fxs[layout]
		out := map[string][]Event{}

		dst := filepath.Join(dir, string(layout)+"-merged.seg")
		res, err := WriteoutMerge(bg, fx.Segs, dst, columns.CompressionDefault)
		if err != nil {
			t.Fatal(err)
		}
		if res.RowsOut != int64(len(ev)) {
			t.Errorf("%s: writeout: RowsOut %d, want %d", layout, res.RowsOut, len(ev))
		}
		out["writeout"] = readSegment(t, dst)

		dst = filepath.Join(dir, string(layout)+"-duckdb.parquet")
		n, err := db.Exec(bg, MergeSQL(fx.Parquets, dst))
		if err != nil {
			t.Fatal(err)
		}
		if n != int64(len(ev)) {
			t.Errorf("%s: duckdb: COPY wrote %d rows, want %d", layout, n, len(ev))
		}
		if out["duckdb"], err = ReadParquet(dst); err != nil {
			t.Fatal(err)
		}

		dst = filepath.Join(dir, string(layout)+"-parquet-go.parquet")
		if _, err := ParquetGoMerge(fx.Parquets, dst); err != nil {
			t.Fatal(err)
		}
		if out["parquet-go"], err = ReadParquet(dst); err != nil {
			t.Fatal(err)
		}

		for _, system := range []string{"writeout", "duckdb", "parquet-go"} {
			got := out[system]
			if d := digestOf(got); d != want {
				t.Errorf("%s: %s: digest %+v, want %+v", layout, system, d, want)
			}
			if i := unsorted(got); i >= 0 {
				t.Errorf("%s: %s: row %d out of order: %+v after %+v", layout, system, i, got[i], got[i-1])
			}
		}

		// rollup-hour: writeout and DuckDB.
		dst = filepath.Join(dir, string(layout)+"-rollup.seg")
		if _, err := WriteoutRollupHour(bg, fx.Segs, dst, columns.CompressionZstd); err != nil {
			t.Fatal(err)
		}
		rollups := map[string][]Event{"writeout": readSegment(t, dst)}
		dst = filepath.Join(dir, string(layout)+"-rollup-duckdb.parquet")
		if _, err := db.Exec(bg, RollupSQL(fx.Parquets, dst)); err != nil {
			t.Fatal(err)
		}
		if rollups["duckdb"], err = ReadParquet(dst); err != nil {
			t.Fatal(err)
		}
		for system, got := range rollups {
			if !slices.Equal(got, wantRollup) {
				i := 0
				for i < min(len(got), len(wantRollup)) && got[i] == wantRollup[i] {
					i++
				}
				t.Errorf("%s: rollup-hour: %s: %d rows, want %d; first difference at row %d", layout, system, len(got), len(wantRollup), i)
			}
		}
		t.Logf("%s: %d rows merged by each system; rollup-hour %d groups of (hour, d1, d2)",
			layout, len(ev), len(wantRollup))
	}
}
