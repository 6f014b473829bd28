//go:build linux

package offheap

import (
	"bufio"
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/medium"
	"github.com/writeout/writeout/tmpfile"
)

// heapObjects returns the Go heap's live object bytes after a collection.
func heapObjects() int64 {
	runtime.GC()
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64())
}

// TestGoHeapGrowth1GiB (bar 2): staging 1 GiB through offheap grows the Go heap by less than
// 4 MiB.
func TestGoHeapGrowth1GiB(t *testing.T) {
	total := 1 << 30
	if raceEnabled {
		total = 256 << 20
		t.Logf("-race: staging %d MiB only", total>>20)
	}
	src := make([]byte, 64<<10)
	for i := range src {
		src[i] = byte(i * 31)
	}
	before := heapObjects()
	m, err := New(Options{})
	require.NoError(t, err)
	defer func() { require.NoError(t, m.Close()) }()
	// 16 Bytes of 64 MiB each, in 64 KiB writes, plus 1000 tiny Bytes.
	var bs []medium.Bytes
	for range 16 {
		b, err := m.NewBytes()
		require.NoError(t, err)
		for range (total / 16) / len(src) {
			_, err := b.Write(src)
			require.NoError(t, err)
		}
		bs = append(bs, b)
	}
	for i := range 1000 {
		b, err := m.NewBytes()
		require.NoError(t, err)
		_, err = b.WriteString(strconv.Itoa(i))
		require.NoError(t, err)
	}
	after := heapObjects()
	growth := after - before
	t.Logf("Go heap objects: %d before, %d after %d MiB staged: growth %d bytes (%.2f MiB)",
		before, after, total>>20, growth, float64(growth)/(1<<20))
	require.Less(t, growth, int64(4<<20))
	// The bytes are there.
	p := make([]byte, len(src))
	for _, b := range bs {
		require.Equal(t, int64(total/16), b.Size())
		_, err := b.ReadAt(p, b.Size()-int64(len(p)))
		require.NoError(t, err)
		require.Equal(t, src, p)
	}
}

// mapsState returns the number of lines of /proc/self/maps and the ranges they cover.
func mapsState(t *testing.T) (int, [][2]uintptr) {
	t.Helper()
	data, err := os.ReadFile("/proc/self/maps")
	require.NoError(t, err)
	var ranges [][2]uintptr
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	for _, line := range lines {
		lo, hi, ok := strings.Cut(strings.Fields(line)[0], "-")
		require.True(t, ok, line)
		a, err := strconv.ParseUint(lo, 16, 64)
		require.NoError(t, err)
		b, err := strconv.ParseUint(hi, 16, 64)
		require.NoError(t, err)
		ranges = append(ranges, [2]uintptr{uintptr(a), uintptr(b)})
	}
	return len(lines), ranges
}

// settled collects garbage and returns memory to the OS, so the runtime's own mappings are as
// they will stay, then reads /proc/self/maps.
func settled(t *testing.T) (int, [][2]uintptr) {
	runtime.GC()
	debug.FreeOSMemory()
	return mapsState(t)
}

