package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/minio/minio-go/v7"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/internal/multierr"
	"github.com/writeout/writeout/internal/segfmt"
	"github.com/writeout/writeout/internal/sys"
)

// defaultRangeSize is the largest GET of a Reader when ReaderOptions.RangeSize is 0.
const defaultRangeSize = 8 << 20

// defaultReadAhead is the number of ranges a Reader fetches ahead of the one read when
// ReaderOptions.ReadAhead is 0.
const defaultReadAhead = 2

// tailSize is what a Reader fetches at once for its first read near the object's end: the
// trailer and, in one request, a footer of that size or less.
const tailSize = 64 << 10

// copyBufSize is the buffer each GET streams its body through into the cache file.
const copyBufSize = 256 << 10

// ReaderOptions configure a Reader. The zero value reads ranges of up to 8 MiB, two ahead,
// with a cache file in os.TempDir().
type ReaderOptions struct {
	// RangeSize is the largest GET; 0 means 8 MiB.
	RangeSize int64
	// ReadAhead is the number of planned ranges fetched, in the background, past the one a
	// read needs; 0 means 2, negative none. At most ReadAhead+1 GETs are in
	// flight at once.
	ReadAhead int
	// CacheDir is the directory of the cache file; "" means os.TempDir().
	CacheDir string
	// Progress, when set, is called with the bytes of each response body as they arrive,
	// from the goroutines that fetch; it must be safe for concurrent use and return quickly.
	Progress func(n int64)
}

// reader reads an object with ranged GETs, as an io.ReaderAt for columns.NewSegment.
//
// Reads are planned: once Plan is given the segment's parts (OpenSegment does that), the
// object is cut into ranges of whole neighbouring parts up to RangeSize (a part larger than
// that alone, in RangeSize pieces), and a read fetches the ranges it touches, in one GET
// each, while the next ReadAhead ranges are fetched in the background. Before Plan, a read
// fetches what it asks for, or for a read near the end the object's last 64 KiB (the trailer
// and the footer).
//
// Every byte fetched is written to a cache file (unnamed: removed from its directory as soon
// as it is created, gone with the reader; mapped, so that a read is a copy) and never fetched
// again: a merge reads each part
// more than once (the checksum pass, then the merge itself), in an order no plan foresees,
// and the cache makes the bytes fetched equal the object's size, however many times and in
// whatever order they are read. Memory holds only the copy buffers of the GETs in flight
// (256 KiB each); the cache file's pages are the kernel's. The reader checks no checksum:
// the Segment on top checks each part's CRC-32C as it does for a local file.
//
// ReadAt is safe for concurrent use. Close cancels the GETs in flight and removes the cache.
type reader struct {
	c           *Client
	bucket, key string
	size        int64
	etag        string // seen when opened; every GET asks for it (If-Match)
	opts        ReaderOptions
	ctx         context.Context
	cancel      context.CancelFunc
	cache       *os.File
	data        []byte        // cache mapped read-only (nil where mmap is missing: pread then)
	sem         chan struct{} // one token per GET in flight
	complete    atomic.Bool   // every byte is cached: reads skip the bookkeeping

	mu       sync.Mutex
	have     []span         // fetched byte ranges, sorted and disjoint
	ranges   []span         // the plan, sorted, covering [0, size); nil before Plan
	inflight map[int]*fetch // range index -> its fetch
	closed   bool

	gets, fetched atomic.Int64
}

// span is a byte range [lo, hi).
type span struct{ lo, hi int64 }

// fetch is a GET of one planned range (or, before the plan, of one span).
type fetch struct {
	done chan struct{}
	err  error
}

// NewReader returns a Reader of bucket/key. ctx bounds its life: once ctx is done its GETs
// fail. It asks the service for the object's size (a HEAD request).
func (c *Client) NewReader(ctx context.Context, bucket, key string, opts ReaderOptions) (*reader, error) {
	if opts.RangeSize == 0 {
		opts.RangeSize = defaultRangeSize
	}
	if opts.RangeSize < 0 {
		return nil, fmt.Errorf("%w: range size %d", ErrInvalid, opts.RangeSize)
	}
	if opts.ReadAhead == 0 {
		opts.ReadAhead = defaultReadAhead
	}
	opts.ReadAhead = max(opts.ReadAhead, 0)
	size, etag, err := c.stat(ctx, bucket, key)
	if err != nil {
		return nil, err
	}
	dir := opts.CacheDir
	if dir == "" {
		dir = os.TempDir()
	}
	f, err := os.CreateTemp(dir, ".writeout-s3cache-*")
	if err != nil {
		return nil, fmt.Errorf("objstore: cache file for %s: %w", URL(bucket, key), err)
	}
	if err := os.Remove(f.Name()); err != nil {
		return nil, multierr.Join(fmt.Errorf("objstore: cache file for %s: %w", URL(bucket, key), err), f.Close(), os.Remove(f.Name()))
	}
	r := &reader{c: c, bucket: bucket, key: key, size: size, etag: etag, opts: opts, cache: f,
		sem: make(chan struct{}, opts.ReadAhead+1), inflight: map[int]*fetch{}}
	if err := r.mapCache(); err != nil {
		return nil, multierr.Join(fmt.Errorf("objstore: cache file for %s: %w", URL(bucket, key), err), f.Close())
	}
	r.ctx, r.cancel = context.WithCancel(ctx)
	return r, nil
}

