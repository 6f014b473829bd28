package main

import (
	"testing"

	"github.com/stretchr/testify/require"
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
	f("seconds", "1714564800", 1714564800000)
	f("posix", "1714564800.25", 1714564800250)
	f("seconds", "1.0009", 1000)
	f("seconds", "-0.0005", -1) // rounds down
	f("micros", "1714564800123456", 1714564800123)
	f("micros", "-1", -1)
	f("nanos", "1714564800123456789", 1714564800123)
	f("rfc3339", "2024-05-01T12:00:00Z", 1714564800000)
	f("iso", "2024-05-01T14:00:00.250+02:00", 1714564800250)
	f("2006-01-02 15:04:05", "2024-05-01 12:00:00", 1714564800000)
	f("02/01/2006", "01/05/2024", 1714521600000)

	bad := func(format, in string) {
		t.Helper()
		p, err := timeParser(format)
		require.NoError(t, err)
		_, err = p(in)
		require.Error(t, err, "%s %q", format, in)
	}
	bad("millis", "1.5")
	bad("millis", "")
	bad("seconds", "1e3")
	bad("seconds", "9223372036854775807")
	bad("rfc3339", "2024-05-01")
	bad("2006-01-02", "May 1")

	for _, format := range []string{"hours", "15:04", "%Y-%m-%d"} {
		_, err := timeParser(format)
		require.Error(t, err, format)
	}
}

func TestDecodeSpec(t *testing.T) {
	sp, err := decodeSpec([]byte(`{"timestamp": {"field": "ts", "format": "seconds"},
	  "input": {"delimiter": ";", "nullValue": "\\N", "fields": {"page": "title"}},
	  "dimensions": [{"name": "page"}], "metrics": [{"name": "n", "aggregator": "count"}],
	  "rollup": true, "granularity": "minute"}`))
	require.NoError(t, err)
	require.Equal(t, "ts", sp.Timestamp.Field)
	require.Equal(t, "title", sp.dimField(sp.Schema.Dimensions[0]))
	require.Equal(t, "|", sp.Input.MultiValueDelimiter)
	require.Equal(t, `\N`, *sp.Input.NullValue)
	require.True(t, sp.Schema.Rollup)

	sp, err = decodeSpec([]byte(`{"dimensions": [{"name": "page"}], "metrics": []}`))
	require.NoError(t, err)
	require.Equal(t, "__time", sp.Timestamp.Field)

	bad := func(js, want string) {
		t.Helper()
		_, err := decodeSpec([]byte(js))
		require.ErrorContains(t, err, want)
	}
	bad(`{"timestamp": {"column": "ts"}, "dimensions": []}`, `"timestamp": json: unknown field "column"`)
	bad(`{"input": {"delimiter": "ab"}, "dimensions": []}`, `input.delimiter "ab"`)
	bad(`{"input": {"fields": {"nope": "x"}}, "dimensions": []}`, `input.fields: "nope" is not a dimension`)
	bad(`{"input": {"format": "xml"}, "dimensions": []}`, `input.format "xml"`)
	bad(`{"dimensions": [{"name": "a"}, {"name": "a"}]}`, `dimension "a": duplicate column name`)
	bad(`{"dimensions": [], "extra": 1}`, `unknown field "extra"`)
	bad(`{"timestamp": {"format": "hours"}, "dimensions": []}`, `timestamp.format "hours"`)
	bad(`{"dimensions": []} {}`, `trailing data`)
	bad(`[1]`, `cannot unmarshal array`)
}
