package objstore

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"time"

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

// ErrPending marks an upload whose abort failed (the service unreachable or stalled): no object
// appeared, but the upload is left pending until a sweep (PendingUploads, AbortUploads) or the
// bucket's lifecycle rule removes it.
var ErrPending = errors.New("objstore: upload left pending")

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
	// RequestTimeout bounds each request, its body included (a ranged GET of RangeSize, an
	// upload part): a service that stops answering fails the request instead of hanging it.
	// A failed ranged GET or upload part is tried again, after 250 ms, 500 ms, 1 s...,
	// Retries tries in all: with the defaults a service restarted within a second is
	// waited for, and a stalled one fails a read or an upload within 102 s. 0 means 25 s,
	// negative no bound.
	RequestTimeout time.Duration
	// Retries is the tries of a ranged GET or an upload part; 0 means 4.
	Retries int
	// Markers says whether an Upload leaves a marker object beside its key while it is
	// pending (see Upload.Publish), so that PendingUploads finds it by a prefix on a service
	// that lists pending uploads by exact key only (MinIO). The default, MarkersAuto, writes
	// them when the service names itself MinIO in its responses' Server header.
	Markers Markers
}

// Markers is Config.Markers.
type Markers int

// Config.Markers' values.
const (
	MarkersAuto   Markers = iota // on a service that says it is MinIO
	MarkersAlways                // on every service
	MarkersNever                 // never: a pending upload is found by its exact key on MinIO
)

// ParseMarkers parses auto, always or never.
func ParseMarkers(s string) (Markers, error) {
	switch s {
	case "auto":
		return MarkersAuto, nil
	case "always":
		return MarkersAlways, nil
	case "never":
		return MarkersNever, nil
	}
	return 0, fmt.Errorf("%w: markers %q: want auto, always or never", ErrInvalid, s)
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
	core    minio.Core
	timeout time.Duration // Config.RequestTimeout; 0: none
	tries   int
	markers Markers
	minio   *atomic.Bool // a response said "Server: MinIO"
}

// serverSniffer carries requests through rt and notes whether a response names MinIO as its
// server.
type serverSniffer struct {
	rt    http.RoundTripper
	minio *atomic.Bool
}

func (s serverSniffer) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := s.rt.RoundTrip(r)
	if err == nil && strings.HasPrefix(strings.ToLower(resp.Header.Get("Server")), "minio") {
		s.minio.Store(true)
	}
	return resp, err
}

// marks reports whether uploads leave markers (Config.Markers).
func (c *Client) marks() bool {
	return c.markers == MarkersAlways || c.markers == MarkersAuto && c.minio.Load()
}

// defaultRequestTimeout and defaultTries are Config.RequestTimeout's and Config.Retries'
// defaults: a ranged GET or an upload part of 8 MiB at 340 KB/s, and a stalled service found
// within two minutes.
const (
	defaultRequestTimeout = 25 * time.Second
	defaultTries          = 4
)

// request returns the context of one request: ctx bounded by the client's timeout.
func (c *Client) request(ctx context.Context) (context.Context, context.CancelFunc) {
	if c.timeout <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, c.timeout)
}

// retry runs try up to the client's tries while it fails with an error worth another (not a
// missing or changed object, not the end of ctx), sleeping 250 ms, 500 ms... between; it
// returns the last error, which says how many tries failed.
func (c *Client) retry(ctx context.Context, try func() error) error {
	wait := 250 * time.Millisecond
	var err error
	for n := 1; ; n++ {
		if err = try(); err == nil || n >= c.tries || ctx.Err() != nil || !retryable(err) {
			if err != nil && n > 1 {
				err = fmt.Errorf("%w (%d tries)", err, n)
			}
			return err
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return fmt.Errorf("%w (%d tries): %w", err, n, ctx.Err())
		}
		wait *= 2
	}
}

