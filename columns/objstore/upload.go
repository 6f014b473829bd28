package objstore

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
)

// MinPartSize is the smallest part S3 accepts in a multipart upload, but for the last one.
const MinPartSize = 5 << 20

// defaultPartSize is the first parts' size of an Upload when UploadOptions.PartSize is 0: the
// smallest S3 takes, since two parts are held in memory (an s3:// merge's peak was 16 MiB
// above the local merge's with parts of 8 MiB).
const defaultPartSize = MinPartSize

// partGrowth is how many parts an upload puts before its parts double in size (a variable
// for tests): 10,000 parts of 5 MiB doubling every 2,000 make objects of up to 310 GiB.
var partGrowth = 2000

// maxParts is the most parts one multipart upload may have.
const maxParts = 10000

// UploadOptions configure an Upload. The zero value uploads 5 MiB parts (doubling every 2,000
// parts) and refuses to replace an existing object.
type UploadOptions struct {
	// Replace allows replacing an existing object.
	Replace bool
	// PartSize is the size of the first parts (every 2,000 parts it doubles; the last may be
	// smaller); 0 means 5 MiB, and it may not be below MinPartSize. Two parts are held in
	// memory: one filling, one in flight.
	PartSize int
	// Progress, when set, is called with the bytes of each part once the service holds it.
	Progress func(n int64)
}

// Upload publishes one object through a multipart upload: the object appears, whole, only
// when the upload completes, and a failed or cancelled upload is aborted and leaves nothing.
// It is the output side of a merge on object storage (it implements merger.Output); any
// writer of a stream can use it through Publish.
type Upload struct {
	c           *Client
	bucket, key string
	opts        UploadOptions
}

// NewUpload returns an Upload of bucket/key. It sends nothing.
func (c *Client) NewUpload(bucket, key string, opts UploadOptions) (*Upload, error) {
	if opts.PartSize == 0 {
		opts.PartSize = defaultPartSize
	}
	if opts.PartSize < MinPartSize {
		return nil, fmt.Errorf("%w: part size %d, at least %d", ErrInvalid, opts.PartSize, MinPartSize)
	}
	if bucket == "" || key == "" {
		return nil, fmt.Errorf("%w: empty bucket or key", ErrInvalid)
	}
	return &Upload{c: c, bucket: bucket, key: key, opts: opts}, nil
}

// Name returns the object's URL, s3://bucket/key.
func (u *Upload) Name() string { return URL(u.bucket, u.key) }

// Check fails, with an error wrapping ErrNotFound, if the bucket does not exist, and with one
// wrapping fs.ErrExist if the object exists and Replace is not set; its errors say what was
// being checked. Publish checks again; calling Check first makes a merge fail before its work.
func (u *Upload) Check(ctx context.Context) error {
	// The bucket first, Replace or not: a HEAD of a key in a missing bucket reads as a
	// missing key, and a merge into a bucket that does not exist ran whole before its upload
	// failed.
	rctx, cancel := u.c.request(ctx)
	defer cancel()
	ok, err := u.c.core.BucketExists(rctx, u.bucket)
	if err != nil {
		return fmt.Errorf("objstore: %s: check that bucket %q exists (HEAD bucket, which needs s3:ListBucket): %w", u.Name(), u.bucket, err)
	}
	if !ok {
		return fmt.Errorf("objstore: %s: bucket %q does not exist: %w", u.Name(), u.bucket, ErrNotFound)
	}
	if u.opts.Replace {
		return nil
	}
	ok, err = u.c.exists(ctx, u.bucket, u.key)
	if err != nil {
		return fmt.Errorf("objstore: %s: check whether the object exists (HEAD, which needs s3:GetObject on the key): %w", u.Name(), err)
	}
	if ok {
		return fmt.Errorf("objstore: %s exists (set Replace to replace it): %w", u.Name(), fs.ErrExist)
	}
	return nil
}

// abortTimeout bounds the abort of a failed upload, which runs even when ctx is done: short,
// so that an interrupted process ends within seconds even when the service stalls (a
// pending upload left behind is found and aborted by a sweep, or by the bucket's lifecycle).
const abortTimeout = 3 * time.Second

