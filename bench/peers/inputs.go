package peers

// The inputWriters of Prepare: a segment in runs, a Parquet file, a CSV file.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/parquet-go/parquet-go"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/merger"
)

// segInput writes one segment through a Builder in runs of runRows rows (see Prepare).
type segInput struct {
	s                *Shape
	dst, tmp         string
	runRows, maxRuns int
	bld              *merger.Builder
	runs             []run // in row order
	nruns            int
	values           [][]string
	row              columns.Row
	vals             [MaxDims][1]string
}

func newSegInput(s *Shape, dst, tmp string, runRows, maxRuns int) (*segInput, error) {
	bld, err := merger.NewBuilder(s.Schema(), merger.BuilderOptions{})
	if err != nil {
		return nil, err
	}
	w := &segInput{s: s, dst: dst, tmp: tmp, runRows: runRows, maxRuns: maxRuns, bld: bld, values: s.Values(),
		row: columns.Row{Dims: make([][]string, len(s.Dims)), Metrics: make([]columns.Value, len(s.Metrics))}}
	return w, nil
}

func (w *segInput) write(rows []Row) error {
	for i := range rows {
		if w.bld.Rows() >= w.runRows {
			if err := w.persistRun(); err != nil {
				return err
			}
		}
		r := &rows[i]
		w.row.Time = r.Time
		for d := range w.row.Dims {
			w.vals[d][0] = w.values[d][r.Dims[d]]
			w.row.Dims[d] = w.vals[d][:]
		}
		for k := range w.row.Metrics {
			w.row.Metrics[k].Long = r.Mets[k]
		}
		if err := w.bld.Add(w.row); err != nil {
			return fmt.Errorf("segment %s: %w", w.dst, err)
		}
	}
	return nil
}

func (w *segInput) runPath() string {
	w.nruns++
	return filepath.Join(w.tmp, fmt.Sprintf("%s.run-%d", filepath.Base(w.dst), w.nruns))
}

// run is one run of a segment: its file and its level (0: persisted from the Builder; n+1:
// merged from MaxRuns runs of level n).
type run struct {
	path  string
	level int
}

func runPaths(runs []run) []string {
	paths := make([]string, len(runs))
	for i, r := range runs {
		paths[i] = r.path
	}
	return paths
}

// persistRun writes the builder's rows as a run of level 0 and empties the builder; then,
// while the last maxRuns runs are of one level, merges them into one of the next.
func (w *segInput) persistRun() error {
	p := w.runPath()
	if _, err := w.bld.Persist(context.Background(), p, merger.PersistOptions{Durability: noSync, Runs: true}); err != nil {
		return fmt.Errorf("segment %s: run: %w", w.dst, err)
	}
	w.bld.Reset()
	w.runs = append(w.runs, run{path: p})
	prepareRuns.Add(1)
	for {
		n, level := len(w.runs), w.runs[len(w.runs)-1].level
		k := 0
		for k < n && w.runs[n-1-k].level == level {
			k++
		}
		if k < w.maxRuns {
			return nil
		}
		group := runPaths(w.runs[n-k:])
		p := w.runPath()
		err := withSegments(group, func(segs []*columns.Segment) error {
			_, err := merger.Merge(context.Background(), segs, p, merger.Options{Durability: noSync})
			return err
		})
		if err != nil {
			return fmt.Errorf("segment %s: merge %d runs: %w", w.dst, k, err)
		}
		if err := removeAll(group); err != nil {
			return err
		}
		w.runs = append(w.runs[:n-k], run{path: p, level: level + 1})
		prepareRunMerges.Add(1)
	}
}

func (w *segInput) finish() (int64, error) {
	defer w.abortRuns()
	var res merger.Result
	err := withSegments(runPaths(w.runs), func(segs []*columns.Segment) (err error) {
		if len(segs) == 0 {
			res, err = w.bld.Persist(context.Background(), w.dst, merger.PersistOptions{Durability: noSync, Replace: true})
		} else {
			res, err = w.bld.PersistAfter(context.Background(), segs, w.dst, merger.PersistOptions{Durability: noSync, Replace: true, Runs: true})
		}
		return err
	})
	if cerr := w.bld.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, fmt.Errorf("segment %s: %w", w.dst, err)
	}
	return res.Bytes, nil
}

