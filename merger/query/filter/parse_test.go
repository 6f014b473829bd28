package filter

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParse(t *testing.T) {
	f := func(expr string, want Filter) {
		t.Helper()
		got, err := Parse(expr)
		require.NoError(t, err, expr)
		require.Equal(t, want, got, expr)
	}
	f("", nil)
	f("   ", nil)
	f("page = 'home'", eqFilter{"page", "home"})
	f("page == 'home'", eqFilter{"page", "home"})
	f("page != 'home'", notFilter{eqFilter{"page", "home"}})
	f("page <> ''", notFilter{eqFilter{"page", ""}})
	f("page IN ('a', 'b')", inFilter{"page", []string{"a", "b"}})
	f("page in ()", inFilter{"page", []string{}})
	f("page not in ('a')", notFilter{inFilter{"page", []string{"a"}}})
	f("page is null", nullFilter{"page"})
	f("page IS NOT NULL", notFilter{nullFilter{"page"}})
	f("not a = 'x' and b = 'y' or c is null", orFilter{andFilter{notFilter{eqFilter{"a", "x"}}, eqFilter{"b", "y"}}, nullFilter{"c"}})
	f("a = 'x' and (b = 'y' or c = 'z')", andFilter{eqFilter{"a", "x"}, orFilter{eqFilter{"b", "y"}, eqFilter{"c", "z"}}})
	f("(a = 'x' and b = 'y') and c = 'z'", andFilter{andFilter{eqFilter{"a", "x"}, eqFilter{"b", "y"}}, eqFilter{"c", "z"}})
	f(`"my dim" = 'a\'b\\c\n\x41\u00e9\U0001F600'`, eqFilter{"my dim", "a'b\\c\nAé😀"})
	f(`"and" = 'x'`, eqFilter{"and", "x"})
	f("dim.sub-1 = 'x'", eqFilter{"dim.sub-1", "x"})
	f("true", andFilter{})
	f("false", orFilter{})
	f("not not a is null", notFilter{notFilter{nullFilter{"a"}}})
	// Comparisons with numbers (metrics).
	f("delay > 10", cmpFilter{"delay", opGt, "10", ""})
	f("delay>=-1.5e3", cmpFilter{"delay", opGe, "-1.5e3", ""})
	f("delay < .5", cmpFilter{"delay", opLt, ".5", ""})
	f("delay <= 1.", cmpFilter{"delay", opLe, "1.", ""})
	f("delay = 7", cmpFilter{"delay", opEq, "7", ""})
	f("delay == 7", cmpFilter{"delay", opEq, "7", ""})
	f("delay != 7E+2", cmpFilter{"delay", opNe, "7E+2", ""})
	f("delay <> -0", cmpFilter{"delay", opNe, "-0", ""})
	f("distance BETWEEN 100 AND 500", cmpFilter{"distance", opBetween, "100", "500"})
	f("distance not between -1 and 1 or x = 'a'", orFilter{cmpFilter{"distance", opNotBetween, "-1", "1"}, eqFilter{"x", "a"}})
	f("delay > 10 and distance between 100 and 500", andFilter{cmpFilter{"delay", opGt, "10", ""}, cmpFilter{"distance", opBetween, "100", "500"}})
	f("delay in (1, -2.5)", numInFilter{"delay", []Number{"1", "-2.5"}, false})
	f("delay not in (3)", numInFilter{"delay", []Number{"3"}, true})
	f("not delay > 1", notFilter{cmpFilter{"delay", opGt, "1", ""}})
	f(`"between" > 1`, cmpFilter{"between", opGt, "1", ""})
}

