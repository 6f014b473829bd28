package objstore

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"time"

	"github.com/minio/minio-go/v7"
)

// Small whole objects: the calls a log of small files (merger/table) makes on a bucket, beside
// the ranged reads and multipart uploads of segments.

// ObjectInfo describes an object of a listing.
type ObjectInfo struct {
	Key     string
	Size    int64
	ModTime time.Time // when the object was last written (LastModified)
}

// PutIfAbsent stores data as bucket/key only if no object has that key: one PutObject with
// If-None-Match: *, which S3 (since 2024), MinIO, R2 and GCS evaluate atomically. A taken key
// fails with an error wrapping fs.ErrExist (412 PreconditionFailed; 409 ConditionalRequestConflict,
// S3's answer to a concurrent conditional write of the same key, too). The body is sent with its
// Content-MD5 and SHA-256, so the service keeps it whole or not at all.
//
// A request whose answer is lost (a timeout, a dropped connection) is tried again like an
// upload part; the retry of a put that had landed then fails with fs.ErrExist, so a caller
// that must tell "mine" from "another's" reads the object back and compares (merger/table
// does). A service that ignores If-None-Match replaces the object silently: callers that
// depend on exclusivity probe for it first.
func (c *Client) PutIfAbsent(ctx context.Context, bucket, key string, data []byte) error {
	return c.put(ctx, bucket, key, data, true)
}

// Put stores data as bucket/key with a plain PutObject, replacing any object of that key, its
// body sent as PutIfAbsent sends it and tried again as it is. It is for a service that does
// not honour If-None-Match, where a caller that alone writes the key checks with Exists first.
func (c *Client) Put(ctx context.Context, bucket, key string, data []byte) error {
	return c.put(ctx, bucket, key, data, false)
}

// put is PutIfAbsent when ifAbsent, else Put.
func (c *Client) put(ctx context.Context, bucket, key string, data []byte, ifAbsent bool) error {
	md := md5.Sum(data)
	sh := sha256.Sum256(data)
	opts := minio.PutObjectOptions{ContentType: "application/octet-stream"}
	if ifAbsent {
		opts.SetMatchETagExcept("*")
	}
	err := c.retry(ctx, func() error {
		rctx, cancel := c.request(ctx)
		defer cancel()
		_, err := c.core.PutObject(rctx, bucket, key, bytes.NewReader(data), int64(len(data)),
			base64.StdEncoding.EncodeToString(md[:]), hex.EncodeToString(sh[:]), opts)
		return ctxErr(rctx, err)
	})
	if err != nil {
		var e minio.ErrorResponse
		if ifAbsent && errors.As(err, &e) && (e.Code == "PreconditionFailed" || e.StatusCode == http.StatusPreconditionFailed ||
			e.Code == "ConditionalRequestConflict") {
			return fmt.Errorf("objstore: put %s: exists: %w: %w", URL(bucket, key), fs.ErrExist, err)
		}
		return fmt.Errorf("objstore: put %s: %w", URL(bucket, key), ctxErr(ctx, notFound(err)))
	}
	return nil
}

// Exists reports whether the object bucket/key exists: a HEAD request (StatObject), tried
// again as a read is.
func (c *Client) Exists(ctx context.Context, bucket, key string) (bool, error) {
	var ok bool
	err := c.retry(ctx, func() error {
		var err error
		ok, err = c.exists(ctx, bucket, key)
		return err
	})
	if err != nil {
		return false, ctxErr(ctx, err)
	}
	return ok, nil
}

// ReadObject returns the whole object bucket/key, which must be at most limit bytes (a small
// object: a log entry, a spec); a missing one fails with an error wrapping ErrNotFound, a
// larger one with ErrInvalid.
func (c *Client) ReadObject(ctx context.Context, bucket, key string, limit int64) ([]byte, error) {
	var out []byte
	err := c.retry(ctx, func() error {
		rctx, cancel := c.request(ctx)
		defer cancel()
		body, info, _, err := c.core.GetObject(rctx, bucket, key, minio.GetObjectOptions{})
		if err != nil {
			return notFound(err)
		}
		defer func() { _ = body.Close() }()
		if info.Size > limit {
			return fmt.Errorf("%w: object of %d bytes, at most %d expected", ErrInvalid, info.Size, limit)
		}
		b, err := io.ReadAll(io.LimitReader(body, limit+1))
		if err != nil {
			return ctxErr(rctx, err)
		}
		if int64(len(b)) > limit {
			return fmt.Errorf("%w: object over %d bytes", ErrInvalid, limit)
		}
		if info.Size >= 0 && int64(len(b)) != info.Size {
			return fmt.Errorf("objstore: read %d bytes of %d", len(b), info.Size)
		}
		out = b
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("objstore: get %s: %w", URL(bucket, key), ctxErr(ctx, err))
	}
	return out, nil
}

// List returns the objects whose keys start with prefix, every level below it included, in
// key order (the order S3 lists in).
func (c *Client) List(ctx context.Context, bucket, prefix string) ([]ObjectInfo, error) {
	var out []ObjectInfo
	for obj := range c.core.Client.ListObjects(ctx, bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if obj.Err != nil {
			return nil, fmt.Errorf("objstore: list %s: %w", URL(bucket, prefix), ctxErr(ctx, notFound(obj.Err)))
		}
		out = append(out, ObjectInfo{Key: obj.Key, Size: obj.Size, ModTime: obj.LastModified})
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("objstore: list %s: %w", URL(bucket, prefix), err)
	}
	return out, nil
}
