package ingest

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Rows are parsed ahead on a goroutine of their own, but what Run reports comes in the order
// of the input, on Run's goroutine: a row's warning before the row, skips between the rows
// around them, progress after each row, across batch boundaries and inputs. (Run with -race:
// a callback called from the reading goroutine would race with the others on events.)
func TestReadAheadOrder(t *testing.T) {
	sp := testSpec(t, func(sp *Spec) { sp.timestamp.Format = "seconds" })
	good := func(i int) string { return fmt.Sprintf("%d,A,a,b,%d,1,u%d\n", 1714564800+i, i, i%7) }
	input := func(n, warnAt, badAt int) (string, []string) {
		var b strings.Builder
		b.WriteString(csvHeader)
		var want []string
		for i := range n {
			line := i + 2
			switch i {
			case warnAt:
				b.WriteString("1714564800123,A,a,b,1,1,u\n") // millis read as seconds: a warning, the row kept
				want = append(want, fmt.Sprintf("warn %d", line))
			case badAt:
				b.WriteString("1714564800,A,a,b,x,1,u\n") // not a number: skipped
				want = append(want, fmt.Sprintf("skip %d", line))
				continue
			default:
				b.WriteString(good(i))
			}
			want = append(want, "row")
		}
		return b.String(), want
	}
	a, wantA := input(3*aheadRows+17, aheadRows+3, aheadRows+4)
	b, wantB := input(aheadRows-1, 0, aheadRows-2)
	var events []string
	added := int64(0)
	_, err := Run(context.Background(), sp, []Input{csvInput("a.csv", a), csvInput("b.csv", b)}, Options{
		Out: filepath.Join(t.TempDir(), "o.seg"), Durability: noSync, MaxParseErrors: 2, progressRows: 1,
		OnWarning: func(w Warning) { events = append(events, fmt.Sprintf("warn %d", w.line)) },
		OnSkip:    func(e *RowError) { events = append(events, fmt.Sprintf("skip %d", e.Line)) },
		progress: func(p progressReport) {
			if p.InputRows > added {
				added = p.InputRows
				events = append(events, "row")
			}
		},
	})
	require.NoError(t, err)
	require.Equal(t, append(wantA, wantB...), events)
}

// closeCheck is an input that records its Close and fails a Read after it.
type closeCheck struct {
	r      io.Reader
	closed atomic.Bool
	late   atomic.Bool // a Read came after Close
}

func (c *closeCheck) Read(p []byte) (int, error) {
	if c.closed.Load() {
		c.late.Store(true)
		return 0, io.ErrClosedPipe
	}
	return c.r.Read(p)
}

func (c *closeCheck) Close() error { c.closed.Store(true); return nil }

