package table

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/columns"
)

// planSeg is a segment of the plan tests: name, interval from start to end (ms), rows.
func planSeg(name string, start, end, rows int64) Segment {
	return Segment{Name: "segments/" + name + ".seg", Interval: columns.Interval{Start: start, End: end}.String(), Rows: rows, Bytes: 1, Footer: "00000000"}
}

// groupNames returns a plan's chunks as their groups' segment names (without segments/ and .seg).
func groupNames(p *Plan) [][][]string {
	var out [][][]string
	for _, c := range p.Chunks {
		var gs [][]string
		for _, g := range c.Groups {
			var ns []string
			for _, pc := range g {
				n := pc.Name[len("segments/") : len(pc.Name)-len(".seg")]
				if !pc.Whole() {
					n += fmt.Sprintf("[%d:%d]", pc.Lo, pc.Hi)
				}
				ns = append(ns, n)
			}
			gs = append(gs, ns)
		}
		out = append(out, gs)
	}
	return out
}

func TestPlanCompaction(t *testing.T) {
	const h = int64(time.Hour / time.Millisecond)
	f := func(o CompactOptions, segs []Segment, want [][][]string, crossing int) {
		t.Helper()
		p, err := PlanCompaction(&Entry{Version: 7, Segments: segs}, o)
		require.NoError(t, err)
		require.Equal(t, 7, p.Version)
		require.Equal(t, want, groupNames(p))
		require.Len(t, p.Crossing, crossing)
		for _, c := range p.Chunks {
			covered := map[string]int64{}
			for _, g := range c.Groups {
				var rows int64
				for _, pc := range g {
					iv, err := ParseInterval(pc.Interval)
					require.NoError(t, err)
					require.True(t, iv.Start >= c.Interval.Start && iv.End <= c.Interval.End, "%s outside %s", pc.Name, c)
					require.True(t, pc.Lo >= 0 && pc.Lo < pc.Hi && pc.Hi <= pc.Rows, "%s [%d:%d]", pc.Name, pc.Lo, pc.Hi)
					rows += pc.Len()
					covered[pc.Name] += pc.Len()
				}
				require.LessOrEqual(t, rows, max(o.TargetRows, 1))
			}
			// A segment in a group is there whole: every row of it, in one piece or several.
			for _, s := range c.Segments {
				if n, ok := covered[s.Name]; ok {
					require.Equal(t, s.Rows, n, "%s", s.Name)
				}
			}
		}
	}
	big := CompactOptions{TargetRows: 1000}
	// Nothing to do: an empty table, one segment a day.
	f(big, nil, nil, 0)
	f(big, []Segment{planSeg("a", day, day+h, 10), planSeg("b", day+24*h, day+25*h, 10)}, nil, 0)
	// Two segments of one day, one of the next: the day merges; days are UTC chunks, by start.
	f(big, []Segment{planSeg("a", day+23*h, day+24*h, 10), planSeg("b", day, day+h, 10), planSeg("c", day+24*h, day+25*h, 10)},
		[][][]string{{{"a", "b"}}}, 0)
	// Several days, in order of their start.
	f(big, []Segment{planSeg("d2a", day+24*h, day+25*h, 1), planSeg("d0a", day, day+h, 1), planSeg("d2b", day+30*h, day+31*h, 1),
		planSeg("d0b", day+5*h, day+6*h, 1)}, [][][]string{{{"d0a", "d0b"}}, {{"d2a", "d2b"}}}, 0)
	// A segment crossing midnight is listed to split, in no chunk.
	f(big, []Segment{planSeg("x", day+23*h, day+25*h, 10), planSeg("a", day, day+h, 10), planSeg("b", day+h, day+2*h, 10)},
		[][][]string{{{"a", "b"}}}, 1)
	// A segment ending exactly at midnight lies inside the day (intervals are half-open).
	f(big, []Segment{planSeg("a", day, day+24*h, 10), planSeg("b", day+h, day+2*h, 10)}, [][][]string{{{"a", "b"}}}, 0)
	// Target rows: first fit, largest first; segments that fit with no other stay.
	small := CompactOptions{TargetRows: 100}
	f(small, []Segment{planSeg("a", day, day+h, 30), planSeg("b", day, day+h, 60), planSeg("c", day, day+h, 40), planSeg("d", day, day+h, 30)},
		[][][]string{{{"b", "c"}, {"a", "d"}}}, 0)
	f(small, []Segment{planSeg("a", day, day+h, 60), planSeg("b", day, day+h, 60), planSeg("c", day, day+h, 60)}, nil, 0)
	f(small, []Segment{planSeg("a", day, day+h, 60), planSeg("b", day, day+h, 60), planSeg("c", day, day+h, 40)},
		[][][]string{{{"a", "c"}}}, 0)
	// A segment over the target is cut into pieces of the target and the rest, every piece
	// written (alone or packed with others).
	f(small, []Segment{planSeg("a", day, day+h, 101), planSeg("b", day, day+h, 50), planSeg("c", day, day+h, 50)},
		[][][]string{{{"a[0:100]"}, {"b", "c"}, {"a[100:101]"}}}, 0)
	f(small, []Segment{planSeg("a", day, day+h, 250), planSeg("b", day, day+h, 30), planSeg("c", day, day+h, 20)},
		[][][]string{{{"a[0:100]"}, {"a[100:200]"}, {"a[200:250]", "b", "c"}}}, 0)
	f(small, []Segment{planSeg("a", day, day+h, 200)}, [][][]string{{{"a[0:100]"}, {"a[100:200]"}}}, 0)
	f(small, []Segment{planSeg("a", day, day+h, 100)}, nil, 0)
	// Hour chunks: a segment of 10:00-12:00 crosses.
	hour := CompactOptions{TargetRows: 1000, SegmentGranularity: columns.GranularityHour}
	f(hour, []Segment{planSeg("a", day, day+h/2, 1), planSeg("b", day+h/2, day+h, 1), planSeg("c", day+10*h, day+12*h, 1), planSeg("d", day+10*h, day+11*h, 1)},
		[][][]string{{{"a", "b"}}}, 1)
}

