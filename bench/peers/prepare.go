package peers

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/parquet-go/parquet-go"
)

// Prepare writes the inputs of any number of rows in bounded memory: the rows come from
// Stream, and every file is written as they pass, each layout's at once. The files are those
// of the in-memory path (Generate, Split, WriteFixture, WriteCSVInputs), byte for byte:
//
//   - a segment is built in runs of a bounded number of rows, each persisted as a run
//     (merger.PersistOptions.Runs); the last rows stay in the Builder, merged after the runs
//     (Builder.PersistAfter), the same rows in the same order as one Builder of them all gives.
//     Runs merge as they come, level by level: MaxRuns runs of one level (the last ones
//     written, so the order stays) merge into one run of the next, so that an input has at
//     most MaxRuns-1 runs of each level and each row is merged again about log(runs, MaxRuns)
//     times.
//   - a Parquet file is written through the same GenericWriter, handed rows in multiples of
//     64 (the rows it writes between its page-size checks, so its pages fall where one Write
//     of every row puts them), its column pages buffered in temp files instead of memory.
//   - a CSV file is written line by line.
//
// Memory is then the batch being written, the builders' runs and, at the end of each input,
// the merge of its runs: merger.Merge's own memory, which issue 34 bounds.

// prepareRuns and prepareRunMerges count the runs persisted and the merges of runs, for tests.
var prepareRuns, prepareRunMerges atomic.Int64

// DefaultRunRows is the default of PrepareOptions.RunRows: the Builders of both layouts' runs
// of Events then hold about 60 MiB.
const DefaultRunRows = 1 << 19

// DefaultMaxRuns is how many runs of one level an input's segment may have before they are
// merged into one run of the next level.
const DefaultMaxRuns = 64

// PrepareOptions configure Prepare. Rows is required; the rest has zero-value defaults.
type PrepareOptions struct {
	// Shape is the table; nil means Events.
	Shape *Shape
	// Rows is the number of rows, at least Inputs.
	Rows int
	// Layouts are the layouts written; nil means Contiguous and Overlapping.
	Layouts []Layout
	// NoCSV skips the CSV files of the ingest-csv job (dir/csv), the largest of the inputs.
	NoCSV bool
	// BatchRows is Stream's batch; 0 means DefaultBatchRows.
	BatchRows int
	// RunRows are the rows of a segment's runs: RunRows in the contiguous layout (one input
	// at a time), RunRows/Inputs in the overlapping one (every input at once). 0 means
	// DefaultRunRows.
	RunRows int
	// MaxRuns is the runs of one level an input may have before they are merged into one of
	// the next level (see above); 0 means DefaultMaxRuns.
	MaxRuns int
	// TempDir holds the buckets, runs and Parquet page buffers (in a directory of their own,
	// removed at the end); "" means dir.
	TempDir string
}

// Manifest describes what Prepare wrote in a directory; Prepare writes it last, as
// manifest.json, so a directory with one holds complete inputs.
type Manifest struct {
	Shape   string   `json:"shape"`
	Rows    int      `json:"rows"`
	Layouts []Layout `json:"layouts"`
	// SegBytes and ParquetBytes are the bytes of each layout's inputs.
	SegBytes     map[Layout]int64 `json:"seg_bytes"`
	ParquetBytes map[Layout]int64 `json:"parquet_bytes"`
	// CSVBytes are the bytes of the CSV inputs under csv/ (0: none written).
	CSVBytes int64 `json:"csv_bytes"`
}

// ManifestName is the name of the manifest file in a prepared directory.
const ManifestName = "manifest.json"

// ReadManifest reads dir's manifest. A directory without one gives an error wrapping
// os.ErrNotExist.
func ReadManifest(dir string) (Manifest, error) {
	var m Manifest
	b, err := os.ReadFile(filepath.Join(dir, ManifestName))
	if err != nil {
		return m, fmt.Errorf("peers: %w", err)
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("peers: %s: %w", filepath.Join(dir, ManifestName), err)
	}
	return m, nil
}

