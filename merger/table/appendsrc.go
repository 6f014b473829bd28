package table

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/afero"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/columns/objstore"
	"github.com/writeout/writeout/internal/lockedio"
	"github.com/writeout/writeout/internal/multierr"
)

// appendSource is a segment file an append reads: a local file, read through Options.Fs, or
// an object (s3://bucket/key), read through Options.S3. A local file is opened for each
// read, so that an append of many files holds one descriptor at a time; an object's reader
// stays open from the check to the copy, so that the object is fetched once (the reader keeps
// what it fetched in its cache file).
type appendSource struct {
	path string
	r    io.ReaderAt // the object's reader; nil for a local file between reads
	size int64
	done func() error // closes what r reads
}

// openSource opens the segment file p for an append.
func (t *Table) openSource(ctx context.Context, p string) (*appendSource, error) {
	if !objstore.IsURL(p) {
		return &appendSource{path: p}, nil
	}
	bucket, key, err := objstore.ParseURL(p)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: append %s: %w", ErrInvalid, t, p, err)
	}
	if t.opts.S3 == nil {
		return nil, fmt.Errorf("%w: %s: append %s: no S3 client (Options.S3)", ErrInvalid, t, p)
	}
	rd, err := t.opts.S3.NewReader(ctx, bucket, key, objstore.ReaderOptions{})
	if err != nil {
		return nil, fmt.Errorf("table: %s: append %s: %w", t, p, err)
	}
	return &appendSource{path: p, r: rd, size: rd.Size(), done: rd.Close}, nil
}

// open returns the source's bytes and size, and the function that releases them.
func (s *appendSource) open(fsys afero.Fs) (io.ReaderAt, int64, func() error, error) {
	if s.r != nil {
		return s.r, s.size, func() error { return nil }, nil
	}
	f, err := fsys.Open(s.path)
	if err != nil {
		return nil, 0, nil, err
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = fmt.Errorf("%w: not a regular file", ErrInvalid)
	}
	if err != nil {
		return nil, 0, nil, multierr.Join(err, f.Close())
	}
	var r io.ReaderAt = f
	if _, ok := fsys.(*afero.OsFs); !ok {
		r = &lockedio.ReaderAt{R: f}
	}
	return r, fi.Size(), f.Close, nil
}

// release closes an object's reader; a second call does nothing.
func (s *appendSource) release() error {
	done := s.done
	s.r, s.done = nil, nil
	if done == nil {
		return nil
	}
	return done()
}

// check reads the segment of src whole (footer, every part's checksum) and returns its entry
// in the log, under a new name, and its schema.
func (t *Table) check(ctx context.Context, src *appendSource) (Segment, columns.Schema, error) {
	r, size, closeFn, err := src.open(t.opts.Fs)
	if err != nil {
		return Segment{}, columns.Schema{}, fmt.Errorf("table: %s: append %s: %w", t, src.path, err)
	}
	defer func() { _ = closeFn() }() // read only
	seg, err := columns.NewSegmentWith(r, size, columns.OpenOptions{Name: src.path})
	if err != nil {
		return Segment{}, columns.Schema{}, fmt.Errorf("table: %s: append: %w", t, err)
	}
	defer func() { _ = seg.Close() }()
	if err := seg.VerifyChecksumsContext(ctx); err != nil {
		return Segment{}, columns.Schema{}, fmt.Errorf("table: %s: append: %w", t, err)
	}
	info := seg.Info()
	return Segment{
		Name:     newSegmentName(info.Interval.Start),
		Interval: info.Interval.String(),
		Rows:     int64(info.Rows),
		Bytes:    info.Size,
		Footer:   FooterChecksum(info),
	}, seg.Schema(), nil
}

// copy stores the segment of src as the table's segment s, checking on the way that it is
// still the one check saw (its size and footer).
func (t *Table) copy(ctx context.Context, src *appendSource, s Segment) error {
	r, size, closeFn, err := src.open(t.opts.Fs)
	if err != nil {
		return fmt.Errorf("table: %s: append %s: %w", t, src.path, err)
	}
	defer func() { _ = closeFn() }() // read only
	info, err := columns.ReadInfo(r, size)
	if err != nil {
		return fmt.Errorf("table: %s: append %s: %w", t, src.path, err)
	}
	if size != s.Bytes || FooterChecksum(info) != s.Footer {
		return fmt.Errorf("table: %s: append %s: the file changed while it was appended: %w", t, src.path, ErrInvalid)
	}
	if err := t.st.putSegment(ctx, s.Name, io.NewSectionReader(r, 0, size), size); err != nil {
		return fmt.Errorf("table: %s: append %s as %s: %w", t, src.path, s.Name, err)
	}
	return nil
}
