// Package colwrite gives this module's packages the column-at-a-time segment writer of package
// columns: internal/segwrite's interfaces with columns' types filled in. merger (its core and
// its Builder) and the tests write segments through it; users write them through merger.
package colwrite

import (
	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/internal/segwrite"
)

type (
	// Writer builds one segment a column at a time; see segwrite.Writer.
	Writer = segwrite.Writer[columns.Info, columns.PublishOptions]
	// Options configure a Writer; see segwrite.Options.
	Options = segwrite.Options[columns.Compression]
	// DimWriter writes a dictionary dimension; see segwrite.DimWriter.
	DimWriter = segwrite.DimWriter
	// BitmapRun encodes a run of a dimension's bitmaps; see segwrite.BitmapRun.
	BitmapRun = segwrite.BitmapRun
	// RawWriter writes a raw dimension; see segwrite.RawWriter.
	RawWriter = segwrite.RawWriter
	// SketchWriter writes a sketch metric; see segwrite.SketchWriter.
	SketchWriter = segwrite.SketchWriter
)

// NumWriter writes a numeric column; see segwrite.NumWriter.
type NumWriter[T int64 | float64] = segwrite.NumWriter[T]

var door = segwrite.Registered[columns.Schema, columns.Compression, columns.Info, columns.PublishOptions]()

// New returns a writer for segments of the schema, which it validates.
func New(schema columns.Schema, opts Options) (Writer, error) { return door.New(schema, opts) }

// Check returns the error New gives for these options, if any: one wrapping columns.ErrInvalid
// that names the bad option. The zero value is valid.
func Check(opts Options) error { return door.Check(opts) }
