package columns

import (
	"encoding/binary"
	"fmt"
)

// Raw (decompressed) layouts of the chunks of ids and blobs:
//
//	ids        n uvarint | w u8 | n ids packed at w bits
//	multi-ids  n uvarint | total uvarint | cw u8 | n (count-1) packed at cw bits |
//	           w u8 | total ids packed at w bits
//	blobs      an int64 chunk encoding of the n lengths | the n values back to back
//
// w is the width the dictionary's cardinality needs, bitWidth(cardinality-1). A multi-value
// row holds at least one id; a null row holds the null id alone.

// idWidth returns the bit width of ids below cardinality.
func idWidth(cardinality int) int {
	if cardinality <= 1 {
		return 0
	}
	return bitWidth(uint64(cardinality - 1))
}

// idsSize returns the bytes appendIDs appends.
func idsSize(n, width int) int { return uvarintLen(uint64(n)) + 1 + packedSize(n, width) }

// appendIDs appends one chunk of single-value ids packed at width bits.
func appendIDs(dst []byte, ids []uint32, width int) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(ids)))
	dst = append(dst, byte(width))
	return appendPacked(dst, ids, width)
}

// decodeIDs appends the ids of the chunk made by appendIDs at the front of src to dst and
// returns the rest of src. It checks that the chunk holds exactly n ids (n < 0: any number up to
// the chunk limit), each below cardinality. Bad bytes give an error wrapping ErrCorrupt.
func decodeIDs(dst []uint32, src []byte, n, cardinality int) ([]uint32, []byte, error) {
	m, k := binary.Uvarint(src)
	if k <= 0 || m > maxChunkValues || (n >= 0 && m != uint64(n)) {
		return dst, src, corruptf("ids chunk: %d ids, want %d", m, n)
	}
	rest := src[k:]
	if len(rest) < 1 {
		return dst, src, corruptf("ids chunk: missing width")
	}
	w := int(rest[0])
	if w != idWidth(cardinality) {
		return dst, src, corruptf("ids chunk: width %d, cardinality %d needs %d", w, cardinality, idWidth(cardinality))
	}
	start := len(dst)
	dst, rest, err := decodePacked(dst, rest[1:], int(m), w)
	if err != nil {
		return dst, src, err
	}
	if err := checkIDs(dst[start:], cardinality); err != nil {
		return dst, src, err
	}
	return dst, rest, nil
}

// Ids chunks of a version 4 part (segfmt.EncIDChunksV4) hold each row's id as its frequency rank
// (rank 0 the id most rows hold; the part's rank table maps ranks back to ids):
//
//	ranked ids  n uvarint | w u8 | form u8 | the n ranks: form 0 packed at w bits,
//	            form 1 in the planes form of width w (planes.go)
//
// A chunk of a version 5 part (segfmt.EncIDChunksV5) may also be in form 2, the ids
// themselves as differences, for ids that ascend within runs of rows (a dimension sorted
// within each time bucket):
//
//	form 2: d_0 ... d_{n-1} in the planes form of width w, where
//	d_i = (id_i - id_{i-1}) mod c, id_{-1} = 0, c the cardinality
const (
	rankedPacked byte = 0
	rankedPlanes byte = 1
	idDeltas     byte = 2
)

// deltasWorthTrying reports whether ids look sorted within runs, so that the id-deltas form
// may be smaller than ranks: at least 7 in 8 of the steps from one id to the next do not
// descend (about half of them do for ids in no order).
func deltasWorthTrying(ids []uint32) bool {
	if len(ids) < minPlaneBytes {
		return false
	}
	down := 0
	for i := 1; i < len(ids); i++ {
		if ids[i] < ids[i-1] {
			down++
		}
	}
	return down*8 <= len(ids)-1
}