// retryable reports whether a failed request is worth another try.
func retryable(err error) bool {
	if errors.Is(err, ErrNotFound) || errors.Is(err, ErrChanged) || errors.Is(err, ErrInvalid) || errors.Is(err, context.Canceled) {
		return false
	}
	var e minio.ErrorResponse
	if errors.As(err, &e) && e.StatusCode >= 400 && e.StatusCode < 500 && e.StatusCode != http.StatusRequestTimeout && e.StatusCode != http.StatusTooManyRequests {
		return false // the request itself is refused (rights, preconditions)
	}
	return true
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
	if cfg.Markers < MarkersAuto || cfg.Markers > MarkersNever {
		return nil, fmt.Errorf("%w: markers %d", ErrInvalid, cfg.Markers)
	}
	isMinIO := new(atomic.Bool)
	c, err := minio.NewCore(endpoint, &minio.Options{Creds: creds, Secure: secure, Region: cfg.Region,
		Transport: serverSniffer{rt: tr, minio: isMinIO}})
	if err != nil {
		return nil, fmt.Errorf("objstore: endpoint %q: %w: %w", cfg.Endpoint, ErrInvalid, err)
	}
	timeout := cfg.RequestTimeout
	if timeout == 0 {
		timeout = defaultRequestTimeout
	}
	tries := cfg.Retries
	if tries == 0 {
		tries = defaultTries
	}
	return &Client{core: *c, timeout: timeout, tries: max(tries, 1), markers: cfg.Markers, minio: isMinIO}, nil
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
	ctx, cancel := c.request(ctx)
	defer cancel()
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

// PendingUploads returns the multipart uploads under prefix in bucket that were started and
// neither completed nor aborted. An upload of this package leaves none behind when it can
// reach the service; one killed mid-way can, and a bucket lifecycle rule
// (AbortIncompleteMultipartUpload) or AbortUploads removes them.
//
// The uploads are listed by prefix, which S3 does; MinIO lists the uploads of an exact key
// only, so the markers under prefix (see Config.Markers) are listed too, and the uploads of
// each marked key by that key.
func (c *Client) PendingUploads(ctx context.Context, bucket, prefix string) ([]pending, error) {
	out, err := c.listUploads(ctx, bucket, prefix)
	if err != nil {
		return nil, err
	}
	markers, err := c.listMarkers(ctx, bucket, prefix)
	if err != nil {
		return nil, err
	}
	seen := make(map[string]bool, len(out))
	for _, u := range out {
		seen[u.UploadID] = true
	}
	listed := map[string]bool{}
	for _, m := range markers {
		if listed[m.key] {
			continue
		}
		listed[m.key] = true
		ups, err := c.listUploads(ctx, bucket, m.key)
		if err != nil {
			return nil, err
		}
		for _, u := range ups {
			if u.Key == m.key && !seen[u.UploadID] {
				seen[u.UploadID] = true
				out = append(out, u)
			}
		}
	}
	byKey := make(map[string]marker, len(markers))
	for _, m := range markers {
		byKey[m.name] = m
	}
	for i := range out {
		if m, ok := byKey[markerKey(out[i].Key, out[i].UploadID)]; ok {
			out[i].Marker = m.name
		}
	}
	return out, nil
}

// listUploads lists the pending uploads the service lists for prefix.
func (c *Client) listUploads(ctx context.Context, bucket, prefix string) ([]pending, error) {
	var out []pending
	keyMarker, idMarker := "", ""
	for {
		rctx, cancel := c.request(ctx)
		res, err := c.core.ListMultipartUploads(rctx, bucket, prefix, keyMarker, idMarker, "", 1000)
		cancel()
		if e := (minio.ErrorResponse{}); errors.As(err, &e) && e.Code == "NoSuchUpload" {
			return out, nil // none: gofakes3 (the tests' server) says so of a bucket without any
		}
		if err != nil {
			return nil, fmt.Errorf("objstore: list the multipart uploads of %s (needs s3:ListBucketMultipartUploads): %w", URL(bucket, prefix), notFound(err))
		}
		for _, u := range res.Uploads {
			out = append(out, pending{Key: u.Key, UploadID: u.UploadID, Initiated: u.Initiated})
		}
		if !res.IsTruncated {
			return out, nil
		}
		keyMarker, idMarker = res.NextKeyMarker, res.NextUploadIDMarker
	}
}

// marker is a marker object: its key, the key of the upload it marks, and when it was written.
type marker struct {
	name, key string
	written   time.Time
}

// listMarkers lists the markers under prefix.
func (c *Client) listMarkers(ctx context.Context, bucket, prefix string) ([]marker, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends the listing's goroutine on an early return
	var out []marker
	for o := range c.core.Client.ListObjects(ctx, bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if o.Err != nil {
			return nil, fmt.Errorf("objstore: list the objects of %s, to find upload markers (needs s3:ListBucket): %w", URL(bucket, prefix), notFound(o.Err))
		}
		i := strings.LastIndex(o.Key, MarkerInfix)
		if i <= 0 || len(o.Key)-i-len(MarkerInfix) != 16 {
			continue
		}
		out = append(out, marker{name: o.Key, key: o.Key[:i], written: o.LastModified})
	}
	return out, nil
}

// pending is a multipart upload started and neither completed nor aborted.
type pending struct {
	Key, UploadID string
	Initiated     time.Time // when it was started, as the service says (zero if it does not)
	Marker        string    // the key of its marker, if it has one
}

// StaleMarkers returns the markers under prefix written over age ago whose upload is no
// longer pending (a process that completed or aborted its upload but could not remove the
// marker): RemoveMarkers removes them.
func (c *Client) StaleMarkers(ctx context.Context, bucket, prefix string, age time.Duration) ([]string, error) {
	markers, err := c.listMarkers(ctx, bucket, prefix)
	if err != nil || len(markers) == 0 {
		return nil, err
	}
	live := map[string]bool{}
	listed := map[string]bool{}
	var out []string
	now := time.Now()
	for _, m := range markers {
		if !listed[m.key] {
			listed[m.key] = true
			ups, err := c.listUploads(ctx, bucket, m.key)
			if err != nil {
				return nil, err
			}
			for _, u := range ups {
				live[markerKey(u.Key, u.UploadID)] = true
			}
		}
		if !live[m.name] && now.Sub(m.written) >= age {
			out = append(out, m.name)
		}
	}
	return out, nil
}

// RemoveMarkers removes markers (keys StaleMarkers returned).
func (c *Client) RemoveMarkers(ctx context.Context, bucket string, keys []string) error {
	var errs []error
	for _, k := range keys {
		if err := c.Remove(ctx, bucket, k); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Remove deletes the object bucket/key (nothing when it does not exist).
func (c *Client) Remove(ctx context.Context, bucket, key string) error {
	ctx, cancel := c.request(ctx)
	defer cancel()
	if err := c.core.RemoveObject(ctx, bucket, key, minio.RemoveObjectOptions{}); err != nil {
		return fmt.Errorf("objstore: remove %s: %w", URL(bucket, key), notFound(err))
	}
	return nil
}

// AbortUploads aborts the pending uploads given, and removes their markers.
func (c *Client) AbortUploads(ctx context.Context, bucket string, ups []pending) error {
	var errs []error
	for _, u := range ups {
		rctx, cancel := c.request(ctx)
		err := c.core.AbortMultipartUpload(rctx, bucket, u.Key, u.UploadID)
		cancel()
		if err != nil {
			errs = append(errs, fmt.Errorf("objstore: abort upload %s of %s: %w", u.UploadID, URL(bucket, u.Key), err))
			continue
		}
		if u.Marker != "" {
			if err := c.Remove(ctx, bucket, u.Marker); err != nil {
				errs = append(errs, err)
			}
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
