package columns

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"

	"github.com/spf13/afero"

	"github.com/writeout/writeout/internal/sys"
)

// PublishFile publishes a file that is not a segment (an export, a report) at dst the way
// Finish publishes a segment: written to an unnamed or TempPattern file in dst's directory,
// synced per opts.Durability, named dst without replacing an existing file unless opts.Replace,
// the directory synced; on failure nothing is left under dst or a temp name, and an existing
// dst is as it was. Finish's documentation gives the details, which hold here word for word
// but for SyncAll's read-back: a segment is checked part by part, while this file is checked as
// a whole against the CRC-32C of the bytes write wrote.
//
// write writes the whole file to w, front to back; an error it returns fails the publication
// and is returned as it is (joined with any error of the cleanup that follows). The Info returned has Path, Size, Syncs and Trickles
// set. With opts.File the bytes go into that file as PublishOptions.File says.
func PublishFile(ctx context.Context, dst string, write func(w io.Writer) error, opts PublishOptions) (Info, error) {
	var crc uint32
	c := content{
		emit: func(out io.Writer) (int64, error) {
			cw := &crcWriter{w: out}
			err := write(cw)
			crc = cw.crc
			if err != nil {
				err = contentError{err}
			}
			return cw.n, err
		},
		readBack: func(ctx context.Context, file afero.File, osf *os.File, size int64, calls *sys.Calls) error {
			if osf != nil {
				if err := calls.DropCache(osf, 0, size); err != nil && !errors.Is(err, sys.ErrUnsupported) {
					return fmt.Errorf("drop cached pages: %w", err)
				}
			}
			h := crc32.New(castagnoli)
			n, err := io.Copy(h, io.NewSectionReader(ctxReaderAt{ctx, file}, 0, size))
			if err != nil {
				return err
			}
			if got := h.Sum32(); n != size || got != crc {
				return corruptf("read %d bytes with CRC-32C %08x back, wrote %d bytes with CRC-32C %08x", n, got, size, crc)
			}
			return nil
		},
	}
	return publishContent(ctx, dst, c, opts, &sys.Default)
}

// ctxReaderAt fails its reads once ctx is done.
type ctxReaderAt struct {
	ctx context.Context
	r   io.ReaderAt
}

func (c ctxReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.ReadAt(p, off)
}

// contentError is an error of PublishFile's write function, returned without the publication's
// context: the function's own message says what failed.
type contentError struct{ err error }

func (c contentError) Error() string { return c.err.Error() }
func (c contentError) Unwrap() error { return c.err }
