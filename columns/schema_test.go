package columns

import (
	"encoding/json"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSchemaJSON(t *testing.T) {
	in := `{"dimensions":[{"name":"page","type":"string","multiValue":false,"raw":false},
		{"name":"tags","multiValue":true,"raw":false},{"name":"body","raw":true,"multiValue":false},
		{"name":"country","multiValue":false,"raw":false,"noBitmapIndex":true}],
	 "metrics":[{"name":"added","type":"long","aggregator":"longSum"},{"name":"count","aggregator":"count"},
		{"name":"users","aggregator":"hyperUnique","fieldName":"user"},{"name":"delta","type":"double","aggregator":"doubleMax"}],
	 "rollup":true,"granularity":"hour"}`
	s, err := ParseSchema([]byte(in))
	require.NoError(t, err)
	require.Len(t, s.Dimensions, 4)
	require.Equal(t, GranularityHour, s.Granularity)
	require.True(t, s.Rollup)
	require.Equal(t, MetricLong, s.Metrics[1].ValueType())
	require.Equal(t, MetricHyperUnique, s.Metrics[2].ValueType())
	require.Equal(t, "user", s.Metrics[2].Field)
	out, err := json.Marshal(s)
	require.NoError(t, err)
	back, err := ParseSchema(out)
	require.NoError(t, err)
	require.True(t, s.Equal(back))
	require.Contains(t, string(out), `{"name":"page","type":"string","multiValue":false,"raw":false}`)
	require.Contains(t, string(out), `"granularity":"hour"`)

	rng := rand.New(rand.NewPCG(seedFor(t, 11), 0))
	for i := 0; i < 200; i++ {
		s := randSchema(rng)
		require.NoError(t, s.Validate())
		b, err := json.Marshal(s)
		require.NoError(t, err)
		back, err := ParseSchema(b)
		require.NoError(t, err)
		require.True(t, s.Equal(back), "%s", b)
	}
}

func TestSchemaValidate(t *testing.T) {
	f := func(in, wantErr string) {
		t.Helper()
		_, err := ParseSchema([]byte(in))
		require.ErrorIs(t, err, ErrSchema)
		require.ErrorContains(t, err, wantErr)
	}
	f(`{"dimensions":[{"name":"a"},{"name":"a"}]}`, `dimension "a": duplicate column name`)
	f(`{"dimensions":[{"name":"a"}],"metrics":[{"name":"a","aggregator":"count"}]}`, `metric "a": duplicate column name`)
	f(`{"dimensions":[{"name":"__time"}]}`, `dimension "__time": name is reserved`)
	f(`{"dimensions":[{"name":""}]}`, `dimension with an empty name`)
	f(`{"dimensions":[{"name":"d","type":"long"}]}`, `dimension "d": unknown type "long"`)
	f(`{"dimensions":[{"name":"d","raw":true,"multiValue":true}]}`, `dimension "d": a raw dimension cannot be multi-value`)
	f(`{"dimensions":[{"name":"d","raw":true,"noBitmapIndex":true}]}`, `dimension "d": noBitmapIndex`)
	f(`{"metrics":[{"name":"m","aggregator":"longAvg"}]}`, `metric "m": unknown aggregator "longAvg"`)
	f(`{"metrics":[{"name":"m","type":"double","aggregator":"longSum"}]}`, `metric "m": aggregator "longSum" works on long, not double`)
	f(`{"metrics":[{"name":"m","type":"int","aggregator":"longSum"}]}`, `metric "m": unknown type "int"`)
	f(`{"granularity":"week"}`, `unknown granularity "week"`)
	f(`{"dimensions":[],"extra":1}`, `unknown field "extra"`)
	f(`{} {}`, `trailing data`)
	require.ErrorIs(t, Schema{Granularity: 9}.Validate(), ErrSchema)
	require.NoError(t, Schema{}.Validate())
}

func TestGranularity(t *testing.T) {
	f := func(g Granularity, ms, want int64) {
		t.Helper()
		require.Equal(t, want, g.Truncate(ms), "%s.Truncate(%d)", g, ms)
	}
	f(GranularityNone, 123456789, 123456789)
	f(GranularitySecond, 1999, 1000)
	f(GranularitySecond, -1, -1000)
	f(GranularityMinute, 61_000, 60_000)
	f(GranularityHour, 3_600_000*5+17, 3_600_000*5)
	f(GranularityDay, 86_400_000*3-1, 86_400_000*2)
	f(GranularityDay, -86_400_000-1, -2*86_400_000)
	f(GranularityDay, -86_400_000, -86_400_000)
	for _, n := range []string{"none", "second", "minute", "hour", "day", "HOUR", ""} {
		g, err := ParseGranularity(n)
		require.NoError(t, err)
		b, err := g.MarshalText()
		require.NoError(t, err)
		var back Granularity
		require.NoError(t, back.UnmarshalText(b))
		require.Equal(t, g, back)
	}
	_, err := Granularity(7).MarshalText()
	require.Error(t, err)
	require.Equal(t, "Granularity(7)", Granularity(7).String())
}
