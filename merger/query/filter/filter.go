package filter

import (
	"strings"
	"unicode/utf8"
)

// Filter selects rows of a segment or builder; Parse makes one from an expression, and a nil
// Filter selects every row. String renders a filter in the expression language that
// Parse reads (see the package documentation), so a filter survives a round trip.
//
// Semantics follow Druid's string dimensions, and SQL's comparisons for metrics (see the
// package documentation):
//   - "=" and "in" on a multi-value dimension match a row when any of its values matches.
//   - "is null" matches a row whose value is null (a multi-value row with an empty list is
//     null). A multi-value row holding a null element among other values is not null, and "="
//     never matches a null value or element.
//   - "not" is the complement within the rows: not d = 'a' also holds the null rows (two-valued
//     logic, as Druid's default null handling).
//   - A dimension the schema lacks is null in every row.
type Filter interface {
	String() string
	isFilter()
}

// eqFilter matches rows whose dimension Dim holds Value.
type eqFilter struct {
	Dim   string
	Value string
}

// inFilter matches rows whose dimension Dim holds any of Values.
type inFilter struct {
	Dim    string
	Values []string
}

// nullFilter matches rows whose dimension Dim is null.
type nullFilter struct {
	Dim string
}

// cmpOp is a comparison of a metric with numbers.
type cmpOp uint8

const (
	opEq cmpOp = iota
	opNe
	opLt
	opLe
	opGt
	opGe
	opBetween
	opNotBetween
)

var opNames = [...]string{"=", "!=", "<", "<=", ">", ">=", "between", "not between"}

func (o cmpOp) String() string { return opNames[o] }

// Number is a number literal as written in an expression: an optional minus sign, decimal
// digits with an optional point, an optional exponent (-12, 2.5, .5, 1e9, 2.5E-3). It is kept
// as text so that a comparison with a long metric is exact (see package documentation).
type Number string

// cmpFilter matches rows whose metric Col compares with Lo as Op says (Lo and Hi, inclusive,
// for between); a null value matches no comparison, not even !=.
type cmpFilter struct {
	Col    string
	Op     cmpOp
	Lo, Hi Number
}

// numInFilter matches rows whose metric Col equals any of Nums (Not: none of them); a null
// value matches neither.
type numInFilter struct {
	Col  string
	Nums []Number
	Not  bool
}

// andFilter matches rows that every filter matches; an empty one matches every row (true).
type andFilter []Filter

// orFilter matches rows that any filter matches; an empty one matches no row (false).
type orFilter []Filter

// notFilter matches the rows its filter does not.
type notFilter struct {
	Filter Filter
}

// Use is what a filter does with a column, which the column's kind must allow.
type Use uint8

const (
	// UseString compares the column with strings (=, !=, in): a dimension's use.
	UseString Use = iota + 1
	// UseNumber compares the column with numbers (<, <=, >, >=, =, !=, between, in): a long or
	// double metric's use.
	UseNumber
	// UseNull tests the column for null: a dimension or a long or double metric.
	UseNull
)

// Column is a column a filter reads, with what it does with it and the predicate as
// written (for messages).
type Column struct {
	Name string
	Use  Use
	Expr string
}

// Columns returns the predicates of f, each with its column, in the order written.
func Columns(f Filter) []Column {
	var out []Column
	var walk func(Filter)
	walk = func(f Filter) {
		switch f := f.(type) {
		case eqFilter:
			out = append(out, Column{f.Dim, UseString, f.String()})
		case inFilter:
			out = append(out, Column{f.Dim, UseString, f.String()})
		case nullFilter:
			out = append(out, Column{f.Dim, UseNull, f.String()})
		case cmpFilter:
			out = append(out, Column{f.Col, UseNumber, f.String()})
		case numInFilter:
			out = append(out, Column{f.Col, UseNumber, f.String()})
		case andFilter:
			for _, g := range f {
				walk(g)
			}
		case orFilter:
			for _, g := range f {
				walk(g)
			}
		case notFilter:
			walk(f.Filter)
		}
	}
	walk(f)
	return out
}

