package query

import (
	"cmp"
	"container/heap"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/writeout/writeout/columns"
)

// RowsColumn is the name of a query's output column that counts the stored rows of a group
// (Row.Rows); columns.TimeColumn (__time) names the time bucket.
const RowsColumn = "__rows"

// OrderKey orders a query's groups by one of its output columns: columns.TimeColumn (the
// time bucket, as Row.Time), a GroupBy dimension, RowsColumn or a metric's name (its
// aggregated value; a sketch's estimate, AggValue.Long). Nulls come first in ascending order,
// last in descending order; dimension values sort in byte order.
type OrderKey struct {
	Column string
	Desc   bool
}

// String writes k as ParseOrderBy reads it.
func (k OrderKey) String() string {
	name := k.Column
	if name == "" || strings.ContainsAny(name, `", `) || strings.TrimSpace(name) != name {
		name = `"` + strings.ReplaceAll(name, `"`, `""`) + `"`
	}
	if k.Desc {
		return name + " desc"
	}
	return name
}

// ParseOrderBy parses a comma-separated list of output columns, each optionally followed
// by asc or desc (case-insensitive; asc when neither): "__time, added desc". A name holding
// a comma, a space or a double quote is written in double quotes, a quote in it doubled
// ("page title" desc). The empty string is no order. A malformed list is an error wrapping
// ErrInvalid that names the item (1-based).
func ParseOrderBy(s string) ([]OrderKey, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []OrderKey
	item := 1
	i := 0
	for {
		for i < len(s) && s[i] == ' ' {
			i++
		}
		var k OrderKey
		switch {
		case i < len(s) && s[i] == '"':
			var b strings.Builder
			j := i + 1
			for {
				if j >= len(s) {
					return nil, fmt.Errorf("%w: order-by item %d: unterminated quoted name %s", ErrInvalid, item, s[i:])
				}
				if s[j] == '"' {
					if j+1 < len(s) && s[j+1] == '"' {
						b.WriteByte('"')
						j += 2
						continue
					}
					break
				}
				b.WriteByte(s[j])
				j++
			}
			k.Column = b.String()
			i = j + 1
		default:
			j := i
			for j < len(s) && s[j] != ',' && s[j] != ' ' {
				if s[j] == '"' {
					return nil, fmt.Errorf("%w: order-by item %d: a quote inside a bare name (quote the whole name)", ErrInvalid, item)
				}
				j++
			}
			k.Column = s[i:j]
			if k.Column == "" {
				return nil, fmt.Errorf("%w: order-by item %d is empty", ErrInvalid, item)
			}
			i = j
		}
		for i < len(s) && s[i] == ' ' {
			i++
		}
		if j := i; j < len(s) && s[j] != ',' {
			for j < len(s) && s[j] != ',' && s[j] != ' ' {
				j++
			}
			switch dir := s[i:j]; {
			case strings.EqualFold(dir, "asc"):
			case strings.EqualFold(dir, "desc"):
				k.Desc = true
			default:
				return nil, fmt.Errorf("%w: order-by item %d (%s): %q is not asc or desc", ErrInvalid, item, k.Column, dir)
			}
			i = j
			for i < len(s) && s[i] == ' ' {
				i++
			}
		}
		out = append(out, k)
		if i >= len(s) {
			return out, nil
		}
		if s[i] != ',' {
			return nil, fmt.Errorf("%w: order-by item %d (%s): expected \",\" after asc or desc, found %q", ErrInvalid, item, k.Column, s[i:])
		}
		i++
		item++
	}
}

// orderCol is an OrderKey resolved against the output columns.
type orderCol struct {
	kind int // orderTime, orderRows, orderDim (index k), orderMetric (index k)
	k    int
	desc bool
}

const (
	orderTime = iota
	orderRows
	orderDim
	orderMetric
)

