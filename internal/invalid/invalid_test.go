package invalid_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/columns/objstore"
	"github.com/writeout/writeout/internal/colwrite"
	"github.com/writeout/writeout/internal/gen"
	"github.com/writeout/writeout/internal/invalid"
	"github.com/writeout/writeout/medium"
	"github.com/writeout/writeout/merger"
	"github.com/writeout/writeout/merger/export"
	"github.com/writeout/writeout/merger/ingest"
	"github.com/writeout/writeout/merger/location"
	"github.com/writeout/writeout/merger/query"
)

// TestOneRoot checks that every package's invalid-argument sentinel, and an error each package
// returns for a bad argument, match the one root, medium.ErrInvalid.
func TestOneRoot(t *testing.T) {
	require.Same(t, invalid.Err, medium.ErrInvalid)
	sentinels := map[string]error{
		"columns":  columns.ErrInvalid,
		"objstore": objstore.ErrInvalid,
		"gen":      gen.ErrInvalid,
		"merger":   merger.ErrInvalid,
		"export":   export.ErrInvalid,
		"ingest":   ingest.ErrInvalid,
		"query":    query.ErrInvalid,
		"location": location.ErrInvalid,
	}
	for name, s := range sentinels {
		require.ErrorIs(t, s, medium.ErrInvalid, name)
		require.Contains(t, s.Error(), name+": invalid", name)
	}

	ctx := context.Background()
	_, err := medium.ParseSyncMode("sometimes")
	f := func(name string, err error, sentinel error) {
		t.Helper()
		require.ErrorIs(t, err, medium.ErrInvalid, name)
		require.ErrorIs(t, err, sentinel, name)
	}
	f("medium", err, medium.ErrInvalid)
	f("columns", colwrite.Check(colwrite.Options{ChunkRows: -1}), columns.ErrInvalid)
	_, _, err = objstore.ParseURL("file:///x")
	f("objstore", err, objstore.ErrInvalid)
	_, err = gen.Basic(1, -1)
	f("gen", err, gen.ErrInvalid)
	_, err = merger.Merge(ctx, nil, t.TempDir()+"/out.seg", merger.Options{})
	f("merger", err, merger.ErrInvalid)
	_, err = export.WriteParquet(ctx, &bytes.Buffer{}, nil, export.Options{RowGroupRows: -1})
	f("export", err, export.ErrInvalid)
	_, err = ingest.Run(ctx, nil, nil, ingest.Options{})
	f("ingest", err, ingest.ErrInvalid)
	_, err = query.Run(ctx, nil, query.Spec{})
	f("query", err, query.ErrInvalid)

	require.False(t, errors.Is(errors.New("invalid argument"), medium.ErrInvalid))
}