// Dims returns the column names f reads (dimensions and metrics), each once, first seen
// first (nil for nil).
func Dims(f Filter) []string {
	var out []string
	seen := map[string]bool{}
	for _, c := range Columns(f) {
		if !seen[c.Name] {
			seen[c.Name] = true
			out = append(out, c.Name)
		}
	}
	return out
}

func (eqFilter) isFilter()    {}
func (inFilter) isFilter()    {}
func (nullFilter) isFilter()  {}
func (cmpFilter) isFilter()   {}
func (numInFilter) isFilter() {}
func (andFilter) isFilter()   {}
func (orFilter) isFilter()    {}
func (notFilter) isFilter()   {}

func (f eqFilter) String() string { return quoteIdent(f.Dim) + " = " + quoteString(f.Value) }

func (f inFilter) String() string {
	var b strings.Builder
	b.WriteString(quoteIdent(f.Dim))
	b.WriteString(" in (")
	for i, v := range f.Values {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(quoteString(v))
	}
	b.WriteString(")")
	return b.String()
}

func (f cmpFilter) String() string {
	if f.Op == opBetween || f.Op == opNotBetween {
		return quoteIdent(f.Col) + " " + f.Op.String() + " " + string(f.Lo) + " and " + string(f.Hi)
	}
	return quoteIdent(f.Col) + " " + f.Op.String() + " " + string(f.Lo)
}

func (f numInFilter) String() string {
	var b strings.Builder
	b.WriteString(quoteIdent(f.Col))
	if f.Not {
		b.WriteString(" not")
	}
	b.WriteString(" in (")
	for i, v := range f.Nums {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(string(v))
	}
	b.WriteString(")")
	return b.String()
}

func (f nullFilter) String() string { return quoteIdent(f.Dim) + " is null" }

func (f andFilter) String() string { return joinFilters([]Filter(f), " and ", "true") }
func (f orFilter) String() string  { return joinFilters([]Filter(f), " or ", "false") }

func (f notFilter) String() string {
	if f.Filter == nil {
		return "not true"
	}
	return "not " + parenthesize(f.Filter)
}

func joinFilters(fs []Filter, sep, empty string) string {
	if len(fs) == 0 {
		return empty
	}
	parts := make([]string, len(fs))
	for i, f := range fs {
		parts[i] = parenthesize(f)
	}
	if len(fs) == 1 {
		return "(" + parts[0] + ")"
	}
	return strings.Join(parts, sep)
}

// parenthesize renders f so that it binds as one operand of and, or, not.
func parenthesize(f Filter) string {
	switch f := f.(type) {
	case nil:
		return "true"
	case andFilter, orFilter:
		return "(" + f.String() + ")"
	default:
		return f.String()
	}
}

// quoteString writes s as a single-quoted string literal of the expression language.
func quoteString(s string) string { return quoteWith(s, '\'') }

// quoteIdent writes a dimension name bare when it is a plain identifier and not a keyword,
// otherwise double-quoted with the string escapes.
func quoteIdent(s string) string {
	if isPlainIdent(s) {
		return s
	}
	return quoteWith(s, '"')
}

func quoteWith(s string, q byte) string {
	var b strings.Builder
	b.WriteByte(q)
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			b.WriteString(`\x`)
			b.WriteString(hex2(s[i]))
		case r == rune(q) || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			b.WriteString(`\x`)
			b.WriteString(hex2(byte(r)))
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	b.WriteByte(q)
	return b.String()
}

func hex2(c byte) string {
	const digits = "0123456789abcdef"
	return string([]byte{digits[c>>4], digits[c&15]})
}

func isPlainIdent(s string) bool {
	if s == "" || isKeyword(s) {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z':
		case i > 0 && ('0' <= c && c <= '9' || c == '.' || c == '-'):
		default:
			return false
		}
	}
	return true
}

func isKeyword(s string) bool {
	switch strings.ToLower(s) {
	case "and", "or", "not", "in", "is", "null", "true", "false", "between":
		return true
	}
	return false
}
