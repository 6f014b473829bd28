package objstore

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/writeout/writeout/internal/invalid"
)

// ErrInvalid marks a bad argument: a malformed s3:// URL, a missing endpoint, a bad option.
// It wraps medium.ErrInvalid.
var ErrInvalid = invalid.Sentinel("objstore: invalid argument")

// ErrNotFound marks a missing bucket or object.
var ErrNotFound = errors.New("objstore: not found")

// ErrChanged marks an object replaced while it was being read: a ranged GET pinned to the
// ETag seen when the reader opened it (If-Match) found another. It is not corruption: the
// object is whole, only another one.
var ErrChanged = errors.New("objstore: object changed while reading")

// Config says how to reach an S3-compatible service. ConfigFromEnv fills it from the
// variables the AWS SDKs read.
type Config struct {
	// Endpoint is the service's URL, "https://host[:port]" or "http://host[:port]" (plain
	// HTTP, for a local server); a bare "host[:port]" means HTTPS. Empty means AWS S3 in
	// Region ("https://s3.amazonaws.com").
	Endpoint string
	// Region is the bucket's region; empty lets the client ask the service.
	Region string
	// AccessKey and SecretKey sign the requests; SessionToken goes with temporary keys. With
	// no AccessKey the requests are anonymous.
	AccessKey, SecretKey, SessionToken string
	// Transport carries the requests; nil means a copy of http.DefaultTransport.
	Transport http.RoundTripper
}

// ConfigFromEnv returns the Config of the environment: AWS_ENDPOINT_URL_S3 or
// AWS_ENDPOINT_URL (the endpoint variables of the AWS SDKs and CLI), AWS_REGION or
// AWS_DEFAULT_REGION, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN.
func ConfigFromEnv() Config {
	first := func(names ...string) string {
		for _, n := range names {
			if v := os.Getenv(n); v != "" {
				return v
			}
		}
		return ""
	}
	return Config{
		Endpoint:     first("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"),
		Region:       first("AWS_REGION", "AWS_DEFAULT_REGION"),
		AccessKey:    os.Getenv("AWS_ACCESS_KEY_ID"),
		SecretKey:    os.Getenv("AWS_SECRET_ACCESS_KEY"),
		SessionToken: os.Getenv("AWS_SESSION_TOKEN"),
	}
}

// Client is a connection to an S3-compatible service, safe for concurrent use.
type Client struct {
	core minio.Core
}

// New returns a Client for cfg. It sends nothing: a wrong endpoint or key shows at the first
// request.
func New(cfg Config) (*Client, error) {
	endpoint := cfg.Endpoint
	secure := true
	switch {
	case endpoint == "":
		endpoint = "s3.amazonaws.com"
	case strings.Contains(endpoint, "://"):
		u, err := url.Parse(endpoint)
		if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") || (u.Path != "" && u.Path != "/") {
			return nil, fmt.Errorf("%w: endpoint %q: want http://host[:port] or https://host[:port]", ErrInvalid, cfg.Endpoint)
		}
		endpoint, secure = u.Host, u.Scheme == "https"
	}
	var creds *credentials.Credentials
	if cfg.AccessKey != "" {
		creds = credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, cfg.SessionToken)
	} else {
		creds = credentials.New(&credentials.Static{}) // anonymous
	}
	tr := cfg.Transport
	if tr == nil {
		tr = http.DefaultTransport.(*http.Transport).Clone()
	}
	c, err := minio.NewCore(endpoint, &minio.Options{Creds: creds, Secure: secure, Region: cfg.Region, Transport: tr})
	if err != nil {
		return nil, fmt.Errorf("objstore: endpoint %q: %w: %w", cfg.Endpoint, ErrInvalid, err)
	}
	return &Client{core: *c}, nil
}

// ParseURL splits "s3://bucket/key" into its bucket and key.
func ParseURL(s string) (bucket, key string, err error) {
	rest, ok := strings.CutPrefix(s, "s3://")
	if !ok {
		return "", "", fmt.Errorf("%w: %q is not an s3:// URL", ErrInvalid, s)
	}
	bucket, key, _ = strings.Cut(rest, "/")
	if bucket == "" || key == "" || strings.HasSuffix(key, "/") {
		return "", "", fmt.Errorf("%w: %q: want s3://bucket/key", ErrInvalid, s)
	}
	return bucket, key, nil
}

// IsURL reports whether s is an s3:// URL (well formed or not).
func IsURL(s string) bool { return strings.HasPrefix(s, "s3://") }

// URL names an object as "s3://bucket/key".
func URL(bucket, key string) string { return "s3://" + bucket + "/" + key }

// stat returns an object's size and ETag, or an error wrapping ErrNotFound if it does not
// exist.
func (c *Client) stat(ctx context.Context, bucket, key string) (int64, string, error) {
	info, err := c.core.StatObject(ctx, bucket, key, minio.StatObjectOptions{})
	if err != nil {
		return 0, "", fmt.Errorf("objstore: stat %s: %w", URL(bucket, key), notFound(err))
	}
	return info.Size, info.ETag, nil
}

// exists reports whether an object exists.
func (c *Client) exists(ctx context.Context, bucket, key string) (bool, error) {
	_, _, err := c.stat(ctx, bucket, key)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// PendingUploads returns the keys of the multipart uploads under prefix in bucket that were
// started and neither completed nor aborted. An upload of this package leaves none behind
// when it can reach the service; one killed mid-way can, and a bucket lifecycle rule
// (AbortIncompleteMultipartUpload) or AbortUploads removes them.
func (c *Client) PendingUploads(ctx context.Context, bucket, prefix string) ([]pending, error) {
	var out []pending
	keyMarker, idMarker := "", ""
	for {
		res, err := c.core.ListMultipartUploads(ctx, bucket, prefix, keyMarker, idMarker, "", 1000)
		if err != nil {
			return nil, fmt.Errorf("objstore: list multipart uploads of %s: %w", bucket, notFound(err))
		}
		for _, u := range res.Uploads {
			out = append(out, pending{Key: u.Key, UploadID: u.UploadID})
		}
		if !res.IsTruncated {
			return out, nil
		}
		keyMarker, idMarker = res.NextKeyMarker, res.NextUploadIDMarker
	}
}

// pending is a multipart upload started and neither completed nor aborted.
type pending struct {
	Key, UploadID string
}

// AbortUploads aborts the pending uploads given.
func (c *Client) AbortUploads(ctx context.Context, bucket string, ups []pending) error {
	var errs []error
	for _, u := range ups {
		if err := c.core.AbortMultipartUpload(ctx, bucket, u.Key, u.UploadID); err != nil {
			errs = append(errs, fmt.Errorf("objstore: abort upload %s of %s: %w", u.UploadID, URL(bucket, u.Key), err))
		}
	}
	return errors.Join(errs...)
}

// notFound wraps err with ErrNotFound when the service says the bucket or key is missing.
func notFound(err error) error {
	var e minio.ErrorResponse
	if !errors.As(err, &e) {
		return err
	}
	switch e.Code {
	case "NoSuchKey", "NoSuchBucket", "NotFound":
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	case "PreconditionFailed":
		return fmt.Errorf("%w: %w", ErrChanged, err)
	}
	return err
}
