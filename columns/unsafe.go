package columns

import "unsafe"

// unsafeBytes views s as bytes without copying; the bytes must not be modified or retained.
func unsafeBytes(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }
