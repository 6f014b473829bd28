package scratch

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/columns/agg"
)

// TestArray writes and reads arrays on both sides of the mapping threshold and frees them
// (twice: the second is a no-op); freed mappings come back from the pool, which stays within
// its limit.
func TestArray(t *testing.T) {
	for _, n := range []int{0, 1, 1000, minMapped / 4, 3 * minMapped} {
		a := New[uint32](n)
		require.Len(t, a.S, n)
		if n*4 >= minMapped && a.mapped == nil {
			t.Logf("%d elements: not mapped here (the heap fallback)", n)
		}
		for i := range a.S {
			a.S[i] = uint32(i)
		}
		for i := range a.S {
			require.Equal(t, uint32(i), a.S[i])
		}
		require.NoError(t, a.Free())
		require.Nil(t, a.S)
		require.NoError(t, a.Free())
	}
	var zero Array[uint16]
	require.NoError(t, zero.Free())

	a := New[uint64](minMapped / 8)
	if a.mapped == nil {
		t.Skip("no mappings here")
	}
	first := &a.mapped[0]
	require.NoError(t, a.Free())
	b := New[uint16](minMapped / 2) // as many bytes: the pooled mapping
	require.Same(t, first, &b.mapped[0], "the freed mapping, reused")
	var held []Array[uint8]
	for range 2 * PoolLimit / mapUnit {
		held = append(held, New[uint8](mapUnit))
	}
	for i := range held {
		require.NoError(t, held[i].Free())
	}
	require.NoError(t, b.Free())
	pool.Lock()
	defer pool.Unlock()
	require.LessOrEqual(t, pool.bytes, PoolLimit)
}

// TestFreeToSystem: an array freed to the system leaves the pool as it was (its mapping is
// unmapped, not kept resident), where Free pools it.
func TestFreeToSystem(t *testing.T) {
	a := New[uint32](minMapped)
	if a.mapped == nil {
		t.Skip("no mappings here")
	}
	clear(a.S)
	before := PoolBytes()
	require.NoError(t, a.FreeToSystem())
	require.Nil(t, a.S)
	require.Equal(t, before, PoolBytes(), "freed to the system: not pooled")
	require.NoError(t, a.FreeToSystem())

	b := New[uint32](minMapped)
	before = PoolBytes()
	require.NoError(t, b.Free())
	require.Greater(t, PoolBytes(), before, "freed: pooled")
}

// TestGrow grows arrays of each kind across the mapping threshold: the kept elements stay,
// the length at least doubles, and a large enough array is mapped.
func TestGrow(t *testing.T) {
	var a Array[int64]
	require.NoError(t, a.Grow(10, 0))
	require.Len(t, a.S, 10)
	for i := range a.S {
		a.S[i] = int64(-i)
	}
	require.NoError(t, a.Grow(5, 10), "no growth needed")
	require.Len(t, a.S, 10)
	require.NoError(t, a.Grow(minMapped/8+1, 7))
	require.GreaterOrEqual(t, len(a.S), minMapped/8+1)
	for i := range 7 {
		require.Equal(t, int64(-i), a.S[i])
	}
	n := len(a.S)
	require.NoError(t, a.Grow(n+1, n))
	require.GreaterOrEqual(t, len(a.S), 2*n)
	require.NoError(t, a.Free())

	f := New[float64](3)
	f.S[2] = 1.5
	require.NoError(t, f.Grow(minMapped, 3))
	require.Equal(t, 1.5, f.S[2])
	require.NoError(t, f.Free())
}

// TestNewExact: arrays from 64 KiB are mapped to the page, hold what is written, and Free
// unmaps them instead of pooling them; smaller ones are on the heap.
func TestNewExact(t *testing.T) {
	for _, n := range []int{0, 100, minExact / 8, minExact/8 + 1, 3*minMapped/8 + 5} {
		before := PoolBytes()
		a := NewExact[int64](n)
		require.Len(t, a.S, n)
		if n*8 >= minExact && a.mapped != nil {
			require.Equal(t, (n*8+pageSize-1)/pageSize*pageSize, len(a.mapped), "%d elements: mapped to the page", n)
		} else {
			require.Nil(t, a.mapped, "%d elements: on the heap", n)
		}
		for i := range a.S {
			a.S[i] = int64(i) * 7
		}
		for i := range a.S {
			require.Equal(t, int64(i)*7, a.S[i])
		}
		require.NoError(t, a.Free())
		require.NoError(t, a.Free())
		require.Equal(t, before, PoolBytes(), "%d elements: not pooled", n)
	}
	acc := NewExact[agg.LongAcc](minExact) // accumulators too
	acc.S[len(acc.S)-1].V = 5
	require.NoError(t, acc.Free())
}

// TestDropBelow: a mapped array gives back whole pages below n only (the elements past them
// keep their values, those dropped read as zero); an array on the heap drops nothing.
func TestDropBelow(t *testing.T) {
	a := NewExact[int64](3 * pageSize / 8)
	if a.mapped == nil {
		t.Skip("no mappings here")
	}
	for i := range a.S {
		a.S[i] = int64(i) + 1
	}
	n, err := a.DropBelow(pageSize/8 - 1) // not a whole page
	require.NoError(t, err)
	require.Zero(t, n)
	n, err = a.DropBelow(pageSize/8 + 5)
	require.NoError(t, err)
	require.Equal(t, pageSize/8, n)
	for i := range a.S {
		if i < n {
			require.Zero(t, a.S[i], "element %d dropped", i)
		} else {
			require.Equal(t, int64(i)+1, a.S[i], "element %d kept", i)
		}
	}
	n, err = a.DropBelow(10) // never back
	require.NoError(t, err)
	require.Equal(t, pageSize/8, n)
	a.Undrop()
	n, err = a.DropBelow(10)
	require.NoError(t, err)
	require.Zero(t, n)
	require.NoError(t, a.Free())

	h := NewExact[int64](100)
	n, err = h.DropBelow(100)
	require.NoError(t, err)
	require.Zero(t, n)
	require.NoError(t, h.Free())
}