// TestPlanRollupClasses: without rollup a chunk's segments are packed with those of their own
// rollup and granularity only (no rollup first); with rollup all together, and one not
// rolled up at the granularity asked is rewritten even alone.
func TestPlanRollupClasses(t *testing.T) {
	const h = int64(time.Hour / time.Millisecond)
	schema := testSchema(false)
	own := func(s Segment, c class) Segment { return s.withClass(schema, c) }
	byDay := class{rollup: true, gran: columns.GranularityDay}
	segs := []Segment{
		own(planSeg("a", day, day+h, 10), byHour), planSeg("b", day+h, day+2*h, 10), own(planSeg("c", day+2*h, day+3*h, 10), byHour),
		planSeg("d", day+3*h, day+4*h, 10), own(planSeg("e", day+24*h, day+48*h, 10), byDay), // alone in day 2
		own(planSeg("f", day+48*h, day+49*h, 10), byHour), // alone in day 3
	}
	e := &Entry{Version: 4, Schema: &schema, Segments: segs}
	f := func(o CompactOptions, want [][][]string) {
		t.Helper()
		p, err := PlanCompaction(e, o)
		require.NoError(t, err)
		require.Equal(t, want, groupNames(p))
		require.Empty(t, p.Crossing)
	}
	f(CompactOptions{}, [][][]string{{{"b", "d"}, {"a", "c"}}})
	f(CompactOptions{Rollup: true, RollupGranularity: columns.GranularityHour}, [][][]string{{{"a", "b", "c", "d"}}, {{"e"}}})
	f(CompactOptions{Rollup: true, RollupGranularity: columns.GranularityDay}, [][][]string{{{"a", "b", "c", "d"}}, {{"f"}}})
	f(CompactOptions{Rollup: true}, [][][]string{{{"a", "b", "c", "d"}}, {{"e"}}, {{"f"}}})
	// A segment of a granularity coarser than the chunks crosses them; to be split.
	p, err := PlanCompaction(e, CompactOptions{SegmentGranularity: columns.GranularityHour})
	require.NoError(t, err)
	require.Len(t, p.Crossing, 1)
}

func TestPlanCompactionOptions(t *testing.T) {
	for _, o := range []CompactOptions{
		{TargetRows: -1},
		{SegmentGranularity: columns.GranularitySecond},
		{SegmentGranularity: columns.Granularity(9)},
		{Shard: 1},
		{Shard: 2, Shards: 2},
		{Shard: -1, Shards: 2},
		{Shards: -1},
	} {
		_, err := PlanCompaction(&Entry{Version: 1}, o)
		require.ErrorIs(t, err, ErrInvalid, "%+v", o)
	}
	// A damaged interval is corruption, naming the segment.
	_, err := PlanCompaction(&Entry{Version: 3, Segments: []Segment{{Name: "segments/a.seg", Interval: "yesterday"}}}, CompactOptions{})
	require.ErrorIs(t, err, ErrCorrupt)
	require.ErrorContains(t, err, "segments/a.seg")
}

