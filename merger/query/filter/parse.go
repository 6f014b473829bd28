package filter

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// parseError is a syntax error in a filter expression. pos is the 1-based byte column where
// the problem was found.
type parseError struct {
	expr string
	pos  int
	msg  string
}

func (e *parseError) Error() string {
	return fmt.Sprintf("filter: column %d: %s", e.pos, e.msg)
}

// Parse parses a filter expression (see the package documentation for the language).
// The empty expression (or one of only spaces) gives a nil Filter, which selects every row.
func Parse(expr string) (Filter, error) {
	p := &parser{src: expr}
	if err := p.next(); err != nil {
		return nil, err
	}
	if p.tok.kind == tokEOF {
		return nil, nil
	}
	f, err := p.parseOr(0)
	if err != nil {
		return nil, err
	}
	if p.tok.kind != tokEOF {
		return nil, p.errorf(p.tok.pos, "unexpected %s after the end of the expression", p.tok)
	}
	return f, nil
}

// MustParse is Parse for expressions known to be valid (tests, constants); it
// panics on a syntax error.
func MustParse(expr string) Filter {
	f, err := Parse(expr)
	if err != nil {
		panic(err)
	}
	return f
}

type tokKind uint8

const (
	tokEOF tokKind = iota
	tokIdent
	tokString
	tokKeyword
	tokLParen
	tokRParen
	tokComma
	tokEq
	tokNe
	tokLt
	tokLe
	tokGt
	tokGe
	tokNumber
)

type token struct {
	kind tokKind
	text string // identifier (unquoted), string value, or lower-case keyword
	pos  int    // 0-based byte offset
}

func (t token) String() string {
	switch t.kind {
	case tokEOF:
		return "end of expression"
	case tokIdent:
		return fmt.Sprintf("name %q", t.text)
	case tokString:
		return fmt.Sprintf("string %s", quoteString(t.text))
	case tokKeyword:
		return fmt.Sprintf("%q", t.text)
	case tokLParen:
		return `"("`
	case tokRParen:
		return `")"`
	case tokComma:
		return `","`
	case tokEq:
		return `"="`
	case tokNe:
		return `"!="`
	case tokLt, tokLe, tokGt, tokGe:
		return fmt.Sprintf("%q", t.text)
	case tokNumber:
		return "number " + t.text
	}
	return "token"
}

// maxDepth bounds nesting so that a hostile expression cannot exhaust the stack.
const maxDepth = 200

type parser struct {
	src string
	off int
	tok token
}

func (p *parser) errorf(pos int, format string, args ...any) error {
	return &parseError{expr: p.src, pos: pos + 1, msg: fmt.Sprintf(format, args...)}
}

func (p *parser) next() error {
	s := p.src
	for p.off < len(s) && (s[p.off] == ' ' || s[p.off] == '\t' || s[p.off] == '\n' || s[p.off] == '\r') {
		p.off++
	}
	start := p.off
	if p.off >= len(s) {
		p.tok = token{kind: tokEOF, pos: start}
		return nil
	}
	c := s[p.off]
	switch {
	case c == '(':
		p.off++
		p.tok = token{kind: tokLParen, pos: start}
	case c == ')':
		p.off++
		p.tok = token{kind: tokRParen, pos: start}
	case c == ',':
		p.off++
		p.tok = token{kind: tokComma, pos: start}
	case c == '=':
		p.off++
		if p.off < len(s) && s[p.off] == '=' { // == is accepted as =
			p.off++
		}
		p.tok = token{kind: tokEq, pos: start}
	case c == '!':
		if p.off+1 < len(s) && s[p.off+1] == '=' {
			p.off += 2
			p.tok = token{kind: tokNe, pos: start}
			return nil
		}
		return p.errorf(start, "unexpected %q (did you mean != ?)", c)
	case c == '<' || c == '>':
		p.off++
		kind, text := tokLt, "<"
		if c == '>' {
			kind, text = tokGt, ">"
		}
		switch {
		case p.off < len(s) && s[p.off] == '=':
			p.off++
			kind, text = kind+1, text+"=" // tokLe, tokGe
		case c == '<' && p.off < len(s) && s[p.off] == '>':
			p.off++
			kind, text = tokNe, "<>"
		}
		p.tok = token{kind: kind, text: text, pos: start}
	case '0' <= c && c <= '9' || c == '.' || c == '-':
		text, err := p.number()
		if err != nil {
			return err
		}
		p.tok = token{kind: tokNumber, text: text, pos: start}
	case c == '\'' || c == '"':
		text, err := p.quoted(c)
		if err != nil {
			return err
		}
		kind := tokString
		if c == '"' {
			kind = tokIdent
		}
		p.tok = token{kind: kind, text: text, pos: start}
	case c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z':
		for p.off < len(s) {
			c := s[p.off]
			if c == '_' || c == '.' || c == '-' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' {
				p.off++
				continue
			}
			break
		}
		word := s[start:p.off]
		if isKeyword(word) {
			p.tok = token{kind: tokKeyword, text: strings.ToLower(word), pos: start}
		} else {
			p.tok = token{kind: tokIdent, text: word, pos: start}
		}
	default:
		r, _ := utf8.DecodeRuneInString(s[p.off:])
		return p.errorf(start, "unexpected character %q", r)
	}
	return nil
}