// When Run stops early (too many bad rows, a cancelled context), the reading goroutine has
// ended before Run returns, and before the input is closed: nothing reads a closed input and
// no goroutine is left behind.
func TestReadAheadStops(t *testing.T) {
	sp := testSpec(t, nil)
	var body strings.Builder
	body.WriteString(csvHeader)
	for i := range 50 * aheadRows {
		if i == 5 {
			body.WriteString("1714564800123,A,a,b,x,1,u\n")
			continue
		}
		fmt.Fprintf(&body, "%d,A,a,b,%d,1,u\n", 1714564800123+int64(i), i)
	}
	// Slow reads, so that the reading goroutine is busy when Run stops.
	slow := func(in *closeCheck) Input {
		return Input{Name: "s.csv", open: func() (io.ReadCloser, error) { return in, nil }}
	}
	before := runtime.NumGoroutine()

	in := &closeCheck{r: &slowReader{r: strings.NewReader(body.String())}}
	_, err := Run(context.Background(), sp, []Input{slow(in)}, Options{Out: filepath.Join(t.TempDir(), "o.seg"), Durability: noSync})
	var re *RowError
	require.ErrorAs(t, err, &re)
	require.Equal(t, 7, re.Line)
	require.True(t, in.closed.Load())
	time.Sleep(50 * time.Millisecond) // a reading goroutine left running would read again by now
	require.False(t, in.late.Load(), "the input was read after it was closed")

	ctx, cancel := context.WithCancel(context.Background())
	in = &closeCheck{r: &slowReader{r: strings.NewReader(strings.Replace(body.String(), ",x,", ",1,", 1))}}
	_, err = Run(ctx, sp, []Input{slow(in)}, Options{Out: filepath.Join(t.TempDir(), "o.seg"), Durability: noSync,
		progressRows: 100, progress: func(p progressReport) {
			if p.InputRows >= 1000 {
				cancel()
			}
		}})
	require.ErrorIs(t, err, context.Canceled)
	require.True(t, in.closed.Load())
	time.Sleep(50 * time.Millisecond)
	require.False(t, in.late.Load(), "the input was read after it was closed")
	for deadline := time.Now().Add(5 * time.Second); runtime.NumGoroutine() > before && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if runtime.NumGoroutine() > before {
		buf := make([]byte, 1<<20)
		t.Fatalf("goroutines: %d before, %d after:\n%s", before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
	}
}

// slowReader hands out at most 64 bytes a Read, sleeping a little every 16 Reads.
type slowReader struct {
	r io.Reader
	n int
}

func (s *slowReader) Read(p []byte) (int, error) {
	if s.n++; s.n%16 == 0 {
		time.Sleep(100 * time.Microsecond)
	}
	return s.r.Read(p[:min(len(p), 64)])
}

// chunkReader hands out reads of 1 to 400 bytes, so that the CSV reader's blocks (what its
// buffer holds when it takes one) are many and short: a batch of rows spans many blocks, and
// a block several batches.
type chunkReader struct {
	r   io.Reader
	rng *rand.Rand
}

func (c *chunkReader) Read(p []byte) (int, error) {
	return c.r.Read(p[:min(len(p), 1+c.rng.IntN(400))])
}

// With block reuse, the CSV reader recycles the memory its rows' strings point into once the
// batches holding them come back: every row the user sees holds its own values, while every
// batch is full and waiting (the most rows in flight), and the blocks are recycled, not
// allocated anew. (Releasing the block of a batch's last row too early, which rows of the next
// batch share, fails it; so does releasing blocks when a batch is taken rather than
// returned.)
func TestReadAheadBlockReuse(t *testing.T) {
	sp, err := ParseSpec([]byte(`{"timestamp": {"field": "ts"}, "dimensions": [{"name": "a"}, {"name": "b"}],
	  "metrics": [{"name": "n", "aggregator": "longSum"}]}`))
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(7, uint64(time.Now().UnixNano())))
	var body strings.Builder
	body.WriteString("ts,a,b,n\n")
	const rows = 100 * aheadRows
	for i := range rows {
		fmt.Fprintf(&body, "%d,a%d-%s,b%d,%d\n", 1714564800000+int64(i), i, strings.Repeat("x", rng.IntN(40)), i*7, i)
	}
	defer func(n int) { chunkBytes = n }(chunkBytes)
	chunkBytes = 512 // many chunks in flight: a chunk recycled too early is overwritten while its rows are
	rr, err := openCSV(sp, "r.csv", &chunkReader{r: strings.NewReader(body.String()), rng: rng})
	require.NoError(t, err)
	ahead := newReadAhead(sp)
	ahead.start(context.Background(), rr, true)
	defer ahead.close()
	seen := 0
	for {
		// Let the reader fill every batch it can before this one is looked at.
		for deadline := time.Now().Add(20 * time.Millisecond); len(ahead.full) < aheadBatches-1 && time.Now().Before(deadline); {
			time.Sleep(100 * time.Microsecond)
		}
		b := ahead.next()
		for k := range b.n {
			require.NoError(t, b.items[k].err)
			row := b.rows[k]
			require.Equal(t, fmt.Sprintf("b%d", seen*7), row.Dims[1][0], "row %d", seen)
			require.True(t, strings.HasPrefix(row.Dims[0][0], fmt.Sprintf("a%d-", seen)), "row %d: %q", seen, row.Dims[0][0])
			require.Equal(t, int64(seen), row.Metrics[0].Long)
			seen++
		}
		if b.end != nil {
			require.ErrorIs(t, b.end, io.EOF)
			break
		}
		ahead.recycle(b)
	}
	require.Equal(t, rows, seen)
	blocks := int(rr.sc.ring.seq)
	require.Greater(t, blocks, rows/40, "blocks taken")
	// In flight: at most aheadBatches batches of aheadRows rows of at most 80 bytes, in
	// 512-byte chunks, and the chunk being filled; far fewer than the blocks taken.
	require.Greater(t, body.Len(), 800*chunkBytes, "chunks carved")
	t.Logf("%d chunks made, %d blocks", rr.sc.ring.made, blocks)
	inFlight := aheadBatches*aheadRows*80/chunkBytes + 64
	require.Less(t, rr.sc.ring.made, inFlight, "chunks allocated for %d blocks (%d bytes)", blocks, body.Len())
	require.Less(t, rr.sc.ring.made, blocks/4, "chunks allocated for %d blocks (%d bytes)", blocks, body.Len())
}
