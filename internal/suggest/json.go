package suggest

import (
	"errors"
	"reflect"
	"strings"
)

// JSONField returns the hint for an "unknown field" error of encoding/json's decoder (with
// DisallowUnknownFields) decoding into v: the nearest field name of v's type, at any depth, in
// Hint's form; "" for any other error or when no name is near. encoding/json names neither
// the type nor the path of the unknown field, so every field of every struct v holds is a
// candidate.
func JSONField(err error, v any) string {
	const prefix = `json: unknown field "`
	var field string
	for e := err; e != nil; e = errors.Unwrap(e) {
		if msg := e.Error(); strings.HasPrefix(msg, prefix) && strings.HasSuffix(msg, `"`) {
			field = msg[len(prefix) : len(msg)-1]
			break
		}
	}
	if field == "" {
		return ""
	}
	var names []string
	seen := map[reflect.Type]bool{}
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array || t.Kind() == reflect.Map {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || seen[t] {
			return
		}
		seen[t] = true
		for i := range t.NumField() {
			f := t.Field(i)
			tag := f.Tag.Get("json")
			if tag == "-" || !f.IsExported() && !f.Anonymous {
				continue
			}
			name, _, _ := strings.Cut(tag, ",")
			if f.Anonymous && name == "" {
				walk(f.Type)
				continue
			}
			if name == "" {
				name = f.Name
			}
			names = append(names, name)
			walk(f.Type)
		}
	}
	walk(reflect.TypeOf(v))
	return Hint(field, names)
}
