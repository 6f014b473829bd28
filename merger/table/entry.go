package table

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/writeout/writeout/columns"
)

// The format numbers of log entries. An entry whose segments all have the entry's schema is
// written in format 1, which every reader reads; one where a segment records a rollup of its
// own (Segment.Rollup) in format 2. This package reads both.
const (
	// Format1 lists segments of the entry's schema only.
	Format1 = 1
	// Format2 adds a segment's own rollup and granularity (Segment.Rollup, Granularity).
	Format2 = 2
	// Format is the newest format this package writes and reads.
	Format = Format2
)

// Kind is what a version's change did.
type Kind string

// The kinds of change.
const (
	KindCreate  Kind = "create"  // version 1: an empty table
	KindAppend  Kind = "append"  // segments added
	KindReplace Kind = "replace" // segments removed and others added in their place (compaction)
)

func (k Kind) valid() bool { return k == KindCreate || k == KindAppend || k == KindReplace }

// Segment is a live segment of a version, as the log lists it.
type Segment struct {
	// Name is the segment's path in the table: "segments/<start>-<16 hex>.seg".
	Name string `json:"name"`
	// Interval is the segment's time interval, start/end in RFC 3339 with milliseconds, UTC
	// (columns.Interval.String).
	Interval string `json:"interval"`
	Rows     int64  `json:"rows"`
	Bytes    int64  `json:"bytes"`
	// Footer is the segment's footer checksum (FooterChecksum), 8 hex digits: it identifies
	// the segment's content without reading its data.
	Footer string `json:"footer"`
	// Rollup and Granularity, set together or not at all, are the segment's own rollup state
	// where it differs from the entry's schema (format 2): the segment's schema is the
	// entry's with Rollup and Granularity these (Entry.SegmentSchema). nil, nil means the
	// entry's. The segments of a table share their columns, not their rollup: an append of
	// a segment rolled up otherwise, or a compaction with CompactOptions.Rollup, records it.
	Rollup      *bool                `json:"rollup,omitempty"`
	Granularity *columns.Granularity `json:"granularity,omitempty"`
}

// Operation is what a version changed: the names of the segments it added and removed.
type Operation struct {
	Kind    Kind     `json:"kind"`
	Added   []string `json:"added"`
	Removed []string `json:"removed"`
}

// Entry is one version of the log: what changed, the table's schema (nil until the first
// segment), and every segment live in the version (a snapshot, not a delta).
type Entry struct {
	Format    int             `json:"format"`
	Version   int             `json:"version"`
	Time      time.Time       `json:"time"`
	Operation Operation       `json:"operation"`
	Schema    *columns.Schema `json:"schema"`
	Segments  []Segment       `json:"segments"`
}

// Rows returns the rows of the live segments.
func (e *Entry) Rows() int64 {
	var n int64
	for _, s := range e.Segments {
		n += s.Rows
	}
	return n
}

// Bytes returns the bytes of the live segments.
func (e *Entry) Bytes() int64 {
	var n int64
	for _, s := range e.Segments {
		n += s.Bytes
	}
	return n
}

// Interval returns the interval spanning every live segment's, false when the version holds
// no segment. A segment whose interval does not parse (never one of an entry DecodeEntry
// returned) is left out.
func (e *Entry) Interval() (columns.Interval, bool) {
	var out columns.Interval
	ok := false
	for _, s := range e.Segments {
		iv, err := ParseInterval(s.Interval)
		if err != nil {
			continue
		}
		if !ok {
			out, ok = iv, true
			continue
		}
		out.Start, out.End = min(out.Start, iv.Start), max(out.End, iv.End)
	}
	return out, ok
}

// Live reports whether the segment name is live in the version.
func (e *Entry) Live(name string) bool {
	return slices.ContainsFunc(e.Segments, func(s Segment) bool { return s.Name == name })
}