// quoted reads a quoted literal starting at p.off (the opening quote q) with the escapes
// \\ \' \" \n \r \t \xHH \uHHHH \UHHHHHHHH.
func (p *parser) quoted(q byte) (string, error) {
	s := p.src
	start := p.off
	p.off++
	var b []byte
	for {
		if p.off >= len(s) {
			return "", p.errorf(start, "unterminated quoted %s", map[byte]string{'\'': "string", '"': "name"}[q])
		}
		c := s[p.off]
		switch c {
		case q:
			p.off++
			return string(b), nil
		case '\\':
			if p.off+1 >= len(s) {
				return "", p.errorf(p.off, "unterminated escape")
			}
			e := s[p.off+1]
			switch e {
			case '\\', '\'', '"':
				b = append(b, e)
				p.off += 2
			case 'n':
				b = append(b, '\n')
				p.off += 2
			case 'r':
				b = append(b, '\r')
				p.off += 2
			case 't':
				b = append(b, '\t')
				p.off += 2
			case 'x', 'u', 'U':
				n := map[byte]int{'x': 2, 'u': 4, 'U': 8}[e]
				if p.off+2+n > len(s) {
					return "", p.errorf(p.off, "escape \\%c needs %d hex digits", e, n)
				}
				var v rune
				for _, h := range []byte(s[p.off+2 : p.off+2+n]) {
					d := unhex(h)
					if d < 0 {
						return "", p.errorf(p.off, "escape \\%c needs %d hex digits", e, n)
					}
					v = v<<4 | rune(d)
				}
				if e == 'x' {
					b = append(b, byte(v))
				} else {
					if !utf8.ValidRune(v) {
						return "", p.errorf(p.off, "escape %s is not a valid code point", s[p.off:p.off+2+n])
					}
					b = utf8.AppendRune(b, v)
				}
				p.off += 2 + n
			default:
				return "", p.errorf(p.off, "unknown escape \\%c", e)
			}
		default:
			b = append(b, c)
			p.off++
		}
	}
}

func unhex(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c-'a') + 10
	case 'A' <= c && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

func (p *parser) isKeyword(k string) bool { return p.tok.kind == tokKeyword && p.tok.text == k }

func (p *parser) parseOr(depth int) (Filter, error) {
	f, err := p.parseAnd(depth)
	if err != nil {
		return nil, err
	}
	if !p.isKeyword("or") {
		return f, nil
	}
	out := orFilter{f}
	for p.isKeyword("or") {
		if err := p.next(); err != nil {
			return nil, err
		}
		g, err := p.parseAnd(depth)
		if err != nil {
			return nil, err
		}
		out = append(out, g)
	}
	return out, nil
}

func (p *parser) parseAnd(depth int) (Filter, error) {
	f, err := p.parseUnary(depth)
	if err != nil {
		return nil, err
	}
	if !p.isKeyword("and") {
		return f, nil
	}
	out := andFilter{f}
	for p.isKeyword("and") {
		if err := p.next(); err != nil {
			return nil, err
		}
		g, err := p.parseUnary(depth)
		if err != nil {
			return nil, err
		}
		out = append(out, g)
	}
	return out, nil
}

