package peers

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/parquet-go/parquet-go"
)

// sorting is the sort order the Parquet files of a shape declare: time, then its dimensions.
func (s *Shape) sorting() parquet.SortingOption {
	cols := []parquet.SortingColumn{parquet.Ascending("time")}
	for _, d := range s.Dims {
		cols = append(cols, parquet.Ascending(d))
	}
	return parquet.SortingColumns(cols...)
}

// writerOptions are the options of every Parquet writer of the shape: zstd, the sort order
// declared.
func (s *Shape) writerOptions() []parquet.WriterOption {
	return []parquet.WriterOption{parquet.Compression(&parquet.Zstd), parquet.SortingWriterConfig(s.sorting())}
}

// writerOptions are the options of every Parquet writer of Events: zstd, sorted by (time, d1,
// d2, d3).
func writerOptions() []parquet.WriterOption { return Events.writerOptions() }

// WriteParquet writes events (in (time, d1, d2, d3) order) as a zstd Parquet file at dst that
// declares that sort order, through parquet-go's GenericWriter with its default row groups.
func WriteParquet(dst string, ev []Event) (int64, error) {
	f, err := os.Create(dst)
	if err != nil {
		return 0, err
	}
	w := parquet.NewGenericWriter[Event](f, writerOptions()...)
	if _, err := w.Write(ev); err != nil {
		return 0, errors.Join(fmt.Errorf("peers: parquet %s: %w", dst, err), f.Close())
	}
	if err := w.Close(); err != nil {
		return 0, errors.Join(fmt.Errorf("peers: parquet %s: %w", dst, err), f.Close())
	}
	return fileSize(f)
}

// fileSize closes f and returns its size.
func fileSize(f *os.File) (int64, error) {
	st, err := f.Stat()
	if err != nil {
		return 0, errors.Join(err, f.Close())
	}
	return st.Size(), f.Close()
}

// ParquetGoMerge is Events.ParquetGoMerge.
func ParquetGoMerge(paths []string, dst string) (int64, error) {
	return Events.ParquetGoMerge(paths, dst)
}

// ParquetGoMerge merges the Parquet files of the shape at paths into dst: every row group of
// every file goes to parquet.MergeRowGroups sorted by (time, dimensions), whose rows are copied
// into a zstd GenericWriter declaring that order. No sync.
func (s *Shape) ParquetGoMerge(paths []string, dst string) (int64, error) {
	return s.parquet.merge(s, paths, dst)
}

// parquetCodec writes and merges the Parquet files of one shape, through parquet-go's
// GenericWriter of the shape's Go type.
type parquetCodec interface {
	newWriter(s *Shape, w io.Writer, opts ...parquet.WriterOption) parquetRowWriter
	merge(s *Shape, paths []string, dst string) (int64, error)
}

// parquetRowWriter writes Rows to a Parquet file. Close flushes and writes the footer; it
// does not close the file.
type parquetRowWriter interface {
	Write(rows []Row) error
	Close() error
}

// parquetOf is the parquetCodec of the shape whose Go type is T; fill makes a T of a Row.
type parquetOf[T any] struct {
	fill func(values [][]string, r *Row, t *T)
}

// parquetWriteRows is how many rows a parquetRowWriter hands GenericWriter.Write at once: a
// multiple of 64, the rows GenericWriter writes between its page-size checks, so that the
// pages (and the file) are those of one Write of every row.
const parquetWriteRows = 64 * 256

func (c parquetOf[T]) newWriter(s *Shape, w io.Writer, opts ...parquet.WriterOption) parquetRowWriter {
	return &rowWriterOf[T]{
		w:      parquet.NewGenericWriter[T](w, append(s.writerOptions(), opts...)...),
		fill:   c.fill,
		values: s.Values(),
		buf:    make([]T, 0, parquetWriteRows),
	}
}

type rowWriterOf[T any] struct {
	w      *parquet.GenericWriter[T]
	fill   func(values [][]string, r *Row, t *T)
	values [][]string
	buf    []T
}

func (p *rowWriterOf[T]) Write(rows []Row) error {
	for i := range rows {
		if len(p.buf) == cap(p.buf) {
			if err := p.flush(); err != nil {
				return err
			}
		}
		p.buf = p.buf[:len(p.buf)+1]
		p.fill(p.values, &rows[i], &p.buf[len(p.buf)-1])
	}
	return nil
}

func (p *rowWriterOf[T]) flush() error {
	n, err := p.w.Write(p.buf)
	if err == nil && n != len(p.buf) {
		err = fmt.Errorf("wrote %d rows of %d", n, len(p.buf))
	}
	p.buf = p.buf[:0]
	return err
}

func (p *rowWriterOf[T]) Close() error {
	if err := p.flush(); err != nil {
		return err
	}
	return p.w.Close()
}

func (c parquetOf[T]) merge(s *Shape, paths []string, dst string) (n int64, err error) {
	var rgs []parquet.RowGroup
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return 0, err
		}
		defer func() { _ = f.Close() }() // read only: nothing to lose
		st, err := f.Stat()
		if err != nil {
			return 0, err
		}
		pf, err := parquet.OpenFile(f, st.Size())
		if err != nil {
			return 0, fmt.Errorf("peers: parquet %s: %w", p, err)
		}
		rgs = append(rgs, pf.RowGroups()...)
	}
	merged, err := parquet.MergeRowGroups(rgs, parquet.SortingRowGroupConfig(s.sorting()))
	if err != nil {
		return 0, fmt.Errorf("peers: parquet-go merge: %w", err)
	}
	out, err := os.Create(dst)
	if err != nil {
		return 0, err
	}
	w := parquet.NewGenericWriter[T](out, s.writerOptions()...)
	rows := merged.Rows()
	n, err = parquet.CopyRows(w, rows)
	if cerr := rows.Close(); err == nil {
		err = cerr
	}
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return n, errors.Join(fmt.Errorf("peers: parquet-go merge: %w", err), out.Close())
	}
	return n, out.Close()
}

// ReadParquet reads every row of the Parquet file at path (any file whose columns are
// Event's, required or optional).
func ReadParquet(path string) ([]Event, error) { return ReadParquetOf[Event](path) }

// ReadParquetOf reads every row of the Parquet file at path as T (Event, Minute).
func ReadParquetOf[T any](path string) ([]T, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }() // read only: nothing to lose
	r := parquet.NewGenericReader[T](f)
	defer func() { _ = r.Close() }()
	out := make([]T, r.NumRows())
	n, err := r.Read(out)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("peers: read %s: %w", path, err)
	}
	if n != len(out) {
		return nil, fmt.Errorf("peers: read %s: %d rows of %d", path, n, len(out))
	}
	return out, nil
}
