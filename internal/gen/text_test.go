package gen

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fromCSV rebuilds rows from CSV written with o (defaults filled in).
func fromCSV(t *testing.T, schema []Column, data []byte, o CSVOptions) []Row {
	t.Helper()
	require.NoError(t, o.ensureDefaults())
	rd := csv.NewReader(bytes.NewReader(data))
	rd.Comma = o.Comma
	recs, err := rd.ReadAll()
	require.NoError(t, err)
	if !o.NoHeader {
		require.NotEmpty(t, recs)
		var names []string
		for _, c := range schema {
			names = append(names, c.Name)
		}
		require.Equal(t, names, recs[0])
		recs = recs[1:]
	}
	rows := make([]Row, 0, len(recs))
	for _, rec := range recs {
		require.Len(t, rec, len(schema))
		var r Row
		for k, c := range schema {
			f := rec[k]
			switch c.Kind {
			case Time:
				r.Time, err = strconv.ParseInt(f, 10, 64)
				require.NoError(t, err)
			case Long:
				v, err := strconv.ParseInt(f, 10, 64)
				require.NoError(t, err)
				r.Longs = append(r.Longs, v)
			case Double:
				v, err := strconv.ParseFloat(f, 64)
				require.NoError(t, err)
				r.Doubles = append(r.Doubles, v)
			case Sketch:
				t.Fatalf("column %s: a sketch in a row's schema", c.Name)
			case String:
				var sv StringValue
				switch {
				case f == o.Null:
					sv.Null = true
				case !c.MultiValue:
					sv.Values = []string{f}
				default:
					for _, e := range strings.Split(f, o.MultiDelimiter) {
						if e == o.Null {
							sv.Values = append(sv.Values, "")
						} else {
							sv.Values = append(sv.Values, e)
						}
						if c.NullElements {
							sv.NullAt = append(sv.NullAt, e == o.Null)
						}
					}
				}
				r.Strings = append(r.Strings, sv)
			}
		}
		rows = append(rows, r)
	}
	return rows
}

// fromNDJSON rebuilds rows from NDJSON.
func fromNDJSON(t *testing.T, schema []Column, data []byte) []Row {
	t.Helper()
	var rows []Row
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		require.True(t, json.Valid(line), "%s", line)
		require.True(t, bytes.HasPrefix(line, []byte(`{"__time":`)), "%s", line)
		d := json.NewDecoder(bytes.NewReader(line))
		d.UseNumber()
		var m map[string]any
		require.NoError(t, d.Decode(&m))
		require.Len(t, m, len(schema))
		var r Row
		for _, c := range schema {
			v, ok := m[c.Name]
			require.True(t, ok, c.Name)
			switch c.Kind {
			case Time:
				n, err := v.(json.Number).Int64()
				require.NoError(t, err)
				r.Time = n
			case Long:
				n, err := v.(json.Number).Int64()
				require.NoError(t, err)
				r.Longs = append(r.Longs, n)
			case Double:
				f, err := v.(json.Number).Float64()
				require.NoError(t, err)
				r.Doubles = append(r.Doubles, f)
			case Sketch:
				t.Fatalf("column %s: a sketch in a row's schema", c.Name)
			case String:
				var sv StringValue
				switch x := v.(type) {
				case nil:
					sv.Null = true
				case string:
					require.False(t, c.MultiValue, c.Name)
					sv.Values = []string{x}
				case []any:
					require.True(t, c.MultiValue, c.Name)
					for _, e := range x {
						s, _ := e.(string)
						sv.Values = append(sv.Values, s)
						if c.NullElements {
							sv.NullAt = append(sv.NullAt, e == nil)
						}
					}
				default:
					t.Fatalf("column %s: unexpected %T", c.Name, v)
				}
				r.Strings = append(r.Strings, sv)
			}
		}
		rows = append(rows, r)
	}
	require.NoError(t, sc.Err())
	return rows
}

type genMaker struct {
	name string
	make func() Generator
}

func textGens(t *testing.T) []genMaker {
	return []genMaker{
		{"basic", func() Generator { return mustBasic(t, BasicSeed, 3000) }},
		{"wide/payload=64", func() Generator { return mustWide(t, 2, 1000, WideOptions{}) }},
		{"wide/payload=512", func() Generator { return mustWide(t, 3, 300, WideOptions{PayloadLen: 512}) }},
	}
}

