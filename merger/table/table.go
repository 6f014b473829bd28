package table

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"slices"
	"time"

	"github.com/spf13/afero"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/columns/objstore"
	"github.com/writeout/writeout/internal/multierr"
	"github.com/writeout/writeout/internal/sys"
)

// Options configure Create and Open. The zero value works on local tables on the OS.
type Options struct {
	// Fs is the file system of a local table and of the segment files Append reads (for an
	// s3:// table too). nil means the OS. It must offer a rename that refuses to replace
	// (RenameNoReplacer), or be an afero.OsFs or afero.MemMapFs.
	Fs afero.Fs
	// S3 is the client of an s3:// table; required for one.
	S3 *objstore.Client
	// Now gives the time written in each entry; nil means time.Now.
	Now func() time.Time
	// SingleWriter lets an s3:// table be written on a service that does not honour
	// conditional writes (If-None-Match: *, probed once at a Table's first write), where
	// writes otherwise fail with ErrUnsupported: each commit then checks that its entry is
	// absent (a HEAD) and stores it with a plain PutObject. That is safe only while one
	// writer at a time (Create, Append, Commit, Compact) works on the table, which the caller
	// vouches for: two at once could both commit one version, the second replacing the first.
	// Where the service honours conditional writes, and on a local table, it changes nothing.
	// False means conditional writes are required.
	SingleWriter bool

	calls *sys.Calls // the system calls of an OsFs (tests replace some)
}

func (o *Options) ensureDefaults() {
	if o.Fs == nil {
		o.Fs = afero.NewOsFs()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.calls == nil {
		o.calls = &sys.Default
	}
}

// Table is a table at a location. It holds no state but where the table is: every call reads
// the log anew, so a Table is safe for concurrent use, by many goroutines and processes.
type Table struct {
	st   store
	opts Options
}

// String returns the table's location: its directory, or s3://bucket/prefix/.
func (t *Table) String() string { return t.st.String() }

// Location returns where readers find the segment name of the table: a local path or an
// s3:// URL, as columns.Open and objstore read them.
func (t *Table) Location(name string) string { return t.st.location(name) }

func newTable(loc string, o Options) (*Table, error) {
	o.ensureDefaults()
	st, err := parseLocation(loc, &o)
	if err != nil {
		return nil, err
	}
	return &Table{st: st, opts: o}, nil
}

// Create creates an empty table at loc (a directory, made if missing, or s3://bucket/prefix/)
// by committing version 1, of kind create. A table already there fails with ErrExist.
func Create(ctx context.Context, loc string, o Options) (*Table, error) {
	t, err := newTable(loc, o)
	if err != nil {
		return nil, err
	}
	vs, err := t.versions(ctx)
	if err != nil {
		return nil, err
	}
	if len(vs) > 0 {
		return nil, fmt.Errorf("%w: %s (version %d)", ErrExist, t, vs[len(vs)-1])
	}
	if err := t.checkExclusive(ctx); err != nil {
		return nil, err
	}
	if err := t.st.init(ctx); err != nil {
		return nil, err
	}
	e := &Entry{Format: Format1, Version: 1, Time: t.now(), Operation: Operation{Kind: KindCreate, Added: []string{}, Removed: []string{}},
		Segments: []Segment{}}
	b, err := AppendEntry(nil, e)
	if err != nil {
		return nil, err
	}
	if err := t.st.createExclusive(ctx, entryName(1), b); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("%w: %s: created meanwhile: %w", ErrExist, t, err)
		}
		return nil, fmt.Errorf("table: create %s: %w", t, err)
	}
	return t, nil
}

// Open opens the table at loc; a location without a log entry fails with ErrNotExist.
func Open(ctx context.Context, loc string, o Options) (*Table, error) {
	t, err := newTable(loc, o)
	if err != nil {
		return nil, err
	}
	if _, err := t.Newest(ctx); err != nil {
		return nil, err
	}
	return t, nil
}

// checkExclusive checks, once per Table, that the store's create-exclusive holds (S3: the
// service honours If-None-Match, or Options.SingleWriter stands in for it).
func (t *Table) checkExclusive(ctx context.Context) error {
	if c, ok := t.st.(exclusiveChecker); ok {
		return c.checkExclusive(ctx)
	}
	return nil
}

func (t *Table) now() time.Time { return t.opts.Now().UTC().Truncate(time.Millisecond) }

