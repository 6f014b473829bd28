package merger

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSlotTablesShare: slot tables given back are kept for the next groups (one for each
// group that may be combined ahead) while the merge's tables hold no more than their share,
// and freed once they hold more; a task gives the pages of the slots it read back only then.
// The account follows every table made, released and freed.
func TestSlotTablesShare(t *testing.T) {
	tm := &tableMem{budget: 1 << 40}
	newMem := func() accMem {
		m := accMem{tables: tm}
		_, err := accsFor(&m, &m.v, 3*dropStep)
		require.NoError(t, err)
		require.Positive(t, m.held())
		return m
	}
	var ps preloads
	task := &longTask{}
	ps.addTask(task, 1, nil)
	p := task.pre

	var held int64
	for range maxPreloads {
		m := newMem()
		held += int64(m.held())
		p.giveBack(m)
	}
	require.Len(t, p.pool, maxPreloads, "tables kept under the share")
	require.Equal(t, held, tm.held.Load())

	// Under the share, a task reads its table to the end and keeps every page.
	sa := slotAccs{mem: newMem(), nextDrop: dropStep}
	held += int64(sa.mem.held())
	for s := range uint32(3 * dropStep) {
		require.NoError(t, sa.passed(s))
	}
	require.Zero(t, sa.dropped)
	require.Equal(t, held, tm.held.Load())

	// Past it, the next table read gives its pages back as it goes, and a table given back
	// is freed, though the pool has room (a preload took one).
	tm.budget = 0
	sb := slotAccs{mem: newMem(), nextDrop: dropStep}
	require.NoError(t, sb.passed(2*dropStep))
	require.Equal(t, 2*dropStep, sb.dropped)
	require.Equal(t, held+int64(sb.mem.held()), tm.held.Load())
	taken := <-p.pool
	p.giveBack(sa.mem)
	p.giveBack(sb.mem)
	require.Len(t, p.pool, maxPreloads-1, "tables kept past the share")
	require.Equal(t, held-int64(sa.mem.held()), tm.held.Load())
	require.NoError(t, taken.free())

	require.NoError(t, ps.close())
	require.Zero(t, tm.held.Load(), "every table freed")
}
