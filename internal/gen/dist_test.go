package gen

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// harmonic returns H(n, s) = sum over k=1..n of 1/k^s.
func harmonic(n int, s float64) float64 {
	var h float64
	for k := 1; k <= n; k++ {
		h += math.Pow(float64(k), -s)
	}
	return h
}

// assertFreq checks that count successes out of n trials fit probability
// p within 5 standard deviations (a false alarm about once in 3.5 million).
func assertFreq(t *testing.T, p float64, count, n int, msg string, args ...any) {
	t.Helper()
	sd := math.Sqrt(p * (1 - p) / float64(n))
	got := float64(count) / float64(n)
	assert.InDelta(t, p, got, 5*sd+1e-12, append([]any{msg + " (got %.5f want %.5f)"}, append(args, got, p)...)...)
}

// single returns the value of a single-value, non-null string cell, or
// "\x00bad" when the cell is anything else.
func single(v *StringValue) string {
	if v.Null || len(v.Values) != 1 || len(v.NullAt) != 0 {
		return "\x00bad"
	}
	return v.Values[0]
}

// check is require.True without the cost of t.Helper on success, for hot
// loops.
func check(t *testing.T, ok bool, msgAndArgs ...any) {
	if !ok {
		t.Helper()
		require.True(t, ok, msgAndArgs...)
	}
}

func dec(i int) string { return strconv.Itoa(i) }

func basicIndex(t *testing.T) (Generator, map[string]Column) {
	g := mustBasic(t, BasicSeed, 100_003)
	cols := map[string]Column{}
	for _, c := range g.Schema() {
		cols[c.Name] = c
	}
	return g, cols
}

