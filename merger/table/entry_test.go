package table

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/columns"
)

func sampleEntry() *Entry {
	s := testSchema(false)
	return &Entry{Format: Format1, Version: 3, Time: time.Date(2026, 12, 6, 15, 4, 5, 123e6, time.UTC),
		Operation: Operation{Kind: KindReplace, Added: []string{"segments/20240501T000000Z-0123456789abcdef.seg"},
			Removed: []string{"segments/a.seg", "segments/b.seg"}},
		Schema: &s,
		Segments: []Segment{
			{Name: "segments/20240501T000000Z-0123456789abcdef.seg", Interval: "2024-05-01T00:00:00.000Z/2024-05-02T00:00:00.000Z",
				Rows: 75000, Bytes: 1843210, Footer: "5d2e8a1c"},
			{Name: "segments/c.seg", Interval: "2024-05-02T00:00:00.000Z/2024-05-02T00:00:00.001Z", Rows: 1, Bytes: 300, Footer: "00000000"},
		}}
}

// TestEntryRoundTrip encodes an entry, decodes it, and encodes it again to the same bytes.
func TestEntryRoundTrip(t *testing.T) {
	e := sampleEntry()
	b, err := AppendEntry([]byte("x"), e)
	require.NoError(t, err)
	require.Equal(t, byte('x'), b[0])
	b = b[1:]
	require.True(t, bytes.HasPrefix(b, []byte(`{"entry":{"format":1,"version":3,"time":"2026-12-06T15:04:05.123Z","operation":{"kind":"replace"`)), "%s", b)
	require.True(t, bytes.HasSuffix(b, []byte("\"}\n")))
	require.Equal(t, 1, bytes.Count(b, []byte("\n")))
	got, err := DecodeEntry(b)
	require.NoError(t, err)
	require.True(t, e.Time.Equal(got.Time))
	require.Equal(t, e.Segments, got.Segments)
	require.Equal(t, e.Operation, got.Operation)
	require.True(t, e.Schema.Equal(*got.Schema))
	again, err := AppendEntry(nil, got)
	require.NoError(t, err)
	require.Equal(t, string(b), string(again))
	require.Equal(t, int64(75001), got.Rows())
	require.Equal(t, int64(1843510), got.Bytes())

	// Version 1: no schema, no segments.
	c := &Entry{Format: Format1, Version: 1, Time: e.Time, Operation: Operation{Kind: KindCreate, Added: []string{}, Removed: []string{}}, Segments: []Segment{}}
	b, err = AppendEntry(nil, c)
	require.NoError(t, err)
	got, err = DecodeEntry(b)
	require.NoError(t, err)
	require.Nil(t, got.Schema)
	require.Empty(t, got.Segments)
}

// TestEntryDamage flips every bit of an encoded entry in turn, and cuts it at every length:
// each is an error wrapping ErrCorrupt (or ErrVersion), never an entry. The exceptions are
// flips that keep the bytes' meaning: outside the checksummed entry, in JSON whitespace, or
// the case of the checksum's hex digits.
func TestEntryDamage(t *testing.T) {
	b, err := AppendEntry(nil, sampleEntry())
	require.NoError(t, err)
	entryStart := len(`{"entry":`)
	crcAt := bytes.LastIndex(b, []byte(`"crc32c":"`)) + len(`"crc32c":"`)
	accepted := 0
	for i := range b {
		for bit := range 8 {
			d := bytes.Clone(b)
			d[i] ^= 1 << bit
			e, err := DecodeEntry(d)
			if err == nil {
				// Only a flip in the wrapper that keeps its meaning may pass: the entry's
				// bytes are checksummed.
				require.True(t, i < entryStart || i >= crcAt-len(`,"crc32c":"`), "flip at %d bit %d accepted inside the entry", i, bit)
				accepted++
				require.Equal(t, 3, e.Version)
				continue
			}
			require.True(t, errors.Is(err, ErrCorrupt) || errors.Is(err, ErrVersion), "flip at %d: %v", i, err)
			require.ErrorIs(t, err, columns.ErrCorrupt)
		}
	}
	require.Less(t, accepted, 40, "flips accepted: only upper/lower case of hex digits and trailing space")
	for n := range len(b) - 1 { // without its last byte, the newline, the entry is whole
		_, err := DecodeEntry(b[:n])
		require.ErrorIs(t, err, ErrCorrupt, "cut at %d", n)
	}
}

