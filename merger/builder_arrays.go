package merger

import (
	"errors"
	"fmt"
	"slices"
	"unsafe"

	"github.com/writeout/writeout/columns/agg"
	"github.com/writeout/writeout/merger/internal/scratch"
)

// Row arrays in scratch memory (BuilderOptions.ScratchArrays).
//
// The arrays of one number a row (times, single-value dimension ids, long and double metrics,
// first/last times) are the bulk of a Builder without rollup: 44 bytes a row for a table of
// three dimensions and three long metrics. Grown on the Go heap, each is zeroed by the
// allocator, and copied each time it grows; in a scratch array (merger/internal/scratch:
// anonymous mappings, pooled) the kernel's first touch is the only zeroing, and a freed array
// goes to the pool for the merge that follows.
//
// Each such slice has an owner (a scratch.Array) while it is in scratch memory: the slice is
// then a prefix of the owner's S, and it is never grown by append (reserveRows makes room
// first). Close and a reset that does not keep the arrays free the owners; nothing may use a
// slice of a freed owner (its mapping is reused by the pool), which the builder's lock
// ensures: views and Persist hold the read lock, freeing takes the write lock.

// reserve makes room for n more elements in *s: on the Go heap (slices.Grow, as append grows)
// when a is nil or the array stays under scratch.MinMapped bytes, else in a scratch array
// owned by *a, growing by a quarter at least (as append grows large slices), the elements
// kept and the old array freed. An error is the old array's release failing; the room is
// made all the same.
func reserve[T scratch.Elem](s *[]T, a *scratch.Array[T], n int) error {
	l := len(*s)
	if cap(*s)-l >= n {
		return nil
	}
	var zero T
	size := int(unsafe.Sizeof(zero))
	if a == nil || (l+n)*size < scratch.MinMapped {
		*s = slices.Grow(*s, n)
		if a == nil {
			return nil
		}
		return a.Free() // what it held (a smaller array) is copied
	}
	next := scratch.New[T](max(l+n, cap(*s)+cap(*s)/4))
	copy(next.S, *s)
	err := a.Free()
	*a = next
	*s = next.S[:l:len(next.S)]
	return err
}

// ownedBytes is the memory of a row array: its owner's when it is in scratch memory, else its
// capacity.
func ownedBytes[T scratch.Elem](s []T, a *scratch.Array[T], size int) int64 {
	if a != nil && a.S != nil {
		return int64(a.Bytes())
	}
	return int64(cap(s) * size)
}

// minReserveRows is the fewest rows Add makes room for when scratch arrays are full (then as
// many as the builder holds: the arrays double).
const minReserveRows = 64

// rowArrays are the owners of a Builder's row arrays in scratch memory.
type rowArrays struct {
	times scratch.Array[int64]
}

// dimArrays own a dimension's: its ids (single-value dimensions).
type dimArrays struct {
	ids scratch.Array[uint32]
}

// metArrays own a metric's: its values and times.
type metArrays struct {
	longs scratch.Array[int64]
	dbls  scratch.Array[float64]
	times scratch.Array[int64]
}

// timesOwner, idsOwner and metOwners return the owners of the builder's arrays when they are
// kept in scratch memory, nil ones when not.
func (b *Builder) timesOwner() *scratch.Array[int64] {
	if !b.opts.ScratchArrays {
		return nil
	}
	return &b.arrs.times
}

func (b *Builder) idsOwner(d *bdim) *scratch.Array[uint32] {
	if !b.opts.ScratchArrays {
		return nil
	}
	return &d.arrs.ids
}

func (b *Builder) metOwners(m *bmet) (*scratch.Array[int64], *scratch.Array[float64], *scratch.Array[int64]) {
	if !b.opts.ScratchArrays {
		return nil, nil, nil
	}
	return &m.arrs.longs, &m.arrs.dbls, &m.arrs.times
}

// reserveRows makes room for n more rows in every row array (multi-value dimensions: one
// value a row), and sets b.room to the rows that now fit in all of them.
func (b *Builder) reserveRows(n int) {
	var errs []error
	errs = append(errs, reserve(&b.times, b.timesOwner(), n))
	room := cap(b.times) - len(b.times)
	for _, d := range b.dims {
		switch d.kind {
		case kindRaw:
			d.raw, d.rawOK = slices.Grow(d.raw, n), slices.Grow(d.rawOK, n)
		case kindSingle:
			errs = append(errs, reserve(&d.ids, b.idsOwner(d), n))
			room = min(room, cap(d.ids)-len(d.ids))
		case kindMulti:
			d.offs, d.multi = slices.Grow(d.offs, n), slices.Grow(d.multi, n)
		}
	}
	for _, m := range b.mets {
		longs, dbls, times := b.metOwners(m)
		switch m.agg.Type {
		case agg.Long:
			errs = append(errs, reserve(&m.longs, longs, n))
			room = min(room, cap(m.longs)-len(m.longs))
		case agg.Double:
			errs = append(errs, reserve(&m.dbls, dbls, n))
			room = min(room, cap(m.dbls)-len(m.dbls))
		case agg.SketchType:
		}
		if m.agg.Timed() {
			errs = append(errs, reserve(&m.times, times, n))
			room = min(room, cap(m.times)-len(m.times))
		}
	}
	b.room = room
	b.noteFree(errors.Join(errs...))
}

// noteFree keeps the first error of releasing scratch memory, for Close.
func (b *Builder) noteFree(err error) {
	if err != nil && b.freeErr == nil {
		b.freeErr = fmt.Errorf("merger: builder: %w", err)
	}
}

// freeArrays releases the scratch arrays of dims and mets (a builder's before a reset that
// does not keep them, or at Close) and of times.
func (b *Builder) freeArrays(dims []*bdim, mets []*bmet) {
	var errs []error
	errs = append(errs, b.arrs.times.Free())
	for _, d := range dims {
		errs = append(errs, d.arrs.ids.Free())
	}
	for _, m := range mets {
		errs = append(errs, m.arrs.longs.Free(), m.arrs.dbls.Free(), m.arrs.times.Free())
	}
	b.noteFree(errors.Join(errs...))
}
