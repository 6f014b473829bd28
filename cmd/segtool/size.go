package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// sizeUnits are the units parseSize accepts, binary only: "8MB" is refused rather than guessed.
var sizeUnits = []struct {
	suffix string
	shift  uint
}{{"GiB", 30}, {"MiB", 20}, {"KiB", 10}, {"B", 0}, {"", 0}}

// parseSize parses a byte count: decimal digits then an optional unit B, KiB, MiB or GiB
// ("0", "4096", "512KiB", "8MiB"). Anything else (signs, spaces, fractions, decimal units such
// as MB, lower-case units, overflow) is an error.
func parseSize(s string) (int64, error) {
	for _, u := range sizeUnits {
		num, ok := strings.CutSuffix(s, u.suffix)
		if !ok {
			continue
		}
		if num == "" || strings.TrimLeft(num, "0123456789") != "" {
			break
		}
		n, err := strconv.ParseInt(num, 10, 64)
		if err != nil || n > math.MaxInt64>>u.shift {
			return 0, fmt.Errorf("size %q is too large", s)
		}
		return n << u.shift, nil
	}
	return 0, fmt.Errorf("size %q: want a number of bytes with an optional unit B, KiB, MiB or GiB (e.g. 8MiB)", s)
}
