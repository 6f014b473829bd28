package ingest

import (
	"errors"
	"fmt"
	"reflect"

	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
)

// Bounded thrift decoding of a Parquet footer or page header (see parquet_check.go): parquet-go's
// decoder makes a slice of a list's count before it reads the elements, so a count is checked
// against the bytes that must hold the elements first.

// errShort is a thrift struct that goes on past the bytes given.
var errShort = errors.New("truncated")

// thriftScan walks the thrift compact-protocol struct at the start of b without decoding it:
// every list, set and map count and every binary length must fit in the bytes left, so that
// decoding it allocates at most its bytes times the largest Go element. It returns the
// struct's length in bytes and the elements of its lists, sets and maps; errShort when b ends
// inside it.
func thriftScan(b []byte) (n int, elems int64, err error) {
	s := thriftScanner{b: b}
	if err := s.structure(); err != nil {
		return 0, 0, err
	}
	return s.off, s.elems, nil
}

type thriftScanner struct {
	b     []byte
	off   int
	elems int64
	depth int
}

func (s *thriftScanner) left() int { return len(s.b) - s.off }

func (s *thriftScanner) byte() (byte, error) {
	if s.off >= len(s.b) {
		return 0, errShort
	}
	c := s.b[s.off]
	s.off++
	return c, nil
}

func (s *thriftScanner) uvarint() (uint64, error) {
	var v uint64
	for shift := 0; shift < 70; shift += 7 {
		c, err := s.byte()
		if err != nil {
			return 0, err
		}
		v |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return v, nil
		}
	}
	return 0, errors.New("varint over 10 bytes")
}

func (s *thriftScanner) skip(n uint64) error {
	if n > uint64(s.left()) {
		return errShort
	}
	s.off += int(n)
	return nil
}

// count reads a count of elements of at least one byte each.
func (s *thriftScanner) count(n uint64, bytesEach int) error {
	if n > uint64(s.left()/bytesEach) {
		return errShort // past the bytes given (a page header's caller reads more, up to its limit)
	}
	s.elems += int64(n)
	return nil
}

func (s *thriftScanner) structure() error {
	if s.depth++; s.depth > maxThriftDepth {
		return fmt.Errorf("thrift structs nested over %d deep", maxThriftDepth)
	}
	for {
		c, err := s.byte()
		if err != nil {
			return err
		}
		if c == 0 { // STOP
			s.depth--
			return nil
		}
		if c>>4 == 0 { // a field id of its own
			if _, err := s.uvarint(); err != nil {
				return err
			}
		}
		if err := s.value(c&0xf, false); err != nil {
			return err
		}
	}
}

// value skips a value of compact type t (an element of a list when elem: a bool is a byte).
func (s *thriftScanner) value(t byte, elem bool) error {
	switch t {
	case 1, 2: // bool: in the field header, or a byte in a list
		if elem {
			_, err := s.byte()
			return err
		}
		return nil
	case 3: // i8
		_, err := s.byte()
		return err
	case 4, 5, 6: // i16, i32, i64
		_, err := s.uvarint()
		return err
	case 7: // double
		return s.skip(8)
	case 8: // binary
		n, err := s.uvarint()
		if err != nil {
			return err
		}
		return s.skip(n)
	case 9, 10: // list, set
		h, err := s.byte()
		if err != nil {
			return err
		}
		n := uint64(h >> 4)
		if n == 15 {
			if n, err = s.uvarint(); err != nil {
				return err
			}
		}
		if err := s.count(n, 1); err != nil {
			return err
		}
		if s.depth++; s.depth > maxThriftDepth {
			return fmt.Errorf("thrift structs nested over %d deep", maxThriftDepth)
		}
		for range n {
			if err := s.value(h&0xf, true); err != nil {
				return err
			}
		}
		s.depth--
		return nil
	case 11: // map
		n, err := s.uvarint()
		if err != nil || n == 0 {
			return err
		}
		kv, err := s.byte()
		if err != nil {
			return err
		}
		if err := s.count(n, 2); err != nil {
			return err
		}
		if s.depth++; s.depth > maxThriftDepth {
			return fmt.Errorf("thrift structs nested over %d deep", maxThriftDepth)
		}
		for range n {
			if err := s.value(kv>>4, true); err != nil {
				return err
			}
			if err := s.value(kv&0xf, true); err != nil {
				return err
			}
		}
		s.depth--
		return nil
	case 12: // struct
		return s.structure()
	case 13: // uuid
		return s.skip(16)
	}
	return fmt.Errorf("thrift type %d", t)
}

// maxElem is the largest Go element of a slice reachable from the format's types: what one
// list element of a footer or a page header may cost when decoded.
var maxElem = func() int64 {
	seen := map[reflect.Type]bool{}
	var most int64
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		if seen[t] {
			return
		}
		seen[t] = true
		if k := t.Kind(); k == reflect.Slice {
			most = max(most, int64(t.Elem().Size()))
			walk(t.Elem())
		} else if k == reflect.Pointer || k == reflect.Array {
			walk(t.Elem())
		} else if k == reflect.Map {
			most = max(most, int64(t.Key().Size()+t.Elem().Size()))
			walk(t.Key())
			walk(t.Elem())
		} else if k == reflect.Struct {
			for i := range t.NumField() {
				walk(t.Field(i).Type)
			}
		}
	}
	walk(reflect.TypeFor[format.FileMetaData]())
	walk(reflect.TypeFor[format.PageHeader]())
	return most
}()

// decodeThrift checks the thrift struct at the start of b with thriftScan and decodes it into
// v; it returns the struct's length.
func decodeThrift(b []byte, v any) (int, error) {
	n, elems, err := thriftScan(b)
	if err != nil {
		return 0, err
	}
	if elems > maxThriftAlloc/maxElem {
		return 0, fmt.Errorf("%d thrift list elements in %d bytes", elems, n)
	}
	if err := thrift.Unmarshal(new(thrift.CompactProtocol), b[:n], v); err != nil {
		return 0, err
	}
	return n, nil
}