// maxEntryBytes bounds an entry file read: a table of ~100,000 live segments.
const maxEntryBytes = 64 << 20

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// AppendEntry appends the encoding of e to dst: one line of JSON,
//
//	{"entry":{...},"crc32c":"8 hex digits"}\n
//
// where the checksum is the CRC-32C (Castagnoli) of the exact bytes of the entry's value.
func AppendEntry(dst []byte, e *Entry) ([]byte, error) {
	if err := e.validate(); err != nil {
		return dst, err
	}
	b, err := json.Marshal(e)
	if err != nil {
		return dst, fmt.Errorf("table: encode version %d: %w", e.Version, err)
	}
	return appendWrapped(dst, b), nil
}

// appendWrapped appends the entry file of the entry's bytes b: the wrapper and the checksum.
func appendWrapped(dst, b []byte) []byte {
	dst = append(dst, `{"entry":`...)
	dst = append(dst, b...)
	dst = append(dst, `,"crc32c":"`...)
	dst = fmt.Appendf(dst, "%08x", crc32.Checksum(b, castagnoli))
	return append(dst, "\"}\n"...)
}

// wrapper is the outer object of an entry file.
type wrapper struct {
	Entry  json.RawMessage `json:"entry"`
	CRC32C string          `json:"crc32c"`
}

// DecodeEntry decodes an entry file's bytes, checking the checksum, the format and every
// field (Validate). Damage is an error wrapping ErrCorrupt, a newer format one wrapping
// ErrVersion; nothing here panics on any input.
func DecodeEntry(b []byte) (*Entry, error) {
	var w wrapper
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return nil, fmt.Errorf("%w: not an entry: %w", ErrCorrupt, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: data after the entry", ErrCorrupt)
	}
	if len(w.Entry) == 0 || w.CRC32C == "" {
		return nil, fmt.Errorf("%w: entry or checksum missing", ErrCorrupt)
	}
	want, err := strconv.ParseUint(w.CRC32C, 16, 32)
	if err != nil || len(w.CRC32C) != 8 {
		return nil, fmt.Errorf("%w: checksum %q is not 8 hex digits", ErrCorrupt, w.CRC32C)
	}
	if got := crc32.Checksum(w.Entry, castagnoli); got != uint32(want) {
		return nil, fmt.Errorf("%w: checksum %08x, the entry says %08x", ErrCorrupt, got, want)
	}
	// The format first, alone: a newer one may be laid out otherwise.
	var f struct {
		Format int `json:"format"`
	}
	if err := json.Unmarshal(w.Entry, &f); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	if f.Format < Format1 || f.Format > Format {
		return nil, fmt.Errorf("%w: format %d (this reader reads %d to %d)", ErrVersion, f.Format, Format1, Format)
	}
	e := new(Entry)
	dec = json.NewDecoder(bytes.NewReader(w.Entry))
	dec.DisallowUnknownFields()
	if err := dec.Decode(e); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	if err := e.validate(); err != nil {
		return nil, err
	}
	return e, nil
}

// segmentName is the form of a segment's name in the table.
var segmentName = regexp.MustCompile(`^segments/[0-9A-Za-z_.-]+\.seg$`)

// validSegmentName reports whether name is a segment name a table may hold.
func validSegmentName(name string) bool {
	return segmentName.MatchString(name) && path.Clean(name) == name
}

