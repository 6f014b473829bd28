package gen

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// hashRow feeds a canonical binary encoding of r to h.
func hashRow(h hash.Hash, r *Row) {
	var b []byte
	b = binary.LittleEndian.AppendUint64(b, uint64(r.Time))
	b = binary.AppendUvarint(b, uint64(len(r.Strings)))
	for i := range r.Strings {
		s := &r.Strings[i]
		if s.Null {
			b = append(b, 1)
			continue
		}
		b = append(b, 0)
		b = binary.AppendUvarint(b, uint64(len(s.Values)))
		for j, v := range s.Values {
			if s.IsNullAt(j) {
				b = append(b, 1)
				continue
			}
			b = append(b, 0)
			b = binary.AppendUvarint(b, uint64(len(v)))
			b = append(b, v...)
		}
	}
	b = binary.AppendUvarint(b, uint64(len(r.Longs)))
	for _, v := range r.Longs {
		b = binary.LittleEndian.AppendUint64(b, uint64(v))
	}
	b = binary.AppendUvarint(b, uint64(len(r.Doubles)))
	for _, v := range r.Doubles {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
	}
	h.Write(b)
}

// hashRows returns the hex SHA-256 of the canonical encoding of every row g
// produces, and the number of rows.
func hashRows(t testing.TB, g Generator) (string, int) {
	t.Helper()
	h := sha256.New()
	var r Row
	n := 0
	for g.Next(&r) {
		hashRow(h, &r)
		n++
	}
	return hex.EncodeToString(h.Sum(nil)), n
}

func mustBasic(t testing.TB, seed int64, rows int) Generator {
	t.Helper()
	g, err := Basic(seed, rows)
	require.NoError(t, err)
	return g
}

func mustWide(t testing.TB, seed int64, rows int, o WideOptions) Generator {
	t.Helper()
	g, err := Wide(seed, rows, o)
	require.NoError(t, err)
	return g
}

func collect(t testing.TB, g Generator) []Row {
	t.Helper()
	var rows []Row
	var r Row
	for g.Next(&r) {
		rows = append(rows, r.Clone())
	}
	require.Len(t, rows, g.Rows())
	return rows
}

// TestGolden pins the rows of both generators (SHA-256 of a canonical
// encoding, see hashRow): a change here changes every benchmark's data set
// and must be deliberate.
func TestGolden(t *testing.T) {
	f := func(name string, g Generator, wantRows int, want string) {
		t.Helper()
		got, n := hashRows(t, g)
		assert.Equal(t, wantRows, n, name)
		assert.Equal(t, want, got, name)
	}
	f("basic seed 9999", mustBasic(t, BasicSeed, 1000), 1000,
		"22873b6b6f1ac9f0eae8fcde36b04c0659c6aee341e6f3132560dec4467bc38c")
	f("basic seed 10000", mustBasic(t, BasicSeed+1, 1000), 1000,
		"a92f6d570c1fd92454304cb529af7a7392d9fdcbe56f6ca1c8f188defaa0e135")
	f("wide seed 1", mustWide(t, 1, 300, WideOptions{}), 300,
		"2a33f187bb706346a6d5522482cd8fb2668c29e327fe328d55c588ff5852a598")
	f("wide seed 1 payload 512", mustWide(t, 1, 100, WideOptions{PayloadLen: 512}), 100,
		"cd9a58ce59a1de36a9f83069bec3201aaf5bc2e9ea10ff4c6a020fa9a6039bbb")
}

