package columns

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/writeout/writeout/columns/agg"
)

// TestMetricParamsJSON: a metric without parameters writes the JSON it always did; keys the
// schema does not define are parameters, kept in key order; the aggregator checks them.
func TestMetricParamsJSON(t *testing.T) {
	b, err := json.Marshal(Metric{Name: "u", Type: MetricHyperUnique, Aggregator: agg.HyperUnique, Field: "user"})
	require.NoError(t, err)
	require.Equal(t, `{"name":"u","type":"hyperUnique","aggregator":"hyperUnique","fieldName":"user"}`, string(b))

	var m Metric
	require.NoError(t, json.Unmarshal([]byte(`{"name": "q", "k": [1, 2], "aggregator": "x", "accuracy": 0.02, "isInputSketch": true}`), &m))
	require.Equal(t, "q", m.Name)
	require.True(t, m.InputSketch)
	require.Len(t, m.Params, 2)
	b, err = json.Marshal(m)
	require.NoError(t, err)
	require.Equal(t, `{"name":"q","aggregator":"x","isInputSketch":true,"accuracy":0.02,"k":[1,2]}`, string(b))
	var again Metric
	require.NoError(t, json.Unmarshal(b, &again))
	require.True(t, Schema{Metrics: []Metric{m}}.Equal(Schema{Metrics: []Metric{again}}))
	again.Params["accuracy"] = json.RawMessage("0.03")
	require.False(t, Schema{Metrics: []Metric{m}}.Equal(Schema{Metrics: []Metric{again}}))

	f := func(schema, want string) {
		t.Helper()
		_, err := ParseSchema([]byte(schema))
		require.ErrorIs(t, err, ErrSchema)
		require.ErrorContains(t, err, want)
	}
	f(`{"metrics": [{"name": "u", "aggregator": "hyperUnique", "accuracy": 0.1}]}`, `takes no parameter "accuracy"`)
	f(`{"metrics": [{"name": "a", "aggregator": "longSum", "fieldNmae": "x"}]}`, `takes no parameter "fieldNmae"`)
	f(`{"metrics": [{"name": "a", "aggregator": "longSum", "isInputSketch": true}]}`, `isInputSketch is for sketch aggregators`)
	s, err := ParseSchema([]byte(`{"metrics": [{"name": "u", "aggregator": "hyperUnique", "fieldName": "user", "isInputSketch": true}]}`))
	require.NoError(t, err)
	require.True(t, s.Metrics[0].InputSketch)
}
