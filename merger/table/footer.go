package table

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/writeout/writeout/columns"
)

// FooterChecksum returns a segment's footer checksum, as the log lists it: the CRC-32C of its
// rows, its interval, its size and every part's column, kind, offset, length and CRC, as the
// segment's footer gives them (columns.ReadInfo, Segment.Info), little-endian:
//
//	rows u64 | start i64 | end i64 | size i64 | parts u32 |
//	per part: len(column) u32 | column | kind u8 | encoding u8 | offset i64 | length i64 | crc u32
//
// Two segments with the same checksum have, short of a CRC collision, the same footer and the
// same bytes in every part: it identifies the content without reading the data.
func FooterChecksum(info columns.Info) string {
	b := make([]byte, 0, 40+len(info.Parts)*40)
	b = binary.LittleEndian.AppendUint64(b, uint64(info.Rows))
	b = binary.LittleEndian.AppendUint64(b, uint64(info.Interval.Start))
	b = binary.LittleEndian.AppendUint64(b, uint64(info.Interval.End))
	b = binary.LittleEndian.AppendUint64(b, uint64(info.Size))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(info.Parts)))
	for _, p := range info.Parts {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(p.Column)))
		b = append(b, p.Column...)
		b = append(b, byte(p.Kind), byte(p.Encoding))
		b = binary.LittleEndian.AppendUint64(b, uint64(p.Offset))
		b = binary.LittleEndian.AppendUint64(b, uint64(p.Length))
		b = binary.LittleEndian.AppendUint32(b, p.CRC)
	}
	return fmt.Sprintf("%08x", crc32.Checksum(b, castagnoli))
}
