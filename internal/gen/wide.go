package gen

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
)

// WideOptions configures Wide. The zero value is the default.
type WideOptions struct {
	// PayloadLen is the length in bytes of each of the two payload
	// columns' values: 0 means 64; otherwise 1..MaxPayloadLen.
	PayloadLen int
	// Time is the interval of the rows' times; the zero TimeRange is one
	// day from Start2000.
	Time TimeRange
}

// MaxPayloadLen is the largest WideOptions.PayloadLen.
const MaxPayloadLen = 1 << 20

// DefaultPayloadLen is the payload length WideOptions{} selects.
const DefaultPayloadLen = 64

func (o *WideOptions) ensureDefaults() error {
	if o.PayloadLen == 0 {
		o.PayloadLen = DefaultPayloadLen
	}
	if o.PayloadLen < 1 || o.PayloadLen > MaxPayloadLen {
		return fmt.Errorf("gen: wide: payload length %d outside [1, %d]: %w", o.PayloadLen, MaxPayloadLen, ErrInvalid)
	}
	return o.Time.ensureDefaults("wide")
}

// rawIntBase is the first value of the wide table's rawInt0 (a row id).
const rawIntBase = 1_000_000_000_000

// wideSpecs are the wide table's columns that come from a distribution.
// String slots 0..9 (dictInt*) and 12..16 (dictStr*); Long slots 0, 2, 3.
func wideSpecs() (ints, strs, longs []spec) {
	words := vocabulary()
	w := func(name string, s spec, n int) spec {
		s.name, s.enum = name, words[:n]
		return s
	}
	ints = []spec{
		uniform("dictInt0", String, 0, 10),
		zipf("dictInt1", String, 0, 100, 1.0),
		sequential("dictInt2", String, 0, 1000),
		uniform("dictInt3", String, 0, 10000),
		zipf("dictInt4", String, 0, 100000, 1.1),
		uniform("dictInt5", String, 0, 2),
		zipf("dictInt6", String, 0, 1000, 1.2),
		uniform("dictInt7", String, 0, 100000),
		roundedNormal("dictInt8", String, 500, 50),
		zipf("dictInt9", String, 0, 100000, 0.8),
	}
	strs = []spec{
		w("dictStr0", uniform("", String, 0, 5), 5),
		w("dictStr1", zipf("", String, 0, 50, 1.0), 50),
		w("dictStr2", uniform("", String, 0, 500), 500),
		w("dictStr3", zipf("", String, 0, 5000, 1.0), 5000),
		w("dictStr4", uniform("", String, 0, 50000), 50000),
	}
	longs = []spec{
		uniform("metric0", Long, 0, 1000),
		zipf("metric2", Long, 0, 10000, 1.0),
		uniform("metric3", Long, 0, 1<<40),
	}
	return ints, strs, longs
}

// Text columns of the wide table, written into one string per row.
const (
	txtRawInt0 = iota
	txtRawInt1
	txtPayloadText
	txtPayloadRandom
	txtJSON
	nText
)

// String slots of the text columns.
var textSlots = [nText]int{10, 11, 17, 18, 19}

type wideGen struct {
	genBase
	opts WideOptions

	counter    int64 // metric1
	counterRng rng
	normalRng  rng // metric4
	rawIntRng  rng // rawInt1
	textRng    rng // payloadText
	textTab    *table
	randRng    rng // payloadRandom
	jsonRng    rng
	jsonTab    *table
	words      []string
	buf        []byte
}