// Publish uploads what write writes to its writer as the object:
//
//  1. without Replace, an existing object fails the publish (fs.ErrExist) before anything
//     is sent;
//  2. a multipart upload is started; write's bytes are cut into parts of PartSize, each put
//     while the next fills (the last part may be smaller);
//  3. once write returns nil, without Replace the object's absence is checked again, and the
//     upload is completed (with If-None-Match: *, so that a service that supports conditional
//     writes refuses to replace an object that appeared since: on one that ignores it, the
//     second check leaves a window of one request);
//
// The object appears at step 3's completion, whole. If write fails, a part fails, or ctx is
// done (the writer then fails its next Write), the upload is aborted (with a context of its
// own, so that a cancelled ctx still aborts), the object is left as it was, and the first
// error is returned, wrapping ctx.Err() for a cancellation.
func (u *Upload) Publish(ctx context.Context, write func(w io.Writer) error) (err error) {
	if err := u.Check(ctx); err != nil {
		return err
	}
	var putOpts minio.PutObjectOptions
	rctx, cancel := u.c.request(ctx)
	id, err := u.c.core.NewMultipartUpload(rctx, u.bucket, u.key, putOpts)
	cancel()
	if err != nil {
		return fmt.Errorf("objstore: start upload of %s: %w", u.Name(), ctxErr(ctx, notFound(err)))
	}
	pw := &partWriter{u: u, ctx: ctx, id: id, buf: make([]byte, 0, u.opts.PartSize), spare: make([]byte, 0, u.opts.PartSize)}
	marker := ""
	defer func() {
		if err != nil {
			_ = pw.wait() // the part in flight, if any, before the abort (its error is in err or later)
			actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), abortTimeout)
			defer cancel()
			if aerr := u.c.core.AbortMultipartUpload(actx, u.bucket, u.key, id); aerr != nil {
				sweep := u.Name()
				if marker != "" { // the marker makes it found by a prefix
					sweep = URL(u.bucket, u.key[:strings.LastIndexByte(u.key, '/')+1])
				}
				err = errors.Join(err, fmt.Errorf("%w: abort upload %s of %s failed (segtool sweep %s, or the bucket's AbortIncompleteMultipartUpload rule, removes it): %w", ErrPending, id, u.Name(), sweep, aerr))
				return // the marker stays with the upload
			}
		}
		if marker != "" {
			// The upload is complete or aborted: its marker goes. One left (the service
			// unreachable) names no pending upload; a sweep removes it.
			mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), abortTimeout)
			defer cancel()
			_ = u.c.core.RemoveObject(mctx, u.bucket, marker, minio.RemoveObjectOptions{})
		}
	}()
	if u.c.marks() {
		if marker, err = u.putMarker(ctx, id); err != nil {
			return err
		}
	}
	if err := write(pw); err != nil {
		return fmt.Errorf("objstore: upload %s: %w", u.Name(), err)
	}
	if err := pw.flush(true); err != nil {
		return err
	}
	if err := pw.wait(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("objstore: upload %s: %w", u.Name(), err)
	}
	if !u.opts.Replace {
		if err := u.Check(ctx); err != nil {
			return err
		}
		putOpts.SetMatchETagExcept("*")
	}
	rctx, cancel = u.c.request(ctx)
	defer cancel()
	if _, err := u.c.core.CompleteMultipartUpload(rctx, u.bucket, u.key, id, pw.done, putOpts); err != nil {
		if e := (minio.ErrorResponse{}); errors.As(err, &e) && e.Code == "PreconditionFailed" {
			err = fmt.Errorf("%w: %w", fs.ErrExist, err)
		}
		return fmt.Errorf("objstore: complete upload of %s: %w", u.Name(), ctxErr(ctx, err))
	}
	return nil
}

// MarkerInfix is what a marker's key adds to its upload's key, before a hash of the upload's
// id: a marker of the upload of "out/x.seg" is "out/x.seg.writeout-upload-0123456789abcdef",
// so that a listing of any prefix of the key lists it too.
const MarkerInfix = ".writeout-upload-"

// markerKey returns the key of the marker of upload id of key.
func markerKey(key, id string) string {
	h := sha256.Sum256([]byte(id))
	return key + MarkerInfix + hex.EncodeToString(h[:8])
}

// putMarker writes the marker of upload id, a small JSON object that says what it marks.
func (u *Upload) putMarker(ctx context.Context, id string) (string, error) {
	key := markerKey(u.key, id)
	body, err := json.Marshal(struct {
		Key      string    `json:"key"`
		UploadID string    `json:"uploadId"`
		Started  time.Time `json:"started"`
	}{u.key, id, time.Now().UTC()})
	if err != nil {
		return "", err
	}
	sum := md5.Sum(body)
	rctx, cancel := u.c.request(ctx)
	defer cancel()
	if _, err := u.c.core.PutObject(rctx, u.bucket, key, bytes.NewReader(body), int64(len(body)), base64.StdEncoding.EncodeToString(sum[:]), "",
		minio.PutObjectOptions{ContentType: "application/json", DisableContentSha256: true}); err != nil {
		return "", fmt.Errorf("objstore: %s: put the marker of upload %s, which lets a sweep of a prefix find it on MinIO "+
			"(needs s3:PutObject and s3:DeleteObject on %s; Config.Markers, --s3-upload-markers never, goes without): %w",
			u.Name(), id, URL(u.bucket, key), ctxErr(ctx, notFound(err)))
	}
	return key, nil
}