func (p *parser) parseUnary(depth int) (Filter, error) {
	if depth > maxDepth {
		return nil, p.errorf(p.tok.pos, "expression nested deeper than %d", maxDepth)
	}
	switch {
	case p.isKeyword("not"):
		if err := p.next(); err != nil {
			return nil, err
		}
		f, err := p.parseUnary(depth + 1)
		if err != nil {
			return nil, err
		}
		return notFilter{f}, nil
	case p.tok.kind == tokLParen:
		open := p.tok.pos
		if err := p.next(); err != nil {
			return nil, err
		}
		f, err := p.parseOr(depth + 1)
		if err != nil {
			return nil, err
		}
		if p.tok.kind != tokRParen {
			return nil, p.errorf(p.tok.pos, "expected \")\" to close the \"(\" at column %d, found %s", open+1, p.tok)
		}
		if err := p.next(); err != nil {
			return nil, err
		}
		return f, nil // "(a and b) and c" keeps its shape: andFilter{andFilter{a, b}, c}
	case p.isKeyword("true"):
		err := p.next()
		return andFilter{}, err
	case p.isKeyword("false"):
		err := p.next()
		return orFilter{}, err
	case p.tok.kind == tokIdent:
		return p.parseComparison()
	}
	return nil, p.errorf(p.tok.pos, "expected a dimension name, \"not\" or \"(\", found %s", p.tok)
}

func (p *parser) parseComparison() (Filter, error) {
	dim := p.tok.text
	if err := p.next(); err != nil {
		return nil, err
	}
	switch {
	case p.tok.kind == tokEq || p.tok.kind == tokNe:
		ne := p.tok.kind == tokNe
		if err := p.next(); err != nil {
			return nil, err
		}
		if p.tok.kind == tokNumber {
			op := opEq
			if ne {
				op = opNe
			}
			f := cmpFilter{Col: dim, Op: op, Lo: Number(p.tok.text)}
			return f, p.next()
		}
		if p.tok.kind != tokString {
			return nil, p.errorf(p.tok.pos, "expected a quoted string or a number after the comparison, found %s", p.tok)
		}
		var f Filter = eqFilter{Dim: dim, Value: p.tok.text}
		if ne {
			f = notFilter{f}
		}
		return f, p.next()
	case p.tok.kind >= tokLt && p.tok.kind <= tokGe:
		op := map[tokKind]cmpOp{tokLt: opLt, tokLe: opLe, tokGt: opGt, tokGe: opGe}[p.tok.kind]
		if err := p.next(); err != nil {
			return nil, err
		}
		if p.tok.kind != tokNumber {
			return nil, p.errorf(p.tok.pos, "expected a number after %s (ordering comparisons apply to long and double metrics), found %s", op, p.tok)
		}
		f := cmpFilter{Col: dim, Op: op, Lo: Number(p.tok.text)}
		return f, p.next()
	case p.isKeyword("between"):
		if err := p.next(); err != nil {
			return nil, err
		}
		return p.parseBetween(dim, opBetween)
	case p.isKeyword("in"):
		if err := p.next(); err != nil {
			return nil, err
		}
		return p.parseIn(dim)
	case p.isKeyword("not"):
		if err := p.next(); err != nil {
			return nil, err
		}
		if p.isKeyword("between") {
			if err := p.next(); err != nil {
				return nil, err
			}
			return p.parseBetween(dim, opNotBetween)
		}
		if !p.isKeyword("in") {
			return nil, p.errorf(p.tok.pos, "expected \"in\" or \"between\" after %q not, found %s", dim, p.tok)
		}
		if err := p.next(); err != nil {
			return nil, err
		}
		f, err := p.parseIn(dim)
		if err != nil {
			return nil, err
		}
		if in, ok := f.(numInFilter); ok {
			in.Not = true // null rows match neither in nor not in
			return in, nil
		}
		return notFilter{f}, nil
	case p.isKeyword("is"):
		if err := p.next(); err != nil {
			return nil, err
		}
		not := false
		if p.isKeyword("not") {
			not = true
			if err := p.next(); err != nil {
				return nil, err
			}
		}
		if !p.isKeyword("null") {
			return nil, p.errorf(p.tok.pos, "expected \"null\" after \"is\", found %s", p.tok)
		}
		var f Filter = nullFilter{Dim: dim}
		if not {
			f = notFilter{f}
		}
		return f, p.next()
	}
	return nil, p.errorf(p.tok.pos, "expected =, !=, <, <=, >, >=, between, in, not in or is after %q, found %s", dim, p.tok)
}

