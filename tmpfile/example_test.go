package tmpfile_test

import (
	"fmt"
	"log"
	"os"

	"github.com/spf13/afero"

	"github.com/writeout/writeout/medium"
	"github.com/writeout/writeout/tmpfile"
)

// Stage bytes in a temp file: small buffers make the Bytes spill to the file early, and
// TrickleBytes paces the file's writeback as it grows (the file itself is never synced: it is an
// unnamed stage).
func Example() {
	dir, err := os.MkdirTemp("", "example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	m, err := tmpfile.New(tmpfile.Options{
		Dir:           dir, // must exist; on Linux the file is unnamed (O_TMPFILE)
		MinBufferSize: 16,
		BufferSize:    32,
		Durability:    medium.Durability{TrickleBytes: 8 << 20},
	})
	if err != nil {
		log.Fatal(err)
	}
	part, err := m.NewBytes()
	if err != nil {
		log.Fatal(err)
	}
	for range 3 {
		if _, err := part.WriteString("0123456789abcdef"); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Println(part.Size(), m.FileBytes()) // 32 bytes went to the file, 16 wait in the buffer

	p := make([]byte, 8)
	if _, err := part.ReadAt(p, 28); err != nil { // 4 bytes from the file, 4 from the buffer
		log.Fatal(err)
	}
	fmt.Printf("%s\n", p)

	if _, err := part.WriteTo(os.Stdout); err != nil { // into an *os.File: copy_file_range
		log.Fatal(err)
	}
	fmt.Println()

	// Close closes the file, and with it goes the last of its bytes.
	if err := m.Close(); err != nil {
		log.Fatal(err)
	}
	// Output:
	// 48 32
	// cdef0123
	// 0123456789abcdef0123456789abcdef0123456789abcdef
}

// Any afero.Fs will do: here an in-memory one, as tests use.
func Example_memMapFs() {
	fsys := afero.NewMemMapFs()
	if err := fsys.MkdirAll("/stage", 0o755); err != nil {
		log.Fatal(err)
	}
	m, err := tmpfile.New(tmpfile.Options{Fs: fsys, Dir: "/stage"})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()

	part, err := m.NewBytes()
	if err != nil {
		log.Fatal(err)
	}
	if _, err := part.WriteString("in memory"); err != nil {
		log.Fatal(err)
	}
	fmt.Println(part.Size())
	if _, err := part.WriteTo(os.Stdout); err != nil {
		log.Fatal(err)
	}
	fmt.Println()
	// Output:
	// 9
	// in memory
}
