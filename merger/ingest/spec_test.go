package ingest

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/columns/agg"
)

func TestTimeFormats(t *testing.T) {
	f := func(format, in string, want int64) {
		t.Helper()
		p, err := timeParser(format)
		require.NoError(t, err)
		got, err := p(in)
		require.NoError(t, err, "%s %q", format, in)
		require.Equal(t, want, got, "%s %q", format, in)
	}
	f("", "1714564800123", 1714564800123)
	f("millis", "-5", -5)
	f("MILLIS", "7", 7)
	f("seconds", "1714564800", 1714564800000)
	f("posix", "1714564800.25", 1714564800250)
	f("seconds", "1.0009", 1000)
	f("seconds", "-0.0005", -1) // rounds down
	f("seconds", "-1", -1000)
	f("micros", "1714564800123456", 1714564800123)
	f("micros", "-1", -1)
	f("nanos", "1714564800123456789", 1714564800123)
	f("nanos", "-1", -1)
	f("rfc3339", "2024-05-01T12:00:00Z", 1714564800000)
	f("iso", "2024-05-01T14:00:00.250+02:00", 1714564800250)
	f("2006-01-02 15:04:05", "2024-05-01 12:00:00", 1714564800000)
	f("02/01/2006", "01/05/2024", 1714521600000)
	f("2006-01-02T15:04:05-0700", "2024-05-01T14:00:00+0200", 1714564800000)

	bad := func(format, in, want string) {
		t.Helper()
		p, err := timeParser(format)
		require.NoError(t, err)
		_, err = p(in)
		require.ErrorContains(t, err, want, "%s %q", format, in)
	}
	bad("millis", "1.5", `not an integer time: "1.5"`)
	bad("millis", "", `not an integer time: ""`)
	bad("micros", "1.5", `not an integer time`)
	bad("seconds", "1e3", `not an integer time`)
	bad("seconds", "9223372036854775807", `time 9223372036854775807 out of range`)
	bad("seconds", "92233720368547758.5", `out of range`)
	bad("seconds", "1/2", `not an integer time`)
	bad("rfc3339", "2024-05-01", `not an RFC 3339 time: "2024-05-01"`)
	bad("2006-01-02", "May 1", `"May 1" does not match the layout "2006-01-02"`)

	for _, format := range []string{"hours", "15:04", "%Y-%m-%d"} {
		_, err := timeParser(format)
		require.ErrorContains(t, err, "timestamp.format", format)
	}
}

func TestParseSpec(t *testing.T) {
	sp, err := ParseSpec([]byte(`{"timestamp": {"field": "ts", "format": "seconds"},
	  "input": {"delimiter": ";", "nullValue": "\\N", "fields": {"page": "title"}},
	  "dimensions": [{"name": "page"}], "metrics": [{"name": "n", "aggregator": "count"}],
	  "rollup": true, "granularity": "minute"}`))
	require.NoError(t, err)
	require.Equal(t, "ts", sp.timestamp.Field)
	require.Equal(t, "title", sp.dimensionField(sp.Schema.Dimensions[0]))
	require.Equal(t, "|", sp.input.MultiValueDelimiter)
	require.Equal(t, `\N`, *sp.input.NullValue)
	require.True(t, sp.Schema.Rollup)
	require.Equal(t, columns.GranularityMinute, sp.Schema.Granularity)

	sp, err = ParseSpec([]byte(`{"dimensions": [{"name": "page"}], "metrics": []}`))
	require.NoError(t, err)
	require.Equal(t, "__time", sp.timestamp.Field)
	bom, err := ParseSpec([]byte("\ufeff" + `{"dimensions": [{"name": "page"}], "metrics": []}`))
	require.NoError(t, err, "a spec saved with a byte-order mark")
	require.Equal(t, sp, bom)
	require.Equal(t, "page", sp.dimensionField(sp.Schema.Dimensions[0]))

	bad := func(js, want string) {
		t.Helper()
		_, err := ParseSpec([]byte(js))
		require.ErrorContains(t, err, want)
		require.ErrorIs(t, err, ErrSpec)
	}
	bad(`{"timestamp": {"column": "ts"}, "dimensions": []}`, `"timestamp": json: unknown field "column"`)
	bad(`{"input": {"delimiter": "ab"}, "dimensions": []}`, `input.delimiter "ab"`)
	bad(`{"input": {"delimiter": "\""}, "dimensions": []}`, `input.delimiter "\""`)
	bad(`{"input": {"fields": {"nope": "x"}}, "dimensions": []}`, `input.fields: "nope" is not a dimension`)
	bad(`{"input": {"format": "xml"}, "dimensions": []}`, `input.format "xml"`)
	bad(`{"input": [], "dimensions": []}`, `"input": json: cannot unmarshal array`)
	bad(`{"dimensions": [{"name": "a"}, {"name": "a"}]}`, `dimension "a": duplicate column name`)
	bad(`{"dimensions": [], "extra": 1}`, `unknown field "extra"`)
	bad(`{"timestamp": {"format": "hours"}, "dimensions": []}`, `timestamp.format "hours"`)
	bad(`{"dimensions": []} {}`, `trailing data`)
	bad(`[1]`, `cannot unmarshal array`)
	bad(`null`, `the spec is null`)
	bad(``, `EOF`)

	// The schema's own errors keep their sentinel too.
	_, err = ParseSpec([]byte(`{"metrics": [{"name": "x", "aggregator": "longAverage"}]}`))
	require.ErrorIs(t, err, columns.ErrSchema)
	require.ErrorIs(t, err, ErrSpec)
	require.ErrorContains(t, err, `columns: invalid schema: metric "x": unknown aggregator "longAverage"`)
	require.NotContains(t, err.Error(), "ingest:", "the message reads as it did")
	require.Equal(t, 1, strings.Count(err.Error(), "columns:"), "no prefix repeated: %v", err)

	// Near misses name what was probably meant: an aggregator, a field of the schema or of
	// the timestamp mapping.
	_, err = ParseSpec([]byte(`{"metrics": [{"name": "x", "aggregator": "longsumm", "field": "x"}]}`))
	require.ErrorContains(t, err, `unknown aggregator "longsumm" (want one of count, longSum`)
	require.ErrorContains(t, err, `; did you mean "longSum"?`)
	_, err = ParseSpec([]byte(`{"dimension": [{"name": "x"}]}`))
	require.ErrorIs(t, err, columns.ErrSchema)
	require.ErrorContains(t, err, `json: unknown field "dimension"; did you mean "dimensions"?`)
	_, err = ParseSpec([]byte(`{"timestamp": {"field": "t", "fromat": "millis"}, "dimensions": []}`))
	require.ErrorIs(t, err, ErrSpec)
	require.ErrorContains(t, err, `"timestamp": json: unknown field "fromat"; did you mean "format"?`)
}