func TestCSVRoundTrip(t *testing.T) {
	for _, gm := range textGens(t) {
		for _, o := range []CSVOptions{
			{},
			{Comma: ';', MultiDelimiter: ",", Null: `\N`},
			{Comma: '\t', MultiDelimiter: "::", NoHeader: true},
			{Comma: '§', Null: "NULL"},
		} {
			t.Run(gm.name, func(t *testing.T) {
				want := collect(t, gm.make())
				var buf bytes.Buffer
				g := gm.make()
				require.NoError(t, o.Write(&buf, g))
				got := fromCSV(t, g.Schema(), buf.Bytes(), o)
				require.Equal(t, len(want), len(got))
				for i := range want {
					require.Equal(t, want[i], got[i], "row %d, options %+v", i, o)
				}
			})
		}
	}
}

func TestNDJSONRoundTrip(t *testing.T) {
	for _, gm := range textGens(t) {
		t.Run(gm.name, func(t *testing.T) {
			want := collect(t, gm.make())
			var buf bytes.Buffer
			g := gm.make()
			require.NoError(t, WriteNDJSON(&buf, g))
			got := fromNDJSON(t, g.Schema(), buf.Bytes())
			require.Equal(t, len(want), len(got))
			for i := range want {
				require.Equal(t, want[i], got[i], "row %d", i)
			}
		})
	}
}

// TestTextGolden pins the first rows of the basic schema (seed 9999) as
// text: the conventions at a glance.
func TestTextGolden(t *testing.T) {
	var csvOut, jsonOut bytes.Buffer
	require.NoError(t, WriteCSV(&csvOut, mustBasic(t, BasicSeed, 3)))
	require.NoError(t, WriteNDJSON(&jsonOut, mustBasic(t, BasicSeed, 3)))
	assert.Equal(t, goldenCSV, csvOut.String())
	assert.Equal(t, goldenNDJSON, jsonOut.String())
}

const goldenCSV = `__time,dimSequential,dimZipf,dimUniform,dimSequentialHalfNull,dimMultivalEnumerated,dimMultivalEnumerated2,dimMultivalSequentialWithNulls,dimHyperUnique,dimNull,metLongSequential,metLongUniform,metFloatNormal,metFloatZipf
946709434859,0,20,73413,,Hello|Hello|Bar|Baz,|Xylophone|,1|2|3|4|5|6|7|8,0,,0,301,5001,32
946716914480,1,39,6322,,Baz|Baz|Foo|Hello,Corundum||Orange,,1,,1,305,5000,264
946742627164,2,11,59341,,Bar|Bar|World|Baz,Orange|Corundum|,9|10|1|2|3|4|5|6,2,,2,408,5001,676
`

const goldenNDJSON = `{"__time":946709434859,"dimSequential":"0","dimZipf":"20","dimUniform":"73413","dimSequentialHalfNull":null,"dimMultivalEnumerated":["Hello","Hello","Bar","Baz"],"dimMultivalEnumerated2":[null,"Xylophone",null],"dimMultivalSequentialWithNulls":["1","2","3","4","5","6","7","8"],"dimHyperUnique":"0","dimNull":null,"metLongSequential":0,"metLongUniform":301,"metFloatNormal":5001,"metFloatZipf":32}
{"__time":946716914480,"dimSequential":"1","dimZipf":"39","dimUniform":"6322","dimSequentialHalfNull":null,"dimMultivalEnumerated":["Baz","Baz","Foo","Hello"],"dimMultivalEnumerated2":["Corundum",null,"Orange"],"dimMultivalSequentialWithNulls":null,"dimHyperUnique":"1","dimNull":null,"metLongSequential":1,"metLongUniform":305,"metFloatNormal":5000,"metFloatZipf":264}
{"__time":946742627164,"dimSequential":"2","dimZipf":"11","dimUniform":"59341","dimSequentialHalfNull":null,"dimMultivalEnumerated":["Bar","Bar","World","Baz"],"dimMultivalEnumerated2":["Orange","Corundum",null],"dimMultivalSequentialWithNulls":["9","10","1","2","3","4","5","6"],"dimHyperUnique":"2","dimNull":null,"metLongSequential":2,"metLongUniform":408,"metFloatNormal":5001,"metFloatZipf":676}
`

