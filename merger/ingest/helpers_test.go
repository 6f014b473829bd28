package ingest

import (
	"fmt"
	"io"
)

// testPlan validates sp and returns its plan, as Run does once for all its readers.
func testPlan(sp *Spec) (*plan, error) {
	if err := sp.Validate(); err != nil {
		return nil, err
	}
	return newPlan(sp, 0)
}

// openReaderOptions returns the reader of format over r as Run makes it.
func openReaderOptions(sp *Spec, format Format, name string, r io.Reader, opts readerOptions) (reader, error) {
	pl, err := testPlan(sp)
	if err != nil {
		return nil, err
	}
	f := lookupFormat(format)
	if f == nil {
		return nil, fmt.Errorf("%w: unknown input format %q (want %s)", ErrInvalid, format, FormatNames())
	}
	return newReader(f, pl, name, r, opts)
}

// openReader is openReaderOptions with the default options.
func openReader(sp *Spec, format Format, name string, r io.Reader) (reader, error) {
	return openReaderOptions(sp, format, name, r, readerOptions{})
}

func openCSV(sp *Spec, name string, r io.Reader) (*csvReader, error) {
	pl, err := testPlan(sp)
	if err != nil {
		return nil, err
	}
	return newCSVReader(pl, name, r, readerOptions{})
}

func openNDJSON(sp *Spec, name string, r io.Reader) (*ndjsonReader, error) {
	pl, err := testPlan(sp)
	if err != nil {
		return nil, err
	}
	return newNDJSONReader(pl, name, r, readerOptions{}), nil
}

func openParquet(sp *Spec, name string, r io.ReaderAt, size int64) (*parquetReader, error) {
	pl, err := testPlan(sp)
	if err != nil {
		return nil, err
	}
	return newParquetReader(pl, name, r, size, readerOptions{})
}

// formatOf returns the format an input's name says, as FormatOf did.
func formatOf(name string) (Format, bool) {
	if f := formatOfName(name); f != nil {
		return f.name, true
	}
	return "", false
}
