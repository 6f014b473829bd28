//go:build linux

package mmapfile_test

import (
	"fmt"
	"log"
	"os"

	"github.com/writeout/writeout/medium"
	"github.com/writeout/writeout/mmapfile"
)

// Stage bytes in a file-backed shared mapping, read them back out of the mapping and copy them
// out. TrickleBytes paces the writeback of the medium's file as its Bytes fill it (the file is
// never synced: it is an unnamed stage).
func Example() {
	dir, err := os.MkdirTemp("", "example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	m, err := mmapfile.New(mmapfile.Options{
		Dir:        dir,     // must exist; the file is unnamed or unlinked at once
		WindowSize: 4 << 20, // map the file 4 MiB at a time (a multiple of the page size)
		Durability: medium.Durability{TrickleBytes: 8 << 20},
	})
	if err != nil {
		log.Fatal(err)
	}
	part, err := m.NewBytes()
	if err != nil {
		log.Fatal(err)
	}
	if _, err := part.WriteString("hello, mapping"); err != nil {
		log.Fatal(err)
	}
	fmt.Println(part.Size())

	p := make([]byte, 7)
	if _, err := part.ReadAt(p, 7); err != nil { // a copy straight out of the mapping
		log.Fatal(err)
	}
	fmt.Printf("%s\n", p)

	if _, err := part.WriteTo(os.Stdout); err != nil { // one Write of the mapped memory per extent
		log.Fatal(err)
	}
	fmt.Println()

	// Close unmaps every window and closes the file, which frees its space.
	if err := m.Close(); err != nil {
		log.Fatal(err)
	}
	// Output:
	// 14
	// mapping
	// hello, mapping
}
