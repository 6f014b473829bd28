// Package s3test runs an S3-protocol server inside a test process, for the tests of objstore
// and of the programs that use it: gofakes3 (an S3 server library, objects kept in memory)
// served over real HTTP on a loopback port, behind a handler that counts what the clients
// asked, on the server's side of the wire. Nothing in it mocks a client: the clients under
// test speak HTTP to it as they would to a bucket.
package s3test

import (
	"bytes"
	"encoding/hex"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// Server is a running S3-protocol server on 127.0.0.1.
type Server struct {
	// URL is the endpoint, "http://127.0.0.1:PORT".
	URL string

	srv     *httptest.Server
	backend *s3mem.Backend
	fake    *gofakes3.GoFakeS3

	gets     atomic.Int64 // GET requests of objects (not listings)
	getBytes atomic.Int64 // bytes of their response bodies

	mu    sync.Mutex
	parts map[string][]int64 // upload id -> sizes of the parts put, by part number order of arrival
	hook  func(r *http.Request)

	minio         atomic.Bool // answer as MinIO does: see LikeMinIO
	unconditional atomic.Bool // ignore If-None-Match on writes: see IgnoreConditionalWrites
}

// LikeMinIO makes the server answer as MinIO does where it differs from S3 in what writeout
// relies on: every response names the server ("Server: MinIO"), and a listing of multipart
// uploads with a prefix lists only the uploads of the key equal to the prefix (MinIO lists
// no other: "working as intended", minio/minio#20989).
func (s *Server) LikeMinIO() { s.minio.Store(true) }

// IgnoreConditionalWrites makes the server ignore If-None-Match on writes, as S3 did before
// 2024 and older S3-compatible servers still do: the header is dropped from every PUT and POST
// before gofakes3 (which honours it) sees it, so a PutObject with If-None-Match: * replaces an
// existing object.
func (s *Server) IgnoreConditionalWrites() { s.unconditional.Store(true) }

// Start starts a server with the given buckets; Close stops it. Tests call Close through
// t.Cleanup.
func Start(buckets ...string) (*Server, error) {
	be := s3mem.New()
	for _, b := range buckets {
		if err := be.CreateBucket(b); err != nil {
			return nil, fmt.Errorf("s3test: create bucket %s: %w", b, err)
		}
	}
	s := &Server{backend: be, parts: map[string][]int64{}}
	s.fake = gofakes3.New(be)
	s.srv = httptest.NewServer(s.handler(s.fake.Server()))
	s.URL = s.srv.URL
	return s, nil
}

// Close stops the server.
func (s *Server) Close() { s.srv.Close() }

// handler counts the requests and bytes that h serves.
func (s *Server) handler(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		hook := s.hook
		s.mu.Unlock()
		if hook != nil {
			hook(r)
		}
		if s.unconditional.Load() && (r.Method == http.MethodPut || r.Method == http.MethodPost) {
			r.Header.Del("If-None-Match")
		}
		q := r.URL.Query()
		object := isObject(r.URL)
		if r.Method == http.MethodPut && object && q.Get("uploadId") != "" {
			n, _ := strconv.ParseInt(r.Header.Get("Content-Length"), 10, 64)
			s.mu.Lock()
			s.parts[q.Get("uploadId")] = append(s.parts[q.Get("uploadId")], n)
			s.mu.Unlock()
		}
		if (r.Method == http.MethodGet || r.Method == http.MethodHead) && object && len(q) == 0 && !s.ifMatch(w, r) {
			return
		}
		if r.Method == http.MethodGet && object && len(q) == 0 {
			s.gets.Add(1)
			w = &countingWriter{ResponseWriter: w, n: &s.getBytes}
		}
		if s.minio.Load() {
			w = &minioWriter{ResponseWriter: w}
			if r.Method == http.MethodGet && !object && q.Has("uploads") && q.Get("prefix") != "" {
				exactKeyUploads(w, r, h, q.Get("prefix"))
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

// exactKeyUploads serves a listing of multipart uploads with h, keeping only the uploads of
// key, as MinIO lists them for a prefix.
func exactKeyUploads(w http.ResponseWriter, r *http.Request, h http.Handler, key string) {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	body := rec.Body.Bytes()
	if rec.Code == http.StatusOK {
		var res struct {
			XMLName xml.Name `xml:"ListMultipartUploadsResult"`
			Inner   []byte   `xml:",innerxml"`
		}
		if err := xml.Unmarshal(body, &res); err == nil {
			// Drop every <Upload> element whose <Key> is not key; keep the rest as it was.
			var kept bytes.Buffer
			dec := xml.NewDecoder(bytes.NewReader(res.Inner))
			for {
				start := dec.InputOffset()
				tok, err := dec.Token()
				if err != nil {
					break
				}
				se, ok := tok.(xml.StartElement)
				if !ok || se.Name.Local != "Upload" {
					kept.Write(res.Inner[start:dec.InputOffset()])
					continue
				}
				var up struct {
					Key string `xml:"Key"`
				}
				if err := dec.DecodeElement(&up, &se); err != nil {
					break
				}
				if up.Key == key {
					kept.Write(res.Inner[start:dec.InputOffset()])
				}
			}
			body = append(append([]byte(`<?xml version="1.0" encoding="UTF-8"?>`+"\n"+`<ListMultipartUploadsResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">`),
				kept.Bytes()...), "</ListMultipartUploadsResult>"...)
		}
	}
	for k, v := range rec.Header() {
		if k != "Content-Length" {
			w.Header()[k] = v
		}
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(body)
}

// ifMatch answers a GET or HEAD of an object whose If-Match names another ETag than the
// object's as S3 does, 412 PreconditionFailed, and reports false; gofakes3 ignores the header.
func (s *Server) ifMatch(w http.ResponseWriter, r *http.Request) bool {
	want := r.Header.Get("If-Match")
	if want == "" {
		return true
	}
	bucket, key, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	obj, err := s.backend.HeadObject(bucket, key)
	if err != nil {
		return true // gofakes3 answers the missing object
	}
	if strings.Trim(want, `"`) == hex.EncodeToString(obj.Hash) || want == "*" {
		return true
	}
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(http.StatusPreconditionFailed)
	if r.Method == http.MethodGet {
		fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>
<Error><Code>PreconditionFailed</Code><Message>At least one of the pre-conditions you specified did not hold</Message><Condition>If-Match</Condition><Resource>%s</Resource></Error>`, r.URL.Path)
	}
	return false
}

// isObject reports whether u names an object (path-style: /bucket/key), not a bucket.
func isObject(u *url.URL) bool {
	p := u.Path
	if len(p) > 0 && p[0] == '/' {
		p = p[1:]
	}
	for i := 0; i < len(p); i++ {
		if p[i] == '/' {
			return i+1 < len(p)
		}
	}
	return false
}

type countingWriter struct {
	http.ResponseWriter
	n *atomic.Int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	k, err := c.ResponseWriter.Write(p)
	c.n.Add(int64(k))
	return k, err
}

// Gets returns the GET requests of objects served so far and the bytes of their bodies.
func (s *Server) Gets() (requests, bytes int64) { return s.gets.Load(), s.getBytes.Load() }

// ResetCounts sets the GET counts to zero.
func (s *Server) ResetCounts() { s.gets.Store(0); s.getBytes.Store(0) }

// PartSizes returns the sizes of the parts put to the multipart upload id, in arrival order.
func (s *Server) PartSizes(id string) []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int64(nil), s.parts[id]...)
}

// Uploads returns the ids of the uploads that received parts, in no order.
func (s *Server) Uploads() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]string, 0, len(s.parts))
	for id := range s.parts {
		ids = append(ids, id)
	}
	return ids
}

// OnRequest sets a function called with every request before it is served (nil: none); a test
// uses it to act at a given point of an upload, cancelling it for example.
func (s *Server) OnRequest(f func(r *http.Request)) {
	s.mu.Lock()
	s.hook = f
	s.mu.Unlock()
}

// Put stores an object with a plain HTTP PUT (unsigned: the server checks no signature).
func (s *Server) Put(bucket, key string, data []byte) error {
	req, err := http.NewRequest(http.MethodPut, s.URL+"/"+bucket+"/"+key, bytes.NewReader(data))
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("s3test: put %s/%s: %s: %s", bucket, key, resp.Status, body)
	}
	return nil
}

// Get returns an object's bytes read directly from the server's backend.
func (s *Server) Get(bucket, key string) ([]byte, error) {
	obj, err := s.backend.GetObject(bucket, key, nil)
	if err != nil {
		return nil, err
	}
	defer func() { _ = obj.Contents.Close() }()
	return io.ReadAll(obj.Contents)
}

// Exists reports whether the backend holds the object.
func (s *Server) Exists(bucket, key string) (bool, error) {
	_, err := s.backend.HeadObject(bucket, key)
	if gofakes3.HasErrorCode(err, gofakes3.ErrNoSuchKey) {
		return false, nil
	}
	return err == nil, err
}

// Keys returns the keys of the objects under prefix in bucket, read directly from the
// server's backend, in order.
func (s *Server) Keys(bucket, prefix string) ([]string, error) {
	p := gofakes3.NewPrefix(&prefix, nil)
	list, err := s.backend.ListBucket(bucket, &p, gofakes3.ListBucketPage{})
	if err != nil {
		return nil, err
	}
	keys := make([]string, 0, len(list.Contents))
	for _, c := range list.Contents {
		keys = append(keys, c.Key)
	}
	return keys, nil
}

// minioWriter names MinIO as the server of a response (gofakes3 names AmazonS3 as it
// writes its header).
type minioWriter struct {
	http.ResponseWriter
	wrote bool
}

func (w *minioWriter) WriteHeader(code int) {
	if !w.wrote {
		w.wrote = true
		w.Header().Set("Server", "MinIO")
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *minioWriter) Write(p []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(p)
}