// validate checks an entry's fields and their consistency: a version of at least 1, a known
// kind (create only as version 1), segment names of the table's form, each live once, with a
// parsable interval, non-negative rows and bytes, a footer checksum and a rollup of its own
// only in format 2, whole (rollup and granularity) and other than the schema's; added
// segments live, removed ones not, and a schema that validates once there are segments.
// Errors wrap ErrCorrupt.
func (e *Entry) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: version %d: %s", ErrCorrupt, e.Version, fmt.Sprintf(format, args...))
	}
	if e.Format < Format1 || e.Format > Format {
		return fmt.Errorf("%w: version %d: format %d (this package reads %d to %d)", ErrVersion, e.Version, e.Format, Format1, Format)
	}
	switch {
	case e.Version < 1:
		return bad("version number below 1")
	case !e.Operation.Kind.valid():
		return bad("unknown kind %q", e.Operation.Kind)
	case (e.Operation.Kind == KindCreate) != (e.Version == 1):
		return bad("kind %s as version %d", e.Operation.Kind, e.Version)
	case e.Time.IsZero():
		return bad("no time")
	case len(e.Segments) > 0 && e.Schema == nil:
		return bad("segments but no schema")
	}
	if e.Schema != nil {
		if err := e.Schema.Validate(); err != nil {
			return bad("schema: %v", err)
		}
	}
	live := make(map[string]bool, len(e.Segments))
	for _, s := range e.Segments {
		if !validSegmentName(s.Name) {
			return bad("segment name %q", s.Name)
		}
		if live[s.Name] {
			return bad("segment %s listed twice", s.Name)
		}
		live[s.Name] = true
		if _, err := ParseInterval(s.Interval); err != nil {
			return bad("segment %s: %v", s.Name, err)
		}
		if s.Rows < 0 || s.Bytes < 0 {
			return bad("segment %s: %d rows, %d bytes", s.Name, s.Rows, s.Bytes)
		}
		if _, err := strconv.ParseUint(s.Footer, 16, 32); err != nil || len(s.Footer) != 8 {
			return bad("segment %s: footer checksum %q", s.Name, s.Footer)
		}
		if err := e.checkOwnRollup(s); err != nil {
			return bad("segment %s: %v", s.Name, err)
		}
	}
	for _, n := range e.Operation.Added {
		if !live[n] {
			return bad("added segment %s is not live", n)
		}
	}
	for _, n := range e.Operation.Removed {
		if !validSegmentName(n) {
			return bad("removed segment name %q", n)
		}
		if live[n] {
			return bad("removed segment %s is live", n)
		}
	}
	return nil
}

// timeLayout is the layout of interval ends: RFC 3339 with milliseconds, UTC.
const timeLayout = "2006-01-02T15:04:05.000Z"

// ParseInterval parses "start/end" as columns.Interval.String writes it.
func ParseInterval(s string) (columns.Interval, error) {
	a, b, ok := strings.Cut(s, "/")
	if !ok {
		return columns.Interval{}, fmt.Errorf("interval %q: want start/end", s)
	}
	start, err := time.Parse(timeLayout, a)
	if err != nil {
		return columns.Interval{}, fmt.Errorf("interval %q: %w", s, err)
	}
	end, err := time.Parse(timeLayout, b)
	if err != nil {
		return columns.Interval{}, fmt.Errorf("interval %q: %w", s, err)
	}
	iv := columns.Interval{Start: start.UnixMilli(), End: end.UnixMilli()}
	if iv.End < iv.Start {
		return columns.Interval{}, fmt.Errorf("interval %q ends before it starts", s)
	}
	return iv, nil
}

// logDir is the directory of the log's entries; segmentsDir that of the segments.
const (
	logDir      = "_log"
	segmentsDir = "segments"
)

// entryName returns the name of version v's entry: _log/ and the version in 20 digits, so
// that names sort as versions do.
func entryName(v int) string { return fmt.Sprintf("%s/%020d.json", logDir, v) }

// parseEntryName returns the version of an entry's base name, ok false for any other name
// (temp files among them).
func parseEntryName(base string) (int, bool) {
	digits, ok := strings.CutSuffix(base, ".json")
	if !ok || len(digits) != 20 {
		return 0, false
	}
	for _, c := range []byte(digits) {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	v, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || v < 1 || v > int64(maxVersion) {
		return 0, false
	}
	return int(v), true
}

// maxVersion bounds version numbers (they fit an int everywhere).
const maxVersion = 1<<31 - 1