func TestEmptyGenerator(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, WriteNDJSON(&buf, mustBasic(t, 1, 0)))
	assert.Empty(t, buf.String())
	require.NoError(t, WriteCSV(&buf, mustWide(t, 1, 0, WideOptions{})))
	assert.True(t, strings.HasPrefix(buf.String(), "__time,dictInt0,"))
	assert.Equal(t, 1, strings.Count(buf.String(), "\n"), "header only")
	buf.Reset()
	require.NoError(t, CSVOptions{NoHeader: true}.Write(&buf, mustBasic(t, 1, 0)))
	assert.Empty(t, buf.String())
}

func TestCSVErrors(t *testing.T) {
	for _, c := range []rune{'"', '\r', '\n', 0xFFFD, -1, 0x110000} {
		err := CSVOptions{Comma: c}.Write(io.Discard, mustBasic(t, 1, 10))
		require.ErrorIs(t, err, ErrInvalid, "comma %q", c)
	}
	// A value that reads as null is refused, not written ambiguously.
	err := CSVOptions{Null: "1"}.Write(io.Discard, mustBasic(t, 1, 10))
	require.ErrorIs(t, err, ErrInvalid)
	assert.ErrorContains(t, err, `value "1" reads as null`)
	// So is a multi-value element holding the delimiter.
	err = CSVOptions{MultiDelimiter: "o"}.Write(io.Discard, mustBasic(t, 1, 10))
	require.ErrorIs(t, err, ErrInvalid)
	assert.ErrorContains(t, err, `"dimMultivalEnumerated`)
}

// failWriter fails once more than n bytes have been written.
type failWriter struct {
	n   int
	err error
}

func (w *failWriter) Write(p []byte) (int, error) {
	if len(p) > w.n {
		k := w.n
		w.n = 0
		return k, w.err
	}
	w.n -= len(p)
	return len(p), nil
}

func TestWriteErrors(t *testing.T) {
	boom := errors.New("boom")
	for _, n := range []int{0, 10, 100 << 10} {
		err := WriteCSV(&failWriter{n: n, err: boom}, mustBasic(t, 1, 5000))
		require.ErrorIs(t, err, boom, "csv, fail after %d", n)
		err = WriteNDJSON(&failWriter{n: n, err: boom}, mustBasic(t, 1, 5000))
		require.ErrorIs(t, err, boom, "ndjson, fail after %d", n)
	}
	// A failure in the final flush is reported too.
	require.ErrorIs(t, WriteCSV(&failWriter{n: 10, err: boom}, mustBasic(t, 1, 1)), boom)
	require.ErrorIs(t, WriteNDJSON(&failWriter{n: 10, err: boom}, mustBasic(t, 1, 1)), boom)
}

// fakeGen hands out fixed rows, for values the real generators never make.
type fakeGen struct {
	schema []Column
	rows   []Row
	i      int
}

func (g *fakeGen) Schema() []Column             { return g.schema }
func (g *fakeGen) Aggregators() []Column        { return nil }
func (g *fakeGen) Rows() int                    { return len(g.rows) }
func (g *fakeGen) Interval() (start, end int64) { return 0, 1 }
func (g *fakeGen) Next(r *Row) bool {
	if g.i >= len(g.rows) {
		return false
	}
	*r = g.rows[g.i].Clone()
	g.i++
	return true
}