// versions lists the versions the log holds, in order (temp files and other names skipped).
func (t *Table) versions(ctx context.Context) ([]int, error) {
	names, err := t.st.list(ctx, logDir)
	if err != nil {
		return nil, fmt.Errorf("table: %s: %w", t, err)
	}
	var vs []int
	for _, n := range names {
		if v, ok := parseEntryName(n); ok {
			vs = append(vs, v)
		}
	}
	slices.Sort(vs)
	return vs, nil
}

// Newest returns the newest version of the log; a location with none fails with ErrNotExist.
func (t *Table) Newest(ctx context.Context) (int, error) {
	vs, err := t.versions(ctx)
	if err != nil {
		return 0, err
	}
	if len(vs) == 0 {
		return 0, fmt.Errorf("%w: %s: no table here (no entry in %s/)", ErrNotExist, t, logDir)
	}
	return vs[len(vs)-1], nil
}

// Snapshot returns version v's entry: its live segments, schema and change; v <= 0 means the
// newest version. A version whose entry is missing fails with ErrNotExist, one whose entry is
// damaged with ErrCorrupt, each naming the version: never another version instead.
func (t *Table) Snapshot(ctx context.Context, v int) (*Entry, error) {
	if v <= 0 {
		n, err := t.Newest(ctx)
		if err != nil {
			return nil, err
		}
		v = n
	}
	return t.read(ctx, v)
}

// read reads and checks version v's entry.
func (t *Table) read(ctx context.Context, v int) (*Entry, error) {
	name := entryName(v)
	b, err := t.st.read(ctx, name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s: version %d (%s): %w", ErrNotExist, t, v, name, err)
	}
	if err != nil {
		return nil, fmt.Errorf("table: %s: read version %d (%s): %w", t, v, name, err)
	}
	e, err := DecodeEntry(b)
	if err != nil {
		return nil, fmt.Errorf("table: %s: version %d (%s): %w", t, v, name, err)
	}
	if e.Version != v {
		return nil, fmt.Errorf("table: %s: %s: %w: it holds version %d", t, name, ErrCorrupt, e.Version)
	}
	return e, nil
}

