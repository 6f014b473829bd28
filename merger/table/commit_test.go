package table

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/columns/objstore"
	"github.com/writeout/writeout/internal/s3test"
)

// stores runs f on a table location of every kind of store: a MemMapFs, the OS, s3test.
func stores(t *testing.T, f func(t *testing.T, loc string, o Options, fsys afero.Fs)) {
	t.Run("store=memfs", func(t *testing.T) {
		fsys := afero.NewMemMapFs()
		f(t, "/t", Options{Fs: fsys}, fsys)
	})
	t.Run("store=os", func(t *testing.T) {
		f(t, filepath.Join(t.TempDir(), "t"), Options{}, afero.NewOsFs())
	})
	t.Run("store=s3", func(t *testing.T) {
		srv, err := s3test.Start("bkt")
		require.NoError(t, err)
		t.Cleanup(srv.Close)
		c, err := objstore.New(objstore.Config{Endpoint: srv.URL, Region: "us-east-1", AccessKey: "test", SecretKey: "testsecret"})
		require.NoError(t, err)
		fsys := afero.NewMemMapFs()
		f(t, "s3://bkt/t/", Options{S3: c, Fs: fsys}, fsys)
	})
}

// race runs the n functions at once (released together) and waits for them.
func race(n int, f func(i int)) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			f(i)
		})
	}
	close(start)
	wg.Wait()
}

// TestCreateExclusive: of writers racing to create one name, exactly one succeeds and its
// bytes are the file's; the others fail with fs.ErrExist.
func TestCreateExclusive(t *testing.T) {
	stores(t, func(t *testing.T, loc string, o Options, _ afero.Fs) {
		ctx := context.Background()
		tb, err := Create(ctx, loc, o)
		require.NoError(t, err)
		for round := range 5 {
			name := entryName(100 + round)
			errs := make([]error, 8)
			race(8, func(i int) { errs[i] = tb.st.createExclusive(ctx, name, fmt.Appendf(nil, "writer %d", i)) })
			winner := -1
			for i, err := range errs {
				if err == nil {
					require.Equal(t, -1, winner, "round %d: writers %d and %d both created %s", round, winner, i, name)
					winner = i
					continue
				}
				require.ErrorIs(t, err, fs.ErrExist)
			}
			require.NotEqual(t, -1, winner)
			got, err := tb.st.read(ctx, name)
			require.NoError(t, err)
			require.Equal(t, fmt.Sprintf("writer %d", winner), string(got))
		}
		names, err := tb.st.list(ctx, logDir)
		require.NoError(t, err)
		require.Len(t, names, 6, "temp files left: %v", names)
	})
}

// stage stores a new segment of n rows in the table, as a compaction's output would be,
// and returns its log entry and schema.
func stage(t *testing.T, tb *Table, seed uint64, n int) Segment {
	t.Helper()
	b := segBytes(t, seed, n, day, false)
	info, err := columns.ReadInfo(bytes.NewReader(b), int64(len(b)))
	require.NoError(t, err)
	s := Segment{Name: newSegmentName(info.Interval.Start), Interval: info.Interval.String(), Rows: int64(info.Rows),
		Bytes: info.Size, Footer: FooterChecksum(info)}
	require.NoError(t, tb.st.putSegment(context.Background(), s.Name, bytes.NewReader(b), s.Bytes))
	return s
}

// TestCommitRace races writers on the same base version:
//
//   - 6 appends: all succeed, each in a version of its own (2..7), none lost;
//   - two replaces of a shared segment B (A,B -> X and B,C -> Y) with an append: the append
//     and exactly one replace succeed; the other fails with ErrConflict naming B;
//   - two replaces of disjoint segments: both succeed, the loser of the race rebased.
//
// Every version's entry is exactly its predecessor with its change applied.
func TestCommitRace(t *testing.T) {
	stores(t, func(t *testing.T, loc string, o Options, fsys afero.Fs) {
		ctx := context.Background()
		tb, err := Create(ctx, loc, o)
		require.NoError(t, err)
		in := writeSegs(t, fsys, "/in", 20, 10, 20, 30, 40, 50, 60)
		vs := make([]int, len(in))
		errs := make([]error, len(in))
		race(len(in), func(i int) { vs[i], errs[i] = tb.Append(ctx, in[i:i+1]) })
		for _, err := range errs {
			require.NoError(t, err)
		}
		slices.Sort(vs)
		require.Equal(t, []int{2, 3, 4, 5, 6, 7}, vs)
		require.Equal(t, int64(210), liveRows(t, tb, 0))
		checkChain(t, tb)
		schema := testSchema(false)

		for round := range 3 {
			cur, err := tb.Snapshot(ctx, 0)
			require.NoError(t, err)
			a, b, c := cur.Segments[0].Name, cur.Segments[1].Name, cur.Segments[2].Name
			x, y, z := stage(t, tb, 40+uint64(round), 5), stage(t, tb, 50+uint64(round), 6), stage(t, tb, 60+uint64(round), 7)
			changes := []Change{
				{Kind: KindReplace, Added: []Segment{x}, Removed: []string{a, b}, Schema: &schema},
				{Kind: KindReplace, Added: []Segment{y}, Removed: []string{b, c}, Schema: &schema},
				{Kind: KindAppend, Added: []Segment{z}, Schema: &schema},
			}
			vs := make([]int, 3)
			errs := make([]error, 3)
			race(3, func(i int) { vs[i], errs[i] = tb.Commit(ctx, cur.Version, changes[i]) })
			require.NoError(t, errs[2], "the append")
			require.True(t, (errs[0] == nil) != (errs[1] == nil), "round %d: exactly one replace of B wins: %v, %v", round, errs[0], errs[1])
			lost := errs[0]
			if lost == nil {
				lost = errs[1]
			}
			require.ErrorIs(t, lost, ErrConflict)
			require.Contains(t, lost.Error(), b)
			now, err := tb.Snapshot(ctx, 0)
			require.NoError(t, err)
			require.Equal(t, cur.Version+2, now.Version)
			require.False(t, now.Live(b))
			liveRows(t, tb, 0)
		}

		cur, err := tb.Snapshot(ctx, 0)
		require.NoError(t, err)
		p, q := stage(t, tb, 70, 3), stage(t, tb, 71, 4)
		changes := []Change{
			{Kind: KindReplace, Added: []Segment{p}, Removed: []string{cur.Segments[0].Name}, Schema: &schema},
			{Kind: KindReplace, Added: []Segment{q}, Removed: []string{cur.Segments[1].Name}, Schema: &schema},
		}
		race(2, func(i int) { vs[i], errs[i] = tb.Commit(ctx, cur.Version, changes[i]) })
		require.NoError(t, errs[0])
		require.NoError(t, errs[1])
		require.ElementsMatch(t, []int{cur.Version + 1, cur.Version + 2}, vs[:2])
		now, err := tb.Snapshot(ctx, 0)
		require.NoError(t, err)
		require.Equal(t, cur.Rows()-cur.Segments[0].Rows-cur.Segments[1].Rows+7, now.Rows())
		checkChain(t, tb)

		// A removal of a segment that is not live at the base: ErrConflict at once.
		_, err = tb.Commit(ctx, now.Version, Change{Kind: KindReplace, Removed: []string{cur.Segments[0].Name}})
		require.ErrorIs(t, err, ErrConflict)
		// Another schema: ErrSchema.
		other := testSchema(true)
		_, err = tb.Commit(ctx, now.Version, Change{Kind: KindAppend, Added: []Segment{stage(t, tb, 80, 3)}, Schema: &other})
		require.ErrorIs(t, err, ErrSchema)
		_, err = tb.Commit(ctx, now.Version, Change{Kind: KindAppend})
		require.ErrorIs(t, err, ErrInvalid)
	})
}

