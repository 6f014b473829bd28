package mediumtest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/medium"
)

func testClosed[T tb[T]](t T, open Open[T]) {
	m := open(t)
	b := newBytes(t, m)
	_, err := b.WriteString("some bytes")
	require.NoError(t, err)
	big := newBytes(t, m)
	_, err = big.Write(make([]byte, 3<<20))
	require.NoError(t, err)
	require.NoError(t, m.Close())
	require.NoError(t, m.Close(), "a second Close")

	for _, x := range []medium.Bytes{b, big} {
		_, err = x.Write([]byte("x"))
		require.ErrorIs(t, err, medium.ErrClosed, "Write")
		_, err = x.WriteString("x")
		require.ErrorIs(t, err, medium.ErrClosed, "WriteString")
		require.ErrorIs(t, x.WriteByte('x'), medium.ErrClosed, "WriteByte")
		_, err = x.ReadFrom(bytes.NewReader([]byte("x")))
		require.ErrorIs(t, err, medium.ErrClosed, "ReadFrom")
		_, err = x.WriteTo(io.Discard)
		require.ErrorIs(t, err, medium.ErrClosed, "WriteTo")
		_, err = x.ReadAt(make([]byte, 1), 0)
		require.ErrorIs(t, err, medium.ErrClosed, "ReadAt")
	}
	_, err = m.NewBytes()
	require.ErrorIs(t, err, medium.ErrClosed, "NewBytes")
	_, err = m.NewChild()
	require.ErrorIs(t, err, medium.ErrClosed, "NewChild")

	// OnClose on a closed medium runs at once: nothing it releases leaks.
	ran := false
	m.OnClose(func() error { ran = true; return nil })
	require.True(t, ran, "OnClose on a closed medium")
}

func testChildren[T tb[T]](t T, open Open[T]) {
	r := rand.New(rand.NewPCG(seed(t), 8))
	m := openMedium(t, open)
	pb := newBytes(t, m)
	var pmodel bytes.Buffer
	for range 20 {
		appendRandom(t, r, pb, &pmodel)
	}

	early, err := m.NewChild()
	require.NoError(t, err)
	late, err := m.NewChild()
	require.NoError(t, err)
	grandchild, err := late.NewChild()
	require.NoError(t, err)

	eb := newBytes(t, early)
	lb := newBytes(t, late)
	gb := newBytes(t, grandchild)
	var emodel, lmodel, gmodel bytes.Buffer
	for range 30 {
		appendRandom(t, r, eb, &emodel)
		appendRandom(t, r, lb, &lmodel)
		appendRandom(t, r, gb, &gmodel)
		appendRandom(t, r, pb, &pmodel)
	}
	checkContents(t, r, eb, emodel.Bytes())

	// A child closed early leaves the parent and its siblings intact.
	require.NoError(t, early.Close())
	_, err = eb.Write([]byte("x"))
	require.ErrorIs(t, err, medium.ErrClosed)
	checkContents(t, r, pb, pmodel.Bytes())
	checkContents(t, r, lb, lmodel.Bytes())
	checkContents(t, r, gb, gmodel.Bytes())
	appendRandom(t, r, pb, &pmodel)
	checkContents(t, r, pb, pmodel.Bytes())

	// The parent's Close closes its remaining children and theirs.
	require.NoError(t, m.Close())
	_, err = lb.Write([]byte("x"))
	require.ErrorIs(t, err, medium.ErrClosed, "a child's Bytes after the parent's Close")
	_, err = gb.Write([]byte("x"))
	require.ErrorIs(t, err, medium.ErrClosed, "a grandchild's Bytes after the parent's Close")
	_, err = late.NewBytes()
	require.ErrorIs(t, err, medium.ErrClosed)
	require.NoError(t, late.Close(), "Close of a child already closed by its parent")
	require.NoError(t, early.Close(), "a second Close of a child")
}

func testOnClose[T tb[T]](t T, open Open[T]) {
	m := open(t)
	var order []int
	errA := errors.New("hook A failed")
	errC := errors.New("hook C failed")
	m.OnClose(func() error { order = append(order, 1); return errA })
	m.OnClose(func() error { order = append(order, 2); return nil })
	m.OnClose(func() error { order = append(order, 3); return errC })
	child, err := m.NewChild()
	require.NoError(t, err)
	child.OnClose(func() error { order = append(order, 4); return nil })
	m.OnClose(func() error { order = append(order, 5); return nil })

	b := newBytes(t, m)
	_, err = b.WriteString("data")
	require.NoError(t, err)

	err = m.Close()
	require.Equal(t, []int{5, 4, 3, 2, 1}, order, "hooks run last registered first, children with them")
	require.ErrorIs(t, err, errC)
	require.ErrorIs(t, err, errA)
	// The first error (in the order the hooks ran) comes first.
	require.Regexp(t, "^(?s)hook C failed.*hook A failed", err.Error())
	require.NoError(t, m.Close(), "a second Close after failed hooks")
	require.Len(t, order, 5, "hooks run once")
	_, err = b.Write([]byte("x"))
	require.ErrorIs(t, err, medium.ErrClosed)
}

