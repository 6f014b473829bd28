package ingest

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// smallParquet returns a Parquet file of n rows of TestParquetSameAsCSV's data, in row groups
// of group rows, written by parquet-go with its options.
func smallParquet(t testing.TB, n, group int, opts ...parquet.WriterOption) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[pqRow](&buf, append([]parquet.WriterOption{parquet.MaxRowsPerRowGroup(int64(group))}, opts...)...)
	for i := range n {
		_, err := w.Write([]pqRow{genPQRow(5, i)})
		require.NoError(t, err)
	}
	require.NoError(t, w.Close())
	return buf.Bytes()
}

// readParquetRows reads data as Parquet named name: its rows (rowString) and the error that
// ended reading (nil at its end; a row's error ends it too). It also returns the bytes
// allocated meanwhile.
func readParquetRows(t testing.TB, sp *Spec, name string, data []byte) (rows []string, alloc uint64, end error) {
	t.Helper()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	defer func() {
		runtime.ReadMemStats(&after)
		alloc = after.TotalAlloc - before.TotalAlloc
	}()
	r, err := openParquet(sp, name, bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, 0, err
	}
	defer r.Close()
	row := sp.newRow()
	for {
		err := r.Read(&row)
		if err == io.EOF {
			return rows, 0, nil
		}
		if err != nil {
			return rows, 0, err
		}
		rows = append(rows, rowString(row))
	}
}

// maxCaseAlloc bounds what reading one small corrupt file may allocate.
const maxCaseAlloc = 64 << 20

// A footer length past the file is an error naming the file and the length, at once and
// without allocating it (a 5.7 KB file made ingest allocate 2 GiB).
func TestParquetFooterLength(t *testing.T) {
	sp, err := ParseSpec([]byte(pqSpecJSON))
	require.NoError(t, err)
	data := smallParquet(t, 20, 7)
	rows, _, end := readParquetRows(t, sp, "f.parquet", data)
	require.NoError(t, end)
	require.Len(t, rows, 20)
	size := len(data)
	for _, n := range []uint32{0, uint32(size - 11), uint32(size), 1 << 31, 0xffffffff} {
		bad := bytes.Clone(data)
		binary.LittleEndian.PutUint32(bad[size-8:], n)
		start := time.Now()
		_, alloc, end := readParquetRows(t, sp, "f.parquet", bad)
		require.ErrorIs(t, end, ErrInput, "length %d", n)
		assert.Contains(t, end.Error(), "f.parquet: not a readable Parquet file: footer length")
		assert.Less(t, alloc, uint64(1<<20), "length %d: %d bytes allocated", n, alloc)
		assert.Less(t, time.Since(start), time.Second)
	}
	// The last length that fits: the footer then starts at byte 4, not where it is.
	bad := bytes.Clone(data)
	binary.LittleEndian.PutUint32(bad[size-8:], uint32(size-12))
	_, _, end = readParquetRows(t, sp, "f.parquet", bad)
	require.ErrorIs(t, end, ErrInput)
}

// Every byte of a small file, footer, page headers and data, set in turn to a value that makes
// lengths large (0xff: a varint that goes on; 0x7f, 0x80): reading it allocates a bounded
// amount, whatever the field, with each codec (parquet-go's LZ4 decoder doubled its buffer
// for as long as a corrupt block did not decode: 32 GB).
func TestParquetCorruptBoundedAlloc(t *testing.T) {
	sp, err := ParseSpec([]byte(pqSpecJSON))
	require.NoError(t, err)
	for _, codec := range []struct {
		name string
		opt  parquet.WriterOption
	}{{"zstd", parquet.Compression(&parquet.Zstd)}, {"snappy", parquet.Compression(&parquet.Snappy)},
		{"lz4raw", parquet.Compression(&parquet.Lz4Raw)}, {"none", parquet.Compression(&parquet.Uncompressed)}} {
		t.Run("codec="+codec.name, func(t *testing.T) {
			data := smallParquet(t, 20, 7, codec.opt)
			step := 1
			if testing.Short() {
				step = 5
			}
			for i := 0; i < len(data); i += step {
				for _, v := range [][]byte{{0xff}, {0x7f}, {0x80}}[i%3] { // one value per byte
					bad := bytes.Clone(data)
					bad[i] = v
					_, alloc, end := readParquetRows(t, sp, "f.parquet", bad)
					if end != nil && !errors.Is(end, ErrRow) {
						require.ErrorIs(t, end, ErrInput, "byte %d = %#x", i, v)
					}
					require.Less(t, alloc, uint64(maxCaseAlloc), "byte %d = %#x: %d bytes allocated", i, v, alloc)
				}
			}
		})
	}
}