// appendIDDeltas appends one chunk of ids (below cardinality, whose width is width >= 1) in the
// id-deltas form and reports whether it did: it declines (returning dst unchanged) when the
// form would not be smaller than limit bytes. scratch holds the differences.
func appendIDDeltas(dst []byte, ids []uint32, cardinality, width int, pc *planeCoder, scratch *[]uint32, limit int) ([]byte, bool) {
	start := len(dst)
	dst = binary.AppendUvarint(dst, uint64(len(ids)))
	dst = append(dst, byte(width), idDeltas)
	d := (*scratch)[:0]
	c := uint32(cardinality)
	prev := uint32(0)
	for _, id := range ids {
		d = append(d, (id+c-prev)%c)
		prev = id
	}
	*scratch = d
	out, ok := appendPlanes(pc, dst, d, width, limit-(len(dst)-start))
	if !ok {
		return dst[:start], false
	}
	return out, true
}

// appendRankedIDs appends one chunk of ranks below 2^width in the smaller of its forms.
func appendRankedIDs(dst []byte, ranks []uint32, width int, pc *planeCoder) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(ranks)))
	dst = append(dst, byte(width))
	if pc != nil && width > 0 {
		mark := len(dst)
		dst = append(dst, rankedPlanes)
		var ok bool
		if dst, ok = appendPlanes(pc, dst, ranks, width, packedSize(len(ranks), width)); ok {
			return dst
		}
		dst = dst[:mark]
	}
	dst = append(dst, rankedPacked)
	return appendPacked(dst, ranks, width)
}

// decodeRankedIDs appends the ids of the chunk made by appendRankedIDs (or, when deltas is
// set, by appendIDDeltas: a version 5 part's) at the front of src to dst, mapped through perm
// (perm[rank] is the id; len(perm) is the cardinality), and returns the rest of src. It checks
// n as decodeIDs does. Bad bytes give an error wrapping ErrCorrupt.
func decodeRankedIDs(dst []uint32, src []byte, n int, perm []uint32, deltas bool, pd *planeDecoder) ([]uint32, []byte, error) {
	cardinality := len(perm)
	m, k := binary.Uvarint(src)
	if k <= 0 || m > maxChunkValues || (n >= 0 && m != uint64(n)) {
		return dst, src, corruptf("ranked ids chunk: %d ids, want %d", m, n)
	}
	rest := src[k:]
	if len(rest) < 2 {
		return dst, src, corruptf("ranked ids chunk: missing width or form")
	}
	w, form := int(rest[0]), rest[1]
	if w != idWidth(cardinality) {
		return dst, src, corruptf("ranked ids chunk: width %d, cardinality %d needs %d", w, cardinality, idWidth(cardinality))
	}
	start := len(dst)
	var err error
	switch form {
	case rankedPacked:
		dst, rest, err = decodePacked(dst, rest[2:], int(m), w)
	case rankedPlanes:
		if w == 0 {
			return dst, src, corruptf("ranked ids chunk: planes of width 0")
		}
		dst, rest, err = decodePlanes(pd, dst, rest[2:], int(m), w)
		if err != nil {
			err = fmt.Errorf("ranked ids chunk: %w", err)
		}
	case idDeltas:
		if !deltas {
			return dst, src, corruptf("ranked ids chunk: the id-deltas form in a version 4 part")
		}
		if w == 0 {
			return dst, src, corruptf("ranked ids chunk: id deltas of width 0")
		}
		dst, rest, err = decodePlanes(pd, dst, rest[2:], int(m), w)
		if err != nil {
			return dst[:start], src, fmt.Errorf("ranked ids chunk: %w", err)
		}
		ids := dst[start:]
		if err := checkIDs(ids, cardinality); err != nil {
			return dst[:start], src, err
		}
		c, prev := uint32(cardinality), uint32(0)
		for i, d := range ids {
			prev += d
			if prev >= c {
				prev -= c
			}
			ids[i] = prev
		}
		return dst, rest, nil
	default:
		return dst, src, corruptf("ranked ids chunk: unknown form %d", form)
	}
	if err != nil {
		return dst[:start], src, err
	}
	ids := dst[start:]
	if err := checkIDs(ids, cardinality); err != nil {
		return dst[:start], src, err
	}
	for i, r := range ids {
		ids[i] = perm[r]
	}
	return dst, rest, nil
}