func testConcurrent[T tb[T]](t T, open Open[T]) {
	s := seed(t)
	m := openMedium(t, open)
	const workers = 8
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- concurrentWorker(m, s, w)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

// concurrentWorker writes its own Bytes (some in a child of its own) and checks them. It
// returns an error rather than calling t.FailNow off the test goroutine.
func concurrentWorker(m medium.Medium, s uint64, w int) error {
	r := rand.New(rand.NewPCG(s, uint64(100+w)))
	target := m
	if w%2 == 1 {
		child, err := m.NewChild()
		if err != nil {
			return err
		}
		target = child
	}
	m.OnClose(func() error { return nil })
	const n = 3
	bs := make([]medium.Bytes, n)
	models := make([]bytes.Buffer, n)
	for i := range bs {
		b, err := target.NewBytes()
		if err != nil {
			return err
		}
		bs[i] = b
	}
	for range scaled(150) {
		i := r.IntN(n)
		p := randomBytes(r, min(writeSize(r), 200<<10))
		if _, err := bs[i].Write(p); err != nil {
			return err
		}
		models[i].Write(p)
		if bs[i].Size() != int64(models[i].Len()) {
			return fmt.Errorf("worker %d: Size %d, want %d", w, bs[i].Size(), models[i].Len())
		}
	}
	for i := range bs {
		var got bytes.Buffer
		if _, err := bs[i].WriteTo(&got); err != nil {
			return err
		}
		if !bytes.Equal(models[i].Bytes(), got.Bytes()) {
			return fmt.Errorf("worker %d bytes %d: %s", w, i, firstDiff(models[i].Bytes(), got.Bytes()))
		}
		p := make([]byte, models[i].Len())
		if _, err := bs[i].ReadAt(p, 0); err != nil && !(len(p) == 0 && err == io.EOF) {
			return err
		}
		if !bytes.Equal(models[i].Bytes(), p) {
			return fmt.Errorf("worker %d bytes %d ReadAt: %s", w, i, firstDiff(models[i].Bytes(), p))
		}
	}
	if target != m {
		return target.Close()
	}
	return nil
}

// requireGone checks that every call on x but Size fails with ErrClosed.
func requireGone[T tb[T]](t T, x medium.Bytes, what string) {
	t.Helper()
	_, err := x.Write([]byte("x"))
	require.ErrorIs(t, err, medium.ErrClosed, "%s: Write", what)
	_, err = x.WriteString("x")
	require.ErrorIs(t, err, medium.ErrClosed, "%s: WriteString", what)
	require.ErrorIs(t, x.WriteByte('x'), medium.ErrClosed, "%s: WriteByte", what)
	_, err = x.ReadFrom(bytes.NewReader([]byte("x")))
	require.ErrorIs(t, err, medium.ErrClosed, "%s: ReadFrom", what)
	_, err = x.WriteTo(io.Discard)
	require.ErrorIs(t, err, medium.ErrClosed, "%s: WriteTo", what)
	_, err = x.ReadAt(make([]byte, 1), 0)
	require.ErrorIs(t, err, medium.ErrClosed, "%s: ReadAt", what)
}

// testDiscard runs where the backend's Bytes are medium.Discarders: a discarded Bytes fails
// every call but Size, a second Discard does nothing, the other Bytes (written before and
// after, on the medium and a child) keep their bytes while new ones take the space given back,
// and a Discard after Close fails with ErrClosed.
func testDiscard[T tb[T]](t T, open Open[T]) {
	r := rand.New(rand.NewPCG(seed(t), 9))
	m := openMedium(t, open)
	if _, ok := newBytes(t, m).(medium.Discarder); !ok {
		t.Skip("the backend's Bytes are not Discarders")
	}
	child, err := m.NewChild()
	require.NoError(t, err)
	type staged struct {
		b     medium.Bytes
		model bytes.Buffer
	}
	var all []*staged
	add := func(on medium.Medium) *staged {
		s := &staged{b: newBytes(t, on)}
		all = append(all, s)
		return s
	}
	// Bytes written in turns, so that their bytes interleave wherever the backend puts them.
	for range 6 {
		add(m)
	}
	add(child)
	for range scaled(4) {
		for _, s := range all {
			appendRandom(t, r, s.b, &s.model)
		}
	}
	var gone []medium.Bytes
	for round := range 3 {
		// Discard every other Bytes left, then write more: new Bytes and the survivors.
		var kept []*staged
		for i, s := range all {
			if i%2 == round%2 {
				size := s.b.Size()
				require.NoError(t, s.b.(medium.Discarder).Discard())
				require.NoError(t, s.b.(medium.Discarder).Discard(), "a second Discard")
				require.Equal(t, size, s.b.Size(), "Size after Discard")
				requireGone(t, s.b, "discarded")
				gone = append(gone, s.b)
				continue
			}
			kept = append(kept, s)
		}
		all = kept
		add(m)
		add(child)
		for range scaled(3) {
			for _, s := range all {
				appendRandom(t, r, s.b, &s.model)
			}
		}
		for _, s := range all {
			checkContents(t, r, s.b, s.model.Bytes())
		}
	}
	for _, b := range gone {
		requireGone(t, b, "discarded, later")
	}
	last := newBytes(t, m)
	_, err = last.WriteString("kept until Close")
	require.NoError(t, err)
	require.NoError(t, m.Close())
	require.ErrorIs(t, last.(medium.Discarder).Discard(), medium.ErrClosed, "Discard after Close")
}

// testDiscardPrefix runs where the backend's Bytes are medium.PrefixDiscarders: after
// DiscardPrefix(n), Size is unchanged, reads from n on (random ones and one to the end) return
// the bytes written, a read that starts before n and WriteTo fail with ErrClosed, writes go on
// and read back, a smaller n does nothing, an n past Size fails with ErrInvalid, the other Bytes
// (written in turns, on the medium and a child) keep their bytes while new writes take the space
// given back, and Discard then gives back the rest.
func testDiscardPrefix[T tb[T]](t T, open Open[T]) {
	r := rand.New(rand.NewPCG(seed(t), 10))
	m := openMedium(t, open)
	if _, ok := newBytes(t, m).(medium.PrefixDiscarder); !ok {
		t.Skip("the backend's Bytes are not PrefixDiscarders")
	}
	child, err := m.NewChild()
	require.NoError(t, err)
	type staged struct {
		b     medium.Bytes
		model bytes.Buffer
		given int64
	}
	var all []*staged
	for i := range 6 {
		on := m
		if i == 5 {
			on = child
		}
		all = append(all, &staged{b: newBytes(t, on)})
	}
	check := func(s *staged, what string) {
		t.Helper()
		want := s.model.Bytes()
		require.Equal(t, int64(len(want)), s.b.Size(), "%s: Size", what)
		if s.given == 0 {
			checkContents(t, r, s.b, want)
			return
		}
		_, err := s.b.WriteTo(io.Discard)
		require.ErrorIs(t, err, medium.ErrClosed, "%s: WriteTo after a prefix of %d was given back", what, s.given)
		_, err = s.b.ReadAt(make([]byte, 1), s.given-1)
		require.ErrorIs(t, err, medium.ErrClosed, "%s: ReadAt(1 byte, %d), prefix %d given back", what, s.given-1, s.given)
		rest := make([]byte, int64(len(want))-s.given)
		if len(rest) > 0 {
			k, err := s.b.ReadAt(rest, s.given)
			require.NoError(t, err, "%s: ReadAt of the rest", what)
			require.Equal(t, len(rest), k)
			if !bytes.Equal(want[s.given:], rest) {
				require.Failf(t, "ReadAt differs", "%s: the rest after %d: %s", what, s.given, firstDiff(want[s.given:], rest))
			}
		}
		for range 10 {
			if len(rest) == 0 {
				break
			}
			off := s.given + r.Int64N(int64(len(rest)))
			p := make([]byte, r.Int64N(int64(len(want))-off)+1)
			k, err := s.b.ReadAt(p, off)
			require.NoError(t, err, "%s: ReadAt(%d bytes, %d)", what, len(p), off)
			require.Equal(t, want[off:off+int64(k)], p[:k], "%s: ReadAt(%d bytes, %d)", what, len(p), off)
		}
		if s.given <= int64(len(want))-3 { // checkReadAtEnd reads from 3 bytes before the end
			checkReadAtEnd(t, s.b, want)
		}
	}
	for round := range 4 {
		// Write in turns, so that the Bytes' bytes interleave wherever the backend puts them.
		for range scaled(4) {
			for _, s := range all {
				appendRandom(t, r, s.b, &s.model)
			}
		}
		for i, s := range all {
			if (i+round)%2 == 0 {
				continue
			}
			what := fmt.Sprintf("round %d, Bytes %d", round, i)
			size := s.b.Size()
			pd := s.b.(medium.PrefixDiscarder)
			n := s.given + r.Int64N(size-s.given+1)
			if round == 3 {
				n = size // all of it
			}
			require.NoError(t, pd.DiscardPrefix(n), "%s: DiscardPrefix(%d) of %d", what, n, size)
			require.NoError(t, pd.DiscardPrefix(n/2), "%s: a smaller prefix", what)
			require.ErrorIs(t, pd.DiscardPrefix(size+1), medium.ErrInvalid, "%s: a prefix past Size", what)
			s.given = n
		}
		for i, s := range all {
			check(s, fmt.Sprintf("round %d, Bytes %d", round, i))
		}
	}
	// Discard gives back the rest; the medium's other Bytes and new ones are untouched.
	for _, s := range all[:3] {
		require.NoError(t, s.b.(medium.Discarder).Discard())
		requireGone(t, s.b, "discarded after a prefix")
	}
	fresh := &staged{b: newBytes(t, m)}
	for range scaled(3) {
		appendRandom(t, r, fresh.b, &fresh.model)
	}
	for i, s := range append(all[3:], fresh) {
		check(s, fmt.Sprintf("after Discard, Bytes %d", i))
	}
	require.NoError(t, m.Close())
	require.ErrorIs(t, fresh.b.(medium.PrefixDiscarder).DiscardPrefix(0), medium.ErrClosed, "DiscardPrefix after Close")
}