// TestParquetFooterRowCounts flips a bit of each byte of the footer of a file of 3,000 rows in
// turn (each bit when WRITEOUT_PQ_ALL_BITS is set): reading it is an error, or it gives exactly the clean file's rows, never fewer rows
// without an error (one flipped byte read 2,968 of 3,000 rows with exit 0).
func TestParquetFooterRowCounts(t *testing.T) {
	sp, err := ParseSpec([]byte(pqSpecJSON))
	require.NoError(t, err)
	pq, _, _ := pqFiles(t, t.TempDir(), 9, 3000, 1000)
	data, err := os.ReadFile(pq)
	require.NoError(t, err)
	clean, _, end := readParquetRows(t, sp, "f.parquet", data)
	require.NoError(t, end)
	require.Len(t, clean, 3000)
	size := len(data)
	footer := int(binary.LittleEndian.Uint32(data[size-8:])) + 8
	var errs, same int
	for i := size - footer; i < size; i++ {
		bits := []byte{1 << (i % 8)} // a bit of each byte (all 8 take two minutes)
		if os.Getenv("WRITEOUT_PQ_ALL_BITS") != "" {
			bits = []byte{1, 2, 4, 8, 16, 32, 64, 128}
		}
		for _, bit := range bits {
			bad := bytes.Clone(data)
			bad[i] ^= bit
			rows, alloc, end := readParquetRows(t, sp, "f.parquet", bad)
			require.Less(t, alloc, uint64(maxCaseAlloc), "byte %d ^ %#x: %d bytes allocated", i, bit, alloc)
			if end != nil {
				errs++
				if !errors.Is(end, ErrRow) {
					require.ErrorIs(t, end, ErrInput)
					require.True(t, strings.HasPrefix(end.Error(), "f.parquet:"), end.Error())
				}
				continue
			}
			same++
			require.Equal(t, len(clean), len(rows), "byte %d (footer byte %d) ^ %#x: rows lost without an error", i, i-(size-footer), bit)
			require.Equal(t, clean, rows, "byte %d (footer byte %d) ^ %#x: other rows without an error", i, i-(size-footer), bit)
		}
	}
	t.Logf("footer of %d bytes: %d flips an error, %d the same rows", footer, errs, same)
}

// withFooter returns data, a Parquet file, with its footer edited.
func withFooter(t testing.TB, data []byte, edit func(md *format.FileMetaData)) []byte {
	t.Helper()
	size := len(data)
	n := int(binary.LittleEndian.Uint32(data[size-8:]))
	var md format.FileMetaData
	require.NoError(t, thrift.Unmarshal(new(thrift.CompactProtocol), data[size-8-n:size-8], &md))
	edit(&md)
	footer, err := thrift.Marshal(new(thrift.CompactProtocol), &md)
	require.NoError(t, err)
	out := append(bytes.Clone(data[:size-8-n]), footer...)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(footer)))
	return append(out, parquetMagic...)
}

// withCodec returns data, a Parquet file, with the codec of every column chunk set to codec in
// its footer: its pages are then read with another codec's decoder.
func withCodec(t testing.TB, data []byte, codec format.CompressionCodec) []byte {
	return withFooter(t, data, func(md *format.FileMetaData) {
		for g := range md.RowGroups {
			for c := range md.RowGroups[g].Columns {
				md.RowGroups[g].Columns[c].MetaData.Codec = codec
			}
		}
	})
}

