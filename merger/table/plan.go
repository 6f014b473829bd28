package table

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"maps"
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
	// Rollup and RollupGranularity roll the table up (Druid's compaction with rollup and a
	// query granularity): every output is rolled up at RollupGranularity, and every segment
	// not already rolled up at it is rewritten, alone in its chunk or not, so that a
	// compaction with these options leaves each chunk's segments all rolled up at it.
	// RollupGranularity must be no coarser than SegmentGranularity. With Rollup false,
	// outputs keep their inputs' rollup and granularity, and segments that differ in them
	// are never merged together. RollupGranularity other than none without Rollup is
	// invalid.
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
	if o.RollupGranularity != columns.GranularityNone && !o.Rollup {
		return fmt.Errorf("%w: rollup granularity %s without rollup", ErrInvalid, o.RollupGranularity)
	}
	if o.RollupGranularity > columns.GranularityDay {
		return fmt.Errorf("%w: unknown rollup granularity %d", ErrInvalid, o.RollupGranularity)
	}
	if o.Rollup && o.RollupGranularity.Millis() > o.SegmentGranularity.Millis() {
		return fmt.Errorf("%w: rollup at %s by %s chunks: a segment granularity must be at least as coarse as the rollup's",
			ErrInvalid, o.RollupGranularity, o.SegmentGranularity)
	}
	return nil
}

// target returns the class a rollup compaction's outputs have, ok false without Rollup.
func (o *CompactOptions) target() (c class, ok bool) {
	return class{rollup: true, gran: o.RollupGranularity}, o.Rollup
}

// Piece is rows [Lo, Hi) of a live segment, in the segment's order: all of them (Whole), or
// one of the ranges a segment of more than TargetRows rows is cut into.
type Piece struct {
	Segment
	Lo, Hi int64
}

// Whole reports whether the piece is its segment's every row.
func (p Piece) Whole() bool { return p.Lo == 0 && p.Hi == p.Rows }

// Len returns the piece's rows.
func (p Piece) Len() int64 { return p.Hi - p.Lo }

// Chunk is one time chunk of a plan: its interval, the live segments that lie inside it,
// and, for a chunk to compact, how they are grouped into outputs. The pieces of a group share
// their rollup and granularity (Entry.SegmentSchema), unless CompactOptions.Rollup rolls
// them all up alike.
type Chunk struct {
	Interval columns.Interval
	// Segments are the live segments inside the chunk, by name.
	Segments []Segment
	// Groups partition the pieces to merge, each into one output of at most TargetRows rows
	// (rows before rollup); empty when the chunk needs nothing. A segment of more than
	// TargetRows rows is cut into pieces of TargetRows rows and a last of the rest, each of
	// which is in a group (alone, or packed with others); a segment that fits is one piece,
	// left as it is when no other fits with it (in no group).
	Groups [][]Piece
}

// Plan is what a compaction of a version does.
type Plan struct {
	Version int
	// Chunks are the chunks of the shard that need compacting, by start.
	Chunks []Chunk
	// Crossing are the live segments that cross a chunk boundary and reach a chunk of the
	// shard (touchesShard), by name. Compact splits each into pieces inside one chunk before it
	// compacts the chunks: a replacement of its own, which the plan's chunks do not wait for
	// (the pieces join their chunks in the next plan).
	Crossing []Segment
}

// maxShardChunks bounds the chunks touchesShard hashes: a segment over more chunks is every
// shard's to split.
const maxShardChunks = 10_000

