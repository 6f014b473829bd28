package mediumtest

import (
	"bytes"
	"math/rand/v2"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/medium"
)

func testEmpty[T tb[T]](t T, open Open[T]) {
	m := openMedium(t, open)
	b := newBytes(t, m)
	require.Zero(t, b.Size())
	checkContents(t, rand.New(rand.NewPCG(1, 2)), b, nil)
	n, err := b.Write(nil)
	require.NoError(t, err)
	require.Zero(t, n)
	n, err = b.WriteString("")
	require.NoError(t, err)
	require.Zero(t, n)
	k, err := b.ReadFrom(bytes.NewReader(nil))
	require.NoError(t, err)
	require.Zero(t, k)
	require.Zero(t, b.Size())
	checkContents(t, rand.New(rand.NewPCG(1, 2)), b, nil)
}

func testRandomWrites[T tb[T]](t T, open Open[T]) {
	s := seed(t)
	r := rand.New(rand.NewPCG(s, 1))
	m := openMedium(t, open)
	for range 4 {
		b := newBytes(t, m)
		var model bytes.Buffer
		for range scaled(60 + r.IntN(60)) {
			appendRandom(t, r, b, &model)
		}
		checkContents(t, r, b, model.Bytes())
		// Still appendable after WriteTo and ReadAt.
		for range 10 {
			appendRandom(t, r, b, &model)
		}
		checkContents(t, r, b, model.Bytes())
	}
}

func testLargeWrites[T tb[T]](t T, open Open[T]) {
	r := rand.New(rand.NewPCG(seed(t), 2))
	m := openMedium(t, open)
	b := newBytes(t, m)
	var model bytes.Buffer
	for _, n := range []int{5 << 20, 1, (1 << 20) + 1, 3 << 20} {
		p := randomBytes(r, n)
		k, err := b.Write(p)
		require.NoError(t, err)
		require.Equal(t, n, k)
		model.Write(p)
		require.Equal(t, int64(model.Len()), b.Size())
	}
	checkContents(t, r, b, model.Bytes())
}

func testInterleaved[T tb[T]](t T, open Open[T]) {
	r := rand.New(rand.NewPCG(seed(t), 3))
	m := openMedium(t, open)
	const n = 40
	bs := make([]medium.Bytes, n)
	models := make([]bytes.Buffer, n)
	for i := range bs {
		bs[i] = newBytes(t, m)
	}
	for range scaled(1000) {
		i := r.IntN(n)
		appendRandom(t, r, bs[i], &models[i])
		if r.IntN(100) == 0 {
			checkContents(t, r, bs[i], models[i].Bytes())
		}
	}
	for i := range bs {
		checkContents(t, r, bs[i], models[i].Bytes())
	}
}

func testNoRetain[T tb[T]](t T, open Open[T]) {
	m := openMedium(t, open)
	b := newBytes(t, m)
	for _, n := range []int{3, 5000, 300 << 10} {
		p := bytes.Repeat([]byte{'a'}, n)
		_, err := b.Write(p)
		require.NoError(t, err)
		for i := range p {
			p[i] = 'X'
		}
	}
	var got bytes.Buffer
	_, err := b.WriteTo(&got)
	require.NoError(t, err)
	require.Equal(t, 3+5000+300<<10, got.Len())
	require.Equal(t, -1, bytes.IndexByte(got.Bytes(), 'X'), "Bytes retained and saw a later change of p")
}
