package columns

import (
	"fmt"
	"strings"

	"github.com/writeout/writeout/internal/segfmt"
)

// ChunkCodecs counts the chunks of a chunked part by the codec each is stored with. A writer
// keeps a chunk compressed only when that makes it smaller, so a part written with zstd or s2
// may hold some chunks stored as they are (None).
type ChunkCodecs struct {
	None int `json:"none"`
	S2   int `json:"s2"`
	Zstd int `json:"zstd"`
}

// Chunks returns the number of chunks counted.
func (c ChunkCodecs) Chunks() int { return c.None + c.S2 + c.Zstd }

// String names the codecs used, most chunks first, with their counts when there are several:
// "zstd", "s2", "none", "zstd:12+none:3"; "-" for no chunk.
func (c ChunkCodecs) String() string {
	type named struct {
		name string
		n    int
	}
	all := []named{{"zstd", c.Zstd}, {"s2", c.S2}, {"none", c.None}}
	var used []named
	for _, x := range all {
		if x.n > 0 {
			used = append(used, x)
		}
	}
	switch len(used) {
	case 0:
		return "-"
	case 1:
		return used[0].name
	}
	for i := 1; i < len(used); i++ { // at most three: insertion sort by count, stable
		for j := i; j > 0 && used[j].n > used[j-1].n; j-- {
			used[j], used[j-1] = used[j-1], used[j]
		}
	}
	parts := make([]string, len(used))
	for i, x := range used {
		parts[i] = fmt.Sprintf("%s:%d", x.name, x.n)
	}
	return strings.Join(parts, "+")
}

// PartCodecs returns the codecs of the chunks of part i of Info().Parts, and true, when the
// part is chunked (values, ids, times, tails); for any other part (dictionary, bitmaps, nulls)
// it returns false and no error. Only the first byte of each chunk is read, after the part's
// checksum is checked as every read checks it.
func (s *Segment) PartCodecs(i int) (ChunkCodecs, bool, error) {
	if s.closed.Load() {
		return ChunkCodecs{}, false, fmt.Errorf("columns: part codecs: %w", errClosed)
	}
	if i < 0 || i >= len(s.f.parts) {
		return ChunkCodecs{}, false, fmt.Errorf("columns: part %d of %d: %w", i, len(s.f.parts), ErrInvalid)
	}
	p := &s.f.parts[i]
	ix := s.chunkIndexOf(p)
	if ix == nil {
		return ChunkCodecs{}, false, nil
	}
	if err := s.checks[i].check(); err != nil {
		return ChunkCodecs{}, true, err
	}
	var c ChunkCodecs
	for k := range ix.chunks() {
		b, err := s.src.view(p.Offset+ix.off(k), 1, nil)
		if err != nil {
			return c, true, s.fileError(p, fmt.Errorf("chunk %d: %w", k, err))
		}
		switch b[0] {
		case codecNone:
			c.None++
		case codecS2:
			c.S2++
		case codecZstd:
			c.Zstd++
		default:
			return c, true, s.fileError(p, corruptf("chunk %d: unknown codec %d", k, b[0]))
		}
	}
	return c, true, nil
}

// chunkIndexOf returns the chunk index Open parsed for p, or nil when p is not chunked.
func (s *Segment) chunkIndexOf(p *segfmt.PartInfo) *chunkIndex {
	var found *chunkIndex
	look := func(ix *chunkIndex) {
		// By offset: a version 4 ids part's index describes the part less its rank table.
		if ix != nil && found == nil && ix.part.Offset == p.Offset && ix.part.Index == p.Index && ix.part.Kind == p.Kind {
			found = ix
		}
	}
	look(s.time.ix)
	for i := range s.dims {
		if s.dims[i] != nil {
			look(s.dims[i].ix)
		}
		if s.raws[i] != nil {
			look(s.raws[i].ix)
		}
	}
	times := func(t *Column[int64]) {
		if t != nil {
			look(t.ix)
		}
	}
	for i := range s.longs {
		if l := s.longs[i]; l != nil {
			look(l.ix)
			times(l.times)
		}
		if d := s.doubles[i]; d != nil {
			look(d.ix)
			times(d.times)
			if d.tails != nil {
				look(d.tails.ix)
			}
		}
		if sk := s.sketches[i]; sk != nil {
			look(sk.ix)
		}
	}
	return found
}
