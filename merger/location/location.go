// Package location parses where a segment, a Parquet file or a spec is written: a local path or
// an object in S3-compatible storage, s3://bucket/key. A location is parsed once (Parse) and
// opened as a merger.Output (Location.Output), the sink merger.MergeTo publishes to: a local
// file published as columns.PublishFile publishes (temp file, sync, rename), or an object
// uploaded as one multipart upload (columns/objstore.Upload) that appears whole or not at all.
// Every writer of outputs (merge, ingest, export) publishes through it.
package location

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/columns/objstore"
	"github.com/writeout/writeout/internal/invalid"
	"github.com/writeout/writeout/medium"
	"github.com/writeout/writeout/merger"
)

// ErrInvalid marks a string that is not a location: empty, a malformed s3:// URL (s3:/x,
// s3://bucket with no key), a scheme in capitals (S3://) or another scheme (gs://, http://).
var ErrInvalid = invalid.Sentinel("location: invalid location")

// Location is a local path or an S3 object. The zero Location is invalid.
type Location struct {
	path        string // a local path, when bucket is empty
	bucket, key string
}

// Parse parses s: s3://bucket/key is an object, anything else without a scheme a local path.
// Errors wrap ErrInvalid; a string that looks like a URL is never taken for a local path.
func Parse(s string) (Location, error) {
	if s == "" {
		return Location{}, fmt.Errorf("%w: empty", ErrInvalid)
	}
	if scheme, _, ok := strings.Cut(s, "://"); ok && isScheme(scheme) {
		if scheme != "s3" && strings.EqualFold(scheme, "s3") {
			return Location{}, fmt.Errorf("%w: %q: want s3://bucket/key (the scheme in lower case)", ErrInvalid, s)
		}
		if scheme != "s3" {
			return Location{}, fmt.Errorf("%w: %q: want a local path or s3://bucket/key (scheme %q not supported)", ErrInvalid, s, scheme)
		}
		bucket, key, err := objstore.ParseURL(s)
		if err != nil {
			return Location{}, fmt.Errorf("%w: %q: want s3://bucket/key", ErrInvalid, s)
		}
		return Location{bucket: bucket, key: key}, nil
	}
	if len(s) >= 3 && strings.EqualFold(s[:3], "s3:") {
		return Location{}, fmt.Errorf("%w: %q: want s3://bucket/key", ErrInvalid, s)
	}
	return Location{path: s}, nil
}

// isScheme reports whether s is a URL scheme: a letter, then letters, digits, +, - or .
func isScheme(s string) bool {
	if s == "" || !isLetter(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !isLetter(c) && !('0' <= c && c <= '9') && c != '+' && c != '-' && c != '.' {
			return false
		}
	}
	return true
}

func isLetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

// IsS3 reports whether l is an S3 object.
func (l Location) IsS3() bool { return l.bucket != "" }

// Path returns a local location's path; "" for an object.
func (l Location) Path() string { return l.path }

// String returns the path, or s3://bucket/key.
func (l Location) String() string {
	if l.IsS3() {
		return objstore.URL(l.bucket, l.key)
	}
	return l.path
}

// OutputOptions configure Location.Output. The zero value publishes a local file with
// SyncOutput and refuses to replace an existing output.
type OutputOptions struct {
	// Replace allows replacing an existing file or object.
	Replace bool
	// Durability of a local file (columns.PublishOptions); an object is durable once its
	// upload completes.
	Durability medium.Durability
	// S3 is the client of an object; required for one.
	S3 *objstore.Client
	// Progress, when set, is called with the bytes of each part an upload has sent.
	Progress func(n int64)
}

// Output returns the sink of l: a *File, or an object's *objstore.Upload.
func (l Location) Output(o OutputOptions) (merger.Output, error) {
	if !l.IsS3() {
		if l.path == "" {
			return nil, fmt.Errorf("%w: empty", ErrInvalid)
		}
		return &File{Path: l.path, Options: columns.PublishOptions{Durability: o.Durability, Replace: o.Replace}}, nil
	}
	if o.S3 == nil {
		return nil, fmt.Errorf("%w: %s: no S3 client", ErrInvalid, l)
	}
	return o.S3.NewUpload(l.bucket, l.key, objstore.UploadOptions{Replace: o.Replace, Progress: o.Progress})
}

// File is a local file as a merger.Output: it is published as columns.PublishFile publishes
// (a temp file next to Path, synced per Options.Durability, renamed into place).
type File struct {
	Path    string
	Options columns.PublishOptions
	// Info is the last successful publish's.
	Info columns.Info
}

var _ merger.Output = (*File)(nil)

// Name returns the path.
func (f *File) Name() string { return f.Path }

// Check fails, wrapping fs.ErrExist, when the file exists and Options.Replace is not set.
func (f *File) Check(context.Context) error {
	if f.Options.Replace {
		return nil
	}
	if _, err := os.Lstat(f.Path); err == nil {
		return fmt.Errorf("%s: %w", f.Path, fs.ErrExist)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// Publish writes the file with write (columns.PublishFile).
func (f *File) Publish(ctx context.Context, write func(w io.Writer) error) error {
	info, err := columns.PublishFile(ctx, f.Path, write, f.Options)
	if err != nil {
		return err
	}
	f.Info = info
	return nil
}

// PublishFile publishes the local file at src as out: its bytes, copied as they are.
func PublishFile(ctx context.Context, out merger.Output, src string) error {
	return out.Publish(ctx, func(w io.Writer) error {
		file, err := os.Open(src)
		if err != nil {
			return err
		}
		_, err = io.Copy(w, file)
		return errors.Join(err, file.Close())
	})
}