// TestMapsReturn (bar 3): after Close and after trimming the pool to zero, /proc/self/maps has
// as many lines as before, and no chunk address is mapped any more.
func TestMapsReturn(t *testing.T) {
	prevLimit, err := setPoolLimit(16 * chunkSize)
	require.NoError(t, err)
	t.Cleanup(func() { _, err := setPoolLimit(prevLimit); require.NoError(t, err) })
	require.NoError(t, trimPool())

	// scenario makes media with children, tiny and large Bytes, spills some, closes them all
	// (the pool keeps up to 16 chunks, the rest is unmapped) and trims the pool. It returns the
	// start of every chunk it held and the line count while they were mapped.
	scenario := func() ([]uintptr, int) {
		spill := medium.NewHeap()
		defer func() { require.NoError(t, spill.Close()) }()
		var chunks []uintptr
		var ms []*Medium
		for i := range 3 {
			m, err := New(Options{MaxBytes: 12 * chunkSize, Spill: spill})
			require.NoError(t, err)
			child, err := m.NewChild()
			require.NoError(t, err)
			for _, x := range []medium.Medium{m, child} {
				for j := range 20 {
					b, err := x.NewBytes()
					require.NoError(t, err)
					n := 10 + j*1000
					if j%7 == 0 {
						n = (i + 1) * chunkSize
					}
					_, err = b.Write(make([]byte, n))
					require.NoError(t, err)
				}
			}
			ms = append(ms, m, child.(*Medium))
		}
		for _, m := range ms {
			for _, c := range m.chunks {
				chunks = append(chunks, uintptr(unsafe.Pointer(&c[0])))
			}
		}
		during, _ := mapsState(t)
		for _, m := range ms {
			require.NoError(t, m.Close())
		}
		require.Positive(t, pooledBytes())
		require.NoError(t, trimPool())
		require.Zero(t, pooledBytes())
		return chunks, during
	}

	scenario() // warm up: the runtime grows its own mappings to what the test needs
	for attempt := 1; ; attempt++ {
		before, _ := settled(t)
		chunks, during := scenario()
		after, ranges := settled(t)
		var stillMapped []uintptr
		for _, c := range chunks {
			for _, r := range ranges {
				if c >= r[0] && c < r[1] {
					stillMapped = append(stillMapped, c)
				}
			}
		}
		t.Logf("attempt %d: %d mapping lines before, %d with %d chunks mapped, %d after Close and trimPool; %d chunk addresses still mapped",
			attempt, before, during, len(chunks), after, len(stillMapped))
		if after == before && len(stillMapped) == 0 {
			return
		}
		if attempt == 5 {
			require.Equal(t, before, after, "mapping lines")
			require.Empty(t, stillMapped, "chunk addresses still mapped")
		}
	}
}

// statusKB returns a field of /proc/self/status in bytes.
func statusKB(t *testing.T, field string) int64 {
	f, err := os.Open("/proc/self/status")
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			v, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			require.NoError(t, err)
			return v << 10
		}
	}
	require.NoError(t, sc.Err())
	require.Failf(t, "no field", "%s not in /proc/self/status", field)
	return 0
}

// pattern is the content of the big tests: Bytes i holds, at offset o, block[(o+i*4099) % 1 MiB].
type pattern struct{ block []byte } // 2 MiB: the 1 MiB block twice, so every window is contiguous

func newPattern(seed uint64) pattern {
	r := rand.New(rand.NewPCG(seed, 1))
	block := make([]byte, 2<<20)
	for i := 0; i < 1<<20; i += 8 {
		v := r.Uint64()
		for j := range 8 {
			block[i+j] = byte(v >> (8 * j))
		}
	}
	copy(block[1<<20:], block[:1<<20])
	return pattern{block}
}

// at returns the n (<= 1 MiB) bytes of Bytes i at offset off.
func (p pattern) at(i int, off int64, n int) []byte {
	s := (off + int64(i)*4099) % (1 << 20)
	return p.block[s : s+int64(n)]
}

// patternChecker is an io.Writer that compares what it gets with the pattern of Bytes i.
type patternChecker struct {
	p   pattern
	i   int
	off int64
	bad error
}

func (c *patternChecker) Write(b []byte) (int, error) {
	n := len(b)
	for len(b) > 0 && c.bad == nil {
		k := min(len(b), 1<<20)
		if !bytes.Equal(c.p.at(c.i, c.off, k), b[:k]) {
			c.bad = fmt.Errorf("bytes %d: WriteTo differs in [%d, %d)", c.i, c.off, c.off+int64(k))
		}
		c.off += int64(k)
		b = b[k:]
	}
	return n, nil
}

// checkPattern reads Bytes i back with ReadAt and with WriteTo and compares every byte.
func checkPattern(t *testing.T, p pattern, i int, b medium.Bytes, buf []byte) {
	size := b.Size()
	for off := int64(0); off < size; off += int64(len(buf)) {
		n := int(min(int64(len(buf)), size-off))
		k, err := b.ReadAt(buf[:n], off)
		require.NoError(t, err)
		require.Equal(t, n, k)
		if !bytes.Equal(p.at(i, off, n), buf[:n]) {
			require.Failf(t, "ReadAt differs", "bytes %d: [%d, %d)", i, off, off+int64(n))
		}
	}
	c := &patternChecker{p: p, i: i}
	n, err := b.WriteTo(c)
	require.NoError(t, err)
	require.Equal(t, size, n)
	require.NoError(t, c.bad)
}