// TestPlanShards: the shards of N partition the chunks: every chunk that the unsharded plan
// compacts is compacted by exactly one shard, with the same groups.
func TestPlanShards(t *testing.T) {
	const h = int64(time.Hour / time.Millisecond)
	var segs []Segment
	for d := range int64(40) {
		for i := range int64(3) {
			segs = append(segs, planSeg(fmt.Sprintf("d%02d-%d", d, i), day+d*24*h+i*h, day+d*24*h+(i+1)*h, 10))
		}
	}
	e := &Entry{Version: 2, Segments: segs}
	all, err := PlanCompaction(e, CompactOptions{})
	require.NoError(t, err)
	require.Len(t, all.Chunks, 40)
	for _, n := range []int{1, 2, 3, 4, 7} {
		var got []Chunk
		for i := range n {
			p, err := PlanCompaction(e, CompactOptions{Shard: i, Shards: n})
			require.NoError(t, err)
			for _, c := range p.Chunks {
				require.Equal(t, i, ChunkShard(c.Interval.Start, n))
			}
			if n > 1 && n < 40 {
				require.NotEmpty(t, p.Chunks, "shard %d/%d takes no chunk of 40", i, n)
			}
			got = append(got, p.Chunks...)
		}
		slices.SortFunc(got, func(a, b Chunk) int { return int(a.Interval.Start - b.Interval.Start) })
		require.Equal(t, all.Chunks, got, "shards of %d", n)
	}
	// A crossing segment is listed by every shard whose chunks it reaches (x: days 0 and 1;
	// y: days 0 to 9), and by no other.
	odd := append(slices.Clone(segs), planSeg("x", day+23*h, day+25*h, 1), planSeg("y", day+1, day+9*24*h+1, 1))
	for _, n := range []int{1, 3, 7} {
		listed := map[string][]int{}
		for i := range n {
			p, err := PlanCompaction(&Entry{Version: 2, Segments: odd}, CompactOptions{TargetRows: 100, Shard: i, Shards: n})
			require.NoError(t, err)
			for _, s := range p.Crossing {
				listed[s.Name] = append(listed[s.Name], i)
			}
		}
		for name, days := range map[string]int64{"segments/x.seg": 2, "segments/y.seg": 10} {
			var want []int
			for i := range n {
				for d := range days {
					if ChunkShard(day+d*24*h, n) == i {
						want = append(want, i)
						break
					}
				}
			}
			require.Equal(t, want, listed[name], "%s, shards of %d", name, n)
		}
	}
	// The hash is fixed, so that workers of other builds agree: FNV-1a 64 of
	// "2024-05-01T00:00:00.000Z" is 597 modulo 1000.
	require.Equal(t, 597, ChunkShard(day, 1000))
	require.Equal(t, 16, ChunkShard(day+24*3600_000, 1000))
	require.Equal(t, 0, ChunkShard(day, 1))
}

// TestRotate: a rotated plan holds the same splits and chunks in the same cyclic order, and
// starts at each one of them some time.
func TestRotate(t *testing.T) {
	var chunks []Chunk
	for i := range 5 {
		chunks = append(chunks, Chunk{Interval: columns.Interval{Start: int64(i)}})
	}
	starts := map[int64]bool{}
	for range 200 {
		p := &Plan{Chunks: slices.Clone(chunks), Crossing: []Segment{{Name: "a"}, {Name: "b"}}}
		rotate(p)
		require.Len(t, p.Chunks, 5)
		first := p.Chunks[0].Interval.Start
		for i, c := range p.Chunks {
			require.Equal(t, (first+int64(i))%5, c.Interval.Start)
		}
		starts[first] = true
		require.ElementsMatch(t, []string{"a", "b"}, []string{p.Crossing[0].Name, p.Crossing[1].Name})
	}
	require.Len(t, starts, 5)
}

// TestRewritesOwn: a plan that would rewrite, alone and whole, an output of the same
// compaction is refused; one that packs it with another segment, or rewrites another, is not.
func TestRewritesOwn(t *testing.T) {
	own := planSeg("own", day, day+1, 10)
	other := planSeg("other", day, day+1, 10)
	res := &CompactResult{Replaced: []Replacement{{Added: []Segment{own}}}}
	plan := func(groups ...[]Piece) *Plan { return &Plan{Chunks: []Chunk{{Groups: groups}}} }
	whole := func(s Segment) Piece { return Piece{Segment: s, Lo: 0, Hi: s.Rows} }
	require.ErrorIs(t, rewritesOwn(plan([]Piece{whole(own)}), res), ErrInvalid)
	require.NoError(t, rewritesOwn(plan([]Piece{whole(own), whole(other)}), res))
	require.NoError(t, rewritesOwn(plan([]Piece{whole(other)}), res))
	require.NoError(t, rewritesOwn(plan([]Piece{{Segment: own, Lo: 0, Hi: 5}}), res))
	require.NoError(t, rewritesOwn(plan([]Piece{whole(own)}), &CompactResult{}))
}

// TestCutRange: a range is cut from its own start into pieces of the target and the rest.
func TestCutRange(t *testing.T) {
	s := planSeg("a", day, day+1, 1000)
	bounds := func(ps []Piece) [][2]int64 {
		var out [][2]int64
		for _, p := range ps {
			out = append(out, [2]int64{p.Lo, p.Hi})
		}
		return out
	}
	require.Equal(t, [][2]int64{{50, 150}, {150, 250}, {250, 270}}, bounds(cutRange(s, 50, 270, 100)))
	require.Equal(t, [][2]int64{{50, 150}}, bounds(cutRange(s, 50, 150, 100)))
	require.Equal(t, [][2]int64{{0, 100}, {100, 200}}, bounds(cut(planSeg("b", day, day+1, 200), 100)))
}
