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
	// DiscardPrefix: the prefixes given back, in order, what had been read by each, and
	// the reads that started before a prefix given back.
	prefixes, readAtPrefix []int64
	readsBelow             int
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
	if k := len(b.prefixes); k > 0 && off < b.prefixes[k-1] {
		b.readsBelow++
	}
	b.mu.Unlock()
	return n, err
}

func (b *recordedBytes) DiscardPrefix(n int64) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.prefixes = append(b.prefixes, n)
	b.readAtPrefix = append(b.readAtPrefix, b.read)
	return nil
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
	rows := genRows(s, 3000, 7)
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

// TestFinishGivesBackStagesAsItCopies: publication gives back each staged part's bytes every
// emitGiveBack bytes it has read of it (medium.PrefixDiscarder), never past what it has read,
// never reading below what it gave back, and the segment is the one a plain medium gives.
func TestFinishGivesBackStagesAsItCopies(t *testing.T) {
	defer func(n int64) { emitGiveBack = n }(emitGiveBack)
	emitGiveBack = 4 << 10
	s := allSchema()
	rows := genRows(s, 40000, 11)
	plain := medium.NewHeap()
	defer func() { require.NoError(t, plain.Close()) }()
	want := writeRows(t, s, rows, writerOptions{Medium: plain, ChunkRows: 1000, Compression: CompressionNone})

	m := newRecordingMedium()
	defer func() { require.NoError(t, m.Close()) }()
	got := writeRows(t, s, rows, writerOptions{Medium: m, ChunkRows: 1000, Compression: CompressionNone})
	require.True(t, bytes.Equal(want, got), "giving back stages changed the segment")

	large := 0
	for i, b := range *m.all {
		what := fmt.Sprintf("stage %d of %d bytes", i, b.Size())
		require.Zero(t, b.readsBelow, "%s: read below a prefix given back", what)
		for k, n := range b.prefixes {
			require.LessOrEqual(t, n, b.readAtPrefix[k], "%s: gave back %d bytes, %d read", what, n, b.readAtPrefix[k])
			require.Less(t, n, b.Size(), "%s: gave back the whole stage as a prefix", what)
			if k > 0 {
				require.GreaterOrEqual(t, n-b.prefixes[k-1], emitGiveBack, "%s: prefixes %d then %d", what, b.prefixes[k-1], n)
			}
		}
		if b.Size() > emitBuf+emitGiveBack {
			// Reads take up to emitBuf bytes: the last prefix is at most a read and a step
			// from the end.
			large++
			require.NotEmpty(t, b.prefixes, "%s: nothing given back before the end", what)
			require.GreaterOrEqual(t, b.prefixes[len(b.prefixes)-1], b.Size()-emitBuf-emitGiveBack, "%s: prefixes given back %v", what, b.prefixes)
		}
		if b.Size() > 0 {
			require.True(t, b.discarded, "%s: not discarded", what)
		}
	}
	require.GreaterOrEqual(t, large, 5, "stages of several reads")
}
