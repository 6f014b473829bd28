package main

import "strconv"

// A query's output is mostly small integers (row counts, sums of a few values): appendInt
// writes those below 10,000 in magnitude from a table of their digits, one copy each, where
// strconv.AppendInt divides; the rest go to strconv.

// digits4 holds the decimal digits of 0..9999, right-aligned in 4 bytes each (leading bytes
// unused).
var digits4 = func() (t [4 * 10000]byte) {
	for v := range 10000 {
		for i, x := 3, v; i >= 0; i, x = i-1, x/10 {
			t[4*v+i] = byte('0' + x%10)
		}
	}
	return t
}()

// appendInt appends v in decimal, as strconv.AppendInt(b, v, 10) does.
func appendInt(b []byte, v int64) []byte {
	if v <= -10000 || v >= 10000 {
		return strconv.AppendInt(b, v, 10)
	}
	if v < 0 {
		b = append(b, '-')
		v = -v
	}
	d := digits4[4*v : 4*v+4 : 4*v+4]
	// Byte by byte: an append of a slice this short is a call to memmove.
	switch {
	case v < 10:
		return append(b, d[3])
	case v < 100:
		return append(b, d[2], d[3])
	case v < 1000:
		return append(b, d[1], d[2], d[3])
	}
	return append(b, d[0], d[1], d[2], d[3])
}