func TestDeterminism(t *testing.T) {
	seed := rand.Int64()
	t.Logf("seed %d", seed)
	for _, tc := range []struct {
		name string
		make func(seed int64) Generator
	}{
		{"basic", func(s int64) Generator { return mustBasic(t, s, 5000) }},
		{"wide", func(s int64) Generator { return mustWide(t, s, 2000, WideOptions{PayloadLen: 100}) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, _ := hashRows(t, tc.make(seed))
			b, _ := hashRows(t, tc.make(seed))
			c, _ := hashRows(t, tc.make(seed+1))
			assert.Equal(t, a, b, "same seed")
			assert.NotEqual(t, a, c, "different seeds")
			// Row by row, the random columns of two seeds differ.
			ra, rc := collect(t, tc.make(seed)), collect(t, tc.make(seed+1))
			same := 0
			for i := range ra {
				if ra[i].Time == rc[i].Time {
					same++
				}
			}
			assert.Less(t, same, len(ra)/10, "times of different seeds mostly differ")
		})
	}
}

func TestRowCountAndEnd(t *testing.T) {
	for _, n := range []int{0, 1, 2, 3, 999, 1000, 1001} {
		for _, g := range []Generator{mustBasic(t, 1, n), mustWide(t, 1, n, WideOptions{})} {
			assert.Equal(t, n, g.Rows())
			rows := collect(t, g)
			assert.Len(t, rows, n)
			// After the end Next returns false and leaves the row alone.
			r := Row{Time: 42}
			assert.False(t, g.Next(&r))
			assert.Equal(t, Row{Time: 42}, r)
		}
	}
}

func TestInvalid(t *testing.T) {
	bad := []int{-1, math.MinInt}
	maxRows := MaxRows
	if maxRows < math.MaxInt {
		bad = append(bad, int(maxRows+1), math.MaxInt)
		_, err := Basic(1, int(maxRows))
		require.NoError(t, err, "MaxRows itself is fine (rows are made lazily)")
	}
	for _, n := range bad {
		_, err := Basic(1, n)
		require.ErrorIs(t, err, ErrInvalid, "rows %d", n)
		assert.ErrorContains(t, err, "row count")
		_, err = Wide(1, n, WideOptions{})
		require.ErrorIs(t, err, ErrInvalid, "rows %d", n)
	}
	for _, p := range []int{-1, MaxPayloadLen + 1} {
		_, err := Wide(1, 10, WideOptions{PayloadLen: p})
		require.ErrorIs(t, err, ErrInvalid, "payload %d", p)
		assert.ErrorContains(t, err, "payload length")
	}
}

func TestBasicSchema(t *testing.T) {
	g := mustBasic(t, BasicSeed, 1)
	type col struct {
		name                                  string
		kind                                  Kind
		multi, nullable, nullElements, bitmap bool
	}
	want := []col{
		{"__time", Time, false, false, false, false},
		{"dimSequential", String, false, false, false, true},
		{"dimZipf", String, false, false, false, true},
		{"dimUniform", String, false, false, false, true},
		{"dimSequentialHalfNull", String, false, true, false, true},
		{"dimMultivalEnumerated", String, true, false, false, true},
		{"dimMultivalEnumerated2", String, true, false, true, true},
		{"dimMultivalSequentialWithNulls", String, true, true, false, true},
		{"dimHyperUnique", String, false, false, false, true},
		{"dimNull", String, false, true, false, true},
		{"metLongSequential", Long, false, false, false, false},
		{"metLongUniform", Long, false, false, false, false},
		{"metFloatNormal", Double, false, false, false, false},
		{"metFloatZipf", Double, false, false, false, false},
	}
	var got []col
	for _, c := range g.Schema() {
		got = append(got, col{c.Name, c.Kind, c.MultiValue, c.Nullable, c.NullElements, c.Bitmap})
		assert.False(t, c.Raw, c.Name)
	}
	assert.Equal(t, want, got)
	checkSlots(t, g)

	aggs := g.Aggregators()
	type agg struct{ name, agg, source string }
	var gotAggs []agg
	for _, a := range aggs {
		gotAggs = append(gotAggs, agg{a.Name, a.Aggregator, a.Source})
		assert.Equal(t, -1, a.Slot)
	}
	assert.Equal(t, []agg{
		{"rows", AggCount, ""},
		{"sumLongSequential", AggLongSum, "metLongSequential"},
		{"maxLongUniform", AggLongMax, "metLongUniform"},
		{"sumFloatNormal", AggDoubleSum, "metFloatNormal"},
		{"minFloatZipf", AggDoubleMin, "metFloatZipf"},
		{"hyper", AggHyperUnique, "dimHyperUnique"},
	}, gotAggs)
	assert.Equal(t, Sketch, aggs[5].Kind)

	// Schema and Aggregators hand out copies.
	s := g.Schema()
	s[1].Name = "changed"
	aggs[0].Name = "changed"
	assert.Equal(t, "dimSequential", g.Schema()[1].Name)
	assert.Equal(t, "rows", g.Aggregators()[0].Name)

	start, end := g.Interval()
	assert.Equal(t, int64(946684800000), start)
	assert.Equal(t, start+24*3600*1000, end)
}