// resolveOrder resolves spec's OrderBy against the output columns, and checks Limit.
func resolveOrder(spec *Spec, metrics []columns.Metric) ([]orderCol, error) {
	if spec.Limit < 0 {
		return nil, fmt.Errorf("%w: limit %d is negative", ErrInvalid, spec.Limit)
	}
	names := append([]string{columns.TimeColumn}, spec.GroupBy...)
	names = append(names, RowsColumn)
	for _, m := range metrics {
		names = append(names, m.Name)
	}
	var out []orderCol
	seen := map[string]bool{}
	for _, key := range spec.OrderBy {
		if seen[key.Column] {
			return nil, fmt.Errorf("%w: order-by column %q listed twice", ErrInvalid, key.Column)
		}
		seen[key.Column] = true
		c := orderCol{desc: key.Desc}
		switch {
		case key.Column == columns.TimeColumn:
			c.kind = orderTime
		case slices.Contains(spec.GroupBy, key.Column):
			c.kind, c.k = orderDim, slices.Index(spec.GroupBy, key.Column)
		case key.Column == RowsColumn:
			c.kind = orderRows
		default:
			k := slices.IndexFunc(metrics, func(m columns.Metric) bool { return m.Name == key.Column })
			if k < 0 {
				return nil, fmt.Errorf("%w: order-by column %q is not an output column of the query (%s)", ErrInvalid, key.Column, strings.Join(names, ", "))
			}
			c.kind, c.k = orderMetric, k
		}
		out = append(out, c)
	}
	return out, nil
}

// defaultOrder reports whether cols order groups as the Result's default order does: a
// prefix of (time bucket, group-by dimensions...), ascending (with all, the time bucket is
// one: no __time).
func defaultOrder(cols []orderCol, all bool) bool {
	next := 0 // the next dimension
	for i, c := range cols {
		switch {
		case c.desc:
			return false
		case c.kind == orderTime && i == 0 && !all:
		case c.kind == orderDim && c.k == next && (all || i > 0):
			next++
		default:
			return false
		}
	}
	return true
}

