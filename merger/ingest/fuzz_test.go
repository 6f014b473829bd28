package ingest

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/columns"
)

// FuzzParseSpec: any bytes decode to a spec or to an error wrapping ErrSpec, never a panic;
// a spec that decodes marshals and decodes back to itself.
func FuzzParseSpec(f *testing.F) {
	for _, s := range []string{
		testSpecJSON, hourSpec, genSpecJSON,
		`{"timestamp": {"field": "ts", "format": "seconds"}, "input": {"delimiter": ";", "nullValue": "\\N", "fields": {"page": "title"}},
		  "dimensions": [{"name": "page"}], "metrics": [{"name": "n", "aggregator": "count"}], "rollup": true, "granularity": "minute"}`,
		`{"timestamp": {"format": "2006-01-02 15:04:05"}, "input": {"format": "ndjson"}, "dimensions": []}`,
		`{"dimensions": [{"name": "a", "raw": true, "multiValue": true}]}`,
		`{"input": {"delimiter": "\u0000"}}`,
		`{"timestamp": {"format": "06"}}`,
		`null`, `[]`, `{}`, `{"dimensions": []} {}`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		sp, err := ParseSpec(data)
		if err != nil {
			require.ErrorIs(t, err, ErrSpec)
			require.Nil(t, sp)
			return
		}
		require.NoError(t, sp.Validate())
		js, err := json.Marshal(sp)
		require.NoError(t, err)
		back, err := ParseSpec(js)
		require.NoError(t, err, "%s", js)
		require.True(t, back.Schema.Equal(sp.Schema))
		require.Equal(t, sp.Timestamp, back.Timestamp)
		require.Equal(t, sp.Input.Format, back.Input.Format)
		require.Equal(t, sp.Input.Delimiter, back.Input.Delimiter)
		require.Equal(t, sp.Input.MultiValueDelimiter, back.Input.MultiValueDelimiter)
		require.Equal(t, sp.Input.NullValue, back.Input.NullValue)
		require.Equal(t, len(sp.Input.Fields), len(back.Input.Fields))
		for k, v := range sp.Input.Fields {
			require.Equal(t, v, back.Input.Fields[k])
		}
	})
}

// fuzzRows reads every row of rr and checks what it gives: rows fit the schema, row errors
// wrap ErrRow and name the input, other errors wrap ErrInput. It never loops forever.
func fuzzRows(t *testing.T, sp *Spec, rr Reader, name string) {
	row := sp.NewRow()
	for range 1 << 16 {
		err := rr.Read(&row)
		if err == io.EOF {
			return
		}
		var re *RowError
		if errors.As(err, &re) {
			require.ErrorIs(t, err, ErrRow)
			require.Equal(t, name, re.File)
			require.Positive(t, re.Line)
			continue
		}
		if err != nil {
			require.ErrorIs(t, err, ErrInput)
			return
		}
		require.Len(t, row.Dims, len(sp.Schema.Dimensions))
		require.Len(t, row.Metrics, len(sp.Schema.Metrics))
		for i, d := range sp.Schema.Dimensions {
			if !d.MultiValue {
				require.LessOrEqual(t, len(row.Dims[i]), 1)
			}
			for _, v := range row.Dims[i] {
				require.LessOrEqual(t, len(v), columns.MaxValueBytes)
			}
		}
	}
	t.Fatal("the reader did not end")
}

// fuzzSpecs are the specs the reader fuzz tests read with: the test spec in its formats, with
// a custom delimiter and null.
func fuzzSpecs(t testing.TB) []*Spec {
	null := "NULL"
	return []*Spec{
		testSpec(t, nil),
		testSpec(t, func(sp *Spec) {
			sp.Input.Delimiter = "\t"
			sp.Input.MultiValueDelimiter = ";"
			sp.Input.NullValue = &null
			sp.Timestamp.Format = "seconds"
		}),
	}
}

// FuzzCSVReader: any bytes are rows, row errors or an input error; never a panic.
func FuzzCSVReader(f *testing.F) {
	for _, s := range []string{
		"ts,page,tags,body,added,d,user\n5,Main,a|b|a,hello,3,1.5,u1\n6,,,,,,\n",
		"\ufeffts,page,tags,body,added,d,user\n7,\"Talk, page\",|c||,\"multi\nline\",-4,1e3,u2\n",
		"ts\tpage\ttags\tbody\tadded\td\tuser\n1.5\tNULL\ta;b\tNULL\t1\t2\tu\n",
		"ts,page,tags,body,added,d,user\n1,Main,a,b,lots,1,u\n9,Main,a\n11,Ma\"in,a,b,1,1,u\n,Main,a,b,1,NaN,u\n",
		"ts,page,ts\n", "", "\"", "ts,page,\"tags\n",
	} {
		f.Add([]byte(s))
	}
	specs := fuzzSpecs(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, sp := range specs {
			rr, err := NewCSVReader(sp, "f.csv", bytes.NewReader(data))
			if err != nil {
				require.ErrorIs(t, err, ErrInput)
				continue
			}
			fuzzRows(t, sp, rr, "f.csv")
		}
	})
}

// FuzzNDJSONReader: any bytes are rows, row errors or an input error; never a panic.
func FuzzNDJSONReader(f *testing.F) {
	for _, s := range []string{
		`{"ts": 5, "page": "Main", "tags": ["a", "b", "a"], "body": "hello", "added": 3, "d": 1.5, "user": "u1"}` + "\n\n" + `{"ts": "6"}`,
		`{"ts": 7, "page": true, "tags": [null, 1.5, "c"], "body": null, "added": -4, "d": "1e3", "user": 17}` + "\r\n",
		`{"ts": 1, "page": ["a", "b"]}` + "\n" + `{"ts": 3, "tags": [["a"]]}` + "\n" + `null` + "\n" + `[1]`,
		`{"ts": 14, "page": "bad \u00zz escape"}`, `{"ts": 10,`, "", "\n\n", `{"ts": 1.5e3, "added": 1e2, "d": -0}`,
	} {
		f.Add([]byte(s))
	}
	specs := fuzzSpecs(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, sp := range specs {
			rr, err := NewNDJSONReader(sp, "f.ndjson", bytes.NewReader(data))
			require.NoError(t, err)
			fuzzRows(t, sp, rr, "f.ndjson")
		}
	})
}