// TestBudgetSpill1GiB (bar 4): MaxBytes 64 MiB and a tmpfile spill medium stage 1 GiB across
// 100 Bytes, every byte reads back exactly, and the resident anonymous memory stays under
// 64 MiB + one chunk + a fixed overhead.
func TestBudgetSpill1GiB(t *testing.T) {
	total := int64(1 << 30)
	if raceEnabled {
		total = 128 << 20
		t.Logf("-race: staging %d MiB only, resident memory not checked (the race detector's shadow memory counts in it)", total>>20)
	}
	const (
		nbytes   = 100
		maxBytes = 64 << 20
		// The fixed overhead: the spill medium's write buffers (BufferBudget below), the test's
		// 2 MiB pattern and 256 KiB read buffer, tmpfile's copy buffers, and the Go runtime's
		// slack around them (heap garbage between collections, stacks, metadata).
		spillBuffers = 8 << 20
		overhead     = spillBuffers + 16<<20
	)
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	p := newPattern(seed)
	buf := make([]byte, 256<<10)
	spill, err := tmpfile.New(tmpfile.Options{Dir: t.TempDir(), BufferSize: 256 << 10, BufferBudget: spillBuffers})
	require.NoError(t, err)
	defer func() { require.NoError(t, spill.Close()) }()

	require.NoError(t, trimPool()) // pooled chunks are resident: start without any
	runtime.GC()
	debug.FreeOSMemory()
	base := statusKB(t, "RssAnon")
	peak := base
	sample := func() {
		peak = max(peak, statusKB(t, "RssAnon"))
	}

	m, err := New(Options{MaxBytes: maxBytes, Spill: spill})
	require.NoError(t, err)
	defer func() { require.NoError(t, m.Close()) }()
	bs := make([]medium.Bytes, nbytes)
	for i := range bs {
		bs[i], err = m.NewBytes()
		require.NoError(t, err)
	}
	// Round robin, in writes of 1 byte to 128 KiB, until 1 GiB is staged.
	r := rand.New(rand.NewPCG(seed, 2))
	var staged int64
	for w := 0; staged < total; w++ {
		i := w % nbytes
		n := int(min(int64(1+r.IntN(128<<10)), total-staged))
		_, err := bs[i].Write(p.at(i, bs[i].Size(), n))
		require.NoError(t, err)
		staged += int64(n)
		if w%64 == 0 {
			sample()
		}
	}
	sample()
	require.LessOrEqual(t, m.budgets[0].Used(), int64(maxBytes))
	spilled := 0
	for i, b := range bs {
		if b.(*offBytes).spill != nil {
			spilled++
		}
		checkPattern(t, p, i, b, buf)
		sample()
	}
	limit := base + maxBytes + chunkSize + overhead
	t.Logf("RssAnon: base %.1f MiB, peak %.1f MiB (+%.1f MiB), limit %.1f MiB; budget used %d MiB; %d of %d Bytes spilled; spill file %d MiB",
		mib(base), mib(peak), mib(peak-base), mib(limit), m.budgets[0].Used()>>20, spilled, nbytes, spill.FileBytes()>>20)
	if !raceEnabled {
		require.Less(t, peak, limit)
	}
	require.Positive(t, spilled)
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

// TestBudgetNoSpill64MiB (bar 4, second half): without a spill medium the write that passes
// the 64 MiB budget fails with ErrBudget, and every byte written before reads back intact.
func TestBudgetNoSpill64MiB(t *testing.T) {
	const nbytes = 100
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	p := newPattern(seed)
	m, err := New(Options{MaxBytes: 64 << 20})
	require.NoError(t, err)
	defer func() { require.NoError(t, m.Close()) }()
	bs := make([]medium.Bytes, nbytes)
	for i := range bs {
		bs[i], err = m.NewBytes()
		require.NoError(t, err)
	}
	r := rand.New(rand.NewPCG(seed, 2))
	var failed error
	var staged int64
	for w := 0; failed == nil; w++ {
		i := w % nbytes
		n := 1 + r.IntN(128<<10)
		before := bs[i].Size()
		k, err := bs[i].Write(p.at(i, before, n))
		require.Equal(t, before+int64(k), bs[i].Size())
		staged += int64(k)
		if err != nil {
			failed = err
			_, err = bs[i].Write([]byte("x"))
			require.ErrorIs(t, err, ErrBudget, "sticky")
		}
	}
	require.ErrorIs(t, failed, ErrBudget)
	t.Logf("%d bytes staged under a 64 MiB budget; then: %v", staged, failed)
	buf := make([]byte, 256<<10)
	for i, b := range bs {
		checkPattern(t, p, i, b, buf)
	}
}
