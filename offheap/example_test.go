package offheap_test

import (
	"fmt"
	"log"
	"os"

	"github.com/writeout/writeout/offheap"
	"github.com/writeout/writeout/tmpfile"
)

// Stage bytes outside the Go heap, under a memory cap, then read them back and copy them out.
func Example() {
	m, err := offheap.New(offheap.Options{MaxBytes: 64 << 20}) // at most 64 MiB of chunks
	if err != nil {
		log.Fatal(err)
	}
	part, err := m.NewBytes()
	if err != nil {
		log.Fatal(err)
	}
	if _, err := part.WriteString("hello, offheap"); err != nil {
		log.Fatal(err)
	}
	fmt.Println(part.Size())

	p := make([]byte, 7)
	if _, err := part.ReadAt(p, 7); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s\n", p)

	if _, err := part.WriteTo(os.Stdout); err != nil { // into an *os.File: one writev
		log.Fatal(err)
	}
	fmt.Println()

	// Close hands the chunks back to the process-wide pool (or unmaps them past its limit);
	// every later call on part fails with an error wrapping medium.ErrClosed.
	if err := m.Close(); err != nil {
		log.Fatal(err)
	}
	// Output:
	// 14
	// offheap
	// hello, offheap
}

// Share a memory budget between media and spill what does not fit to a temp-file medium. The
// budget here is smaller than one chunk, so every byte spills.
func Example_spill() {
	spill, err := tmpfile.New(tmpfile.Options{}) // in os.TempDir(); the caller owns it
	if err != nil {
		log.Fatal(err)
	}
	defer spill.Close()

	budget := offheap.NewBudget(1 << 20)
	m, err := offheap.New(offheap.Options{Budget: budget, Spill: spill})
	if err != nil {
		log.Fatal(err)
	}
	part, err := m.NewBytes()
	if err != nil {
		log.Fatal(err)
	}
	if _, err := part.WriteString("spilled, yet one Bytes"); err != nil {
		log.Fatal(err)
	}
	fmt.Println(part.Size(), budget.Used())
	if _, err := part.WriteTo(os.Stdout); err != nil {
		log.Fatal(err)
	}
	fmt.Println()

	if err := m.Close(); err != nil { // also closes its child of the spill medium
		log.Fatal(err)
	}
	// Output:
	// 22 0
	// spilled, yet one Bytes
}