// checkChain checks that every version is its predecessor with its operation applied.
func checkChain(t *testing.T, tb *Table) {
	t.Helper()
	log, err := tb.Log(context.Background())
	require.NoError(t, err)
	for i := 1; i < len(log); i++ {
		prev, e := log[i-1], log[i]
		var want []string
		for _, s := range prev.Segments {
			if !slices.Contains(e.Operation.Removed, s.Name) {
				want = append(want, s.Name)
			}
		}
		want = append(want, e.Operation.Added...)
		var got []string
		for _, s := range e.Segments {
			got = append(got, s.Name)
		}
		require.ElementsMatch(t, want, got, "version %d", e.Version)
	}
}

// lostAnswerStore creates an entry, then answers as a retried request does after its first
// answer was lost: fs.ErrExist, the entry being its own.
type lostAnswerStore struct {
	store
	lost int // creates to answer so
}

func (s *lostAnswerStore) createExclusive(ctx context.Context, name string, data []byte) error {
	if err := s.store.createExclusive(ctx, name, data); err != nil || s.lost == 0 {
		return err
	}
	s.lost--
	return fmt.Errorf("test: a retry found the entry: %w", fs.ErrExist)
}

// TestCommitLostAnswer: a commit told "exists" about the entry it wrote itself (a retried
// PutObject whose first answer was lost) reads it back, sees its own bytes, and returns
// that version: it does not commit its segments a second time on top.
func TestCommitLostAnswer(t *testing.T) {
	ctx := context.Background()
	fsys := afero.NewMemMapFs()
	tb, err := Create(ctx, "/t", Options{Fs: fsys})
	require.NoError(t, err)
	tb.st = &lostAnswerStore{store: tb.st, lost: 1}
	v, err := tb.Append(ctx, writeSegs(t, fsys, "/in", 1, 30))
	require.NoError(t, err)
	require.Equal(t, 2, v)
	newest, err := tb.Newest(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, newest)
	require.Equal(t, int64(30), liveRows(t, tb, 0))
}

// unreadableStore is lostAnswerStore whose read-back of the entry it created fails once.
type unreadableStore struct {
	lostAnswerStore
	failReads int
	created   string
}

func (s *unreadableStore) createExclusive(ctx context.Context, name string, data []byte) error {
	if s.lost > 0 {
		s.created = name
	}
	return s.lostAnswerStore.createExclusive(ctx, name, data)
}

func (s *unreadableStore) read(ctx context.Context, name string) ([]byte, error) {
	if name == s.created && s.failReads > 0 {
		s.failReads--
		return nil, errors.New("test: connection reset")
	}
	return s.store.read(ctx, name)
}

// TestCommitLostAnswerUnreadable: the same, but reading the entry back fails, so the commit
// rebases and finds its own segments live: it returns the version its earlier try committed,
// and the segments stay (Append must not remove segments a version lists).
func TestCommitLostAnswerUnreadable(t *testing.T) {
	ctx := context.Background()
	fsys := afero.NewMemMapFs()
	tb, err := Create(ctx, "/t", Options{Fs: fsys})
	require.NoError(t, err)
	tb.st = &unreadableStore{lostAnswerStore: lostAnswerStore{store: tb.st, lost: 1}, failReads: 1}
	v, err := tb.Append(ctx, writeSegs(t, fsys, "/in", 1, 30))
	require.NoError(t, err)
	require.Equal(t, 2, v)
	require.Equal(t, int64(30), liveRows(t, tb, 0))
}