func TestTextEscaping(t *testing.T) {
	schema := []Column{
		{Name: "__time", Kind: Time},
		{Name: `s "quoted", odd`, Kind: String, Slot: 0},
		{Name: "m", Kind: String, Slot: 1, MultiValue: true, NullElements: true},
		{Name: "d", Kind: Double, Slot: 0},
	}
	tricky := []string{"plain", " leading space", "comma,here", `quote"here`, "new\nline", "cr\rhere",
		"tab\there", "ctl\x01\x1f", "back\\slash", "ünïcødé ✓ 𝄞", "\u2028sep", "bad\xffutf8", "ok"}
	var rows []Row
	for i, s := range tricky {
		rows = append(rows, Row{
			Time:    int64(i),
			Strings: []StringValue{{Values: []string{s}}, {Values: []string{s, "", "x"}, NullAt: []bool{false, true, false}}},
			Doubles: []float64{float64(i) / 3},
		})
	}
	var jsonOut bytes.Buffer
	require.NoError(t, WriteNDJSON(&jsonOut, &fakeGen{schema: schema, rows: rows}))
	got := fromNDJSON(t, schema, jsonOut.Bytes())
	for i := range rows {
		want := rows[i].Clone()
		if i == len(tricky)-2 { // invalid UTF-8 comes back as U+FFFD
			want.Strings[0].Values[0] = "bad\uFFFDutf8"
			want.Strings[1].Values[0] = "bad\uFFFDutf8"
		}
		assert.Equal(t, want, got[i], "row %d", i)
	}

	var csvOut bytes.Buffer
	require.NoError(t, WriteCSV(&csvOut, &fakeGen{schema: schema, rows: rows}))
	gotCSV := fromCSV(t, schema, csvOut.Bytes(), CSVOptions{})
	for i := range rows {
		assert.Equal(t, rows[i], gotCSV[i], "row %d %q", i, tricky[i])
	}

	// NaN has no JSON form.
	nan := []Row{{Doubles: []float64{0}, Strings: []StringValue{{Values: []string{"a"}}, {}}}}
	nan[0].Doubles[0] = zero() / zero()
	err := WriteNDJSON(io.Discard, &fakeGen{schema: schema, rows: nan})
	require.ErrorIs(t, err, ErrInvalid)
}

func zero() float64 { return 0 }

// TestTextSketchColumn: a sketch is an aggregator's kind; a row schema holding one is refused.
func TestTextSketchColumn(t *testing.T) {
	schema := []Column{{Name: "__time", Kind: Time}, {Name: "hll", Kind: Sketch}}
	rows := []Row{{Time: 1}}
	err := WriteCSV(io.Discard, &fakeGen{schema: schema, rows: rows})
	require.ErrorIs(t, err, ErrInvalid)
	assert.ErrorContains(t, err, `"hll"`)
	err = WriteNDJSON(io.Discard, &fakeGen{schema: schema, rows: rows})
	require.ErrorIs(t, err, ErrInvalid)
	assert.ErrorContains(t, err, `"hll"`)
}

func FuzzAppendJSONString(f *testing.F) {
	for _, s := range []string{"", "a", `"`, "\\", "\x00", "\x7f", "é", "\xff", "\xe2\x82", "𝄞", "\u2028"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b := appendJSONString(nil, s)
		require.True(t, json.Valid(b), "%q -> %s", s, b)
		var got string
		require.NoError(t, json.Unmarshal(b, &got))
		ref, err := json.Marshal(s)
		require.NoError(t, err)
		var want string
		require.NoError(t, json.Unmarshal(ref, &want))
		require.Equal(t, want, got)
	})
}

func FuzzAppendField(f *testing.F) {
	for _, s := range []string{"", "a", " a", "a,b", `"`, "a\nb", "a\r\nb", "x;y"} {
		f.Add(s, ',')
		f.Add(s, ';')
	}
	f.Fuzz(func(t *testing.T, s string, comma rune) {
		o := CSVOptions{Comma: comma}
		if o.ensureDefaults() != nil || !validCSVField(s) || comma == ' ' || comma == '#' {
			t.Skip()
		}
		line, _ := quoteIfNeeded([]byte("x"+s), 1, o.Comma, nil)
		line = append(line[1:], '\n')
		rd := csv.NewReader(bytes.NewReader(line))
		rd.Comma = o.Comma
		rec, err := rd.Read()
		if s == "" {
			require.ErrorIs(t, err, io.EOF, "an empty line is no record")
			return
		}
		require.NoError(t, err, "%q", line)
		require.Equal(t, []string{s}, rec)
	})
}

// validCSVField reports whether encoding/csv can give s back exactly: it
// turns \r\n inside quotes into \n and needs valid UTF-8.
func validCSVField(s string) bool {
	return !strings.Contains(s, "\r") && strings.ToValidUTF8(s, "") == s
}
