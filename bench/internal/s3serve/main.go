// Command s3serve runs the S3-protocol server of internal/s3test (gofakes3, objects in
// memory, conditional writes honoured) as a process of its own, for the scripts of bench/
// that drive segtool against object storage: it prints the endpoint URL on its first line and
// serves until it is signalled.
//
//	go run ./bench/internal/s3serve -bucket seg -bucket other [-latency 20ms] [-minio]
package main

import (
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/writeout/writeout/internal/s3test"
)

// buckets collects repeated -bucket flags.
type buckets []string

func (b *buckets) String() string     { return strings.Join(*b, ",") }
func (b *buckets) Set(v string) error { *b = append(*b, v); return nil }

func main() {
	var bs buckets
	flag.Var(&bs, "bucket", "a bucket to create (repeat for more)")
	minio := flag.Bool("minio", false, "answer as MinIO does (s3test.Server.LikeMinIO)")
	latency := flag.Duration("latency", 0, "wait this long before answering each request, as a remote service's round trip")
	flag.Parse()
	if len(bs) == 0 {
		bs = buckets{"seg"}
	}
	srv, err := s3test.Start(bs...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "s3serve:", err)
		os.Exit(1)
	}
	if *minio {
		srv.LikeMinIO()
	}
	if *latency > 0 {
		srv.OnRequest(func(*http.Request) { time.Sleep(*latency) })
	}
	fmt.Println(srv.URL)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
	srv.Close()
}