// checkSlots verifies that each kind's slots are 0..n-1 in schema order,
// that Next shapes the row to match, and that aggregator sources exist.
func checkSlots(t *testing.T, g Generator) {
	t.Helper()
	next := map[Kind]int{}
	names := map[string]Column{}
	for i, c := range g.Schema() {
		if i == 0 {
			assert.Equal(t, Column{Name: "__time", Kind: Time}, c)
			continue
		}
		assert.Equal(t, next[c.Kind], c.Slot, c.Name)
		next[c.Kind]++
		assert.NotContains(t, names, c.Name)
		names[c.Name] = c
	}
	for _, a := range g.Aggregators() {
		if a.Aggregator != AggCount {
			assert.Contains(t, names, a.Source, a.Name)
		}
	}
	var r Row
	if g.Next(&r) {
		assert.Len(t, r.Strings, next[String])
		assert.Len(t, r.Longs, next[Long])
		assert.Len(t, r.Doubles, next[Double])
	}
}

func TestWideSchema(t *testing.T) {
	g := mustWide(t, 1, 10, WideOptions{})
	s := g.Schema()
	require.Len(t, s, 26, "__time and 25 columns")
	var dictInt, dictIntBitmap, rawInt, metrics, dictStr, dictStrBitmap, raw []string
	for _, c := range s[1:] {
		switch {
		case c.Kind == Long:
			metrics = append(metrics, c.Name)
		case c.Raw:
			assert.False(t, c.Bitmap, c.Name)
			raw = append(raw, c.Name)
			if len(c.Name) > 6 && c.Name[:6] == "rawInt" {
				rawInt = append(rawInt, c.Name)
			}
		case c.Name[:7] == "dictInt":
			dictInt = append(dictInt, c.Name)
			if c.Bitmap {
				dictIntBitmap = append(dictIntBitmap, c.Name)
			}
		case c.Name[:7] == "dictStr":
			dictStr = append(dictStr, c.Name)
			if c.Bitmap {
				dictStrBitmap = append(dictStrBitmap, c.Name)
			}
		}
		assert.False(t, c.MultiValue || c.Nullable || c.NullElements, c.Name)
	}
	assert.Len(t, dictInt, 10)
	assert.Equal(t, []string{"dictInt0", "dictInt1", "dictInt2", "dictInt3", "dictInt4"}, dictIntBitmap)
	assert.Equal(t, []string{"rawInt0", "rawInt1"}, rawInt)
	assert.Equal(t, []string{"metric0", "metric1", "metric2", "metric3", "metric4"}, metrics)
	assert.Len(t, dictStr, 5)
	assert.Equal(t, []string{"dictStr0", "dictStr1"}, dictStrBitmap)
	assert.Equal(t, []string{"rawInt0", "rawInt1", "payloadText", "payloadRandom", "json"}, raw)
	checkSlots(t, g)
	for i, a := range g.Aggregators() {
		assert.Equal(t, AggLongSum, a.Aggregator)
		assert.Equal(t, metrics[i], a.Source)
		assert.Equal(t, metrics[i], a.Name)
	}
}

