package export

import (
	"fmt"

	"github.com/writeout/writeout/columns/agg"
	"github.com/writeout/writeout/merger/ingest"
)

// IngestSpec returns the ingestion spec that reads the exported file back: the segment's schema,
// the time from __time in milliseconds, each dimension from its column, each long and double
// metric from its column (fieldName set to the metric's name), with these changes where a
// spec cannot say what the segment holds:
//   - a count metric that held a value other than 1 (Info.CountsAbove1) becomes a longSum of
//     its column: ingestion counts input rows, and each exported row is one;
//   - a sketch metric (hyperUnique, quantiles, ...) keeps its fieldName when that names a
//     dimension (the sketch is made again from the dimension's values); any other reads its
//     column's sketch bytes as they are (isInputSketch, fieldName set to the metric's name).
//
// The input format is left to the file's name and bytes.
func (i Info) IngestSpec() (*ingest.Spec, error) {
	s := i.Schema.Clone()
	above1 := make(map[string]bool, len(i.CountsAbove1))
	for _, n := range i.CountsAbove1 {
		above1[n] = true
	}
	for k := range s.Metrics {
		m := &s.Metrics[k]
		switch {
		case m.Agg().CountsRows:
			if above1[m.Name] {
				m.Aggregator, m.Type, m.Field = agg.LongSum, "", m.Name
			}
		case m.Agg().Kind == agg.Union:
			if m.Field == "" || s.Dimension(m.Field) < 0 {
				m.Field, m.InputSketch = m.Name, true
			}
		default:
			if m.Field != "" {
				m.Field = m.Name
			}
		}
	}
	sp := ingest.NewSpec(s)
	if err := sp.Validate(); err != nil {
		return nil, fmt.Errorf("export: ingestion spec: %w", err)
	}
	return sp, nil
}