// TestBasicDistributions checks each column of the basic schema against
// its definition over 100,003 rows (a little over 100k, so that
// dimHyperUnique wraps).
func TestBasicDistributions(t *testing.T) {
	g, cols := basicIndex(t)
	const n = 100_003
	str := func(r *Row, name string) *StringValue { return &r.Strings[cols[name].Slot] }

	var (
		zipfCount      = map[string]int{}
		uniformMin     = math.MaxInt
		uniformMax     = math.MinInt
		uniformSum     float64
		halfNull       int
		halfNullNext   int
		enum1          = map[string]int{}
		enum2          = map[string]int{}
		enum2Null      int
		seqNullRows    int
		seqNext        = 1
		longUniform    [500]int
		normSum, norm2 float64
		floatZipf      = map[float64]int{}
	)
	var r Row
	for i := 0; g.Next(&r); i++ {
		// sequential columns, wrapping
		check(t, single(str(&r, "dimSequential")) == dec(i%1000), "row %d", i)
		check(t, single(str(&r, "dimHyperUnique")) == dec(i%100000), "row %d", i)
		check(t, r.Longs[cols["metLongSequential"].Slot] == int64(i%10000), "row %d", i)
		check(t, str(&r, "dimNull").Null, "row %d", i)

		zipfCount[single(str(&r, "dimZipf"))]++

		v, err := strconv.Atoi(single(str(&r, "dimUniform")))
		check(t, err == nil, "dimUniform: %v", err)
		uniformMin, uniformMax = min(uniformMin, v), max(uniformMax, v)
		uniformSum += float64(v)

		// half-null sequence: non-null rows continue where the last left off
		if h := str(&r, "dimSequentialHalfNull"); h.Null {
			halfNull++
			check(t, len(h.Values) == 0)
		} else {
			check(t, single(h) == dec(halfNullNext), "row %d", i)
			halfNullNext = (halfNullNext + 1) % 1000
		}

		e1 := str(&r, "dimMultivalEnumerated")
		check(t, !e1.Null && len(e1.Values) == 4 && len(e1.NullAt) == 0)
		for _, v := range e1.Values {
			enum1[v]++
		}
		e2 := str(&r, "dimMultivalEnumerated2")
		check(t, !e2.Null && len(e2.Values) == 3 && len(e2.NullAt) == 3)
		for j, v := range e2.Values {
			if e2.IsNullAt(j) {
				check(t, v == "")
				enum2Null++
			} else {
				enum2[v]++
			}
		}

		if s := str(&r, "dimMultivalSequentialWithNulls"); s.Null {
			seqNullRows++
		} else {
			check(t, len(s.Values) == 8)
			for _, v := range s.Values {
				check(t, v == dec(seqNext), "row %d", i)
				seqNext = seqNext%10 + 1
			}
		}

		lu := r.Longs[cols["metLongUniform"].Slot]
		check(t, lu >= 0 && lu < 500, "metLongUniform %d", lu)
		longUniform[lu]++

		fn := r.Doubles[cols["metFloatNormal"].Slot]
		check(t, math.Round(fn) == fn, "metFloatNormal %v is rounded", fn)
		normSum += fn
		norm2 += fn * fn

		fz := r.Doubles[cols["metFloatZipf"].Slot]
		check(t, fz >= 0 && fz < 1000 && fz == math.Round(fz), "metFloatZipf %v", fz)
		floatZipf[fz]++
	}

	// dimZipf: values 1..100, rank k is value k, probability (1/k)/H(100).
	h100 := harmonic(100, 1)
	for k := 1; k <= 5; k++ {
		assertFreq(t, 1/float64(k)/h100, zipfCount[strconv.Itoa(k)], n, "dimZipf rank %d", k)
	}
	assert.Len(t, zipfCount, 100, "every value 1..100 occurs")
	assert.NotContains(t, zipfCount, "0")
	assert.NotContains(t, zipfCount, "101")
	// metFloatZipf: values 0..999, rank k is value k-1.
	h1000 := harmonic(1000, 1)
	for k := 1; k <= 5; k++ {
		assertFreq(t, 1/float64(k)/h1000, floatZipf[float64(k-1)], n, "metFloatZipf rank %d", k)
	}

	// dimUniform: 1..99999.
	assert.True(t, uniformMin >= 1 && uniformMin < 20, "min %d near 1", uniformMin)
	assert.Greater(t, uniformMax, 99_990)
	assert.LessOrEqual(t, uniformMax, 99_999)
	mean, sdMean := 50_000.0, 99_999/math.Sqrt(12)/math.Sqrt(n)
	assert.InDelta(t, mean, uniformSum/n, 5*sdMean)

	// metLongUniform 0..499: every value, each about n/500 times.
	for v, c := range longUniform {
		assert.Greater(t, c, 0, "metLongUniform %d occurs", v)
	}
	assertFreq(t, 1.0/500, longUniform[0], n, "metLongUniform 0")
	assertFreq(t, 1.0/500, longUniform[499], n, "metLongUniform 499")

	// null rates
	assertFreq(t, 0.5, halfNull, n, "dimSequentialHalfNull null rate")
	assertFreq(t, 0.15, seqNullRows, n, "dimMultivalSequentialWithNulls null rate")

	// enumerated probabilities, per element
	for v, p := range map[string]float64{"Hello": .2, "World": .25, "Foo": .15, "Bar": .10, "Baz": .3} {
		assertFreq(t, p, enum1[v], 4*n, "dimMultivalEnumerated %s", v)
	}
	assert.Len(t, enum1, 5)
	for v, p := range map[string]float64{"Apple": .2, "Orange": .25, "Xylophone": .15, "Corundum": .10} {
		assertFreq(t, p, enum2[v], 3*n, "dimMultivalEnumerated2 %s", v)
	}
	assert.Len(t, enum2, 4)
	assertFreq(t, 0.3, enum2Null, 3*n, "dimMultivalEnumerated2 null")

	// metFloatNormal: round(normal(5000, 1)) has mean 5000 and variance 1 + 1/12.
	nm := normSum / n
	sd := math.Sqrt(norm2/n - nm*nm)
	assert.InDelta(t, 5000, nm, 5*math.Sqrt(1.0833/n))
	assert.InDelta(t, math.Sqrt(1+1.0/12), sd, 0.02)
}

