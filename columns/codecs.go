package columns

import (
	"encoding/binary"
)

// Raw (decompressed) layouts of the chunks of ids and blobs:
//
//	ids        n uvarint | w u8 | n ids packed at w bits
//	multi-ids  n uvarint | total uvarint | cw u8 | n (count-1) packed at cw bits |
//	           w u8 | total ids packed at w bits
//	blobs      an int64 chunk encoding of the n lengths | the n values back to back
//
// w is the width the dictionary's cardinality needs, BitWidth(cardinality-1). A multi-value
// row holds at least one id; a null row holds the null id alone.

// IDWidth returns the bit width of ids below cardinality.
func IDWidth(cardinality int) int {
	if cardinality <= 1 {
		return 0
	}
	return BitWidth(uint64(cardinality - 1))
}

// IDsSize returns the bytes AppendIDs appends.
func IDsSize(n, width int) int { return uvarintLen(uint64(n)) + 1 + PackedSize(n, width) }

// AppendIDs appends one chunk of single-value ids packed at width bits.
func AppendIDs(dst []byte, ids []uint32, width int) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(ids)))
	dst = append(dst, byte(width))
	return appendPacked(dst, ids, width)
}

// DecodeIDs appends the ids of a chunk made by AppendIDs to dst. It checks that the chunk holds
// exactly n ids (n < 0: any number up to the chunk limit), each below cardinality, and nothing
// more.
func DecodeIDs(dst []uint32, raw []byte, n, cardinality int) ([]uint32, error) {
	m, k := binary.Uvarint(raw)
	if k <= 0 || m > maxChunkValues || (n >= 0 && m != uint64(n)) {
		return dst, corruptf("ids chunk: %d ids, want %d", m, n)
	}
	raw = raw[k:]
	if len(raw) < 1 {
		return dst, corruptf("ids chunk: missing width")
	}
	w := int(raw[0])
	if w != IDWidth(cardinality) {
		return dst, corruptf("ids chunk: width %d, cardinality %d needs %d", w, cardinality, IDWidth(cardinality))
	}
	start := len(dst)
	dst, rest, err := decodePacked(dst, raw[1:], int(m), w)
	if err != nil {
		return dst, err
	}
	if len(rest) != 0 {
		return dst, corruptf("ids chunk: %d trailing bytes", len(rest))
	}
	if err := checkIDs(dst[start:], cardinality); err != nil {
		return dst, err
	}
	return dst, nil
}

func checkIDs(ids []uint32, cardinality int) error {
	if cardinality > 0 && 1<<IDWidth(cardinality) == cardinality {
		return nil // every value of the width is a valid id
	}
	for _, id := range ids {
		if int64(id) >= int64(cardinality) {
			return corruptf("id %d not below the cardinality %d", id, cardinality)
		}
	}
	return nil
}

// MultiIDsSize returns the bytes AppendMultiIDs appends.
func MultiIDsSize(counts []uint32, total, width int) int {
	var maxc uint32
	for _, c := range counts {
		maxc = max(maxc, c-1)
	}
	n := len(counts)
	return uvarintLen(uint64(n)) + uvarintLen(uint64(total)) + 1 + PackedSize(n, BitWidth(uint64(maxc))) + 1 + PackedSize(total, width)
}

// AppendMultiIDs appends one chunk of multi-value rows: counts[i] ids for row i (at least 1),
// ids all the rows' ids in order, packed at width bits.
func AppendMultiIDs(dst []byte, counts []uint32, ids []uint32, width int) []byte {
	var maxc uint32
	for _, c := range counts {
		maxc = max(maxc, c-1)
	}
	cw := BitWidth(uint64(maxc))
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

// DecodeMultiIDs decodes a chunk made by AppendMultiIDs holding exactly n rows (n < 0: any
// number): it returns the row offsets (n+1 entries, row i's ids are ids[offs[i]:offs[i+1]])
// appended to offs[:0] and the ids appended to ids[:0].
func DecodeMultiIDs(offs, ids []uint32, raw []byte, n, cardinality int) ([]uint32, []uint32, error) {
	m, k := binary.Uvarint(raw)
	if k <= 0 || m > maxChunkRows || (n >= 0 && m != uint64(n)) {
		return offs, ids, corruptf("multi-value ids chunk: %d rows, want %d", m, n)
	}
	raw = raw[k:]
	total, k := binary.Uvarint(raw)
	if k <= 0 || total > maxChunkValues || total < m {
		return offs, ids, corruptf("multi-value ids chunk: %d ids for %d rows", total, m)
	}
	raw = raw[k:]
	if len(raw) < 1 || raw[0] > 32 {
		return offs, ids, corruptf("multi-value ids chunk: bad count width")
	}
	cw := int(raw[0])
	offs, rest, err := decodePacked(offs[:0], raw[1:], int(m), cw)
	if err != nil {
		return offs, ids, err
	}
	// Counts-1 to offsets, in place, with one more entry at the end.
	offs = append(offs, 0)
	var sum uint64
	for i := 0; i < int(m); i++ {
		c := uint64(offs[i]) + 1
		offs[i] = uint32(sum)
		sum += c
	}
	if sum != total {
		return offs, ids, corruptf("multi-value ids chunk: counts add up to %d, want %d", sum, total)
	}
	offs[m] = uint32(total)
	if len(rest) < 1 {
		return offs, ids, corruptf("multi-value ids chunk: missing width")
	}
	w := int(rest[0])
	if w != IDWidth(cardinality) {
		return offs, ids, corruptf("multi-value ids chunk: width %d, cardinality %d needs %d", w, cardinality, IDWidth(cardinality))
	}
	ids, rest, err = decodePacked(ids[:0], rest[1:], int(total), w)
	if err != nil {
		return offs, ids, err
	}
	if len(rest) != 0 {
		return offs, ids, corruptf("multi-value ids chunk: %d trailing bytes", len(rest))
	}
	if err := checkIDs(ids, cardinality); err != nil {
		return offs, ids, err
	}
	return offs, ids, nil
}

// BlobsSize returns the bytes AppendBlobs appends for values of these lengths.
func BlobsSize(lengths []int64) int {
	n := Int64sSize(lengths)
	for _, l := range lengths {
		n += int(l)
	}
	return n
}

// AppendBlobs appends one chunk of byte strings: lengths[i] is the length of value i, data all
// the values back to back.
func AppendBlobs(dst []byte, lengths []int64, data []byte) []byte {
	return append(AppendInt64s(dst, lengths), data...)
}

// DecodeBlobs decodes a chunk made by AppendBlobs holding exactly n values (n < 0: any number).
// It returns the value offsets (n+1 entries, value i is data[offs[i]:offs[i+1]]) in offs[:0],
// the lengths in lens[:0] (scratch) and data, a view of raw.
func DecodeBlobs(offs []int, lens []int64, raw []byte, n int) ([]int, []int64, []byte, error) {
	lens, data, err := decodeInt64s(lens[:0], raw, n)
	if err != nil {
		return offs, lens, nil, err
	}
	offs = grow(offs[:0], len(lens)+1)
	var sum int64
	for i, l := range lens {
		if l < 0 || l > MaxValueBytes {
			return offs, lens, nil, corruptf("blob chunk: value %d has length %d", i, l)
		}
		offs[i] = int(sum)
		sum += l
	}
	if sum != int64(len(data)) {
		return offs, lens, nil, corruptf("blob chunk: lengths add up to %d, have %d bytes", sum, len(data))
	}
	offs[len(lens)] = int(sum)
	return offs, lens, data, nil
}