// mapCache sizes the cache file to the object (sparse) and maps it read-only, so that reads
// of cached bytes are copies from memory rather than system calls: a merge reads bitmaps of
// a few bytes by the hundred thousand. Where mmap is missing, reads use pread.
func (r *reader) mapCache() error {
	if err := r.cache.Truncate(r.size); err != nil {
		return err
	}
	if r.size == 0 || r.size > math.MaxInt {
		return nil
	}
	data, err := sys.Default.Mmap(int(r.cache.Fd()), 0, int(r.size), sys.ProtRead, sys.MapShared)
	if errors.Is(err, sys.ErrUnsupported) {
		return nil
	}
	if err != nil {
		return err
	}
	r.data = data
	return nil
}

// DropPages takes the cache mapping's pages of [off, off+n) out of the process's resident set
// (madvise MADV_DONTNEED; the bytes stay in the cache file, and a later read faults them back):
// a merge releases its inputs' pages as it goes (columns.Segment.ReleasePages), which without it
// kept every byte fetched resident (an s3:// merge of 376 MB of inputs peaked at 436 MB, the
// local one at 69). It does nothing where the cache is not mapped.
func (r *reader) DropPages(off, n int64) error {
	if r.data == nil {
		return nil
	}
	lo, hi := off&^int64(os.Getpagesize()-1), min(off+n, int64(len(r.data)))
	if lo < 0 || hi <= lo {
		return nil
	}
	if err := sys.Default.Madvise(r.data[lo:hi], sys.MadvDontneed); err != nil {
		return fmt.Errorf("objstore: %s: release cached pages: %w", r.Name(), err)
	}
	return nil
}

// Size returns the object's size.
func (r *reader) Size() int64 { return r.size }

// Name returns the object's URL, s3://bucket/key.
func (r *reader) Name() string { return URL(r.bucket, r.key) }

// Stats returns the GETs sent and the bytes of their bodies received so far.
func (r *reader) Stats() (gets, bytes int64) { return r.gets.Load(), r.fetched.Load() }

// Plan sets the read plan from the parts of the segment the object holds: reads from now on
// fetch whole planned ranges. Parts outside the object are an error wrapping ErrInvalid.
func (r *reader) Plan(parts []segfmt.PartInfo) error {
	ps := make([]span, 0, len(parts))
	for _, p := range parts {
		if p.Offset < 0 || p.Length < 0 || p.Offset > r.size-p.Length {
			return fmt.Errorf("%w: %s: part %s of %q at %d+%d outside the object of %d bytes", ErrInvalid, r.Name(), p.Kind, p.Column, p.Offset, p.Length, r.size)
		}
		if p.Length > 0 {
			ps = append(ps, span{p.Offset, p.Offset + p.Length})
		}
	}
	ranges := plan(ps, r.size, r.opts.RangeSize)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ranges != nil {
		return fmt.Errorf("%w: %s: planned twice", ErrInvalid, r.Name())
	}
	r.ranges = ranges
	return nil
}

// plan cuts [0, size) into ranges of at most max bytes: the parts' spans, a part longer than
// max split into max-sized pieces, and the gaps between them (header, footer), then
// neighbours joined while they fit in max.
func plan(parts []span, size, maxLen int64) []span {
	sort.Slice(parts, func(i, j int) bool { return parts[i].lo < parts[j].lo })
	var pieces []span
	at := int64(0)
	add := func(s span) {
		for s.hi-s.lo > maxLen {
			pieces = append(pieces, span{s.lo, s.lo + maxLen})
			s.lo += maxLen
		}
		if s.hi > s.lo {
			pieces = append(pieces, s)
		}
	}
	for _, p := range parts {
		if p.lo < at { // overlapping parts (a damaged footer): keep the ranges disjoint
			p.lo = at
		}
		if p.hi <= p.lo {
			continue // empty, or inside the part before
		}
		if p.lo > at {
			add(span{at, p.lo})
		}
		add(p)
		at = p.hi
	}
	add(span{at, size})
	var out []span
	for _, p := range pieces {
		if n := len(out); n > 0 && p.hi-out[n-1].lo <= maxLen {
			out[n-1].hi = p.hi
			continue
		}
		out = append(out, p)
	}
	return out
}