// compareRows compares a and b by cols.
func compareRows(cols []orderCol, a, b *Row) int {
	for _, c := range cols {
		var r int
		switch c.kind {
		case orderTime:
			r = cmp.Compare(a.Time, b.Time)
		case orderRows:
			r = cmp.Compare(a.Rows, b.Rows)
		case orderDim:
			x, y := a.Groups[c.k], b.Groups[c.k]
			switch {
			case x.Null || y.Null:
				r = -cmp.Compare(boolInt(x.Null), boolInt(y.Null))
			default:
				r = strings.Compare(x.Value, y.Value)
			}
		case orderMetric:
			x, y := &a.Values[c.k], &b.Values[c.k]
			switch {
			case x.Null || y.Null:
				r = -cmp.Compare(boolInt(x.Null), boolInt(y.Null))
			case x.Type == columns.MetricDouble:
				r = cmp.Compare(x.Double, y.Double)
			default:
				r = cmp.Compare(x.Long, y.Long)
			}
		}
		if c.desc {
			r = -r
		}
		if r != 0 {
			return r
		}
	}
	return 0
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// errLimit ends a query whose limit is reached (ordered.each returns it; runEach does not).
var errLimit = errors.New("query: limit reached")

// ordered applies a query's order and limit to the parts RunEach hands on in default order.
type ordered struct {
	cols    []orderCol
	limit   int  // 0: none
	reuse   bool // the parts' memory is reused (RunEach): held groups are copied
	each    func(Result) error
	stream  bool // the order is the default one: parts go on as they come, cut at the limit
	groupBy []string
	metrics []columns.Metric
	sent    int
	called  bool
	// held: the groups held (every one, or with a limit the best limit ones, in a heap whose
	// root is the worst); seq: each one's position in default order, the tie-breaker that
	// makes the order stable
	held []heldRow
}

type heldRow struct {
	row Row
	seq int
}

func newOrdered(cols []orderCol, limit int, all, reuse bool, each func(Result) error) *ordered {
	return &ordered{cols: cols, limit: limit, reuse: reuse, each: each, stream: defaultOrder(cols, all)}
}

// take receives a part in default order.
func (o *ordered) take(part Result) error {
	if o.groupBy == nil {
		o.groupBy, o.metrics = part.GroupBy, part.Metrics
	}
	if o.stream {
		if o.limit > 0 && o.sent+len(part.Rows) >= o.limit {
			part.Rows = part.Rows[:o.limit-o.sent]
			o.sent += len(part.Rows)
			if err := o.send(part); err != nil {
				return err
			}
			return errLimit
		}
		o.sent += len(part.Rows)
		return o.send(part)
	}
	for i := range part.Rows {
		r := &part.Rows[i]
		seq := o.sent
		o.sent++
		if o.limit == 0 || len(o.held) < o.limit {
			row := *r // a part of memory of its own (not reuse) is kept as it is
			if o.reuse {
				row = cloneRow(r, nil)
			}
			o.held = append(o.held, heldRow{row: row, seq: seq})
			if o.limit > 0 {
				heap.Fix((*worstFirst)(o), len(o.held)-1)
			}
			continue
		}
		// Full: r replaces the worst held group when it orders before it (a later group
		// never does on a tie: stable). It takes the worst's memory when that is its own.
		if compareRows(o.cols, r, &o.held[0].row) < 0 {
			var dst *Row
			if o.reuse {
				dst = &o.held[0].row
			}
			o.held[0] = heldRow{row: cloneRow(r, dst), seq: seq}
			heap.Fix((*worstFirst)(o), 0)
		}
	}
	return nil
}

func (o *ordered) send(part Result) error {
	o.called = true
	return o.each(part)
}

// finish hands the held groups on, sorted, in parts of partRows; each at least once.
func (o *ordered) finish() error {
	if o.stream {
		if !o.called {
			return o.send(Result{GroupBy: o.groupBy, Metrics: o.metrics})
		}
		return nil
	}
	slices.SortFunc(o.held, func(a, b heldRow) int {
		if c := compareRows(o.cols, &a.row, &b.row); c != 0 {
			return c
		}
		return cmp.Compare(a.seq, b.seq)
	})
	rows := make([]Row, len(o.held))
	for i := range o.held {
		rows[i] = o.held[i].row
	}
	o.held = nil
	if len(rows) == 0 {
		return o.send(Result{GroupBy: o.groupBy, Metrics: o.metrics})
	}
	for lo := 0; lo < len(rows); lo += partRows {
		part := Result{GroupBy: o.groupBy, Metrics: o.metrics, Rows: rows[lo:min(len(rows), lo+partRows)]}
		if err := o.send(part); err != nil {
			return err
		}
	}
	return nil
}

// cloneRow copies r into memory of its own (dst's, when it has room).
func cloneRow(r *Row, dst *Row) Row {
	out := *r
	var g []GroupValue
	var v []AggValue
	if dst != nil {
		g, v = dst.Groups[:0], dst.Values[:0]
	}
	out.Groups = append(g, r.Groups...)
	out.Values = append(v, r.Values...)
	return out
}

// worstFirst is the heap of held groups whose root is the one that orders last.
type worstFirst ordered

func (h *worstFirst) Len() int { return len(h.held) }
func (h *worstFirst) Less(i, j int) bool {
	if c := compareRows(h.cols, &h.held[i].row, &h.held[j].row); c != 0 {
		return c > 0
	}
	return h.held[i].seq > h.held[j].seq
}
func (h *worstFirst) Swap(i, j int) { h.held[i], h.held[j] = h.held[j], h.held[i] }
func (h *worstFirst) Push(any)      { panic("query: worstFirst grows by append and Fix") }
func (h *worstFirst) Pop() any      { panic("query: worstFirst never pops") }
