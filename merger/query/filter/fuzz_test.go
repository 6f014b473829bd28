package filter

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzParse: any text is a filter or a *parseError that points inside it (or just past its
// end), never a panic; a filter written back with String parses to the same filter, and
// writes the same text again.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"page = 'home'", "page != 'home' and tags in ('a', 'b')", `"a b" is not null or not (x <> 'y')`,
		`page = '\u00e9\x41\n\'\\'`, "true", "false", "", "   ", "page ~ 'a'", "page not 'a'",
		"((a = 'x'))", "a in ()", "not not a is null", "a = 'x' and (b = 'y' or c = 'z') and d = ''",
		`"\xff" = '\U0001F600'`, "a = 'x", `a = '\uD800'`, "AND = 'x'", `"and" = 'x'`,
		"delay > 10 and distance between 100 and 500", "x <= -1.5e-3 or y >= .5", "x != 1E+400", "x <> 1.",
		"x not between 1 and 2", "x in (1, 2.5, -3)", "x not in (1)", "x > 1x", "x > -", "x between 1 or 2",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, expr string) {
		flt, err := Parse(expr)
		if err != nil {
			var pe *parseError
			require.True(t, errors.As(err, &pe), "%T %v", err, err)
			require.Equal(t, expr, pe.expr)
			require.GreaterOrEqual(t, pe.pos, 1)
			require.LessOrEqual(t, pe.pos, len(expr)+1)
			require.True(t, strings.HasPrefix(err.Error(), "filter: column "), err.Error())
			require.Nil(t, flt)
			return
		}
		if flt == nil {
			require.Empty(t, strings.TrimSpace(expr))
			return
		}
		s := flt.String()
		back, err := Parse(s)
		require.NoError(t, err, "%q written as %q", expr, s)
		require.Equal(t, flt, back, "%q written as %q", expr, s)
		require.Equal(t, s, back.String())
	})
}
