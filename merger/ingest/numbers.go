package ingest

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// The number syntax of metrics and epoch times is decimal only: an optional sign, digits with
// an optional fraction (digits on at least one side of the point), an optional exponent
// (e or E, an optional sign, digits). Go's literal forms (1_000, 0x10, 0x1p4, 0b1, 0o7), inf
// and nan are not numbers.

// decimal is a number in that syntax: ±digits × 10^exp, exactly.
type decimal struct {
	neg    bool
	digits string // significant digits: no leading or trailing zero; "" for zero
	exp    int64  // clamped to ±(1<<40) for huge exponents
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// parseDecimal parses s in the decimal syntax; ok is false when s is not in it.
func parseDecimal(s string) (d decimal, ok bool) {
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		d.neg = s[i] == '-'
		i++
	}
	start := i
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	intPart, frac := s[start:i], ""
	if i < len(s) && s[i] == '.' {
		i++
		k := i
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		frac = s[k:i]
	}
	if intPart == "" && frac == "" {
		return d, false
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		neg := false
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			neg = s[i] == '-'
			i++
		}
		k := i
		for i < len(s) && isDigit(s[i]) {
			if d.exp < 1<<40 {
				d.exp = d.exp*10 + int64(s[i]-'0')
			}
			i++
		}
		if i == k {
			return d, false
		}
		if neg {
			d.exp = -d.exp
		}
	}
	if i != len(s) {
		return d, false
	}
	digits := strings.TrimLeft(intPart+frac, "0")
	d.exp -= int64(len(frac))
	t := strings.TrimRight(digits, "0")
	d.exp += int64(len(digits) - len(t))
	d.digits = t
	if t == "" {
		d.exp = 0
	}
	return d, true
}

// int64 returns the decimal's value when it is an integer within int64.
func (d decimal) int64() (n int64, isInt, inRange bool) {
	if d.digits == "" {
		return 0, true, true
	}
	if d.exp < 0 {
		return 0, false, true
	}
	if int64(len(d.digits))+d.exp > 19 {
		return 0, true, false
	}
	s := d.digits + strings.Repeat("0", int(d.exp))
	if d.neg {
		s = "-" + s
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, true, err == nil
}

// parseLong parses the text of a long metric: a decimal integer, or a decimal number whose
// value is an integer (1.0, 1e3), exactly; never through float64, never clamped.
func parseLong(s string) (int64, error) {
	if n, ok := parseInt10(s); ok {
		return n, nil
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n, nil
	}
	d, ok := parseDecimal(s)
	if !ok {
		return 0, fmt.Errorf("not an integer: %q", s)
	}
	n, isInt, inRange := d.int64()
	switch {
	case !isInt:
		return 0, fmt.Errorf("not an integer: %q", s)
	case !inRange:
		return 0, fmt.Errorf("integer out of range: %q", s)
	}
	return n, nil
}

// parseInt10 parses s when it is an optional sign and 1 to 18 decimal digits, the common case
// of metrics and epoch times, which cannot overflow: the value strconv.ParseInt(s, 10, 64)
// gives, with less work. Anything else is left to strconv (ok false).
func parseInt10(s string) (n int64, ok bool) {
	neg := false
	if len(s) > 0 && (s[0] == '-' || s[0] == '+') {
		neg = s[0] == '-'
		s = s[1:]
	}
	if len(s) == 0 || len(s) > 18 {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		c := s[i] - '0'
		if c > 9 {
			return 0, false
		}
		n = n*10 + int64(c)
	}
	if neg {
		n = -n
	}
	return n, true
}

// parseDouble parses the text of a double metric: a decimal number, rounded to the nearest
// float64; one past the float64 range, inf and nan are errors.
func parseDouble(s string) (float64, error) {
	if _, ok := parseDecimal(s); !ok {
		return 0, fmt.Errorf("not a finite number: %q", s)
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, fmt.Errorf("number out of range: %q", s)
	}
	return f, nil
}
