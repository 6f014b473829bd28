package peers

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/parquet-go/parquet-go"
)

// sorting is the sort order every Parquet file here declares: (time, d1, d2, d3).
func sorting() parquet.SortingOption {
	return parquet.SortingColumns(parquet.Ascending("time"), parquet.Ascending("d1"),
		parquet.Ascending("d2"), parquet.Ascending("d3"))
}

func writerOptions() []parquet.WriterOption {
	return []parquet.WriterOption{parquet.Compression(&parquet.Zstd), parquet.SortingWriterConfig(sorting())}
}

// WriteParquet writes events (in (time, d1, d2, d3) order) as a zstd Parquet file at dst that
// declares that sort order, through parquet-go's GenericWriter with its default row groups.
func WriteParquet(dst string, ev []Event) (int64, error) {
	f, err := os.Create(dst)
	if err != nil {
		return 0, err
	}
	w := parquet.NewGenericWriter[Event](f, writerOptions()...)
	if _, err := w.Write(ev); err != nil {
		f.Close()
		return 0, fmt.Errorf("peers: parquet %s: %w", dst, err)
	}
	if err := w.Close(); err != nil {
		f.Close()
		return 0, fmt.Errorf("peers: parquet %s: %w", dst, err)
	}
	return fileSize(f)
}

func fileSize(f *os.File) (int64, error) {
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return 0, err
	}
	return st.Size(), f.Close()
}

// ParquetGoMerge merges the Parquet files at paths into dst: every row group of every file
// goes to parquet.MergeRowGroups sorted by (time, d1, d2, d3), whose rows are copied into a
// zstd GenericWriter declaring that order. No sync.
func ParquetGoMerge(paths []string, dst string) (n int64, err error) {
	var rgs []parquet.RowGroup
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return 0, err
		}
		defer f.Close()
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
	merged, err := parquet.MergeRowGroups(rgs, parquet.SortingRowGroupConfig(sorting()))
	if err != nil {
		return 0, fmt.Errorf("peers: parquet-go merge: %w", err)
	}
	out, err := os.Create(dst)
	if err != nil {
		return 0, err
	}
	w := parquet.NewGenericWriter[Event](out, writerOptions()...)
	rows := merged.Rows()
	n, err = parquet.CopyRows(w, rows)
	if cerr := rows.Close(); err == nil {
		err = cerr
	}
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		out.Close()
		return n, fmt.Errorf("peers: parquet-go merge: %w", err)
	}
	return n, out.Close()
}

// ReadParquet reads every row of the Parquet file at path (any file whose columns are
// Event's, required or optional).
func ReadParquet(path string) ([]Event, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := parquet.NewGenericReader[Event](f)
	defer r.Close()
	out := make([]Event, r.NumRows())
	n, err := r.Read(out)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("peers: read %s: %w", path, err)
	}
	if n != len(out) {
		return nil, fmt.Errorf("peers: read %s: %d rows of %d", path, n, len(out))
	}
	return out, nil
}