// Row counts of the footer, its row groups and column chunks that disagree are an error
// naming the file, not rows lost: each count of a file of 3 row groups of 100 rows made
// smaller or larger in turn.
func TestParquetRowCountsDisagree(t *testing.T) {
	sp, err := ParseSpec([]byte(pqSpecJSON))
	require.NoError(t, err)
	data := smallParquet(t, 300, 100, parquet.Compression(&parquet.Zstd))
	clean, _, end := readParquetRows(t, sp, "f.parquet", data)
	require.NoError(t, end)
	require.Len(t, clean, 300)
	f := func(what string, edit func(md *format.FileMetaData)) {
		t.Helper()
		rows, _, end := readParquetRows(t, sp, "f.parquet", withFooter(t, data, edit))
		require.ErrorIs(t, end, ErrInput, "%s: %d rows read", what, len(rows))
		require.Contains(t, end.Error(), "f.parquet:", what)
		t.Logf("%s: %v", what, end)
	}
	for _, d := range []int64{-8, -1, 1} {
		f(fmt.Sprintf("file rows %+d", d), func(md *format.FileMetaData) { md.NumRows += d })
		f(fmt.Sprintf("group rows %+d", d), func(md *format.FileMetaData) { md.RowGroups[1].NumRows += d })
		f(fmt.Sprintf("file and group rows %+d", d), func(md *format.FileMetaData) {
			md.NumRows += d
			md.RowGroups[2].NumRows += d
		})
		f(fmt.Sprintf("file and group rows, chunk values %+d", d), func(md *format.FileMetaData) {
			md.NumRows += d
			md.RowGroups[2].NumRows += d
			for c := range md.RowGroups[2].Columns {
				if c != 3 { // the list: a value per element
					md.RowGroups[2].Columns[c].MetaData.NumValues += d
				}
			}
		})
		f(fmt.Sprintf("column ts values %+d", d), func(md *format.FileMetaData) { md.RowGroups[0].Columns[0].MetaData.NumValues += d })
		f(fmt.Sprintf("column tags values %+d", d), func(md *format.FileMetaData) { md.RowGroups[0].Columns[3].MetaData.NumValues += d })
	}
}

// Pages read with another codec's decoder (one flipped bit turns ZSTD into LZ4_RAW) are an
// error, with a bounded allocation: parquet-go's LZ4_RAW decoder doubles its buffer for as
// long as a block does not decode (32 GB), snappy's allocates what its preamble says (up
// to 4 GiB), zstd's what a frame's header says.
func TestParquetWrongCodecBounded(t *testing.T) {
	sp, err := ParseSpec([]byte(pqSpecJSON))
	require.NoError(t, err)
	codecs := map[format.CompressionCodec]compress.Codec{format.Zstd: &parquet.Zstd, format.Snappy: &parquet.Snappy,
		format.Lz4Raw: &parquet.Lz4Raw, format.Gzip: &parquet.Gzip, format.Uncompressed: &parquet.Uncompressed}
	for from, codec := range codecs {
		data := smallParquet(t, 300, 100, parquet.Compression(codec))
		clean, _, end := readParquetRows(t, sp, "f.parquet", data)
		require.NoError(t, end)
		for to := range codecs {
			if to == from {
				continue
			}
			start := time.Now()
			rows, alloc, end := readParquetRows(t, sp, "f.parquet", withCodec(t, data, to))
			if end == nil {
				require.Equal(t, clean, rows, "%s read as %s", from, to)
			} else {
				require.ErrorIs(t, end, ErrInput, "%s read as %s", from, to)
			}
			assert.Less(t, alloc, uint64(maxCaseAlloc), "%s read as %s: %d bytes allocated", from, to, alloc)
			assert.Less(t, time.Since(start), 5*time.Second, "%s read as %s", from, to)
		}
	}
}