// TestTableExact checks the table sampler against the probabilities it
// announces, and that those equal the weights to 2^-50.
func TestTableExact(t *testing.T) {
	seed := rand.Int64()
	t.Logf("seed %d", seed)
	w := []float64{0.2, 0.25, 0.15, 0.10, 0.3}
	tab := newTable(w)
	for i, p := range w {
		assert.InDelta(t, p, tab.prob(i), 0x1p-50)
	}
	var r rng
	seedStream(&r, seed, 1)
	const n = 200_000
	var counts [5]int
	for range n {
		counts[tab.sample(&r)]++
	}
	for i, p := range w {
		assertFreq(t, p, counts[i], n, "index %d", i)
	}
	// Zero weights are never drawn; a single entry always is.
	z := newTable([]float64{0, 1, 0})
	one := newTable([]float64{3})
	for range 1000 {
		assert.Equal(t, 1, z.sample(&r))
		assert.Equal(t, 0, one.sample(&r))
	}
	// Rounded normal weights sum to 1 and are symmetric.
	nw := roundedNormalWeights(1, 11)
	var sum float64
	for i, x := range nw {
		sum += x
		assert.InDelta(t, x, nw[len(nw)-1-i], 1e-15)
	}
	assert.InDelta(t, 1, sum, 1e-12)
	assert.InDelta(t, 0.3829249225480262, nw[11], 1e-12, "P(|X| < 0.5)")
}

func TestUintn(t *testing.T) {
	seed := rand.Int64()
	t.Logf("seed %d", seed)
	var r rng
	seedStream(&r, seed, 3)
	for _, n := range []uint64{1, 2, 3, 7, 1 << 40, math.MaxUint64} {
		for range 1000 {
			require.Less(t, uintn(&r, n), n)
		}
	}
	var counts [3]int
	const n = 300_000
	for range n {
		counts[uintn(&r, 3)]++
	}
	for i := range counts {
		assertFreq(t, 1.0/3, counts[i], n, "value %d", i)
	}
	assert.Equal(t, uint64(0), threshold(0))
	assert.Equal(t, uint64(0), threshold(-1))
	assert.Equal(t, uint64(0), threshold(math.NaN()))
	assert.Equal(t, unitOne, threshold(1))
	assert.Equal(t, unitOne/2, threshold(0.5))
}