func TestParseErrors(t *testing.T) {
	f := func(expr string, pos int, msg string) {
		t.Helper()
		_, err := Parse(expr)
		require.Error(t, err, expr)
		var pe *parseError
		require.ErrorAs(t, err, &pe)
		require.Equal(t, pos, pe.pos, "%s: %v", expr, err)
		require.Contains(t, err.Error(), msg, expr)
	}
	f("page = home", 8, "expected a quoted string or a number")
	f("delay > 'x'", 9, "expected a number after >")
	f("delay >= x", 10, "expected a number after >=")
	f("delay > 1x", 9, `malformed number: 'x' follows "1"`)
	f("delay > 1.2.3", 9, "malformed number")
	f("delay > -", 9, "malformed number \"-\": digits expected")
	f("delay > 1e", 9, "exponent digits expected")
	f("delay between 1 or 2", 17, `expected "and" after "between 1"`)
	f("delay between 'a' and 2", 15, `expected a number after "between"`)
	f("delay between 1 and x", 21, `expected a number after "between 1 and"`)
	f("delay in (1, 'a')", 14, "expected a number in the list of numbers")
	f("page in ('a', 1)", 15, "expected a quoted string in the list of strings")
	f("delay not 5", 11, `expected "in" or "between"`)
	f("page = 'home", 8, "unterminated quoted string")
	f("page", 5, "expected =, !=, <, <=, >, >=, between, in")
	f("page = 'a' and", 15, "expected a dimension name")
	f("(page = 'a'", 12, `to close the "(" at column 1`)
	f("page = 'a')", 11, "unexpected")
	f("page in 'a'", 9, `expected "("`)
	f("page in ('a' 'b')", 14, `expected "," or ")"`)
	f("page in ('a',)", 14, "expected a quoted string in the list")
	f("page is 'a'", 9, `expected "null"`)
	f(`page = '\q'`, 9, "unknown escape")
	f(`page = '\u12'`, 9, "hex digits")
	f(`page = '\uD800'`, 9, "not a valid code point")
	f("page ~ 'a'", 6, "unexpected character")
	f("page ! 'a'", 6, "did you mean")
	f("page not 'a'", 10, `expected "in"`)
	deep := ""
	for i := 0; i < 300; i++ {
		deep += "not "
	}
	f(deep+"a is null", 805, "nested deeper")
}

func TestStringRoundTrip(t *testing.T) {
	seed := uint64(7)
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 2))
	names := []string{"page", "a b", "and", "x'y", `q"d`, "é", "_1", "\x00\xff"}
	vals := []string{"", "v", "it's", `back\slash`, "tab\t", "\xff\xfe", "日本", "\x7f"}
	var gen func(depth int) Filter
	gen = func(depth int) Filter {
		nums := []Number{"0", "-1", "2.5", ".5", "1e300", "-9223372036854775808", "7E-3", "1."}
		k := rng.IntN(8)
		if depth > 3 {
			k = rng.IntN(3)
		}
		switch k {
		case 6:
			op := cmpOp(rng.IntN(len(opNames)))
			c := cmpFilter{Col: names[rng.IntN(len(names))], Op: op, Lo: nums[rng.IntN(len(nums))]}
			if op == opBetween || op == opNotBetween {
				c.Hi = nums[rng.IntN(len(nums))]
			}
			return c
		case 7:
			in := numInFilter{Col: names[rng.IntN(len(names))], Not: rng.IntN(2) == 0}
			for i := 1 + rng.IntN(3); i > 0; i-- {
				in.Nums = append(in.Nums, nums[rng.IntN(len(nums))])
			}
			return in
		case 0:
			return eqFilter{names[rng.IntN(len(names))], vals[rng.IntN(len(vals))]}
		case 1:
			in := inFilter{Dim: names[rng.IntN(len(names))], Values: []string{}}
			for i := rng.IntN(4); i > 0; i-- {
				in.Values = append(in.Values, vals[rng.IntN(len(vals))])
			}
			return in
		case 2:
			return nullFilter{names[rng.IntN(len(names))]}
		case 3:
			return notFilter{gen(depth + 1)}
		case 4:
			a := andFilter{}
			for i := 2 + rng.IntN(2); i > 0; i-- {
				a = append(a, gen(depth+1))
			}
			return a
		default:
			o := orFilter{}
			for i := 2 + rng.IntN(2); i > 0; i-- {
				o = append(o, gen(depth+1))
			}
			return o
		}
	}
	for i := 0; i < 2000; i++ {
		want := gen(0)
		got, err := Parse(want.String())
		require.NoError(t, err, want.String())
		require.Equal(t, want, got, want.String())
	}
}

func TestDims(t *testing.T) {
	require.Nil(t, Dims(nil))
	require.Equal(t, []string{"a", "b", "c"}, Dims(MustParse("a = 'x' and (b in ('y') or not (c is null and a = 'z'))")))
	require.Nil(t, Dims(andFilter{}))
}