func (p *parser) parseBetween(col string, op cmpOp) (Filter, error) {
	if p.tok.kind != tokNumber {
		return nil, p.errorf(p.tok.pos, "expected a number after \"between\", found %s", p.tok)
	}
	lo := Number(p.tok.text)
	if err := p.next(); err != nil {
		return nil, err
	}
	if !p.isKeyword("and") {
		return nil, p.errorf(p.tok.pos, "expected \"and\" after \"between %s\", found %s", lo, p.tok)
	}
	if err := p.next(); err != nil {
		return nil, err
	}
	if p.tok.kind != tokNumber {
		return nil, p.errorf(p.tok.pos, "expected a number after \"between %s and\", found %s", lo, p.tok)
	}
	f := cmpFilter{Col: col, Op: op, Lo: lo, Hi: Number(p.tok.text)}
	return f, p.next()
}

// parseIn parses the list after "in": quoted strings (a dimension's values), or numbers (a
// metric's).
func (p *parser) parseIn(dim string) (Filter, error) {
	if p.tok.kind != tokLParen {
		return nil, p.errorf(p.tok.pos, "expected \"(\" after \"in\", found %s", p.tok)
	}
	f := inFilter{Dim: dim, Values: []string{}}
	var nums []Number
	for {
		if err := p.next(); err != nil {
			return nil, err
		}
		if p.tok.kind == tokRParen && len(f.Values) == 0 && len(nums) == 0 {
			break
		}
		switch {
		case p.tok.kind == tokString && nums == nil:
			f.Values = append(f.Values, p.tok.text)
		case p.tok.kind == tokNumber && len(f.Values) == 0:
			nums = append(nums, Number(p.tok.text))
		case nums != nil:
			return nil, p.errorf(p.tok.pos, "expected a number in the list of numbers, found %s", p.tok)
		case len(f.Values) > 0:
			return nil, p.errorf(p.tok.pos, "expected a quoted string in the list of strings, found %s", p.tok)
		default:
			return nil, p.errorf(p.tok.pos, "expected a quoted string or a number in the list, found %s", p.tok)
		}
		if err := p.next(); err != nil {
			return nil, err
		}
		if p.tok.kind == tokRParen {
			break
		}
		if p.tok.kind != tokComma {
			return nil, p.errorf(p.tok.pos, "expected \",\" or \")\" in the list, found %s", p.tok)
		}
	}
	if nums != nil {
		return numInFilter{Col: dim, Nums: nums}, p.next()
	}
	return f, p.next()
}

// number reads a number literal starting at p.off: an optional minus sign, digits with an
// optional decimal point (1, 1.5, .5, 1.), and an optional exponent (1e9, 2.5E-3).
func (p *parser) number() (string, error) {
	s := p.src
	start := p.off
	digits := func() int {
		n := 0
		for p.off < len(s) && '0' <= s[p.off] && s[p.off] <= '9' {
			p.off++
			n++
		}
		return n
	}
	if s[p.off] == '-' {
		p.off++
	}
	n := digits()
	if p.off < len(s) && s[p.off] == '.' {
		p.off++
		n += digits()
	}
	if n == 0 {
		return "", p.errorf(start, "malformed number %q: digits expected", s[start:p.off])
	}
	if p.off < len(s) && (s[p.off] == 'e' || s[p.off] == 'E') {
		p.off++
		if p.off < len(s) && (s[p.off] == '+' || s[p.off] == '-') {
			p.off++
		}
		if digits() == 0 {
			return "", p.errorf(start, "malformed number %q: exponent digits expected", s[start:p.off])
		}
	}
	if p.off < len(s) {
		if c := s[p.off]; c == '_' || c == '.' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' {
			return "", p.errorf(start, "malformed number: %q follows %q", c, s[start:p.off])
		}
	}
	return s[start:p.off], nil
}
