package table

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"slices"
	"time"

	"github.com/writeout/writeout/columns"
)

// CompactOptions configure Compact and Plan. The zero value compacts by UTC day into outputs of
// at most DefaultTargetRows rows, every chunk in one worker.
type CompactOptions struct {
	// SegmentGranularity is the width of the time chunks segments are grouped by (Druid's
	// segment granularity), UTC: minute, hour or day. 0 (none) means day.
	SegmentGranularity columns.Granularity
	// TargetRows is the most rows an output holds. 0 means DefaultTargetRows.
	TargetRows int64
	// Shard and Shards take only the chunks whose start hashes to Shard of Shards (ChunkShard),
	// so that Shards workers share a table with no coordinator. Shards 0 means 1: every chunk.
	Shard, Shards int
	// Rollup and RollupGranularity ask for outputs rolled up at that granularity. A table's
	// segments share one schema, rollup and granularity included, so they must be the table's
	// (a table that is not rolled up cannot be compacted into rolled-up outputs yet); with
	// Rollup false the table's own rollup is used. Outputs are merged as the table's schema
	// says either way.
	Rollup            bool
	RollupGranularity columns.Granularity
	// MemoryLimit is passed to merger.Options.MemoryLimit; 0 means its default.
	MemoryLimit int64
}

// DefaultTargetRows is the TargetRows of CompactOptions' zero value.
const DefaultTargetRows = 5_000_000

func (o *CompactOptions) ensureDefaults() error {
	if o.SegmentGranularity == columns.GranularityNone {
		o.SegmentGranularity = columns.GranularityDay
	}
	if o.SegmentGranularity < columns.GranularityMinute || o.SegmentGranularity > columns.GranularityDay {
		return fmt.Errorf("%w: segment granularity %s (want minute, hour or day)", ErrInvalid, o.SegmentGranularity)
	}
	if o.TargetRows == 0 {
		o.TargetRows = DefaultTargetRows
	}
	if o.TargetRows < 0 {
		return fmt.Errorf("%w: target rows %d", ErrInvalid, o.TargetRows)
	}
	if o.Shards == 0 && o.Shard == 0 {
		o.Shards = 1
	}
	if o.Shards < 1 || o.Shard < 0 || o.Shard >= o.Shards {
		return fmt.Errorf("%w: shard %d/%d (want 0 <= I < N)", ErrInvalid, o.Shard, o.Shards)
	}
	return nil
}

// Chunk is one time chunk of a plan: its interval, the live segments that lie inside it,
// and, for a chunk to compact, how they are grouped into outputs.
type Chunk struct {
	Interval columns.Interval
	// Segments are the live segments inside the chunk, by name.
	Segments []Segment
	// Groups partition the segments to merge, each into one output of at most TargetRows rows
	// (rows before rollup); empty when the chunk needs nothing. Segments in no group stay.
	Groups [][]Segment
}

// Plan is what a compaction of a version does.
type Plan struct {
	Version int
	// Chunks are the chunks of the shard that need compacting, by start.
	Chunks []Chunk
	// Crossing are the live segments of the shard (by the chunk of their start) that cross a
	// chunk boundary. They stay as they are: splitting a segment by time is not done yet.
	Crossing []Segment
	// Oversized are the live segments of the shard inside one chunk with more than TargetRows
	// rows. They stay as they are: splitting a segment by rows is not done yet.
	Oversized []Segment
}

// ChunkShard returns the shard of shards that the chunk starting at start (milliseconds since
// the epoch) belongs to: the 64-bit FNV-1a hash of the start as the log writes times
// ("2024-05-01T00:00:00.000Z", UTC), modulo shards. It depends on nothing but the chunk's
// start, so every worker computes the same.
func ChunkShard(start int64, shards int) int {
	h := fnv.New64a()
	_, _ = h.Write([]byte(time.UnixMilli(start).UTC().Format(timeLayout))) // a hash.Hash never fails
	return int(h.Sum64() % uint64(shards))
}

// PlanCompaction plans the compaction of version e: it groups e's live segments by time chunk
// (o.SegmentGranularity, UTC) and, for each chunk of shard o.Shard of o.Shards whose segments
// can be packed into fewer outputs of at most o.TargetRows rows, groups them so (first fit,
// largest first). A segment alone in its group is left as it is. Segments that cross a chunk
// boundary, and segments over TargetRows, are listed and left as they are.
func PlanCompaction(e *Entry, o CompactOptions) (*Plan, error) {
	if err := o.ensureDefaults(); err != nil {
		return nil, err
	}
	p := &Plan{Version: e.Version}
	g := o.SegmentGranularity
	byStart := map[int64]*Chunk{}
	for _, s := range e.Segments {
		iv, err := ParseInterval(s.Interval)
		if err != nil {
			return nil, fmt.Errorf("%w: version %d: segment %s: %w", ErrCorrupt, e.Version, s.Name, err)
		}
		start := g.Truncate(iv.Start)
		if ChunkShard(start, o.Shards) != o.Shard {
			continue
		}
		if iv.End > start+g.Millis() {
			p.Crossing = append(p.Crossing, s)
			continue
		}
		if s.Rows > o.TargetRows {
			p.Oversized = append(p.Oversized, s)
			continue
		}
		c := byStart[start]
		if c == nil {
			c = &Chunk{Interval: columns.Interval{Start: start, End: start + g.Millis()}}
			byStart[start] = c
		}
		c.Segments = append(c.Segments, s)
	}
	for _, c := range byStart {
		c.Groups = pack(c.Segments, o.TargetRows)
		if len(c.Groups) > 0 {
			p.Chunks = append(p.Chunks, *c)
		}
	}
	slices.SortFunc(p.Chunks, func(a, b Chunk) int { return cmp.Compare(a.Interval.Start, b.Interval.Start) })
	return p, nil
}

// pack groups segs (each of at most target rows) into bins of at most target rows, first fit
// by rows, largest first (ties by name, so every worker plans alike), and returns the bins of
// more than one segment: nil when no two segments fit together.
func pack(segs []Segment, target int64) [][]Segment {
	sorted := slices.Clone(segs)
	slices.SortFunc(sorted, func(a, b Segment) int {
		if c := cmp.Compare(b.Rows, a.Rows); c != 0 {
			return c
		}
		return cmp.Compare(a.Name, b.Name)
	})
	var bins [][]Segment
	var rows []int64
	for _, s := range sorted {
		i := slices.IndexFunc(rows, func(r int64) bool { return r+s.Rows <= target })
		if i < 0 {
			bins = append(bins, nil)
			rows = append(rows, 0)
			i = len(bins) - 1
		}
		bins[i] = append(bins[i], s)
		rows[i] += s.Rows
	}
	var out [][]Segment
	for _, b := range bins {
		if len(b) > 1 {
			out = append(out, b)
		}
	}
	return out
}

// String describes a chunk: its interval and segments.
func (c Chunk) String() string {
	return fmt.Sprintf("chunk %s/%s (%d segments)", time.UnixMilli(c.Interval.Start).UTC().Format(timeLayout),
		time.UnixMilli(c.Interval.End).UTC().Format(timeLayout), len(c.Segments))
}