// Wide returns a generator of rows rows of a 25-column table in the shape
// of Pinot's segment-creation benchmarks, seeded by seed. All String
// values are non-empty and never null; int-like dimensions are emitted as
// decimal strings, since a dimension is a string in writeout's data model.
//
// Columns, in Schema order (ranges half-open, [start, end)):
//
//	__time                   2000-01-01T00:00Z + [0, 1 day), non-decreasing (WideOptions.Time)
//	dictInt0..dictInt9       dictionary-encoded int-like dimensions; 0..4 with Bitmap:
//	                         0 uniform 0..9; 1 Zipf(1.0) 0..99; 2 sequential 0..999;
//	                         3 uniform 0..9999; 4 Zipf(1.1) 0..99999; 5 uniform 0..1;
//	                         6 Zipf(1.2) 0..999; 7 uniform 0..99999;
//	                         8 round(normal(500, 50)); 9 Zipf(0.8) 0..99999
//	rawInt0, rawInt1         Raw int dimensions: 0 a row id (10^12 + row number),
//	                         1 uniform 0..2^31-1
//	metric0..metric4 (Long)  0 uniform 0..999; 1 a counter rising by 1..10 a row;
//	                         2 Zipf(1.0) 0..9999; 3 uniform 0..2^40-1;
//	                         4 about normal(100000, 16384) (sum of 12 uniforms)
//	dictStr0..dictStr4       dictionary-encoded words; 0, 1 with Bitmap:
//	                         0 uniform over 5; 1 Zipf(1.0) over 50; 2 uniform over 500;
//	                         3 Zipf(1.0) over 5000; 4 uniform over 50000
//	payloadText              Raw, PayloadLen bytes of words (Zipf over 4096): compressible
//	payloadRandom            Raw, PayloadLen random characters of [A-Za-z0-9+/]
//	json                     Raw, a JSON object of about 150 bytes
//
// Aggregators: longSum for each metric, named as its source column.
//
// A bad row count or option is an error wrapping ErrInvalid.
func Wide(seed int64, rows int, opts WideOptions) (Generator, error) {
	if err := checkRows("wide", rows); err != nil {
		return nil, err
	}
	if err := opts.ensureDefaults(); err != nil {
		return nil, err
	}
	g := &wideGen{genBase: genBase{rows: rows}, opts: opts, words: vocabulary()}
	ints, strs, longs := wideSpecs()
	stream := uint64(1)
	add := func(s spec, slot int, c Column) {
		g.schema = append(g.schema, c)
		g.cols = append(g.cols, newColState(s, slot, seed, stream))
		stream++
	}
	g.schema = append(g.schema, Column{Name: "__time", Kind: Time})
	for i, s := range ints {
		c := s.column(i)
		c.Bitmap = i < 5
		add(s, i, c)
	}
	g.schema = append(g.schema,
		Column{Name: "rawInt0", Kind: String, Slot: 10, Raw: true},
		Column{Name: "rawInt1", Kind: String, Slot: 11, Raw: true})
	g.schema = append(g.schema, longs[0].column(0), Column{Name: "metric1", Kind: Long, Slot: 1})
	g.cols = append(g.cols, newColState(longs[0], 0, seed, stream))
	stream++
	add(longs[1], 2, longs[1].column(2))
	add(longs[2], 3, longs[2].column(3))
	g.schema = append(g.schema, Column{Name: "metric4", Kind: Long, Slot: 4})
	for i, s := range strs {
		c := s.column(12 + i)
		c.Bitmap = i < 2
		add(s, 12+i, c)
	}
	g.schema = append(g.schema,
		Column{Name: "payloadText", Kind: String, Slot: 17, Raw: true},
		Column{Name: "payloadRandom", Kind: String, Slot: 18, Raw: true},
		Column{Name: "json", Kind: String, Slot: 19, Raw: true})
	for _, r := range []*rng{&g.counterRng, &g.normalRng, &g.rawIntRng, &g.textRng, &g.randRng, &g.jsonRng} {
		seedStream(r, seed, stream)
		stream++
	}
	g.textTab = cachedTable(tableKey{"zipf", 4096, 1.0}, func() []float64 { return zipfWeights(4096, 1.0) })
	g.jsonTab = cachedTable(tableKey{"zipf", 1000, 1.0}, func() []float64 { return zipfWeights(1000, 1.0) })
	for i := range 5 {
		g.aggs = append(g.aggs, Column{Name: fmt.Sprintf("metric%d", i), Kind: Long, Slot: -1,
			Aggregator: AggLongSum, Source: fmt.Sprintf("metric%d", i)})
	}
	g.clock = newClock(opts.Time, uint64(rows), seed)
	return g, nil
}

func (g *wideGen) Next(r *Row) bool {
	if g.i >= g.rows {
		return false
	}
	r.shape(20, 5, 0)
	r.Time = g.clock.at(uint64(g.i))
	for k := range g.cols {
		g.cols[k].fill(r)
	}
	g.counter += int64(uintn(&g.counterRng, 10)) + 1
	r.Longs[1] = g.counter
	// metric4: a sum of 12 uniforms on [0, 2^20) has mean 6*2^20 and
	// standard deviation 2^20; scaled by 2^-6 that is 2^14 = 16384.
	var sum int64
	for range 12 {
		sum += int64(g.normalRng.Uint64() >> 44)
	}
	r.Longs[4] = 100000 + (sum-6<<20)>>6

	// The text columns share one string per row: one allocation.
	var ends [nText]int
	b := g.buf[:0]
	rawInt0 := rawIntBase + int64(g.i)
	b = strconv.AppendInt(b, rawInt0, 10)
	ends[txtRawInt0] = len(b)
	b = strconv.AppendUint(b, uintn(&g.rawIntRng, 1<<31), 10)
	ends[txtRawInt1] = len(b)
	b = g.appendText(b, g.opts.PayloadLen)
	ends[txtPayloadText] = len(b)
	b = g.appendRandom(b, g.opts.PayloadLen)
	ends[txtPayloadRandom] = len(b)
	b = g.appendJSON(b, rawInt0, r.Time)
	ends[txtJSON] = len(b)
	s := string(b)
	g.buf = b
	prev := 0
	for k, e := range ends {
		sv := &r.Strings[textSlots[k]]
		sv.Values = append(sv.Values, s[prev:e])
		prev = e
	}
	g.i++
	return true
}

