package peers

import (
	"context"
	"fmt"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/medium"
	"github.com/writeout/writeout/merger"
)

// noSync is the durability of every write here, on every side: no fsync. DuckDB's COPY and
// parquet-go's writer are not asked to sync either.
var noSync = medium.Durability{Sync: medium.SyncNone}

// Schema is Events.Schema(): three dictionary dimensions with bitmap indexes (the default),
// three longSum metrics, rollup off.
func Schema() columns.Schema { return Events.Schema() }

// WriteSegment writes events as a writeout segment at dst, through a merger.Builder (rollup
// off) persisted without sync.
func WriteSegment(dst string, ev []Event) (int64, error) {
	bld, err := merger.NewBuilder(Schema(), merger.BuilderOptions{})
	if err != nil {
		return 0, err
	}
	if err := eachRow(ev, bld.Add); err != nil {
		return 0, fmt.Errorf("peers: segment %s: %w", dst, err)
	}
	res, err := bld.Persist(context.Background(), dst, merger.PersistOptions{Durability: noSync})
	if err != nil {
		return 0, fmt.Errorf("peers: segment %s: %w", dst, err)
	}
	return res.Bytes, nil
}

// WriteoutMerge merges the segments at paths into dst: rollup off, sorted by (time, d1, d2,
// d3), the default staging medium (an unnamed temp file in dst's directory), input checksums
// checked (the default), no sync.
// The output's chunks are compressed with comp (columns.CompressionDefault is S2).
func WriteoutMerge(ctx context.Context, paths []string, dst string, comp columns.Compression) (merger.Result, error) {
	return writeoutMerge(ctx, paths, dst, merger.Options{Durability: noSync, Compression: comp})
}

// WriteoutRollupHour is Events.WriteoutRollupHour.
func WriteoutRollupHour(ctx context.Context, paths []string, dst string, comp columns.Compression) (merger.Result, error) {
	return Events.WriteoutRollupHour(ctx, paths, dst, comp)
}

// WriteoutRollupHour merges the segments at paths into dst rolled up to the hour by
// RollupDims: other dimensions are dropped (Options.Dimensions) and rows with equal (hour,
// RollupDims) combine, the metrics summed. The output's chunks are compressed with comp.
func (s *Shape) WriteoutRollupHour(ctx context.Context, paths []string, dst string, comp columns.Compression) (merger.Result, error) {
	return writeoutMerge(ctx, paths, dst, merger.Options{Durability: noSync, Compression: comp, Rollup: true,
		Granularity: columns.GranularityHour, Dimensions: s.RollupDims})
}

func writeoutMerge(ctx context.Context, paths []string, dst string, opts merger.Options) (res merger.Result, err error) {
	err = withSegments(paths, func(segs []*columns.Segment) error {
		res, err = merger.Merge(ctx, segs, dst, opts)
		return err
	})
	return res, err
}

// eachRow hands add each event as a row of Schema, one reused columns.Row.
func eachRow(ev []Event, add func(columns.Row) error) error {
	r := columns.Row{Dims: make([][]string, 3), Metrics: make([]columns.Value, 3)}
	var d [3][1]string
	for i := range ev {
		e := &ev[i]
		r.Time = e.Time
		d[0][0], d[1][0], d[2][0] = e.D1, e.D2, e.D3
		for k := range d {
			r.Dims[k] = d[k][:]
		}
		r.Metrics[0].Long, r.Metrics[1].Long, r.Metrics[2].Long = e.M1, e.M2, e.M3
		if err := add(r); err != nil {
			return err
		}
	}
	return nil
}
