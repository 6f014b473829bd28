// Package peers runs the same merge and rollup jobs through writeout, DuckDB and parquet-go, so
// that their times can be compared side by side (issue 14, item 1). It is a module of its own
// so that DuckDB's cgo dependency stays out of writeout's go.mod.
//
// The data is generated in-process and deterministic: an event table with a time column
// (epoch milliseconds over one day), three string dimensions of Zipf-distributed values
// (cardinalities 200, 1000 and 5000) and three long metrics, split into five inputs in one of
// two layouts (see Layout). Each input is written once, outside any timer, as a writeout
// segment and as a zstd Parquet file sorted by (time, d1, d2, d3).
//
// Generate holds the whole table in memory. Prepare writes the same files for any number of
// rows in bounded memory, from Stream, for the events (Events) or another Shape (Minutes: two
// ~300-value dimensions and two skewed metrics over six months of minutes, issue 34).
package peers

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
)

// Event is one row of the generated table, and the Go shape of every Parquet file here.
type Event struct {
	Time int64  `parquet:"time"`
	D1   string `parquet:"d1,dict"`
	D2   string `parquet:"d2,dict"`
	D3   string `parquet:"d3,dict"`
	M1   int64  `parquet:"m1"`
	M2   int64  `parquet:"m2"`
	M3   int64  `parquet:"m3"`
}

// Cardinalities of d1, d2 and d3.
var Cardinalities = [3]int{200, 1000, 5000}

// Day is the first millisecond of the generated day (2026-01-01T00:00:00Z) and DayMillis its
// length.
const (
	Day       int64 = 1767225600000
	DayMillis int64 = 86_400_000
)

// Inputs is the number of inputs every job merges.
const Inputs = 5

// Seed is the PCG seed pair of the generator.
const Seed uint64 = 14

// Layout is how the rows are split into the inputs.
type Layout string

const (
	// Contiguous: input i holds the i-th fifth of the time range.
	Contiguous Layout = "contiguous"
	// Overlapping: in time order, row j goes to input j%5, so every input spans the day.
	Overlapping Layout = "overlapping"
)

// CompareEvents orders events by (time, d1, d2, d3), the sort order of every output.
func CompareEvents(a, b *Event) int {
	if c := cmp.Compare(a.Time, b.Time); c != 0 {
		return c
	}
	if c := cmp.Compare(a.D1, b.D1); c != 0 {
		return c
	}
	if c := cmp.Compare(a.D2, b.D2); c != 0 {
		return c
	}
	return cmp.Compare(a.D3, b.D3)
}

// Generate returns rows events in (time, d1, d2, d3) order, the same for the same rows.
func Generate(rows int) []Event {
	r := rand.New(rand.NewPCG(Seed, Seed^0x9e3779b97f4a7c15))
	var values [3][]string
	var zipf [3]*rand.Zipf
	for d, n := range Cardinalities {
		values[d] = make([]string, n)
		// The most frequent values are not the first in string order: value k's name is
		// a permutation of k.
		perm := r.Perm(n)
		for k := range n {
			values[d][k] = fmt.Sprintf("d%d-%05d", d+1, perm[k])
		}
		zipf[d] = rand.NewZipf(r, 1.1, 2, uint64(n-1))
	}
	ev := make([]Event, rows)
	for i := range ev {
		e := &ev[i]
		e.Time = Day + r.Int64N(DayMillis)
		e.D1 = values[0][zipf[0].Uint64()]
		e.D2 = values[1][zipf[1].Uint64()]
		e.D3 = values[2][zipf[2].Uint64()]
		e.M1 = 1 + r.Int64N(10)
		e.M2 = r.Int64N(1_000_000)
		e.M3 = int64(r.ExpFloat64() * 250)
	}
	slices.SortStableFunc(ev, func(a, b Event) int { return CompareEvents(&a, &b) })
	return ev
}

// Split splits events (in order) into Inputs inputs by layout; each input stays in order.
func Split(ev []Event, layout Layout) ([Inputs][]Event, error) {
	var out [Inputs][]Event
	switch layout {
	case Contiguous:
		lo := 0
		for i := range Inputs {
			end := Day + DayMillis*int64(i+1)/Inputs
			hi, _ := slices.BinarySearchFunc(ev[lo:], end, func(e Event, t int64) int { return cmp.Compare(e.Time, t) })
			out[i] = ev[lo : lo+hi]
			lo += hi
		}
	case Overlapping:
		for i := range Inputs {
			out[i] = make([]Event, 0, len(ev)/Inputs+1)
		}
		for j := range ev {
			out[j%Inputs] = append(out[j%Inputs], ev[j])
		}
	default:
		return out, fmt.Errorf("peers: unknown layout %q", layout)
	}
	return out, nil
}
