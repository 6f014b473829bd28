// Package suggest finds the name a user probably meant: the "did you mean" of an error about
// an unknown flag, column, field or aggregator.
package suggest

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Closest returns the candidate nearest to word, ignoring case, if it is near enough to be a
// likely misspelling: at most one edit for words of up to four characters, two up to eight,
// three beyond. Ties go to the earliest candidate. It returns "" when none is near, and when
// word is itself a candidate.
func Closest(word string, candidates []string) string {
	lw := strings.ToLower(word)
	limit := 1
	switch n := utf8.RuneCountInString(word); {
	case n > 8:
		limit = 3
	case n > 4:
		limit = 2
	}
	best, bestDist := "", limit+1
	for _, c := range candidates {
		if c == word {
			return ""
		}
		lc := strings.ToLower(c)
		if lc == lw {
			if bestDist > 0 {
				best, bestDist = c, 0
			}
			continue
		}
		if d := distance(lw, lc, bestDist); d < bestDist {
			best, bestDist = c, d
		}
	}
	return best
}

// Hint returns `; did you mean "NAME"?` for Closest(word, candidates), or "" when none is near:
// a suffix for an error message.
func Hint(word string, candidates []string) string {
	if c := Closest(word, candidates); c != "" {
		return fmt.Sprintf("; did you mean %q?", c)
	}
	return ""
}

// distance is the optimal string alignment distance between a and b (insertions, deletions,
// substitutions and transpositions of adjacent runes), or any value of at least max when it is
// at least max.
func distance(a, b string, max int) int {
	ra, rb := []rune(a), []rune(b)
	if d := len(ra) - len(rb); d >= max || -d >= max {
		return max
	}
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		rowMin := cur[0]
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			v := min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				v = min(v, prev2[j-2]+1)
			}
			cur[j] = v
			rowMin = min(rowMin, v)
		}
		if rowMin >= max {
			return max
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}
