package backend

import (
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestLifecycleHooksRunLastFirst(t *testing.T) {
	var l Lifecycle
	var order []int
	for i := range 3 {
		l.OnClose(func() error { order = append(order, i); return nil })
	}
	require.False(t, l.Closed())
	require.NoError(t, l.Close())
	require.True(t, l.Closed())
	require.Equal(t, []int{2, 1, 0}, order)

	require.NoError(t, l.Close(), "a second Close returns nil")
	require.Equal(t, []int{2, 1, 0}, order, "and runs no hook again")
}

func TestLifecycleCloseRunsEveryHookAndJoinsErrors(t *testing.T) {
	var l Lifecycle
	first, second := errors.New("first"), errors.New("second")
	ran := 0
	l.OnClose(func() error { ran++; return second })
	l.OnClose(func() error { ran++; return nil })
	l.OnClose(func() error { ran++; return first })

	err := l.Close()
	require.Equal(t, 3, ran, "every hook runs although one failed")
	require.ErrorIs(t, err, first)
	require.ErrorIs(t, err, second)
	require.Equal(t, "first\nsecond", err.Error(), "the first failure leads")
}

func TestLifecycleOnCloseAfterCloseRunsAtOnce(t *testing.T) {
	var l Lifecycle
	require.NoError(t, l.Close())
	ran := false
	l.OnClose(func() error { ran = true; return errors.New("dropped") })
	require.True(t, ran)
	require.NoError(t, l.Close())
}

func TestLifecycleIfOpen(t *testing.T) {
	var l Lifecycle
	ran := 0
	require.True(t, l.IfOpen(func() { ran++ }))
	require.Equal(t, 1, ran)
	require.NoError(t, l.Close())
	require.False(t, l.IfOpen(func() { ran++ }))
	require.Equal(t, 1, ran, "fn does not run once Close has started")
}

type closer struct {
	closed int
	err    error
}

func (c *closer) Close() error { c.closed++; return c.err }

func TestLifecycleAddChild(t *testing.T) {
	var l Lifecycle
	var order []string
	l.OnClose(func() error { order = append(order, "own release"); return nil })
	child := &closer{err: errors.New("child failed")}
	require.True(t, l.AddChild(child))
	l.OnClose(func() error { order = append(order, "hook"); return nil })

	err := l.Close()
	require.ErrorIs(t, err, child.err)
	require.Equal(t, 1, child.closed)
	require.Equal(t, []string{"hook", "own release"}, order)

	late := &closer{}
	require.False(t, l.AddChild(late), "a closed Lifecycle takes no child")
	require.Zero(t, late.closed, "the caller closes it")
}

// TestLifecycleConcurrent: hooks added while Close runs are either run by Close or run at once;
// none is lost and none runs twice. Run with -race.
func TestLifecycleConcurrent(t *testing.T) {
	for range 50 {
		var l Lifecycle
		var mu sync.Mutex
		runs := 0
		var wg sync.WaitGroup
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 20 {
					l.OnClose(func() error { mu.Lock(); runs++; mu.Unlock(); return nil })
					_ = l.IfOpen(func() {})
					_ = l.Closed()
				}
			}()
		}
		require.NoError(t, l.Close())
		wg.Wait()
		require.Equal(t, 8*20, runs)
	}
}