// Prepare writes under dir the inputs of o.Rows rows of o.Shape: for each layout Inputs
// segments and Inputs Parquet files at FixturePaths(dir, layout), the CSV files and their spec
// under dir/csv unless o.NoCSV, and the manifest. Memory does not grow with o.Rows but for the
// merge of each segment's runs (see above).
func Prepare(dir string, o PrepareOptions) (m Manifest, err error) {
	s := o.Shape
	if s == nil {
		s = Events
	}
	if o.Rows < Inputs {
		return m, fmt.Errorf("peers: prepare: %d rows: want at least %d", o.Rows, Inputs)
	}
	layouts := o.Layouts
	if layouts == nil {
		layouts = []Layout{Contiguous, Overlapping}
	}
	runRows := o.RunRows
	if runRows <= 0 {
		runRows = DefaultRunRows
	}
	maxRuns := o.MaxRuns
	if maxRuns <= 0 {
		maxRuns = DefaultMaxRuns
	}
	if maxRuns < 2 {
		return m, fmt.Errorf("peers: prepare: MaxRuns %d: want at least 2", maxRuns)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return m, fmt.Errorf("peers: prepare: %w", err)
	}
	if err := os.Remove(filepath.Join(dir, ManifestName)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return m, fmt.Errorf("peers: prepare: %w", err)
	}
	tmp, err := os.MkdirTemp(cmp.Or(o.TempDir, dir), ".peers-prepare-*")
	if err != nil {
		return m, fmt.Errorf("peers: prepare: %w", err)
	}
	defer func() {
		if rerr := os.RemoveAll(tmp); rerr != nil && err == nil {
			err = fmt.Errorf("peers: prepare: %w", rerr)
		}
	}()
	pages := parquet.ColumnPageBuffers(parquet.NewFileBufferPool(tmp, "pages-*"))
	m = Manifest{Shape: s.Name, Rows: o.Rows, Layouts: layouts, SegBytes: map[Layout]int64{}, ParquetBytes: map[Layout]int64{}}
	type named struct {
		name string
		sp   *splitter
		n    func(int64) // records the bytes written in m
	}
	var sinks []named
	for k, l := range layouts {
		if l != Contiguous && l != Overlapping {
			return m, fmt.Errorf("peers: prepare: unknown layout %q", l)
		}
		if slices.Contains(layouts[:k], l) {
			return m, fmt.Errorf("peers: prepare: layout %q given twice", l)
		}
		fx := FixturePaths(dir, l)
		rr := runRows
		if l == Overlapping {
			rr = max(1, runRows/Inputs)
		}
		seg := func(i int) (inputWriter, error) {
			return newSegInput(s, fx.Segs[i], tmp, rr, maxRuns)
		}
		pq := func(i int) (inputWriter, error) { return newParquetInput(s, fx.Parquets[i], pages) }
		sinks = append(sinks, named{string(l) + " segments", newSplitter(s, l, seg), func(n int64) { m.SegBytes[l] = n }},
			named{string(l) + " parquet", newSplitter(s, l, pq), func(n int64) { m.ParquetBytes[l] = n }})
	}
	if !o.NoCSV {
		csvDir := filepath.Join(dir, "csv")
		if err := os.MkdirAll(csvDir, 0o755); err != nil {
			return m, fmt.Errorf("peers: prepare: %w", err)
		}
		if err := os.WriteFile(filepath.Join(csvDir, "spec.json"), []byte(s.IngestSpec()), 0o644); err != nil {
			return m, fmt.Errorf("peers: prepare: %w", err)
		}
		paths := csvPaths(csvDir)
		sinks = append(sinks, named{"csv", newSplitter(s, Contiguous, func(i int) (inputWriter, error) {
			return newCSVInput(s, paths[i])
		}), func(n int64) { m.CSVBytes = n }})
	}
	// each runs f on every sink at once and returns their errors, each named.
	each := func(f func(sp *splitter) error) error {
		errs := make([]error, len(sinks))
		var wg sync.WaitGroup
		for k, sk := range sinks {
			wg.Go(func() {
				if err := f(sk.sp); err != nil {
					errs[k] = fmt.Errorf("peers: prepare: %s: %w", sk.name, err)
				}
			})
		}
		wg.Wait()
		return errors.Join(errs...)
	}
	defer func() {
		if err != nil {
			for _, sk := range sinks {
				sk.sp.abort()
			}
		}
	}()
	err = Stream(s, o.Rows, StreamOptions{BatchRows: o.BatchRows, TempDir: tmp}, func(rows []Row) error {
		return each(func(sp *splitter) error { return sp.write(rows) })
	})
	if err != nil {
		return m, err
	}
	if err := each(func(sp *splitter) error { return sp.finish() }); err != nil {
		return m, err
	}
	for _, sk := range sinks {
		sk.n(sk.sp.bytes)
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return m, fmt.Errorf("peers: prepare: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, ManifestName), append(b, '\n'), 0o644); err != nil {
		return m, fmt.Errorf("peers: prepare: %w", err)
	}
	return m, nil
}

// inputWriter writes one input file from rows in order.
type inputWriter interface {
	write(rows []Row) error
	// finish completes the file and returns its bytes.
	finish() (int64, error)
	// abort releases what the writer holds and removes its file.
	abort()
}

// splitter splits rows in order into the Inputs inputs of a layout, as Split does, and
// writes each through an inputWriter: in the contiguous layout one at a time (each finished
// when the rows pass its end), in the overlapping one all at once.
type splitter struct {
	layout Layout
	open   func(i int) (inputWriter, error)
	w      [Inputs]inputWriter
	done   [Inputs]bool
	ends   [Inputs]int64 // contiguous: input i holds the times before ends[i]
	cur    int           // contiguous: the input being written
	next   int64         // overlapping: the rows written so far
	bytes  int64         // the finished inputs' bytes
}

func newSplitter(s *Shape, l Layout, open func(i int) (inputWriter, error)) *splitter {
	sp := &splitter{layout: l, open: open}
	for i := range Inputs {
		sp.ends[i] = s.Start + s.Span*int64(i+1)/Inputs
	}
	return sp
}

func (sp *splitter) get(i int) (inputWriter, error) {
	if sp.w[i] == nil {
		w, err := sp.open(i)
		if err != nil {
			return nil, err
		}
		sp.w[i] = w
	}
	return sp.w[i], nil
}

func (sp *splitter) finishInput(i int) error {
	w, err := sp.get(i)
	if err != nil {
		return err
	}
	n, err := w.finish()
	if err != nil {
		return fmt.Errorf("input %d: %w", i, err)
	}
	sp.done[i], sp.bytes = true, sp.bytes+n
	return nil
}

func (sp *splitter) write(rows []Row) error {
	if sp.layout == Overlapping {
		for j := range rows {
			w, err := sp.get(int(sp.next % Inputs))
			if err != nil {
				return err
			}
			if err := w.write(rows[j : j+1]); err != nil {
				return err
			}
			sp.next++
		}
		return nil
	}
	for len(rows) > 0 {
		end := sp.ends[sp.cur]
		n := sort.Search(len(rows), func(k int) bool { return rows[k].Time >= end })
		if n > 0 {
			w, err := sp.get(sp.cur)
			if err != nil {
				return err
			}
			if err := w.write(rows[:n]); err != nil {
				return err
			}
			rows = rows[n:]
		}
		if len(rows) > 0 {
			if err := sp.finishInput(sp.cur); err != nil {
				return err
			}
			sp.cur++
		}
	}
	return nil
}

// finish finishes every input not finished yet (an input no row went to is written empty).
func (sp *splitter) finish() error {
	for i := range Inputs {
		if !sp.done[i] {
			if err := sp.finishInput(i); err != nil {
				return err
			}
		}
	}
	return nil
}

func (sp *splitter) abort() {
	for i, w := range sp.w {
		if w != nil && !sp.done[i] {
			w.abort()
		}
	}
}