// ReadAt reads len(p) bytes at off, fetching the ranges they lie in that are not cached yet.
func (r *reader) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("%w: %s: read at %d", ErrInvalid, r.Name(), off)
	}
	if off >= r.size {
		return 0, io.EOF
	}
	end := min(off+int64(len(p)), r.size)
	if !r.complete.Load() {
		if err := r.ensure(off, end); err != nil {
			return 0, err
		}
	}
	var n int
	if r.data != nil {
		n = copy(p, r.data[off:end])
	} else {
		var err error
		if n, err = r.cache.ReadAt(p[:end-off], off); err != nil {
			return n, fmt.Errorf("objstore: %s: read cache: %w", r.Name(), err)
		}
	}
	if end-off < int64(len(p)) {
		return n, io.EOF
	}
	return n, nil
}

// ensure makes [off, end) cached, fetching what is missing, and starts the read-ahead.
func (r *reader) ensure(off, end int64) error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return fmt.Errorf("objstore: %s: read after Close: %w", r.Name(), os.ErrClosed)
	}
	if r.covered(off, end) {
		r.mu.Unlock()
		return nil
	}
	var wait []*fetch
	if r.ranges == nil {
		if off >= r.size-tailSize {
			off = max(0, r.size-tailSize)
			end = r.size
		}
		wait = append(wait, r.start(-1, span{off, end}))
	} else {
		i := sort.Search(len(r.ranges), func(i int) bool { return r.ranges[i].hi > off })
		j := i
		for ; j < len(r.ranges) && r.ranges[j].lo < end; j++ {
			if f := r.start(j, r.ranges[j]); f != nil {
				wait = append(wait, f)
			}
		}
		for k := j; k < min(j+r.opts.ReadAhead, len(r.ranges)); k++ {
			r.start(k, r.ranges[k])
		}
	}
	r.mu.Unlock()
	var errs []error
	for _, f := range wait {
		<-f.done
		errs = append(errs, f.err)
	}
	return errors.Join(errs...)
}

// covered reports whether [off, end) is cached. r.mu is held.
func (r *reader) covered(off, end int64) bool {
	i := sort.Search(len(r.have), func(i int) bool { return r.have[i].hi > off })
	return i < len(r.have) && r.have[i].lo <= off && r.have[i].hi >= end
}

// start starts the fetch of range i (s; -1: an unplanned span) unless it is cached or in
// flight, and returns the fetch to wait for (nil when cached). r.mu is held.
func (r *reader) start(i int, s span) *fetch {
	if f, ok := r.inflight[i]; ok && i >= 0 {
		return f
	}
	gaps := r.missing(s)
	if len(gaps) == 0 {
		return nil
	}
	f := &fetch{done: make(chan struct{})}
	if i >= 0 {
		r.inflight[i] = f
	}
	go func() {
		var errs []error
		for _, g := range gaps {
			errs = append(errs, r.get(g))
		}
		f.err = errors.Join(errs...)
		r.mu.Lock()
		if i >= 0 {
			delete(r.inflight, i) // a failed range is fetched again by the next read of it
		}
		r.mu.Unlock()
		close(f.done)
	}()
	return f
}

// missing returns the parts of s not cached. r.mu is held.
func (r *reader) missing(s span) []span {
	var out []span
	at := s.lo
	for _, h := range r.have {
		if h.hi <= at {
			continue
		}
		if h.lo >= s.hi {
			break
		}
		if h.lo > at {
			out = append(out, span{at, h.lo})
		}
		at = h.hi
	}
	if at < s.hi {
		out = append(out, span{at, s.hi})
	}
	return out
}

// get fetches s with a ranged GET into the cache and marks it cached. A GET that fails (a
// broken connection, a service that stops answering within the request timeout) is tried
// again (Client.retry): each try writes the whole span again.
func (r *reader) get(s span) error {
	select {
	case r.sem <- struct{}{}:
	case <-r.ctx.Done():
		return fmt.Errorf("objstore: %s: %w", r.Name(), r.ctx.Err())
	}
	defer func() { <-r.sem }()
	if err := r.c.retry(r.ctx, func() error { return r.getOnce(s) }); err != nil {
		return err
	}
	r.mu.Lock()
	r.have = addSpan(r.have, s)
	if len(r.have) == 1 && r.have[0] == (span{0, r.size}) {
		r.complete.Store(true)
	}
	r.mu.Unlock()
	return nil
}

