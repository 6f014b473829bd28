package main

import (
	"math"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAppendInt: appendInt writes what strconv.AppendInt writes, for every value within
// ±20,000 (the table's edges at ±10,000 among them), the extremes and random values, after
// bytes already in the buffer.
func TestAppendInt(t *testing.T) {
	check := func(v int64) {
		require.Equal(t, string(strconv.AppendInt([]byte("x,"), v, 10)), string(appendInt([]byte("x,"), v)), "%d", v)
	}
	for v := int64(-20_000); v <= 20_000; v++ {
		check(v)
	}
	for _, v := range []int64{math.MinInt64, math.MinInt64 + 1, math.MaxInt64, -1e18, 1e18} {
		check(v)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 100_000 {
		check(int64(rng.Uint64()) >> rng.IntN(64))
	}
}