// TestEntryValidate checks the consistency rules on entries whose checksum is right.
func TestEntryValidate(t *testing.T) {
	f := func(what string, change func(e *Entry), wantErr error) {
		t.Helper()
		e := sampleEntry()
		change(e)
		_, err := AppendEntry(nil, e)
		require.ErrorIs(t, err, wantErr, what)
		// The same entry written by someone else, checksum right: the decoder refuses it too.
		b, merr := marshalUnchecked(e)
		require.NoError(t, merr)
		_, err = DecodeEntry(b)
		require.ErrorIs(t, err, wantErr, what)
	}
	f("version 0", func(e *Entry) { e.Version = 0 }, ErrCorrupt)
	f("unknown kind", func(e *Entry) { e.Operation.Kind = "merge" }, ErrCorrupt)
	f("create as version 3", func(e *Entry) { e.Operation.Kind = KindCreate }, ErrCorrupt)
	f("no time", func(e *Entry) { e.Time = time.Time{} }, ErrCorrupt)
	f("no schema", func(e *Entry) { e.Schema = nil }, ErrCorrupt)
	f("name outside segments/", func(e *Entry) { e.Segments[1].Name = "../x.seg" }, ErrCorrupt)
	f("name with ..", func(e *Entry) { e.Segments[1].Name = "segments/../../x.seg" }, ErrCorrupt)
	f("listed twice", func(e *Entry) { e.Segments[1].Name = e.Segments[0].Name }, ErrCorrupt)
	f("bad interval", func(e *Entry) { e.Segments[1].Interval = "2024-05-02/2024-05-03" }, ErrCorrupt)
	f("backwards interval", func(e *Entry) {
		e.Segments[1].Interval = "2024-05-02T00:00:00.000Z/2024-05-01T00:00:00.000Z"
	}, ErrCorrupt)
	f("negative rows", func(e *Entry) { e.Segments[1].Rows = -1 }, ErrCorrupt)
	f("bad footer", func(e *Entry) { e.Segments[1].Footer = "xyz" }, ErrCorrupt)
	f("added not live", func(e *Entry) { e.Operation.Added = []string{"segments/zz.seg"} }, ErrCorrupt)
	f("removed live", func(e *Entry) { e.Operation.Removed = []string{"segments/c.seg"} }, ErrCorrupt)
	f("format 3", func(e *Entry) { e.Format = 3 }, ErrVersion)
	f("format 0", func(e *Entry) { e.Format = 0 }, ErrVersion)
}

// marshalUnchecked encodes e with a right checksum, without AppendEntry's checks.
func marshalUnchecked(e *Entry) ([]byte, error) {
	saved := *e
	saved.Format = Format
	b, err := json.Marshal(&saved)
	if err != nil {
		return nil, err
	}
	if e.Format != Format {
		b = bytes.Replace(b, fmt.Appendf(nil, `"format":%d`, Format), fmt.Appendf(nil, `"format":%d`, e.Format), 1)
	}
	return appendWrapped(nil, b), nil
}

// FuzzDecodeEntry decodes arbitrary bytes: never a panic, and whatever decodes re-encodes to
// an entry that decodes to the same.
func FuzzDecodeEntry(f *testing.F) {
	b, err := AppendEntry(nil, sampleEntry())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte(`{"entry":{},"crc32c":"00000000"}`))
	f.Add([]byte(strings.Replace(string(b), "75000", "75001", 1)))
	own := sampleEntry()
	own.Format = Format2
	own.Segments[1] = own.Segments[1].withClass(*own.Schema, class{rollup: true, gran: columns.GranularityDay})
	if b, err = AppendEntry(nil, own); err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := DecodeEntry(data)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrVersion) {
				t.Fatalf("error wraps neither ErrCorrupt nor ErrVersion: %v", err)
			}
			return
		}
		again, err := AppendEntry(nil, e)
		if err != nil {
			t.Fatalf("a decoded entry does not encode: %v", err)
		}
		e2, err := DecodeEntry(again)
		if err != nil {
			t.Fatalf("a re-encoded entry does not decode: %v", err)
		}
		if e2.Version != e.Version || len(e2.Segments) != len(e.Segments) {
			t.Fatalf("re-encoded entry differs")
		}
	})
}

// TestEntryInterval: the interval spans every live segment's; none without segments.
func TestEntryInterval(t *testing.T) {
	e := sampleEntry()
	iv, ok := e.Interval()
	require.True(t, ok)
	require.Equal(t, "2024-05-01T00:00:00.000Z/2024-05-02T00:00:00.001Z", iv.String())
	e.Segments = e.Segments[1:]
	iv, ok = e.Interval()
	require.True(t, ok)
	require.Equal(t, "2024-05-02T00:00:00.000Z/2024-05-02T00:00:00.001Z", iv.String())
	e.Segments = nil
	_, ok = e.Interval()
	require.False(t, ok)
}