// getOnce is one try of get: one ranged GET, within the client's request timeout.
func (r *reader) getOnce(s span) error {
	ctx, cancel := r.c.request(r.ctx)
	defer cancel()
	var o minio.GetObjectOptions
	if err := o.SetRange(s.lo, s.hi-1); err != nil {
		return fmt.Errorf("objstore: %s: range %d-%d: %w", r.Name(), s.lo, s.hi, err)
	}
	if r.etag != "" {
		// Pinned to the object opened: one replaced since fails (412) as ErrChanged rather
		// than handing its bytes to the checks of the one read so far.
		if err := o.SetMatchETag(r.etag); err != nil {
			return fmt.Errorf("objstore: %s: ETag %s: %w", r.Name(), r.etag, err)
		}
	}
	r.gets.Add(1)
	body, _, _, err := r.c.core.GetObject(ctx, r.bucket, r.key, o)
	if err != nil {
		return fmt.Errorf("objstore: %s: get bytes %d-%d: %w", r.Name(), s.lo, s.hi, ctxErr(ctx, notFound(err)))
	}
	defer func() { _ = body.Close() }() // a read error, if any, is the one returned
	w := &progressWriter{w: io.NewOffsetWriter(r.cache, s.lo), r: r}
	buf := make([]byte, copyBufSize)
	n, err := io.CopyBuffer(w, io.LimitReader(body, s.hi-s.lo), buf)
	if err == nil && n != s.hi-s.lo {
		err = fmt.Errorf("%w: the service sent %d bytes of %d (the object changed?)", io.ErrUnexpectedEOF, n, s.hi-s.lo)
	}
	if err != nil {
		return fmt.Errorf("objstore: %s: get bytes %d-%d: %w", r.Name(), s.lo, s.hi, ctxErr(ctx, err))
	}
	return nil
}

// addSpan adds s to the sorted, disjoint spans have, joining it with those it touches.
func addSpan(have []span, s span) []span {
	i := sort.Search(len(have), func(i int) bool { return have[i].hi >= s.lo })
	j := i
	for j < len(have) && have[j].lo <= s.hi {
		s.lo, s.hi = min(s.lo, have[j].lo), max(s.hi, have[j].hi)
		j++
	}
	return append(have[:i], append([]span{s}, have[j:]...)...)
}

type progressWriter struct {
	w io.Writer
	r *reader
}

func (p *progressWriter) Write(b []byte) (int, error) {
	n, err := p.w.Write(b)
	p.r.fetched.Add(int64(n))
	if f := p.r.opts.Progress; f != nil && n > 0 {
		f(int64(n))
	}
	return n, err
}

// Close cancels the GETs in flight, waits for them, and removes the cache. A second Close
// returns nil.
func (r *reader) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	var wait []*fetch
	for _, f := range r.inflight {
		wait = append(wait, f)
	}
	r.mu.Unlock()
	r.cancel()
	for _, f := range wait {
		<-f.done
	}
	r.complete.Store(false) // reads after Close go to ensure, which fails them
	var errs []error
	if r.data != nil {
		errs = append(errs, sys.Default.Munmap(r.data))
		r.data = nil
	}
	errs = append(errs, r.cache.Close())
	if err := multierr.Join(errs...); err != nil {
		return fmt.Errorf("objstore: %s: close cache: %w", r.Name(), err)
	}
	return nil
}

// segment is a segment read from an object: a columns.segment and the Reader under it.
type segment struct {
	*columns.Segment
	Reader *reader
}

// OpenSegment opens the segment in bucket/key: its header, trailer and footer are read
// (columns.ReadInfo: two GETs, the header's bytes and the object's last 64 KiB, the footer's
// checksum checked), the reads are planned from its parts, and the segment is opened on the
// Reader (columns.NewSegmentWith, which reads the dictionaries and chunk indexes through the
// plan); the rest is fetched as it is read. The segment is named s3://bucket/key in errors. ctx bounds its life
// as for NewReader. Close closes the segment and the Reader.
func (c *Client) OpenSegment(ctx context.Context, bucket, key string, opts ReaderOptions) (*segment, error) {
	r, err := c.NewReader(ctx, bucket, key, opts)
	if err != nil {
		return nil, err
	}
	info, err := columns.ReadInfo(r, r.Size())
	if err != nil {
		return nil, multierr.Join(fmt.Errorf("objstore: open %s: %w", r.Name(), err), r.Close())
	}
	if err := r.Plan(info.Parts); err != nil {
		return nil, multierr.Join(err, r.Close())
	}
	seg, err := columns.NewSegmentWith(r, r.Size(), columns.OpenOptions{Name: r.Name()})
	if err != nil {
		return nil, multierr.Join(fmt.Errorf("objstore: open %s: %w", r.Name(), err), r.Close())
	}
	return &segment{Segment: seg, Reader: r}, nil
}

// Close closes the segment, then its Reader; the first error is returned, a later one joined.
func (s *segment) Close() error {
	return multierr.Join(s.Segment.Close(), s.Reader.Close())
}
