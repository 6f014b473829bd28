package peers

import (
	"fmt"
	"os"
	"path/filepath"
)

// Fixture is the inputs of one layout in each system's format: Inputs writeout segments and
// Inputs Parquet files, in input order.
type Fixture struct {
	Segs, Parquets         []string
	SegBytes, ParquetBytes int64
}

// FixturePaths returns the paths under dir of the inputs of layout as WriteFixture names them.
func FixturePaths(dir string, layout Layout) Fixture {
	var fx Fixture
	for i := range Inputs {
		fx.Segs = append(fx.Segs, filepath.Join(dir, fmt.Sprintf("%s-%d.seg", layout, i)))
		fx.Parquets = append(fx.Parquets, filepath.Join(dir, fmt.Sprintf("%s-%d.parquet", layout, i)))
	}
	return fx
}

// WriteFixture writes the parts of layout (Split's) under dir, each as a segment and as a
// Parquet file at FixturePaths' paths, and returns those paths with the bytes written.
func WriteFixture(dir string, layout Layout, parts [Inputs][]Event) (Fixture, error) {
	fx := FixturePaths(dir, layout)
	for i, p := range parts {
		n, err := WriteSegment(fx.Segs[i], p)
		if err != nil {
			return fx, err
		}
		fx.SegBytes += n
		if n, err = WriteParquet(fx.Parquets[i], p); err != nil {
			return fx, err
		}
		fx.ParquetBytes += n
	}
	return fx, nil
}

// StatFixture returns FixturePaths(dir, layout) with the sizes of the files, or an error if
// one is missing.
func StatFixture(dir string, layout Layout) (Fixture, error) {
	fx := FixturePaths(dir, layout)
	for i := range Inputs {
		for _, f := range []struct {
			path string
			n    *int64
		}{{fx.Segs[i], &fx.SegBytes}, {fx.Parquets[i], &fx.ParquetBytes}} {
			st, err := os.Stat(f.path)
			if err != nil {
				return fx, fmt.Errorf("peers: layout %s: %w", layout, err)
			}
			*f.n += st.Size()
		}
	}
	return fx, nil
}