func TestTimeOrderAndRange(t *testing.T) {
	for _, n := range []int{1, 2, 3, 7, 1000, 86_400, 100_000} {
		for _, g := range []Generator{mustBasic(t, int64(n), n), mustWide(t, int64(n), min(n, 20000), WideOptions{PayloadLen: 1})} {
			start, end := g.Interval()
			prev := start
			var r Row
			for g.Next(&r) {
				check(t, r.Time >= prev && r.Time < end, "rows %d: time %d after %d, end %d", n, r.Time, prev, end)
				prev = r.Time
			}
		}
	}
	// Spread: with many rows the first and last are near the ends of the day.
	rows := collect(t, mustBasic(t, BasicSeed, 75000))
	assert.Less(t, rows[0].Time-Start2000, int64(3000))
	assert.Greater(t, rows[len(rows)-1].Time, Start2000+DayMillis-3000)
}

func TestClockExtremes(t *testing.T) {
	// The clock is exact integer arithmetic for any row count up to MaxRows.
	for _, n := range []uint64{1, 2, 86_400_000, 86_400_001, 1 << 32, uint64(MaxRows)} {
		c := newClock(TimeRange{Start: Start2000, Span: DayMillis}, n, 7)
		idx := []uint64{0, 1, 2, n / 3, n / 2, n - 2, n - 1}
		slices.Sort(idx)
		idx = slices.Compact(idx)
		prev := int64(math.MinInt64)
		for _, i := range idx {
			if i >= n {
				continue
			}
			ts := c.at(i)
			assert.GreaterOrEqual(t, ts, Start2000, "n %d i %d", n, i)
			assert.Less(t, ts, Start2000+DayMillis, "n %d i %d", n, i)
			assert.GreaterOrEqual(t, ts, prev, "n %d i %d", n, i)
			prev = ts
		}
	}
}

func TestCloneAndReuse(t *testing.T) {
	g := mustBasic(t, 3, 10)
	var r Row
	require.True(t, g.Next(&r))
	c := r.Clone()
	assert.Equal(t, r, c)
	require.True(t, g.Next(&r))
	assert.NotEqual(t, r, c, "the clone is not overwritten")

	// A Row used by one generator works for another: same rows as a fresh Row.
	var shared Row
	w := mustWide(t, 5, 3, WideOptions{})
	for w.Next(&shared) {
	}
	want := collect(t, mustBasic(t, 4, 50))
	b := mustBasic(t, 4, 50)
	for i := 0; b.Next(&shared); i++ {
		require.Equal(t, want[i], shared.Clone(), "row %d", i)
	}
}

func TestKindString(t *testing.T) {
	assert.Equal(t, "time", Time.String())
	assert.Equal(t, "string", String.String())
	assert.Equal(t, "long", Long.String())
	assert.Equal(t, "double", Double.String())
	assert.Equal(t, "sketch", Sketch.String())
	assert.Equal(t, "Kind(0)", Kind(0).String())
	assert.Equal(t, "Kind(99)", Kind(99).String())
}

// TestConcurrentGenerators runs generators on several goroutines at once:
// the shared tables are read-only, so each gives the rows it gives alone.
func TestConcurrentGenerators(t *testing.T) {
	makers := []func() Generator{
		func() Generator { return mustBasic(t, BasicSeed, 3000) },
		func() Generator { return mustBasic(t, BasicSeed+1, 3000) },
		func() Generator { return mustWide(t, 1, 1000, WideOptions{}) },
		func() Generator { return mustWide(t, 2, 500, WideOptions{PayloadLen: 512}) },
	}
	want := make([]string, len(makers))
	for i, m := range makers {
		want[i], _ = hashRows(t, m())
	}
	gens := make([]Generator, len(makers))
	for i, m := range makers {
		gens[i] = m()
	}
	got := make([]string, len(makers))
	var wg sync.WaitGroup
	for i, g := range gens {
		wg.Go(func() { got[i], _ = hashRows(t, g) })
	}
	wg.Wait()
	assert.Equal(t, want, got)
}
