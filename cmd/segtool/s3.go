package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/columns/objstore"
	"github.com/writeout/writeout/merger/location"
)

// s3Flags say how to reach the object storage of s3:// paths: the AWS_* environment
// variables (objstore.ConfigFromEnv), overridden by --s3-endpoint and --s3-region. The client
// is made at the first s3:// path; fetched and uploaded count the bytes moved.
type s3Flags struct {
	endpoint, region string
	timeout          time.Duration
	markers          string

	once   sync.Once
	client *objstore.Client
	err    error

	fetched, uploaded atomic.Int64
	gets              atomic.Int64
	onBytes           func() // called after bytes moved (progress bar); set before any transfer
}

const s3Help = `Paths of the form s3://BUCKET/KEY name objects in S3-compatible object storage. The endpoint,
region and credentials come from the variables the AWS SDKs read: AWS_ENDPOINT_URL (or
AWS_ENDPOINT_URL_S3; http://host:port for a plain-HTTP server such as a local MinIO), AWS_REGION,
AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN; --s3-endpoint and --s3-region
override the first two. An input object is read with ranged GETs planned from its footer;
the fetched bytes go through a temp file, never fetched twice. Each request has a deadline
(--s3-request-timeout), and a broken read or upload part is tried again.`

// addS3UploadFlags adds the flags of a command that uploads to s3:// (addS3Flags too).
func addS3UploadFlags(cmd *cobra.Command, f *s3Flags) {
	addS3Flags(cmd, f)
	cmd.Flags().StringVar(&f.markers, "s3-upload-markers", "auto", "auto|always|never: while an upload is pending, a marker object KEY"+objstore.MarkerInfix+"HASH beside it lets 'segtool sweep s3://BUCKET/PREFIX' find it where the service lists pending uploads by exact key only (MinIO; auto: when the service names itself MinIO)")
}

func addS3Flags(cmd *cobra.Command, f *s3Flags) {
	cmd.Flags().StringVar(&f.endpoint, "s3-endpoint", "", "endpoint of s3:// paths, http(s)://host[:port] (default: $AWS_ENDPOINT_URL, else AWS S3)")
	cmd.Flags().StringVar(&f.region, "s3-region", "", "region of s3:// paths (default: $AWS_REGION)")
	cmd.Flags().DurationVar(&f.timeout, "s3-request-timeout", 0, "bound of each request to the object storage, its body included; a failed read or upload part is tried 4 times (default 25s: a stalled service fails the command within 2 minutes)")
}

// clientFor returns the client of s3:// paths, made once.
func (f *s3Flags) clientFor() (*objstore.Client, error) {
	f.once.Do(func() {
		cfg := objstore.ConfigFromEnv()
		if f.endpoint != "" {
			cfg.Endpoint = f.endpoint
		}
		if f.region != "" {
			cfg.Region = f.region
		}
		cfg.RequestTimeout = f.timeout
		if f.markers != "" {
			if cfg.Markers, f.err = objstore.ParseMarkers(f.markers); f.err != nil {
				f.err = usageError{fmt.Errorf("--s3-upload-markers: %w", f.err)}
				return
			}
		}
		f.client, f.err = objstore.New(cfg)
		if f.err != nil {
			f.err = usageError{f.err}
		}
	})
	return f.client, f.err
}

func (f *s3Flags) moved() {
	if f.onBytes != nil {
		f.onBytes()
	}
}

// parseLocations checks that every path is a local path or an s3:// URL (location.Parse),
// before a command that goes on past a bad input does any work: a malformed one is a usage
// error.
func parseLocations(paths []string) error {
	for _, p := range paths {
		if _, err := location.Parse(p); err != nil {
			return usageError{err}
		}
	}
	return nil
}

// openInput opens a segment file, or with an s3:// path an object. The close function
// closes the segment. A malformed location (s3:/x, S3://x, gs://x) is a usage error, never
// a local path.
func openInput(ctx context.Context, path string, s3 *s3Flags) (*columns.Segment, func() error, error) {
	loc, err := location.Parse(path)
	if err != nil {
		return nil, nil, usageError{err}
	}
	if !loc.IsS3() {
		return openSegment(path)
	}
	bucket, key, err := objstore.ParseURL(path)
	if err != nil {
		return nil, nil, usageError{err}
	}
	c, err := s3.clientFor()
	if err != nil {
		return nil, nil, err
	}
	seg, err := c.OpenSegment(ctx, bucket, key, objstore.ReaderOptions{Progress: func(n int64) {
		s3.fetched.Add(n)
		s3.moved()
	}})
	if err != nil {
		return nil, nil, err
	}
	return seg.Segment, func() error {
		g, _ := seg.Reader.Stats()
		s3.gets.Add(g)
		return seg.Close()
	}, nil
}

// openParallel is how many inputs openInputs opens at once: an object's open waits on a GET
// or two (its footer), so a query of a table of a hundred objects waits on them together.
const openParallel = 16

// openInputs opens the segments at paths (files, or s3:// objects), up to openParallel at
// once, and returns them in the order of paths with their close functions. On an error (the
// first by position) it returns the close functions of the segments it opened, for the
// caller to call as it does on success.
func openInputs(ctx context.Context, paths []string, s3 *s3Flags) ([]*columns.Segment, []func() error, error) {
	segs := make([]*columns.Segment, len(paths))
	closers := make([]func() error, len(paths))
	errs := make([]error, len(paths))
	sem := make(chan struct{}, openParallel)
	var wg sync.WaitGroup
	for i, p := range paths {
		if !strings.HasPrefix(p, "s3://") {
			// A file opens in microseconds: no goroutine for it.
			segs[i], closers[i], errs[i] = openInput(ctx, p, s3)
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			segs[i], closers[i], errs[i] = openInput(ctx, p, s3)
		})
	}
	wg.Wait()
	var opened []func() error
	for _, c := range closers {
		if c != nil {
			opened = append(opened, c)
		}
	}
	for _, err := range errs {
		if err != nil {
			return nil, opened, err
		}
	}
	return segs, opened, nil
}

// newUpload returns the upload of an s3:// output.
func newUpload(path string, replace bool, s3 *s3Flags) (*objstore.Upload, error) {
	bucket, key, err := objstore.ParseURL(path)
	if err != nil {
		return nil, usageError{err}
	}
	c, err := s3.clientFor()
	if err != nil {
		return nil, err
	}
	return c.NewUpload(bucket, key, objstore.UploadOptions{Replace: replace, Progress: func(n int64) {
		s3.uploaded.Add(n)
		s3.moved()
	}})
}

// transfer describes the bytes moved, "" when none.
func (f *s3Flags) transfer() string {
	d, u := f.fetched.Load(), f.uploaded.Load()
	switch {
	case d > 0 && u > 0:
		return fmt.Sprintf("fetched %s, uploaded %s", humanBytes(d), humanBytes(u))
	case d > 0:
		return "fetched " + humanBytes(d)
	case u > 0:
		return "uploaded " + humanBytes(u)
	}
	return ""
}
