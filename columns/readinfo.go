package columns

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
)

// ReadInfo reads what the footer of the segment of size bytes in r says (rows, interval,
// every part's column, kind, offset, length and CRC-32C), reading only the header, the
// trailer and the footer, and checking them as Open does (the footer's CRC included). A
// reader of a remote object plans its reads from the parts before it opens the segment (see
// columns/objstore).
func ReadInfo(r io.ReaderAt, size int64) (Info, error) {
	if r == nil || size < 0 {
		return Info{}, fmt.Errorf("columns: ReadInfo: nil reader or negative size: %w", ErrInvalid)
	}
	f, err := readFooter(source{r: r, size: size})
	if err != nil {
		return Info{}, err
	}
	return f.info(size), nil
}

// readFooter reads and checks the header, the trailer and the footer of the segment in src.
func readFooter(src source) (*footer, error) {
	size := src.size
	if size < int64(headerSize+trailerSize) {
		return nil, corruptf("columns: file of %d bytes, too short for a segment", size)
	}
	h, err := src.view(0, int64(headerSize), nil)
	if err != nil {
		return nil, fmt.Errorf("columns: header: %w", err)
	}
	if string(h[:len(magic)]) != magic {
		return nil, corruptf("columns: header: bad magic %q", h[:len(magic)])
	}
	if v := h[len(magic)]; v < minVersion || v > maxVersion {
		return nil, fmt.Errorf("columns: header: version %d (this reader reads %d to %d): %w", v, minVersion, maxVersion, ErrVersion)
	}
	t, err := src.view(size-int64(trailerSize), int64(trailerSize), nil)
	if err != nil {
		return nil, fmt.Errorf("columns: trailer: %w", err)
	}
	if string(t[8:]) != magic {
		return nil, corruptf("columns: trailer: bad magic %q (truncated file?)", t[8:])
	}
	fcrc := binary.LittleEndian.Uint32(t)
	flen := int64(binary.LittleEndian.Uint32(t[4:]))
	footerStart := size - int64(trailerSize) - flen
	if flen > maxFooter || footerStart < int64(headerSize) {
		return nil, corruptf("columns: trailer: footer of %d bytes does not fit in a file of %d", flen, size)
	}
	fb, err := src.view(footerStart, flen, nil)
	if err != nil {
		return nil, fmt.Errorf("columns: footer: %w", err)
	}
	if c := crc32.Checksum(fb, castagnoli); c != fcrc {
		return nil, corruptf("columns: footer: CRC %08x, want %08x", c, fcrc)
	}
	f, err := decodeFooter(fb, footerStart)
	if err != nil {
		return nil, err
	}
	if f.version != h[len(magic)] {
		return nil, corruptf("columns: footer: version %d, the header says %d", f.version, h[len(magic)])
	}
	return f, nil
}