func (w *segInput) abortRuns() {
	_ = removeAll(runPaths(w.runs))
	w.runs = nil
}

func (w *segInput) abort() {
	w.abortRuns()
	_ = w.bld.Close()
	_ = os.Remove(w.dst)
}

// withSegments opens the segments at paths, calls f with them and closes them.
func withSegments(paths []string, f func([]*columns.Segment) error) (err error) {
	segs := make([]*columns.Segment, 0, len(paths))
	defer func() {
		for _, s := range segs {
			if cerr := s.Close(); cerr != nil && err == nil {
				err = cerr
			}
		}
	}()
	for _, p := range paths {
		s, err := columns.Open(p)
		if err != nil {
			return err
		}
		segs = append(segs, s)
	}
	return f(segs)
}

func removeAll(paths []string) error {
	var errs []error
	for _, p := range paths {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// parquetInput writes one Parquet file as WriteParquet does, from rows in batches.
type parquetInput struct {
	dst string
	f   *os.File
	w   parquetRowWriter
}

func newParquetInput(s *Shape, dst string, opts ...parquet.WriterOption) (*parquetInput, error) {
	f, err := os.Create(dst)
	if err != nil {
		return nil, err
	}
	return &parquetInput{dst: dst, f: f, w: s.parquet.newWriter(s, f, opts...)}, nil
}

func (p *parquetInput) write(rows []Row) error {
	if err := p.w.Write(rows); err != nil {
		return fmt.Errorf("parquet %s: %w", p.dst, err)
	}
	return nil
}

func (p *parquetInput) finish() (int64, error) {
	if err := p.w.Close(); err != nil {
		return 0, errors.Join(fmt.Errorf("parquet %s: %w", p.dst, err), p.f.Close())
	}
	return fileSize(p.f)
}

func (p *parquetInput) abort() {
	_ = p.f.Close()
	_ = os.Remove(p.dst)
}

// csvInput writes one CSV file as WriteCSV does (a header line, a line per row), from rows in
// batches.
type csvInput struct {
	dst    string
	f      *os.File
	w      *bufio.Writer
	n      int64
	nd, nm int
	values [][]string
	line   []byte
}

func newCSVInput(s *Shape, dst string) (*csvInput, error) {
	f, err := os.Create(dst)
	if err != nil {
		return nil, err
	}
	c := &csvInput{dst: dst, f: f, w: bufio.NewWriterSize(f, 1<<20), nd: len(s.Dims), nm: len(s.Metrics), values: s.Values()}
	c.line = append(append(c.line, s.CSVHeader()...), '\n')
	n, err := c.w.Write(c.line)
	c.n += int64(n)
	if err != nil {
		c.abort()
		return nil, fmt.Errorf("csv %s: %w", dst, err)
	}
	return c, nil
}

func (c *csvInput) write(rows []Row) error {
	for i := range rows {
		r := &rows[i]
		line := strconv.AppendInt(c.line[:0], r.Time, 10)
		for d := range c.nd {
			line = append(append(line, ','), c.values[d][r.Dims[d]]...)
		}
		for m := range c.nm {
			line = strconv.AppendInt(append(line, ','), r.Mets[m], 10)
		}
		line = append(line, '\n')
		n, err := c.w.Write(line)
		c.n += int64(n)
		if err != nil {
			return fmt.Errorf("csv %s: %w", c.dst, err)
		}
		c.line = line
	}
	return nil
}

func (c *csvInput) finish() (int64, error) {
	if err := c.w.Flush(); err != nil {
		return 0, errors.Join(fmt.Errorf("csv %s: %w", c.dst, err), c.f.Close())
	}
	if err := c.f.Close(); err != nil {
		return 0, fmt.Errorf("csv %s: %w", c.dst, err)
	}
	return c.n, nil
}

func (c *csvInput) abort() {
	_ = c.f.Close()
	_ = os.Remove(c.dst)
}