// rankTableSize returns the bytes of the rank table of a version 4 ids part: the ids of ranks
// 0, 1, ... cardinality-1 packed at the ids' width, after the chunked part.
func rankTableSize(cardinality int) int64 {
	return int64(packedSize(cardinality, idWidth(cardinality)))
}

// decodeRankTable decodes and checks a rank table: a permutation of the ids.
func decodeRankTable(src []byte, cardinality int) ([]uint32, error) {
	perm, rest, err := decodePacked(make([]uint32, 0, cardinality), src, cardinality, idWidth(cardinality))
	if err != nil {
		return nil, fmt.Errorf("rank table: %w", err)
	}
	if len(rest) != 0 {
		return nil, corruptf("rank table: %d trailing bytes", len(rest))
	}
	seen := make([]uint64, (cardinality+63)/64)
	for r, id := range perm {
		if int64(id) >= int64(cardinality) || seen[id/64]&(1<<(id%64)) != 0 {
			return nil, corruptf("rank table: rank %d holds id %d, out of range or repeated", r, id)
		}
		seen[id/64] |= 1 << (id % 64)
	}
	return perm, nil
}

// checkIDs checks that every id is below the cardinality; the error names the first that is
// not. It takes the largest id four at a time (four maxima, without a branch an id), and
// looks for the culprit only when that is too large.
func checkIDs(ids []uint32, cardinality int) error {
	if cardinality > 0 && 1<<idWidth(cardinality) == cardinality {
		return nil // every value of the width is a valid id
	}
	var m0, m1, m2, m3 uint32
	k := 0
	for ; k+4 <= len(ids); k += 4 {
		q := ids[k : k+4 : k+4]
		m0, m1, m2, m3 = max(m0, q[0]), max(m1, q[1]), max(m2, q[2]), max(m3, q[3])
	}
	for _, id := range ids[k:] {
		m0 = max(m0, id)
	}
	if len(ids) == 0 || int64(max(m0, m1, m2, m3)) < int64(cardinality) {
		return nil
	}
	for _, id := range ids {
		if int64(id) >= int64(cardinality) {
			return corruptf("id %d not below the cardinality %d", id, cardinality)
		}
	}
	return nil
}

// multiIDsSize returns the bytes appendMultiIDs appends.
func multiIDsSize(counts []uint32, total, width int) int {
	var maxc uint32
	for _, c := range counts {
		maxc = max(maxc, c-1)
	}
	n := len(counts)
	return uvarintLen(uint64(n)) + uvarintLen(uint64(total)) + 1 + packedSize(n, bitWidth(uint64(maxc))) + 1 + packedSize(total, width)
}

// appendMultiIDs appends one chunk of multi-value rows: counts[i] ids for row i (at least 1),
// ids all the rows' ids in order, packed at width bits.
func appendMultiIDs(dst []byte, counts []uint32, ids []uint32, width int) []byte {
	var maxc uint32
	for _, c := range counts {
		maxc = max(maxc, c-1)
	}
	cw := bitWidth(uint64(maxc))
	dst = binary.AppendUvarint(dst, uint64(len(counts)))
	dst = binary.AppendUvarint(dst, uint64(len(ids)))
	dst = append(dst, byte(cw))
	pk := packer{dst: dst, w: uint(cw)}
	if cw > 0 {
		for _, c := range counts {
			pk.put(uint64(c - 1))
		}
	}
	dst = pk.flush()
	dst = append(dst, byte(width))
	return appendPacked(dst, ids, width)
}