// TestWideDistributions checks the wide table's columns over 20,000 rows.
func TestWideDistributions(t *testing.T) {
	const n = 20_000
	for _, payload := range []int{1, 64, 512} {
		g := mustWide(t, 77, n, WideOptions{PayloadLen: payload})
		cols := map[string]Column{}
		for _, c := range g.Schema() {
			cols[c.Name] = c
		}
		val := func(r *Row, name string) string {
			v := single(&r.Strings[cols[name].Slot])
			check(t, v != "", name)
			return v
		}
		intIn := func(r *Row, name string, lo, hi int64) int64 {
			v, err := strconv.ParseInt(val(r, name), 10, 64)
			check(t, err == nil, "%s: %v", name, err)
			check(t, v >= lo && v < hi, "%s = %d outside [%d, %d)", name, v, lo, hi)
			return v
		}
		distinct := map[string]map[string]bool{}
		var prevCounter int64
		var m4sum, m4sq float64
		var textSpaces, randomBytes int
		var r Row
		for i := 0; g.Next(&r); i++ {
			for _, c := range g.Schema()[1:] {
				if c.Kind == String {
					if distinct[c.Name] == nil {
						distinct[c.Name] = map[string]bool{}
					}
					distinct[c.Name][val(&r, c.Name)] = true
				}
			}
			intIn(&r, "dictInt0", 0, 10)
			intIn(&r, "dictInt1", 0, 100)
			check(t, intIn(&r, "dictInt2", 0, 1000) == int64(i%1000))
			intIn(&r, "dictInt3", 0, 10000)
			intIn(&r, "dictInt4", 0, 100000)
			intIn(&r, "dictInt5", 0, 2)
			intIn(&r, "dictInt6", 0, 1000)
			intIn(&r, "dictInt7", 0, 100000)
			intIn(&r, "dictInt8", 250, 750)
			intIn(&r, "dictInt9", 0, 100000)
			check(t, intIn(&r, "rawInt0", 0, math.MaxInt64) == rawIntBase+int64(i))
			intIn(&r, "rawInt1", 0, 1<<31)

			m := func(name string) int64 { return r.Longs[cols[name].Slot] }
			check(t, m("metric0") >= 0 && m("metric0") < 1000)
			check(t, m("metric1") > prevCounter && m("metric1") <= prevCounter+10)
			prevCounter = m("metric1")
			check(t, m("metric2") >= 0 && m("metric2") < 10000)
			check(t, m("metric3") >= 0 && m("metric3") < 1<<40)
			m4 := float64(m("metric4"))
			m4sum += m4
			m4sq += m4 * m4

			pt, pr := val(&r, "payloadText"), val(&r, "payloadRandom")
			check(t, len(pt) == payload && len(pr) == payload)
			check(t, pt[0] != ' ' && pt[len(pt)-1] != ' ', "%q", pt)
			textSpaces += strings.Count(pt, " ")
			for j := range len(pr) {
				check(t, strings.IndexByte(randomAlphabet, pr[j]) >= 0)
			}
			randomBytes += len(pr)

			js := val(&r, "json")
			var obj struct {
				ID     int64
				User   string
				TS     int64
				Score  float64
				Active bool
				Tags   []string
				Geo    struct{ Lat, Lon float64 }
			}
			err := json.Unmarshal([]byte(js), &obj)
			check(t, err == nil, "%s: %v", js, err)
			check(t, obj.ID == rawIntBase+int64(i) && obj.TS == r.Time && obj.User != "" && len(obj.Tags) <= 3, js)
			check(t, obj.Score >= 0 && obj.Score < 1000)
			check(t, math.Abs(obj.Geo.Lat) <= 90 && math.Abs(obj.Geo.Lon) <= 180)
		}
		// cardinalities
		want := map[string]int{"dictInt0": 10, "dictInt5": 2, "dictInt2": 1000, "dictStr0": 5, "dictStr1": 50,
			"dictStr2": 500, "rawInt0": n}
		for name, c := range want {
			assert.Len(t, distinct[name], c, "%s cardinality (payload %d)", name, payload)
		}
		assert.Greater(t, len(distinct["dictStr4"]), 15000, "about 50000*(1-e^-0.4) = 16484")
		assert.Greater(t, len(distinct["rawInt1"]), n-10)
		if payload >= 16 {
			assert.Greater(t, len(distinct["payloadRandom"]), n-10)
		}
		// metric4 is about normal(100000, 16384)
		mean := m4sum / n
		sd := math.Sqrt(m4sq/n - mean*mean)
		assert.InDelta(t, 100000, mean, 5*16384/math.Sqrt(n))
		assert.InDelta(t, 16384, sd, 300)
		if payload >= 64 {
			assert.Greater(t, textSpaces, n*payload/10, "text payloads are words")
		}
	}
}

func TestVocabularyDistinct(t *testing.T) {
	words := vocabulary()
	require.Len(t, words, vocabularySize)
	seen := make(map[string]bool, len(words))
	for _, w := range words {
		check(t, !seen[w] && len(w) >= 4, w)
		seen[w] = true
	}
	d := decimals()
	require.Len(t, d.off, decimalMax+2)
	for i := range decimalMax + 1 {
		s := d.get(int64(i))
		check(t, s == strconv.Itoa(i), "decimal %d is %q", i, s)
	}
}

func TestAppendFixed(t *testing.T) {
	f := func(v int64, frac int, want string) {
		t.Helper()
		assert.Equal(t, want, string(appendFixed(nil, v, frac)))
	}
	f(0, 2, "0.00")
	f(5, 2, "0.05")
	f(12345, 2, "123.45")
	f(-1, 4, "-0.0001")
	f(-900000, 4, "-90.0000")
	f(1800000, 4, "180.0000")
}