func TestSpecJSONRoundTrip(t *testing.T) {
	null := "-"
	sp := Spec{
		Schema: columns.Schema{
			Dimensions: []columns.Dimension{{Name: "page"}, {Name: "tags", MultiValue: true}},
			Metrics:    []columns.Metric{{Name: "n", Aggregator: agg.Count}, {Name: "u", Aggregator: agg.HyperUnique, Field: "user"}},
			Rollup:     true, Granularity: columns.GranularityHour,
		},
		timestamp: timestampSpec{Field: "ts", Format: "rfc3339"},
		input:     inputSpec{Format: CSV, Delimiter: ";", MultiValueDelimiter: ",", NullValue: &null, Fields: map[string]string{"page": "title"}},
	}
	js, err := json.Marshal(sp)
	require.NoError(t, err)
	var back Spec
	require.NoError(t, json.Unmarshal(js, &back))
	require.Equal(t, sp, back)

	// A spec without input or timestamp marshals without them.
	js, err = json.Marshal(Spec{Schema: sp.Schema})
	require.NoError(t, err)
	require.NotContains(t, string(js), "timestamp")
	require.NotContains(t, string(js), "input")
}

func TestSpecValidate(t *testing.T) {
	sp := &Spec{Schema: columns.Schema{Dimensions: []columns.Dimension{{Name: "a"}}}}
	require.NoError(t, sp.Validate())
	sp.input.Fields = map[string]string{"b": "x"}
	require.ErrorIs(t, sp.Validate(), ErrSpec)
	sp = &Spec{Schema: columns.Schema{Dimensions: []columns.Dimension{{Name: ""}}}}
	err := sp.Validate()
	require.ErrorIs(t, err, ErrSpec)
	require.ErrorIs(t, err, columns.ErrSchema)
	require.True(t, errors.Is(specErr(errors.New("x")), ErrSpec))
	require.NoError(t, specErr(nil))
}

func TestMetricField(t *testing.T) {
	sp := &Spec{Schema: columns.Schema{
		Dimensions: []columns.Dimension{{Name: "user"}},
		Metrics: []columns.Metric{
			{Name: "n", Aggregator: agg.Count, Field: "x"},
			{Name: "added", Aggregator: agg.LongSum},
			{Name: "delta", Aggregator: agg.DoubleSum, Field: "d"},
			{Name: "users", Aggregator: agg.HyperUnique, Field: "user"},
			{Name: "ips", Aggregator: agg.HyperUnique, Field: "ip"},
		},
	}}
	var got []string
	for _, m := range sp.Schema.Metrics {
		got = append(got, sp.metricField(m))
	}
	require.Equal(t, []string{"", "added", "d", "", "ip"}, got)
}

// TestParseSpecSyntaxPosition: a JSON syntax error in a spec says the line and column of the
// byte at fault (it gave none: a spec of forty lines left one to count), and an input that
// ends early says where it ended.
func TestParseSpecSyntaxPosition(t *testing.T) {
	for in, want := range map[string]string{
		"{\"dimensions\": [\n  {\"name\": \"a\",}]}": "line 2, column 16: invalid character '}' looking for beginning of object key string",
		"{\"dimensions\": [\n  {\"name\": \"a\"}]":   "line 2, column 17: unexpected EOF",
		"\n\n   nope": "line 3, column 5: invalid character 'o' in literal null (expecting 'u')",
	} {
		_, err := ParseSpec([]byte(in))
		require.ErrorIs(t, err, ErrSpec, in)
		require.EqualError(t, err, want, in)
	}
}