// Log returns every version the log holds, oldest first.
func (t *Table) Log(ctx context.Context) ([]*Entry, error) {
	vs, err := t.versions(ctx)
	if err != nil {
		return nil, err
	}
	if len(vs) == 0 {
		return nil, fmt.Errorf("%w: %s: no table here (no entry in %s/)", ErrNotExist, t, logDir)
	}
	out := make([]*Entry, 0, len(vs))
	for _, v := range vs {
		e, err := t.read(ctx, v)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

// Change is what a commit does: the segments it adds (already stored in the table under
// their names) and the names of the live segments it removes.
type Change struct {
	Kind    Kind // KindAppend or KindReplace
	Added   []Segment
	Removed []string
	// Schema is the added segments' schema: required when Added is not empty. An added
	// segment's Rollup and Granularity, when set, are its own against Schema (its columns are
	// Schema's). The first segments committed set the table's schema; later ones must have
	// its columns, and each whose rollup or granularity differs from the table's records its
	// own in the entry.
	Schema *columns.Schema
}

// maxCommitTries bounds the rebases of one commit.
const maxCommitTries = 1000

// Commit commits ch as the version after base, by optimistic concurrency: it creates the
// entry of version base+1 only if no writer has (the store's create-exclusive); if another
// did, it reads the newest version and, if every segment ch removes is still live there,
// tries again on top of it (appends always can). A removed segment no longer live fails
// with ErrConflict naming it; added columns other than the table's with ErrSchema. It
// returns the version committed.
//
// The segments added must be in the table's store already, durable: a commit makes them
// visible, it does not copy them. On an error the caller cannot tell whether the entry was
// written unless it wraps ErrConflict, ErrSchema or ErrInvalid (then nothing was): it must not
// delete the segments it added on any other error.
func (t *Table) Commit(ctx context.Context, base int, ch Change) (int, error) {
	v, _, err := t.commit(ctx, base, ch)
	return v, err
}

// commit is Commit; uncertain reports an error after which the entry may exist.
func (t *Table) commit(ctx context.Context, base int, ch Change) (v int, uncertain bool, err error) {
	if err := t.checkChange(ch); err != nil {
		return 0, false, err
	}
	if err := t.checkExclusive(ctx); err != nil {
		return 0, false, err
	}
	cur, err := t.read(ctx, base)
	if err != nil {
		return 0, false, err
	}
	var unsure []int // versions taken whose entry could not be read back: ours, perhaps
	for try := 1; ; try++ {
		if len(unsure) > 0 && len(ch.Added) > 0 && cur.Live(ch.Added[0].Name) {
			// Segment names are unique: only this commit adds them. An earlier try landed.
			return t.landed(ctx, unsure, ch)
		}
		e, err := t.next(cur, ch)
		if err != nil {
			return 0, uncertain, err
		}
		b, err := AppendEntry(nil, e)
		if err != nil {
			return 0, uncertain, err
		}
		err = t.st.createExclusive(ctx, entryName(e.Version), b)
		if err == nil {
			return e.Version, false, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return 0, uncertain || errors.Is(err, errUncertain), fmt.Errorf("table: %s: commit version %d: %w", t, e.Version, err)
		}
		// Taken: by an earlier try of ours whose answer was lost, or by another writer.
		got, rerr := t.st.read(ctx, entryName(e.Version))
		if rerr == nil && bytes.Equal(got, b) {
			return e.Version, false, nil
		}
		if rerr != nil {
			// Perhaps ours: from now on a failure may leave the entry committed.
			uncertain = true
			unsure = append(unsure, e.Version)
		}
		if try >= maxCommitTries {
			return 0, uncertain, fmt.Errorf("%w: %s: version %d taken, gave up after %d tries: %w", ErrConflict, t, e.Version, try, err)
		}
		newest, err := t.Newest(ctx)
		if err != nil {
			return 0, uncertain, err
		}
		if cur, err = t.read(ctx, max(newest, e.Version)); err != nil {
			return 0, uncertain, err
		}
	}
}

// landed finds which of the versions unsure holds ch, committed by a try whose answer was
// lost and whose entry could not be read back then.
func (t *Table) landed(ctx context.Context, unsure []int, ch Change) (int, bool, error) {
	for _, v := range unsure {
		e, err := t.read(ctx, v)
		if err != nil {
			return 0, true, err
		}
		if slices.Contains(e.Operation.Added, ch.Added[0].Name) {
			return v, false, nil
		}
	}
	return 0, true, fmt.Errorf("%w: %s: segment %s is live, committed by a try of this commit in none of versions %v", errUncertain, t, ch.Added[0].Name, unsure)
}

// checkChange checks a change's form.
func (t *Table) checkChange(ch Change) error {
	if ch.Kind != KindAppend && ch.Kind != KindReplace {
		return fmt.Errorf("%w: %s: commit of kind %q", ErrInvalid, t, ch.Kind)
	}
	if len(ch.Added) > 0 && ch.Schema == nil {
		return fmt.Errorf("%w: %s: segments added without their schema", ErrInvalid, t)
	}
	if len(ch.Added) == 0 && len(ch.Removed) == 0 {
		return fmt.Errorf("%w: %s: a commit that changes nothing", ErrInvalid, t)
	}
	seen := map[string]bool{}
	for _, s := range ch.Added {
		if !validSegmentName(s.Name) || seen[s.Name] {
			return fmt.Errorf("%w: %s: added segment name %q (invalid or twice)", ErrInvalid, t, s.Name)
		}
		if err := checkOwnRollupForm(s); err != nil {
			return fmt.Errorf("%w: %s: added segment %s: %v", ErrInvalid, t, s.Name, err)
		}
		seen[s.Name] = true
	}
	for _, n := range ch.Removed {
		if seen[n] {
			return fmt.Errorf("%w: %s: segment %s both added and removed, or removed twice", ErrInvalid, t, n)
		}
		seen[n] = true
	}
	return nil
}

// next returns the entry that applies ch on top of cur.
func (t *Table) next(cur *Entry, ch Change) (*Entry, error) {
	if cur.Version >= maxVersion {
		return nil, fmt.Errorf("%w: %s: version %d is the last", ErrInvalid, t, cur.Version)
	}
	for _, n := range ch.Removed {
		if !cur.Live(n) {
			return nil, fmt.Errorf("%w: %s: segment %s is not live in version %d", ErrConflict, t, n, cur.Version)
		}
	}
	schema := cur.Schema
	if ch.Schema != nil {
		switch {
		case schema == nil:
			s := ch.Schema.Clone()
			schema = &s
		case !sameColumns(*schema, *ch.Schema):
			return nil, fmt.Errorf("%w: %s: the segments' columns differ from the table's (version %d)", ErrSchema, t, cur.Version)
		}
	}
	e := &Entry{Version: cur.Version + 1, Time: t.now(), Schema: schema,
		Operation: Operation{Kind: ch.Kind, Added: []string{}, Removed: []string{}}}
	for _, s := range cur.Segments {
		if !slices.Contains(ch.Removed, s.Name) {
			e.Segments = append(e.Segments, s)
		}
	}
	for _, s := range ch.Added {
		if cur.Live(s.Name) {
			return nil, fmt.Errorf("%w: %s: added segment %s is live already", ErrInvalid, t, s.Name)
		}
		// Its own rollup against ch.Schema, recorded against the table's.
		e.Segments = append(e.Segments, s.withClass(*schema, s.classIn(ch.Schema)))
		e.Operation.Added = append(e.Operation.Added, s.Name)
	}
	e.Operation.Removed = append(e.Operation.Removed, ch.Removed...)
	if e.Segments == nil {
		e.Segments = []Segment{}
	}
	e.Format = entryFormat(e.Segments)
	return e, nil
}

// OpenSegment opens a live segment of the table and checks that its footer is the one the log
// lists (ErrCorrupt if not). The function returned closes it.
func (t *Table) OpenSegment(ctx context.Context, s Segment) (*columns.Segment, func() error, error) {
	seg, closeSeg, err := t.st.openSegment(ctx, s.Name)
	if err != nil {
		return nil, nil, err
	}
	if got := FooterChecksum(seg.Info()); got != s.Footer {
		return nil, nil, multierr.Join(fmt.Errorf("%w: %s: segment %s: footer checksum %s, the log lists %s", ErrCorrupt, t, s.Name, got, s.Footer), closeSeg())
	}
	return seg, closeSeg, nil
}

// Append copies the segment files at paths (read through Options.Fs) into the table and
// commits them as one version of kind append, on top of whatever version is newest then
// (an append never conflicts). Every file is opened and checked first (footer, every part's
// checksum, columns equal to the table's and to each other's: ErrSchema); nothing is copied
// unless all pass. A segment whose rollup or granularity differs from the table's schema
// records its own in the log (Segment.Rollup): the first append sets the table's schema,
// that of its first segment. It returns the version committed. Segments copied but not committed
// are removed, unless the commit's outcome is unknown (then vacuum finds them).
func (t *Table) Append(ctx context.Context, paths []string) (int, error) {
	if len(paths) == 0 {
		return 0, fmt.Errorf("%w: %s: append of no segment", ErrInvalid, t)
	}
	if err := t.checkExclusive(ctx); err != nil {
		return 0, err
	}
	base, err := t.Snapshot(ctx, 0)
	if err != nil {
		return 0, err
	}
	schema := base.Schema
	segs := make([]Segment, len(paths))
	srcs := make([]*appendSource, len(paths))
	defer func() {
		for _, src := range srcs {
			if src != nil {
				_ = src.release() // read only: nothing of ours to lose
			}
		}
	}()
	for i, p := range paths {
		src, err := t.openSource(ctx, p)
		if err != nil {
			return 0, err
		}
		srcs[i] = src
		s, sch, err := t.check(ctx, src)
		if err != nil {
			return 0, err
		}
		if schema == nil {
			schema = &sch
		} else if !sameColumns(*schema, sch) {
			return 0, fmt.Errorf("%w: %s: append %s: its columns differ from the table's", ErrSchema, t, p)
		}
		segs[i] = s.withClass(*schema, classOf(sch))
	}
	var put []string
	for i := range paths {
		if err := t.copy(ctx, srcs[i], segs[i]); err != nil {
			return 0, t.removeAll(ctx, put, err)
		}
		put = append(put, segs[i].Name)
	}
	v, uncertain, err := t.commit(ctx, base.Version, Change{Kind: KindAppend, Added: segs, Schema: schema})
	if err != nil {
		if uncertain {
			return 0, err
		}
		return 0, t.removeAll(ctx, put, err)
	}
	return v, nil
}

// segmentStampOK is the form of a time stamp in a segment's name.
var segmentStampOK = regexp.MustCompile(`^[0-9]{8}T[0-9]{6}Z$`)

// newSegmentName returns a new segment name: segments/, the interval's start
// (20060102T150405Z), 16 random hex digits, .seg.
func newSegmentName(start int64) string {
	stamp := time.UnixMilli(start).UTC().Format("20060102T150405Z")
	if !segmentStampOK.MatchString(stamp) {
		stamp = fmt.Sprintf("ms%d", start)
	}
	return fmt.Sprintf("%s/%s-%s.seg", segmentsDir, stamp, randomHex())
}
