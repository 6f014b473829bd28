package merger

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/writeout/writeout/columns/agg"
	"github.com/writeout/writeout/merger/internal/scratch"
)

// Slot tables. A long metric task combines each pre-aggregated group's rows into a table of
// accumulators (slotAccs), one per slot; the task reads it once, in slot order, as the
// group's rows go out. The tables' memory passes from group to group (a preload's goes to its
// task, a task's back to its preloader's pool, a retired source's to the next source), so that
// a new group's table is written into pages already resident rather than into new ones.
//
// What they hold counts against their share of the merge's memory budget (tableMem): past
// it, a task gives the pages of the slots it has read back to the system as it goes (passed),
// and tables given back are freed rather than kept for a later group. Below it, both would
// cost the kernel work for nothing: the next group's table would fault the same pages in
// again, a zeroed page each.

// tableMem is what a merge's slot tables hold, against their share of the budget.
type tableMem struct {
	budget int64        // bounds.tableBytes
	ahead  int64        // bounds.aheadBytes
	held   atomic.Int64 // the tables' bytes not given back (accMem.held), every table
}

// over reports whether the tables hold more than their share (or there is no account: m nil).
func (m *tableMem) over() bool { return m == nil || m.held.Load() > m.budget }

// aheadFull reports whether the tables hold their share for groups combined ahead past
// maxPreloads (see preloads.most).
func (m *tableMem) aheadFull() bool { return m.held.Load() >= m.ahead }

// add counts n bytes more held (n < 0: fewer).
func (m *tableMem) add(n int) {
	if m != nil && n != 0 {
		m.held.Add(int64(n))
	}
}

// accMem is the memory of a slotAccs' tables, outside the Go heap where it can be (see
// scratch.New): the tables are read at random and live as long as their group's slots go out,
// and on the Go heap each byte of them let the collector's heap grow by another (a 300 M-row
// hour rollup of the peers' events holds some 1.5 MB a table). It passes from a preload to its
// task, and from a retired source to the next; free gives it back.
type accMem struct {
	v, c scratch.Array[int64]
	accs scratch.Array[agg.LongAcc]
	// tables is the merge's account of what tables hold (nil: none, as before the first
	// table is made).
	tables *tableMem
}

// bytes returns the memory m holds.
func (m *accMem) bytes() int { return m.v.Bytes() + m.c.Bytes() + m.accs.Bytes() }

// held returns the memory of m not given back (passed).
func (m *accMem) held() int { return m.v.Held() + m.c.Held() + m.accs.Held() }

// free releases m's memory and returns the first error.
func (m *accMem) free() error {
	m.tables.add(-m.held())
	return errors.Join(m.v.Free(), m.c.Free(), m.accs.Free())
}

// accsFor returns the first n elements of a, one of m's tables, which it makes anew
// (scratch.NewExact, an eighth more) when a holds fewer.
func accsFor[T scratch.Elem](m *accMem, a *scratch.Array[T], n int) ([]T, error) {
	before := a.Held()
	if n > len(a.S) {
		if err := a.Free(); err != nil {
			m.tables.add(-before)
			return nil, fmt.Errorf("merger: free a slot table: %w", err)
		}
		*a = scratch.NewExact[T](n + n/8)
		slotTablesMade.Add(1)
	}
	a.Undrop() // the caller writes every element first
	m.tables.add(a.Held() - before)
	return a.S[:n], nil
}

// dropStep is how many slots a task reads between two releases of its slot tables' pages
// (see slotAccs.passed): 64 KiB of plain values.
const dropStep = 1 << 13

// passed notes that the task reads slot s of the group next. A task reads a group's slots
// once, in order (its rows go out in key order, the slots' order): while the merge's tables
// hold more than their share, every dropStep slots the pages of the tables below s go back to
// the system, so that a group whose slots are half out holds half its tables.
func (sa *slotAccs) passed(s uint32) error {
	if int(s) < sa.dropped {
		return fmt.Errorf("merger: slot %d of a group read after the pages of its first %d slots were released", s, sa.dropped)
	}
	if int(s) < sa.nextDrop {
		return nil
	}
	sa.nextDrop = int(s) + dropStep
	if !sa.mem.tables.over() {
		return nil
	}
	before := sa.mem.held()
	dropped := -1 // the fewest slots an array dropped (arrays on the heap drop none)
	var err error
	for _, drop := range []func(int) (int, error){sa.mem.v.DropBelow, sa.mem.c.DropBelow, sa.mem.accs.DropBelow} {
		n, derr := drop(int(s))
		if derr != nil {
			err = derr
			break
		}
		if n > 0 && (dropped < 0 || n < dropped) {
			dropped = n
		}
	}
	sa.mem.tables.add(sa.mem.held() - before)
	if err != nil {
		return err
	}
	if dropped > sa.dropped {
		sa.dropped = dropped
		slotDrops.Add(1)
	}
	return nil
}

// For tests: slotDrops counts the releases of slot tables' pages, slotTablesMade the tables
// made anew.
var slotDrops, slotTablesMade atomic.Int64