// touchesShard reports whether a segment of interval iv holds a chunk of granularity g that
// is shard's of shards: every worker whose chunks a crossing segment reaches splits it (the
// first to commit wins; the others meet a conflict and plan again), so that no worker's
// chunks wait for pieces that another worker, perhaps done already, would make.
func touchesShard(iv columns.Interval, g columns.Granularity, shard, shards int) bool {
	if shards == 1 {
		return true
	}
	first := g.Truncate(iv.Start)
	if (iv.End-first)/g.Millis() > maxShardChunks {
		return true
	}
	for c := first; c < iv.End; c += g.Millis() {
		if ChunkShard(c, shards) == shard {
			return true
		}
	}
	return false
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
// (o.SegmentGranularity, UTC) and, for each chunk of shard o.Shard of o.Shards, cuts segments
// of more than o.TargetRows rows into pieces of at most that many and packs the pieces into
// outputs of at most o.TargetRows rows (first fit, largest first). Segments are packed with
// those of their own rollup and granularity only; with o.Rollup, all together, and each that
// is not rolled up at o.RollupGranularity is rewritten even alone. A segment that fits, packs
// with no other and keeps its rollup is left as it is; a chunk with nothing else to do is
// not listed. Segments that cross a chunk boundary are listed in Crossing, for Compact to
// split.
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
		if iv.End > start+g.Millis() {
			if touchesShard(iv, g, o.Shard, o.Shards) {
				p.Crossing = append(p.Crossing, s)
			}
			continue
		}
		if ChunkShard(start, o.Shards) != o.Shard {
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
		c.Groups = planChunk(e, c.Segments, o)
		if len(c.Groups) > 0 {
			p.Chunks = append(p.Chunks, *c)
		}
	}
	slices.SortFunc(p.Chunks, func(a, b Chunk) int { return cmp.Compare(a.Interval.Start, b.Interval.Start) })
	slices.SortFunc(p.Crossing, func(a, b Segment) int { return cmp.Compare(a.Name, b.Name) })
	return p, nil
}

// cut returns s as pieces of at most target rows: itself whole when it fits, else pieces of
// target rows and a last of the rest.
func cut(s Segment, target int64) []Piece { return cutRange(s, 0, s.Rows, target) }

// cutRange returns rows [lo, hi) of s as pieces of target rows and a last of the rest: one
// piece when they fit.
func cutRange(s Segment, lo, hi, target int64) []Piece {
	if hi-lo <= target {
		return []Piece{{Segment: s, Lo: lo, Hi: hi}}
	}
	var ps []Piece
	for ; lo < hi; lo += target {
		ps = append(ps, Piece{Segment: s, Lo: lo, Hi: min(lo+target, hi)})
	}
	return ps
}

// planChunk returns the groups of a chunk's segments segs of version e: packed all together
// with o.Rollup, each rolled up otherwise rewritten; else packed class by class (no rollup
// first, then by granularity), each class's outputs its own.
func planChunk(e *Entry, segs []Segment, o CompactOptions) [][]Piece {
	if want, ok := o.target(); ok {
		return pack(segs, o.TargetRows, func(s Segment) bool { return s.classIn(e.Schema) != want })
	}
	byClass := map[class][]Segment{}
	for _, s := range segs {
		c := s.classIn(e.Schema)
		byClass[c] = append(byClass[c], s)
	}
	classes := slices.SortedFunc(maps.Keys(byClass), class.compare)
	var out [][]Piece
	for _, c := range classes {
		out = append(out, pack(byClass[c], o.TargetRows, nil)...)
	}
	return out
}

// pack cuts segs into pieces of at most target rows and packs them into bins of at most
// target rows, first fit by rows, largest first (ties by name, then row, so every worker
// plans alike). It returns the bins to merge: those of more than one piece, those holding
// a piece of a segment that was cut, and those of a segment rewrite (may be nil) says must
// be rewritten; nil when no segment needs rewriting.
func pack(segs []Segment, target int64, rewrite func(Segment) bool) [][]Piece {
	var pieces []Piece
	for _, s := range segs {
		pieces = append(pieces, cut(s, target)...)
	}
	slices.SortFunc(pieces, func(a, b Piece) int {
		if c := cmp.Compare(b.Len(), a.Len()); c != 0 {
			return c
		}
		if c := cmp.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		return cmp.Compare(a.Lo, b.Lo)
	})
	var bins [][]Piece
	var rows []int64
	for _, pc := range pieces {
		i := slices.IndexFunc(rows, func(r int64) bool { return r+pc.Len() <= target })
		if i < 0 {
			bins = append(bins, nil)
			rows = append(rows, 0)
			i = len(bins) - 1
		}
		bins[i] = append(bins[i], pc)
		rows[i] += pc.Len()
	}
	var out [][]Piece
	for _, b := range bins {
		if len(b) > 1 || !b[0].Whole() || rewrite != nil && rewrite(b[0].Segment) {
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
