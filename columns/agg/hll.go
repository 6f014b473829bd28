package agg

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/bits"

	"github.com/axiomhq/hyperloglog"
)

// hllKind is the HyperLogLog sketch of hyperUnique (github.com/axiomhq/hyperloglog): an input
// value is hashed as its text; the estimate is the distinct count. It takes no parameters.
//
// The library keeps recent insertions in an unsorted side set until it compacts, so its bytes
// depend on the order of inserts until Compact (which merges the side set into the sorted
// list, or the dense registers); a row's sketch as it came is written as it is represented,
// and so were the segments written before this seam.
type hllKind struct{}

func init() {
	registerSketch(Agg{Name: "hyperUnique", Type: SketchType, Kind: Union, sketch: hllKind{}})
}

func (hllKind) Sketches(params map[string]json.RawMessage) (Sketches, error) {
	if k := firstKey(params); k != "" {
		return nil, fmt.Errorf("hyperUnique takes no parameter %q", k)
	}
	return hllSketches{}, nil
}

type hllSketches struct{}

func (hllSketches) New() Sketch { return &hll{*hyperloglog.New()} }

func (hllSketches) Decode(b []byte) (Sketch, error) {
	s := &hll{}
	if err := s.unmarshal(b); err != nil {
		return nil, err
	}
	return s, nil
}

// Check checks the forms the library writes, sparse and version 2 dense, in place without
// allocating (decoding allocates about seven times a sketch, which a merge copying millions of
// sketches cannot afford), by the rules of the library's decoder (hyperloglog v0.3.0,
// UnmarshalBinary); whatever that check does not accept (version 1 dense, or bytes it finds
// bad) goes to the decoder, whose answer is the one returned. The check only ever says yes
// where the decoder would (TestCheckSketch compares them on damaged sketches of every form).
func (hllSketches) Check(b []byte) error {
	if sketchDecodes(b) {
		return nil
	}
	var s hll
	return s.unmarshal(b)
}

// hll is one HyperLogLog sketch.
type hll struct{ sk hyperloglog.Sketch }

func (s *hll) unmarshal(b []byte) error {
	return decodeSafely("hyperloglog", func() error {
		if err := s.sk.UnmarshalBinary(b); err != nil {
			return fmt.Errorf("%w: %w", errSketch, err)
		}
		return nil
	})
}

func (s *hll) Insert(v []byte) error { s.sk.Insert(v); return nil }

func (s *hll) Merge(o Sketch) error {
	h, ok := o.(*hll)
	if !ok {
		return fmt.Errorf("agg: merge a %T into a HyperLogLog sketch", o)
	}
	if err := s.sk.Merge(&h.sk); err != nil {
		return fmt.Errorf("agg: merge sketches: %w", err)
	}
	return nil
}

// Compact compacts the side set into the sorted list (converting to dense past m).
func (s *hll) Compact() { s.sk.Estimate() }

func (s *hll) AppendBinary(dst []byte) ([]byte, error) {
	return s.sk.AppendBinary(dst)
}

func (s *hll) Estimate() float64 { return float64(s.sk.Estimate()) }
func (s *hll) Clone() Sketch     { return &hll{*s.sk.Clone()} }
func (s *hll) Reset()            { s.sk.Reset() }

// The library's constants: the sparse precision, and its register count.
const (
	sketchPP = 25
	sketchMP = uint32(1) << sketchPP
)

// sketchDecodes reports whether b is a sparse or version 2 dense sketch that the library
// decodes; false means "ask the decoder".
func sketchDecodes(b []byte) bool {
	if len(b) < 8 {
		return false
	}
	v, p, bias, sparse := b[0], b[1], b[2], b[3]
	if v != 1 && v != 2 || sparse > 1 || v == 2 && bias != 0 || p < 4 || p > 18 {
		return false
	}
	m := uint32(1) << p
	maxRho := 64 - p + 1
	if sparse == 0 {
		if v != 2 || binary.BigEndian.Uint32(b[4:8]) != m || uint64(len(b)-8) != uint64(m) {
			return false
		}
		for _, r := range b[8:] {
			if r > maxRho {
				return false
			}
		}
		return true
	}
	tssz := binary.BigEndian.Uint32(b[4:8])
	need := 8 + 4*uint64(tssz)
	if need > uint64(len(b)) || tssz > m {
		return false
	}
	for i := 8; i < int(need); i += 4 {
		if !sparseKeyOK(binary.BigEndian.Uint32(b[i:]), p, maxRho) {
			return false
		}
	}
	// The compressed list: count u32 | last u32 | size u32 | size bytes of varint deltas.
	l := b[need:]
	if len(l) < 12 {
		return false
	}
	count, last, sz := binary.BigEndian.Uint32(l), binary.BigEndian.Uint32(l[4:]), binary.BigEndian.Uint32(l[8:])
	l = l[12:]
	if uint64(len(l)) != uint64(sz) || count >= sketchMP {
		return false
	}
	if count == 0 {
		return sz == 0 && last == 0
	}
	if sz < count || sz > 5*count {
		return false
	}
	var entries, running uint32
	for i := 0; i < len(l); {
		x, next, ok := sketchVarint(l, i)
		if !ok {
			return false
		}
		i = next
		k := running + x
		if entries > 0 && k <= running {
			return false
		}
		running = k
		if !sparseKeyOK(running, p, maxRho) {
			return false
		}
		entries++
	}
	return entries == count && running == last
}

// sparseKeyOK reports whether the rho a sparse key decodes to is at most maxRho.
func sparseKeyOK(k uint32, p, maxRho uint8) bool {
	var r uint8
	if k&1 == 1 {
		r = uint8(k>>1&0x3f) + sketchPP - p
	} else {
		r = uint8(bits.LeadingZeros64(uint64(k<<(32-sketchPP+p-1))) - 31)
	}
	return r <= maxRho
}

// sketchVarint decodes the varint at b[i:] as the library's compressed list does, rejecting
// what it rejects: a truncated varint, one of more than 5 bytes or past 32 bits, and a
// multi-byte one ending in a zero byte.
func sketchVarint(b []byte, i int) (x uint32, next int, ok bool) {
	j := i
	for ; j < len(b) && b[j]&0x80 != 0; j++ {
		x |= uint32(b[j]&0x7f) << (uint(j-i) * 7)
	}
	if j >= len(b) {
		return 0, 0, false
	}
	x |= uint32(b[j]) << (uint(j-i) * 7)
	n := j - i + 1
	if n > 5 || n == 5 && b[j] > 0x0f || n > 1 && b[j] == 0 {
		return 0, 0, false
	}
	return x, j + 1, true
}