// decodeMultiIDs decodes the chunk made by appendMultiIDs at the front of src, which must hold
// exactly n rows (n < 0: any number), each id below cardinality. It appends the ids to dst and
// returns the rest of src; *offs gets the n+1 row offsets into the returned ids (its capacity
// reused): row i holds ids[offs[i]:offs[i+1]]. Bad bytes give an error wrapping ErrCorrupt.
func decodeMultiIDs(dst []uint32, src []byte, n, cardinality int, offs *[]uint32) ([]uint32, []byte, error) {
	m, k := binary.Uvarint(src)
	if k <= 0 || m > maxChunkRows || (n >= 0 && m != uint64(n)) {
		return dst, src, corruptf("multi-value ids chunk: %d rows, want %d", m, n)
	}
	rest := src[k:]
	total, k := binary.Uvarint(rest)
	if k <= 0 || total > maxChunkValues || total < m {
		return dst, src, corruptf("multi-value ids chunk: %d ids for %d rows", total, m)
	}
	rest = rest[k:]
	if len(rest) < 1 || rest[0] > 32 {
		return dst, src, corruptf("multi-value ids chunk: bad count width")
	}
	cw := int(rest[0])
	o, rest, err := decodePacked((*offs)[:0], rest[1:], int(m), cw)
	*offs = o
	if err != nil {
		return dst, src, err
	}
	// Counts-1 to offsets, in place, with one more entry at the end.
	o = append(o, 0)
	*offs = o
	sum := uint64(len(dst))
	for i := 0; i < int(m); i++ {
		c := uint64(o[i]) + 1
		o[i] = uint32(sum)
		sum += c
	}
	if sum-uint64(len(dst)) != total {
		return dst, src, corruptf("multi-value ids chunk: counts add up to %d, want %d", sum-uint64(len(dst)), total)
	}
	o[m] = uint32(sum)
	if len(rest) < 1 {
		return dst, src, corruptf("multi-value ids chunk: missing width")
	}
	w := int(rest[0])
	if w != idWidth(cardinality) {
		return dst, src, corruptf("multi-value ids chunk: width %d, cardinality %d needs %d", w, cardinality, idWidth(cardinality))
	}
	start := len(dst)
	dst, rest, err = decodePacked(dst, rest[1:], int(total), w)
	if err != nil {
		return dst, src, err
	}
	if err := checkIDs(dst[start:], cardinality); err != nil {
		return dst, src, err
	}
	return dst, rest, nil
}

// blobsSize returns the bytes appendBlobs appends for values of these lengths.
func blobsSize(lengths []int64) int {
	n := int64sSize(lengths)
	for _, l := range lengths {
		n += int(l)
	}
	return n
}

// appendBlobs appends one chunk of byte strings: lengths[i] is the length of value i, data all
// the values back to back.
func appendBlobs(dst []byte, lengths []int64, data []byte) []byte {
	return append(appendInt64s(dst, lengths), data...)
}

// decodeBlobs decodes the chunk made by appendBlobs at the front of src, which must hold exactly
// n values (n < 0: any number). It appends n+1 offsets into src to dst, value i being
// src[offs[i]:offs[i+1]] of the returned offs (counting from len(dst)), and returns the rest of
// src after the last value. lens is scratch for the lengths; nil allocates. Bad bytes give an
// error wrapping ErrCorrupt.
func decodeBlobs(dst []int, src []byte, n int, lens *[]int64) ([]int, []byte, error) {
	var ls []int64
	if lens != nil {
		ls = (*lens)[:0]
	}
	ls, data, err := decodeInt64s(ls, src, n)
	if lens != nil {
		*lens = ls
	}
	if err != nil {
		return dst, src, err
	}
	start := len(dst)
	dst = grow(dst, len(ls)+1)
	offs := dst[start:]
	pos := int64(len(src) - len(data))
	for i, l := range ls {
		if l < 0 || l > MaxValueBytes {
			return dst[:start], src, corruptf("blob chunk: value %d has length %d", i, l)
		}
		offs[i] = int(pos)
		pos += l
	}
	if pos > int64(len(src)) {
		return dst[:start], src, corruptf("blob chunk: lengths add up to %d, have %d bytes", pos-int64(len(src)-len(data)), len(data))
	}
	offs[len(ls)] = int(pos)
	return dst, src[pos:], nil
}