// appendText appends exactly n bytes of space-separated words.
func (g *wideGen) appendText(b []byte, n int) []byte {
	end := len(b) + n
	for len(b) < end {
		if len(b) > end-n {
			b = append(b, ' ')
		}
		b = append(b, g.words[g.textTab.sample(&g.textRng)]...)
	}
	b = b[:end]
	if b[end-1] == ' ' { // never end on a space: CSV readers may trim it
		b[end-1] = '.'
	}
	return b
}

const randomAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

// appendRandom appends n random characters of randomAlphabet.
func (g *wideGen) appendRandom(b []byte, n int) []byte {
	for n > 0 {
		x := g.randRng.Uint64()
		for j := 0; j < 10 && n > 0; j++ {
			b = append(b, randomAlphabet[x&63])
			x >>= 6
			n--
		}
	}
	return b
}

// appendJSON appends a JSON object with numbers, strings, a boolean, an
// array of 0..3 strings and a nested object.
func (g *wideGen) appendJSON(b []byte, id, ts int64) []byte {
	r := &g.jsonRng
	word := func() string { return g.words[g.jsonTab.sample(r)] }
	b = append(b, `{"id":`...)
	b = strconv.AppendInt(b, id, 10)
	b = append(b, `,"user":"`...)
	b = append(b, word()...)
	b = append(b, `","ts":`...)
	b = strconv.AppendInt(b, ts, 10)
	b = append(b, `,"score":`...)
	b = appendFixed(b, int64(uintn(r, 100000)), 2)
	b = append(b, `,"active":`...)
	b = strconv.AppendBool(b, r.Uint64()&1 == 1)
	b = append(b, `,"tags":[`...)
	for j := range int(uintn(r, 4)) {
		if j > 0 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = append(b, word()...)
		b = append(b, '"')
	}
	b = append(b, `],"geo":{"lat":`...)
	b = appendFixed(b, int64(uintn(r, 1800001))-900000, 4)
	b = append(b, `,"lon":`...)
	b = appendFixed(b, int64(uintn(r, 3600001))-1800000, 4)
	b = append(b, "}}"...)
	return b
}

// appendFixed appends v / 10^frac in decimal with exactly frac fraction
// digits, in integer arithmetic.
func appendFixed(b []byte, v int64, frac int) []byte {
	if v < 0 {
		b = append(b, '-')
		v = -v
	}
	p := int64(1)
	for range frac {
		p *= 10
	}
	b = strconv.AppendInt(b, v/p, 10)
	b = append(b, '.')
	var tmp [20]byte
	f := strconv.AppendInt(tmp[:0], p+v%p, 10) // the leading 1 keeps the zeros
	return append(b, f[1:]...)
}

// syllables build the words of the vocabulary.
var syllables = [16]string{"ka", "lo", "mi", "nu", "re", "sa", "to", "vi", "ze", "bo", "da", "fe", "gi", "hu", "ja", "po"}

// vocabularySize is the number of distinct words the wide table uses.
const vocabularySize = 1 << 16

// vocabulary returns vocabularySize distinct lower-case words: word i is
// the syllables of the base-16 digits of i+16, so it has two to five
// syllables. Built on first use, as substrings of one string.
var vocabulary = sync.OnceValue(func() []string {
	var sb strings.Builder
	ends := make([]int, vocabularySize)
	var digits [8]int
	for i := range ends {
		n := 0
		for x := i + 16; x > 0; x >>= 4 {
			digits[n] = x & 15
			n++
		}
		for j := n - 1; j >= 0; j-- {
			sb.WriteString(syllables[digits[j]])
		}
		ends[i] = sb.Len()
	}
	all := sb.String()
	out := make([]string, vocabularySize)
	prev := 0
	for i, e := range ends {
		out[i] = all[prev:e]
		prev = e
	}
	return out
})
