package table

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"github.com/writeout/writeout/columns"
)

// class is a segment's rollup state: whether its rows are rolled up, and the granularity its
// times are truncated to. The segments of a table share their columns; their classes may
// differ (Segment.Rollup).
type class struct {
	rollup bool
	gran   columns.Granularity
}

// classOf returns the class of schema s.
func classOf(s columns.Schema) class { return class{rollup: s.Rollup, gran: s.Granularity} }

// apply returns s with c's rollup and granularity.
func (c class) apply(s columns.Schema) columns.Schema {
	s.Rollup, s.Granularity = c.rollup, c.gran
	return s
}

// String describes c: "rollup at hour", "no rollup, granularity none".
func (c class) String() string {
	if c.rollup {
		return "rollup at " + c.gran.String()
	}
	return "no rollup, granularity " + c.gran.String()
}

// compare orders classes: no rollup first, then by granularity.
func (c class) compare(o class) int {
	if c.rollup != o.rollup {
		if c.rollup {
			return 1
		}
		return -1
	}
	return cmp.Compare(c.gran, o.gran)
}

// sameColumns reports whether schemas a and b are equal but for rollup and granularity.
func sameColumns(a, b columns.Schema) bool { return classOf(b).apply(a).Equal(b) }

// ownRollup reports whether s records a rollup state of its own (either field set).
func (s Segment) ownRollup() bool { return s.Rollup != nil || s.Granularity != nil }

// classIn returns s's class in a version whose schema is base (nil: none yet, the zero class).
func (s Segment) classIn(base *columns.Schema) class {
	var c class
	if base != nil {
		c = classOf(*base)
	}
	if s.Rollup != nil {
		c.rollup = *s.Rollup
	}
	if s.Granularity != nil {
		c.gran = *s.Granularity
	}
	return c
}

// withClass returns s recording class c in a version whose schema is base: nothing of its
// own when c is base's.
func (s Segment) withClass(base columns.Schema, c class) Segment {
	s.Rollup, s.Granularity = nil, nil
	if c != classOf(base) {
		r, g := c.rollup, c.gran
		s.Rollup, s.Granularity = &r, &g
	}
	return s
}

// checkOwnRollup checks segment s's own rollup in entry e: none in format 1; else whole (both
// fields), a known granularity, and other than the entry schema's (one meaning, one encoding).
func (e *Entry) checkOwnRollup(s Segment) error {
	if !s.ownRollup() {
		return nil
	}
	switch {
	case e.Format < Format2:
		return fmt.Errorf("a rollup of its own in format %d", e.Format)
	case s.Rollup == nil || s.Granularity == nil:
		return errors.New("rollup and granularity go together")
	case *s.Granularity > columns.GranularityDay:
		return fmt.Errorf("unknown granularity %d", *s.Granularity)
	case e.Schema != nil && s.classIn(e.Schema) == classOf(*e.Schema):
		return errors.New("its own rollup is the entry's")
	}
	return nil
}

// checkOwnRollupForm checks the form of an added segment's own rollup (Change.Added): whole,
// of a known granularity.
func checkOwnRollupForm(s Segment) error {
	if !s.ownRollup() {
		return nil
	}
	if s.Rollup == nil || s.Granularity == nil {
		return errors.New("rollup and granularity go together")
	}
	if *s.Granularity > columns.GranularityDay {
		return fmt.Errorf("unknown granularity %d", *s.Granularity)
	}
	return nil
}

// entryFormat returns the format an entry listing segs is written in: 1 unless one records a
// rollup of its own, so that readers of format 1 read the tables that need nothing newer.
func entryFormat(segs []Segment) int {
	if slices.ContainsFunc(segs, Segment.ownRollup) {
		return Format2
	}
	return Format1
}

// SegmentSchema returns the schema of segment s, live in the version: the entry's schema, with
// the segment's own rollup and granularity when it records them (Segment.Rollup). Before the
// first segment, when the entry has no schema, it is the zero schema with those.
func (e *Entry) SegmentSchema(s Segment) columns.Schema {
	var out columns.Schema
	if e.Schema != nil {
		out = e.Schema.Clone()
	}
	return s.classIn(e.Schema).apply(out)
}

// CommonSchema returns a schema that every live segment's rows fit, what a reader of all of
// them together (an export) declares: the table's columns, rolled up only when every live
// segment is, at the finest of their granularities (every row's time is truncated to it). With
// no live segment it is the entry's schema; ok is false before the first segment.
func (e *Entry) CommonSchema() (s columns.Schema, ok bool) {
	if e.Schema == nil {
		return columns.Schema{}, false
	}
	if len(e.Segments) == 0 {
		return e.Schema.Clone(), true
	}
	c := e.Segments[0].classIn(e.Schema)
	for _, seg := range e.Segments[1:] {
		sc := seg.classIn(e.Schema)
		c.rollup = c.rollup && sc.rollup
		c.gran = min(c.gran, sc.gran)
	}
	return c.apply(e.Schema.Clone()), true
}

// Mixed reports whether the live segments differ in rollup or granularity (SegmentSchema).
func (e *Entry) Mixed() bool {
	for _, s := range e.Segments {
		if s.classIn(e.Schema) != e.Segments[0].classIn(e.Schema) {
			return true
		}
	}
	return false
}