// lz4BlockSize reads what parquet-go's LZ4_RAW codec writes as the block it is.
func TestLZ4BlockSize(t *testing.T) {
	for _, src := range [][]byte{nil, []byte("a"), []byte(strings.Repeat("abcd", 1000)), []byte(pqSpecJSON),
		bytes.Repeat([]byte{0}, 70_000)} {
		block, err := parquet.Lz4Raw.Encode(nil, src)
		require.NoError(t, err)
		n, err := lz4BlockSize(block, int64(len(src)))
		require.NoError(t, err)
		require.Equal(t, int64(len(src)), n)
		if len(src) > 0 {
			_, err = lz4BlockSize(block, int64(len(src)-1))
			require.Error(t, err, "over the limit")
		}
	}
	for _, bad := range []string{"\x10", "\x1fa", "\x00\x00\x00", "\x40abcd\x05\x00", "\xf0"} {
		_, err := lz4BlockSize([]byte(bad), 1<<20)
		require.Error(t, err, "%q", bad)
	}
}

// FuzzLZ4BlockSize checks that a block lz4BlockSize reads is one parquet-go's LZ4_RAW decoder
// reads too, to the same size: otherwise that decoder would double its buffer forever.
func FuzzLZ4BlockSize(f *testing.F) {
	for _, src := range []string{"", "a", strings.Repeat("abcd", 100), pqSpecJSON} {
		block, err := parquet.Lz4Raw.Encode(nil, []byte(src))
		require.NoError(f, err)
		f.Add(block)
	}
	f.Fuzz(func(t *testing.T, block []byte) {
		n, err := lz4BlockSize(block, 1<<20)
		if err != nil {
			return
		}
		out, err := parquet.Lz4Raw.Decode(make([]byte, n), block)
		require.NoError(t, err)
		require.Len(t, out, int(n))
	})
}

// What a page's compressed bytes say they decode to is checked against its header before a
// decoder trusts it: a snappy preamble of 4 GiB, a zstd frame of 1 TiB, an LZ4 block that
// does not decode, a gzip stream of 64 MiB for a page of 1,000 bytes are errors, with a
// bounded allocation.
func TestParquetCompressedSizes(t *testing.T) {
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, err := zw.Write(make([]byte, 64<<20))
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	snappy := binary.AppendUvarint(nil, 1<<32-1)
	zstdFrame := []byte{0x28, 0xb5, 0x2f, 0xfd, 0xe0, 0, 0, 0, 0, 0, 1, 0, 0} // single segment, 8-byte size 2^40
	lz4, err := parquet.Lz4Raw.Encode(nil, bytes.Repeat([]byte("abcd"), 250))
	require.NoError(t, err)
	f := func(codec format.CompressionCodec, data []byte, expect int64, want string) {
		t.Helper()
		w := pageWindow{r: bytes.NewReader(data), end: int64(len(data))}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		err := new(pqFile).checkCompressed(&w, codec, 0, int64(len(data)), expect)
		runtime.ReadMemStats(&after)
		if want == "" {
			require.NoError(t, err)
		} else {
			require.ErrorContains(t, err, want)
		}
		require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(1<<20)+uint64(len(data)))
	}
	f(format.Gzip, gz.Bytes(), 1000, "gzip data of over 1000 bytes, the page header says 1000")
	f(format.Gzip, gz.Bytes(), 64<<20, "")
	f(format.Snappy, snappy, 1000, "snappy data of 4294967295 bytes, the page header says 1000")
	f(format.Zstd, zstdFrame, 1000, "zstd data of 1099511627776 bytes, the page header says 1000")
	f(format.Lz4Raw, lz4, 1000, "")
	f(format.Lz4Raw, lz4, 999, "LZ4 data of over 999 bytes")
	f(format.Lz4Raw, lz4[:len(lz4)-1], 1000, "LZ4")
}
