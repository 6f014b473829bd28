package columns

import (
	"bytes"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/medium"
)

// recordingMedium is a heap medium whose Bytes are medium.Discarders that record what happened to
// them: how far they were read before Discard, and whether Discard came at all.
type recordingMedium struct {
	medium.Medium
	mu  *sync.Mutex
	all *[]*recordedBytes
}

type recordedBytes struct {
	medium.Bytes
	mu        *sync.Mutex
	read      int64 // the end of the furthest ReadAt
	discarded bool
	readAtEnd int64 // read when Discard came
}

func newRecordingMedium() recordingMedium {
	return recordingMedium{Medium: medium.NewHeap(), mu: new(sync.Mutex), all: new([]*recordedBytes)}
}

func (m recordingMedium) NewBytes() (medium.Bytes, error) {
	b, err := m.Medium.NewBytes()
	if err != nil {
		return nil, err
	}
	d := &recordedBytes{Bytes: b, mu: m.mu}
	m.mu.Lock()
	*m.all = append(*m.all, d)
	m.mu.Unlock()
	return d, nil
}

func (m recordingMedium) NewChild() (medium.Medium, error) {
	c, err := m.Medium.NewChild()
	if err != nil {
		return nil, err
	}
	return recordingMedium{Medium: c, mu: m.mu, all: m.all}, nil
}

func (b *recordedBytes) ReadAt(p []byte, off int64) (int, error) {
	n, err := b.Bytes.ReadAt(p, off)
	b.mu.Lock()
	b.read = max(b.read, off+int64(n))
	b.mu.Unlock()
	return n, err
}

func (b *recordedBytes) Discard() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.discarded {
		b.discarded, b.readAtEnd = true, b.read
	}
	return nil
}

// TestFinishDiscardsStages: publication discards each staged part (medium.Discarder) once it
// is copied whole into the segment, not before, and the segment is the one a medium without
// Discard gives.
func TestFinishDiscardsStages(t *testing.T) {
	s := allSchema()
	gen := newRowGen(7, s)
	rows := make([]Row, 3000)
	for i := range rows {
		rows[i] = gen.next()
	}
	plain := medium.NewHeap()
	defer func() { require.NoError(t, plain.Close()) }()
	want := writeRows(t, s, rows, writerOptions{Medium: plain, ChunkRows: 100})

	m := newRecordingMedium()
	defer func() { require.NoError(t, m.Close()) }()
	got := writeRows(t, s, rows, writerOptions{Medium: m, ChunkRows: 100})
	require.True(t, bytes.Equal(want, got), "a Discarder medium changed the segment")

	staged := 0
	for i, b := range *m.all {
		if b.Size() == 0 {
			continue
		}
		staged++
		what := fmt.Sprintf("stage %d of %d bytes", i, b.Size())
		require.True(t, b.discarded, "%s: not discarded", what)
		require.Equal(t, b.Size(), b.readAtEnd, "%s: discarded before it was copied whole", what)
	}
	require.Greater(t, staged, 10, "the schema stages parts")
}
