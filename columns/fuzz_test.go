package columns

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"
)

// FuzzOpen opens arbitrary bytes as a segment, through a mapping-like view and through ReadAt,
// reads everything through every API and verifies: nothing panics, every error wraps
// ErrCorrupt or ErrVersion, and a segment that verifies reads without an error. The seeds are
// real segments from testdata/seeds (regenerate them with go test -run TestGolden -update).
//
// Checksums would stop almost every mutation at the footer CRC, so for half of the inputs
// (chosen by a hash of the input) the fuzz function first recomputes the CRCs the mutated
// footer lists, letting the mutations reach the decoders behind them.
func FuzzOpen(f *testing.F) {
	paths, _ := filepath.Glob(filepath.Join("testdata", "seeds", "*.seg"))
	if len(paths) == 0 {
		f.Fatal("no seeds in testdata/seeds")
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if crc32.ChecksumIEEE(data)&1 == 0 {
			data = fixCRCs(data)
		}
		bad := func(err error) bool { return errors.Is(err, ErrCorrupt) || errors.Is(err, ErrVersion) }
		seg, err := newSegmentBytes(data)
		if err != nil {
			if !bad(err) {
				t.Fatalf("open: %v wraps neither ErrCorrupt nor ErrVersion", err)
			}
			return
		}
		verr := seg.Verify()
		if verr != nil && !bad(verr) {
			t.Fatalf("verify: %v wraps neither ErrCorrupt nor ErrVersion", verr)
		}
		rerr := readAll(seg)
		if verr == nil && rerr != nil {
			t.Fatalf("the segment verifies, yet reading it fails: %v", rerr)
		}
		if rerr != nil && !bad(rerr) {
			t.Fatalf("read: %v wraps neither ErrCorrupt nor ErrVersion", rerr)
		}
		if err := seg.Close(); err != nil {
			t.Fatal(err)
		}
		// The ReadAt path gives the same answers.
		seg2, err := NewSegment(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			t.Fatalf("opens from bytes but not through ReadAt: %v", err)
		}
		if verr2 := seg2.Verify(); (verr2 == nil) != (verr == nil) {
			t.Fatalf("Verify: %v through a view, %v through ReadAt", verr, verr2)
		}
	})
}

// fixCRCs returns a copy of data whose footer lists the right CRC for every part it points to
// within the file, and whose trailer holds the footer's right CRC, when the framing allows.
func fixCRCs(data []byte) []byte {
	b := append([]byte(nil), data...)
	size := len(b)
	if size < headerSize+trailerSize {
		return b
	}
	flen := int(binary.LittleEndian.Uint32(b[size-trailerSize+4:]))
	start := size - trailerSize - flen
	if flen < 25 || start < headerSize {
		return b
	}
	fb := b[start : size-trailerSize]
	rest := fb[25:]
	n, k := binary.Uvarint(rest)
	if k > 0 && n <= uint64(len(rest)-k) {
		rest = rest[k+int(n):]
		np, k := binary.Uvarint(rest)
		rest = rest[max(k, 0):]
		for i := uint64(0); k > 0 && i < np; i++ {
			_, k = binary.Uvarint(rest)
			if k <= 0 || len(rest)-k < 22 {
				break
			}
			e := rest[k:]
			off, l := binary.LittleEndian.Uint64(e[2:]), binary.LittleEndian.Uint64(e[10:])
			if off <= uint64(size) && l <= uint64(size)-off {
				binary.LittleEndian.PutUint32(e[18:], crc32.Checksum(b[off:off+l], castagnoli))
			}
			rest = e[22:]
		}
	}
	binary.LittleEndian.PutUint32(b[size-trailerSize:], crc32.Checksum(fb, castagnoli))
	return b
}
