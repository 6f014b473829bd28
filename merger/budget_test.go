package merger

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/merger/internal/fixture"
)

func TestBoundsFor(t *testing.T) {
	// The default budget gives every bound its largest value.
	def := boundsFor(0, 3, 2, 5)
	assert.Equal(t, bounds{logIDs: logRunIDs, sortRows: logSortRows, memGroupRows: maxMemGroupRows, tableBytes: defaultMemoryLimit / tableKeep, aheadBytes: defaultMemoryLimit / 8}, def)
	assert.Equal(t, def, boundsFor(defaultMemoryLimit, 3, 2, 5))

	// 16 MiB: a quarter for 3 logs of 8 bytes an id, an eighth for 2 sorts and for 5 cursors'
	// keys of 4 bytes, a 64th for the slot tables, an eighth for more groups combined ahead.
	small := boundsFor(16<<20, 3, 2, 5)
	assert.Equal(t, bounds{logIDs: (4 << 20) / 3 / 8, sortRows: (2 << 20) / 2 / 4, memGroupRows: (2 << 20) / 5 / 4, tableBytes: 256 << 10, aheadBytes: 2 << 20}, small)

	// Many dimensions, goroutines and inputs: the floors.
	assert.Equal(t, bounds{logIDs: 1 << 16, sortRows: 1 << 16, memGroupRows: 1 << 14, tableBytes: 256 << 10, aheadBytes: 2 << 20}, boundsFor(16<<20, 100, 64, 1000))
	// No dimension: the share is whole, never a division by 0.
	assert.Equal(t, (4<<20)/8, boundsFor(16<<20, 0, 0, 0).logIDs)
}

func TestMemoryFanIn(t *testing.T) {
	assert.Equal(t, 0, memoryFanIn(0, 83, 7), "83 inputs of 7 columns fit the default")
	assert.Equal(t, 83, memoryFanIn(0, 84, 7))
	assert.Equal(t, 2, memoryFanIn(16<<20, 40, 100), "at least 2")
	assert.Equal(t, 0, memoryFanIn(1<<30, 40, 16))
}

func TestMemoryLimitInvalid(t *testing.T) {
	dir := t.TempDir()
	in := fixture.GenSegment(t, dir, 1, 100)
	for _, limit := range []int64{-1, 1, minMemoryLimit - 1} {
		_, err := Merge(t.Context(), []*columns.Segment{in}, filepath.Join(dir, "o.seg"), Options{MemoryLimit: limit})
		require.ErrorIs(t, err, ErrInvalid, "limit %d", limit)
		assert.ErrorContains(t, err, "MemoryLimit")
	}
}

// TestMergeMemoryLimit merges under the smallest budget: the id logs write runs (which the
// default budget does not at these rows), the inputs merge in phases of 2, and the bytes are
// those of one phase with everything in memory.
func TestMergeMemoryLimit(t *testing.T) {
	dir := t.TempDir()
	big := []*columns.Segment{fixture.GenSegment(t, dir, 1, 120_000), fixture.GenSegment(t, dir, 2, 120_000)}
	var small []*columns.Segment
	for i := range 40 {
		small = append(small, fixture.GenSegment(t, dir, int64(10+i), 500))
	}
	for _, c := range []struct {
		name   string
		inputs []*columns.Segment
		opts   Options
	}{
		{"rows", big, Options{}},
		{"rollup", big, Options{Rollup: true, Granularity: columns.GranularityHour}},
		{"inputs", small, Options{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			free := c.opts
			free.MemoryLimit = 1 << 30
			runs := logRunsWritten.Load()
			want := mustMerge(t, c.inputs, filepath.Join(dir, c.name+"-free.seg"), free)
			assert.Equal(t, runs, logRunsWritten.Load(), "no run under 1 GiB")
			assert.Equal(t, 1, want.Phases)

			tight := c.opts
			tight.MemoryLimit = minMemoryLimit
			got := mustMerge(t, c.inputs, filepath.Join(dir, c.name+"-tight.seg"), tight)
			requireSameFiles(t, filepath.Join(dir, c.name+"-free.seg"), filepath.Join(dir, c.name+"-tight.seg"), c.name)
			if c.name == "inputs" {
				// 16 columns of 112 KiB an input, against a quarter of 16 MiB.
				assert.Equal(t, 2, got.FanIn)
				assert.Equal(t, 6, got.Phases, fmt.Sprint(got))
				def := mustMerge(t, c.inputs, filepath.Join(dir, c.name+"-default.seg"), c.opts)
				assert.Equal(t, 36, def.FanIn, "64 MiB of 1.75 MiB inputs under the default")
				return
			}
			assert.Greater(t, logRunsWritten.Load(), runs, "runs under 16 MiB")
		})
	}
}