// ctxErr wraps err with ctx's error when ctx is done, so that a cancelled request says so.
func ctxErr(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("%w: %w", cerr, err)
	}
	return err
}

// partWriter cuts a stream into parts and puts each while the next one fills: buf fills,
// then is handed to a goroutine (inflight) and swapped with spare once that returns.
//
// Each part is sent with its Content-MD5, which the service checks before it keeps the part,
// and without a SHA-256 of the payload in the signature (DisableContentSha256): over plain
// HTTP minio-go would otherwise sign the body in aws-chunked streaming form, which not every
// S3-compatible service decodes in UploadPart (gofakes3, the tests' server, keeps the chunk
// framing as data), while Content-MD5 is checked by all of them, over HTTP and HTTPS alike.
type partWriter struct {
	u     *Upload
	ctx   context.Context
	id    string
	buf   []byte
	spare []byte
	done  []minio.CompletePart
	n     int // parts started

	inflight chan error // the put in flight, nil when none
	err      error      // sticky: the first failure
}

var _ io.Writer = (*partWriter)(nil)

// Write buffers p, putting every part that fills.
func (w *partWriter) Write(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	if err := w.ctx.Err(); err != nil {
		w.err = fmt.Errorf("objstore: upload %s: %w", w.u.Name(), err)
		return 0, w.err
	}
	written := 0
	for len(p) > 0 {
		k := min(len(p), cap(w.buf)-len(w.buf))
		w.buf = append(w.buf, p[:k]...)
		p, written = p[k:], written+k
		if len(w.buf) == cap(w.buf) {
			if err := w.flush(false); err != nil {
				return written, err
			}
		}
	}
	return written, nil
}

// flush puts the buffered part (an empty one only as the first and last part, an object of
// zero bytes), after the part in flight returns.
func (w *partWriter) flush(last bool) error {
	if w.err != nil {
		return w.err
	}
	if len(w.buf) == 0 && !(last && w.n == 0) {
		return nil
	}
	if err := w.wait(); err != nil {
		return err
	}
	if w.n == maxParts {
		w.err = fmt.Errorf("objstore: upload %s: more than %d parts (%d bytes the last): %w", w.u.Name(), maxParts, cap(w.buf), ErrInvalid)
		return w.err
	}
	w.n++
	num, data := w.n, w.buf
	size := cap(data)
	if w.n%partGrowth == 0 {
		size *= 2
	}
	w.buf, w.spare = w.spare[:0], nil
	if cap(w.buf) < size {
		w.buf = make([]byte, 0, size)
	}
	ch := make(chan error, 1)
	w.inflight = ch
	go func() {
		sum := md5.Sum(data)
		var part minio.ObjectPart
		err := w.u.c.retry(w.ctx, func() error {
			// Each try within the request timeout, from the part's first byte.
			ctx, cancel := w.u.c.request(w.ctx)
			defer cancel()
			var err error
			part, err = w.u.c.core.PutObjectPart(ctx, w.u.bucket, w.u.key, w.id, num, bytes.NewReader(data), int64(len(data)),
				minio.PutObjectPartOptions{Md5Base64: base64.StdEncoding.EncodeToString(sum[:]), DisableContentSha256: true})
			return ctxErr(ctx, err)
		})
		if err != nil {
			ch <- fmt.Errorf("objstore: upload %s: part %d (%d bytes): %w", w.u.Name(), num, len(data), ctxErr(w.ctx, err))
			return
		}
		w.done = append(w.done, minio.CompletePart{PartNumber: num, ETag: part.ETag})
		w.spare = data
		if f := w.u.opts.Progress; f != nil {
			f(int64(len(data)))
		}
		ch <- nil
	}()
	return nil
}

// wait waits for the part in flight and returns the first failure.
func (w *partWriter) wait() error {
	if w.inflight != nil {
		err := <-w.inflight
		w.inflight = nil
		if err != nil && w.err == nil {
			w.err = err
		}
	}
	return w.err
}
