package bench

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/writeout/writeout/internal/multierr"
	"github.com/writeout/writeout/internal/parquetpool"
	"github.com/writeout/writeout/tmpfile"
)

// BenchmarkParquetPool is issue 13's bar 5: parquet-go writes a 25-column table (10 int64, 7
// double, 8 string columns; WRITEOUT_BENCH_PARQUET_ROWS rows, default 2,000,000, in row groups
// of 500,000) into a file, staging its column pages through the writeout pool on a tmpfile
// medium ("writeout-tmpfile") or through parquet-go's own parquet.NewFileBufferPool ("file").
// peak-fds is the most descriptors the process held beyond those it held before the write
// (sampled every 10,000 rows, Linux only; the output file counts as one). The first iteration
// of a process pays its warm-up (about twice the time of later ones, whichever pool runs
// first): compare with benchstat over -count 5 or more runs.
func BenchmarkParquetPool(b *testing.B) {
	rows := 2_000_000
	if s := os.Getenv("WRITEOUT_BENCH_PARQUET_ROWS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			b.Fatalf("WRITEOUT_BENCH_PARQUET_ROWS=%q: want a positive integer", s)
		}
		rows = n
	}
	pools := []struct {
		name string
		open func(dir string) (parquet.BufferPool, func() error, error)
	}{
		{"pool=writeout-tmpfile", func(dir string) (parquet.BufferPool, func() error, error) {
			m, err := tmpfile.New(tmpfile.Options{Dir: dir})
			if err != nil {
				return nil, nil, err
			}
			pool := parquetpool.New(m)
			return pool, func() error { return multierr.Join(pool.Close(), m.Close()) }, nil
		}},
		{"pool=file", func(dir string) (parquet.BufferPool, func() error, error) {
			return parquet.NewFileBufferPool(dir, "parquet-buffer-*"), func() error { return nil }, nil
		}},
	}
	for _, p := range pools {
		b.Run(p.name, func(b *testing.B) {
			dir := b.TempDir()
			b.ReportAllocs()
			peak := 0
			for b.Loop() {
				fds, size, err := writeWideParquet(dir, rows, p.open)
				if err != nil {
					b.Fatal(err)
				}
				b.SetBytes(size)
				peak = max(peak, fds)
			}
			if runtime.GOOS == "linux" {
				b.ReportMetric(float64(peak), "peak-fds")
			}
		})
	}
}

type wideParquetRow struct {
	I00 int64   `parquet:"i00"`
	I01 int64   `parquet:"i01"`
	I02 int64   `parquet:"i02"`
	I03 int64   `parquet:"i03"`
	I04 int64   `parquet:"i04"`
	I05 int64   `parquet:"i05"`
	I06 int64   `parquet:"i06"`
	I07 int64   `parquet:"i07"`
	I08 int64   `parquet:"i08"`
	I09 int64   `parquet:"i09"`
	F00 float64 `parquet:"f00"`
	F01 float64 `parquet:"f01"`
	F02 float64 `parquet:"f02"`
	F03 float64 `parquet:"f03"`
	F04 float64 `parquet:"f04"`
	F05 float64 `parquet:"f05"`
	F06 float64 `parquet:"f06"`
	S00 string  `parquet:"s00"`
	S01 string  `parquet:"s01"`
	S02 string  `parquet:"s02"`
	S03 string  `parquet:"s03"`
	S04 string  `parquet:"s04"`
	S05 string  `parquet:"s05"`
	S06 string  `parquet:"s06"`
	S07 string  `parquet:"s07"`
}

var parquetWords = func() []string {
	w := make([]string, 1000)
	for i := range w {
		w[i] = "value-" + strconv.Itoa(i*7919)
	}
	return w
}()

func fillWide(r *wideParquetRow, i int) {
	x := uint64(i) * 0x9e3779b97f4a7c15
	words := parquetWords
	r.I00 = int64(x>>0) + 0
	r.I01 = int64(x>>1) + 1
	r.I02 = int64(x>>2) + 2
	r.I03 = int64(x>>3) + 3
	r.I04 = int64(x>>4) + 4
	r.I05 = int64(x>>5) + 5
	r.I06 = int64(x>>6) + 6
	r.I07 = int64(x>>7) + 7
	r.I08 = int64(x>>8) + 8
	r.I09 = int64(x>>9) + 9
	r.F00 = float64(x%100000) / 1.5
	r.F01 = float64(x%100000) / 2.5
	r.F02 = float64(x%100000) / 3.5
	r.F03 = float64(x%100000) / 4.5
	r.F04 = float64(x%100000) / 5.5
	r.F05 = float64(x%100000) / 6.5
	r.F06 = float64(x%100000) / 7.5
	r.S00 = words[(x>>0)%uint64(len(words))]
	r.S01 = words[(x>>3)%uint64(len(words))]
	r.S02 = words[(x>>6)%uint64(len(words))]
	r.S03 = words[(x>>9)%uint64(len(words))]
	r.S04 = words[(x>>12)%uint64(len(words))]
	r.S05 = words[(x>>15)%uint64(len(words))]
	r.S06 = words[(x>>18)%uint64(len(words))]
	r.S07 = words[(x>>21)%uint64(len(words))]
}

func countFDs() int {
	if runtime.GOOS != "linux" {
		return 0
	}
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 0
	}
	return len(entries)
}

// writeWideParquet writes rows rows through the pool open makes and returns the peak of extra
// descriptors held during the write and the size of the Parquet file.
func writeWideParquet(dir string, rows int, open func(string) (parquet.BufferPool, func() error, error)) (peak int, size int64, err error) {
	before := countFDs()
	pool, closePool, err := open(dir)
	if err != nil {
		return 0, 0, err
	}
	defer func() { err = multierr.Join(err, closePool()) }()
	f, err := os.Create(filepath.Join(dir, "out.parquet"))
	if err != nil {
		return 0, 0, err
	}
	defer func() { err = multierr.Join(err, f.Close(), os.Remove(f.Name())) }()
	w := parquet.NewGenericWriter[wideParquetRow](f, parquet.ColumnPageBuffers(pool), parquet.MaxRowsPerRowGroup(500_000))
	batch := make([]wideParquetRow, 10_000)
	for start := 0; start < rows; start += len(batch) {
		n := min(len(batch), rows-start)
		for i := range n {
			fillWide(&batch[i], start+i)
		}
		if _, err := w.Write(batch[:n]); err != nil {
			return 0, 0, multierr.Join(err, w.Close())
		}
		peak = max(peak, countFDs()-before)
	}
	if err := w.Close(); err != nil {
		return 0, 0, err
	}
	info, err := f.Stat()
	if err != nil {
		return 0, 0, err
	}
	return peak, info.Size(), nil
}
