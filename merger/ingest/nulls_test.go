package ingest

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestNullsNullAsZero: by default an empty, null or missing metric value is null; metrics
// listed in input.nullAsZero read it as 0; the list is validated.
func TestNullsNullAsZero(t *testing.T) {
	in := "ts,page,tags,body,added,d,user\n5,p,,,,,\n6,p,,,NULL,2,\n"
	read := func(sp *Spec) []string {
		t.Helper()
		rr, err := openCSV(sp, "n.csv", strings.NewReader(in))
		require.NoError(t, err)
		rows, bad, end := readAll(t, sp, rr)
		require.NoError(t, end)
		require.Empty(t, bad)
		return rows
	}
	null := "NULL"
	// Default: null. With a null text, "" is null for metrics too (no number is empty),
	// though it is the empty string for dimensions.
	require.Equal(t, []string{`5 ["p"] [""] [""] 1 null null 0 0`, `6 ["p"] [""] [""] 1 null 2 0 0`},
		read(testSpec(t, func(s *Spec) { s.input.NullValue = &null })))
	require.Equal(t, []string{`5 ["p"] [""] [""] 1 0 null 0 0`, `6 ["p"] [""] [""] 1 0 2 0 0`},
		read(testSpec(t, func(s *Spec) { s.input.NullValue = &null; s.input.NullAsZero = []string{"added"} })))

	// The JSON form round-trips.
	sp := testSpec(t, func(s *Spec) { s.input.NullAsZero = []string{"added", "delta"} })
	js, err := sp.MarshalJSON()
	require.NoError(t, err)
	require.Contains(t, string(js), `"nullAsZero":["added","delta"]`)
	back, err := ParseSpec(js)
	require.NoError(t, err)
	require.Equal(t, sp.input.NullAsZero, back.input.NullAsZero)

	bad := func(names []string, want string) {
		t.Helper()
		sp := testSpec(t, func(s *Spec) { s.input.NullAsZero = names })
		err := sp.Validate()
		require.ErrorIs(t, err, ErrSpec)
		require.ErrorContains(t, err, want)
	}
	bad([]string{"nope"}, `input.nullAsZero: "nope" is not a metric of the schema`)
	bad([]string{"page"}, `input.nullAsZero: "page" is not a metric of the schema`)
	bad([]string{"added", "added"}, `input.nullAsZero: "added" listed twice`)
	for _, m := range sp.Schema.Metrics {
		if !m.Agg().Nullable() {
			bad([]string{m.Name}, "has no null value")
		}
	}
}
