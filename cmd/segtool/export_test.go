package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/axiomhq/hyperloglog"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"
	"github.com/rogpeppe/go-internal/testscript"
)

// cmdPQDump reads a Parquet file with parquet-go, independently of segtool's export, and writes
// its rows as segtool dump writes a segment's (CSV, times in milliseconds, multi-values joined
// with "|", null as the empty field, a sketch as its estimate): pqdump FILE.
func cmdPQDump(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: pqdump FILE")
	}
	data, err := os.ReadFile(ts.MkAbs(args[0]))
	ts.Check(err)
	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	ts.Check(err)
	fields := f.Schema().Fields()
	var out []byte
	for i, fl := range fields {
		if i > 0 {
			out = append(out, ',')
		}
		out = appendCSVField(out, fl.Name())
	}
	out = append(out, '\n')
	buf := make([]parquet.Row, 64)
	for _, rg := range f.RowGroups() {
		rows := rg.Rows()
		for {
			n, err := rows.ReadRows(buf)
			for _, row := range buf[:n] {
				cells := make([][]string, len(fields))
				for _, v := range row {
					if v.IsNull() {
						continue
					}
					c := v.Column()
					fl := fields[c]
					var s string
					switch {
					case fl.Leaf() && fl.Type().Kind() == parquet.Int64:
						s = strconv.FormatInt(v.Int64(), 10)
					case fl.Leaf() && fl.Type().Kind() == parquet.Double:
						s = strconv.FormatFloat(v.Double(), 'g', -1, 64)
					case fl.Leaf() && fl.Type().LogicalType() == nil:
						var sk hyperloglog.Sketch
						ts.Check(sk.UnmarshalBinary(v.ByteArray()))
						s = strconv.FormatUint(sk.Estimate(), 10)
					default:
						if lt := fl.Type().LogicalType(); !fl.Leaf() && lt != nil {
							if _, ok := lt.Value.(*format.ListType); !ok {
								ts.Fatalf("column %s: unexpected type %v", fl.Name(), lt)
							}
						}
						s = string(v.ByteArray())
					}
					cells[c] = append(cells[c], s)
				}
				for i, vals := range cells {
					if i > 0 {
						out = append(out, ',')
					}
					out = appendCSVField(out, strings.Join(vals, "|"))
				}
				out = append(out, '\n')
			}
			if errors.Is(err, io.EOF) {
				break
			}
			ts.Check(err)
		}
		ts.Check(rows.Close())
	}
	_, err = ts.Stdout().Write(out)
	ts.Check(err)
}
