package ingest

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"
)

// Format names an input format: one of the registry's (FormatNames).
type Format string

// inputFormat is one input format: its name, how an input is recognised as one (by the
// extension of its name, or by the magic bytes its content starts with), how its reader is
// made, and what users read about it. Each format lives in a file of its own (csv.go,
// ndjson.go, parquet.go) and is listed in formats: adding a format is one file and one line
// there; the spec's validation, the choice of an input's format, SpecHelp, the CLI's help and
// the error messages all follow from the list.
type inputFormat struct {
	name  Format
	title string // the name in prose: "CSV"
	// exts are the extensions (lower case, with their dot) of the names of its files.
	exts []string
	// gzip: the extensions may be followed by .gz (openFile decompresses such a file); a
	// format that reads from a stream.
	gzip bool
	// magic, when set, is the bytes a file of the format starts with (and, seekable, ends
	// with): an input with them is of the format whatever its name, and one without them is
	// not.
	magic string
	// seekable: a reader needs an io.ReaderAt with a size (readerAtSize), not a stream.
	seekable bool
	// newReader returns the reader of the input src, named name in messages, of a validated
	// spec's plan.
	newReader func(pl *plan, name string, src io.Reader, opts readerOptions) (reader, error)
	// help is the format's paragraph of SpecHelp.
	help string
}

// formats is the registry of input formats, in the order help lists them.
var formats = []*inputFormat{&csvFormat, &ndjsonFormat, &parquetFormat}

// lookupFormat returns the registered format named f, or nil.
func lookupFormat(f Format) *inputFormat {
	for _, x := range formats {
		if x.name == f {
			return x
		}
	}
	return nil
}

// FormatNames lists the input formats for users: "a, b or c".
func FormatNames() string {
	names := make([]string, len(formats))
	for i, f := range formats {
		names[i] = string(f.name)
	}
	return orList(names)
}

// extNames lists the extensions of the formats for users.
func extNames() string {
	var exts []string
	for _, f := range formats {
		exts = append(exts, f.exts...)
	}
	return strings.Join(exts, ", ")
}

func orList(s []string) string {
	if len(s) <= 1 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}

// ParseFormat returns the format named s, or an error wrapping ErrInvalid that lists the
// formats.
func ParseFormat(s string) (Format, error) {
	if f := lookupFormat(Format(s)); f != nil {
		return f.name, nil
	}
	return "", fmt.Errorf("%w: input format %q: want %s", ErrInvalid, s, FormatNames())
}

// formatOfName returns the format an input's name says by its extension (case does not
// matter; .gz may follow the extensions of a format that reads streams), or nil.
func formatOfName(name string) *inputFormat {
	lower := strings.ToLower(name)
	gz := strings.TrimSuffix(lower, ".gz")
	for _, f := range formats {
		for _, ext := range f.exts {
			if strings.HasSuffix(lower, ext) || f.gzip && gz != lower && strings.HasSuffix(gz, ext) {
				return f
			}
		}
	}
	return nil
}

// formatOfFile returns the format of the file at path as Run decides it without a format
// given: by the magic bytes of its content (a Parquet file whatever its name), else by the
// extension of its name. ok is false when neither tells.
func formatOfFile(path string) (f Format, ok bool) {
	// Only a regular file's content is read twice: a named pipe's bytes would be gone.
	if fi, err := os.Stat(path); err == nil && fi.Mode().IsRegular() {
		if file, err := os.Open(path); err == nil {
			x, _, err := formatOfContent(file)
			_ = file.Close()
			if err == nil && x != nil {
				return x.name, true
			}
		}
	}
	if x := formatOfName(path); x != nil {
		return x.name, true
	}
	return "", false
}

// formatOfContent returns the format whose magic bytes r's content has, or nil. It returns the
// reader to read the input from: r itself when r is an io.ReaderAt (its ReadAt does not move
// the stream), else r through a buffer that kept the bytes peeked.
func formatOfContent(r io.Reader) (*inputFormat, io.Reader, error) {
	ra, ok := r.(io.ReaderAt)
	if !ok {
		return peekFormat(r)
	}
	for _, f := range formats {
		if f.magic == "" {
			continue
		}
		b := make([]byte, len(f.magic))
		n, err := ra.ReadAt(b, 0)
		switch {
		case n == len(b):
		case err == io.EOF || err == nil:
			continue
		default:
			// Not a file one can read at offsets (a pipe, standard input): peek.
			return peekFormat(r)
		}
		if string(b) != f.magic {
			continue
		}
		if _, size, err := readerAtSize(f.title, "", r); err == nil && size >= int64(2*len(b)) {
			if n, _ := ra.ReadAt(b, size-int64(len(b))); n == len(b) && string(b) != f.magic {
				continue
			}
		}
		return f, r, nil
	}
	return nil, r, nil
}

// peekFormat is formatOfContent on a stream.
func peekFormat(r io.Reader) (*inputFormat, io.Reader, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	for _, f := range formats {
		if f.magic == "" {
			continue
		}
		b, err := br.Peek(len(f.magic))
		if err != nil && err != io.EOF && err != bufio.ErrBufferFull {
			return nil, br, err
		}
		if string(b) == f.magic {
			return f, br, nil
		}
	}
	return nil, br, nil
}

// readerAtSize returns r as an io.ReaderAt and its size, for a seekable format (title).
func readerAtSize(title, name string, r io.Reader) (io.ReaderAt, int64, error) {
	ra, ok := r.(io.ReaderAt)
	if ok {
		switch s := r.(type) {
		case interface{ Size() int64 }:
			return ra, s.Size(), nil
		case interface{ Stat() (os.FileInfo, error) }:
			fi, err := s.Stat()
			if err != nil {
				return nil, 0, fmt.Errorf("%s: %w", name, err)
			}
			return ra, fi.Size(), nil
		}
	}
	return nil, 0, inputErr("%s: a %s file is read from its end: it needs a file, not a stream (a pipe, standard input or a compressed file)", name, title)
}

// inputFormatOf returns the format given for an input: its own, else the spec's, else nil
// (its content's or its name's: chooseFormat).
func inputFormatOf(sp *Spec, in Input) (*inputFormat, error) {
	name := in.Format
	if name == "" {
		name = sp.input.Format
	}
	if name == "" {
		return nil, nil
	}
	f := lookupFormat(name)
	if f == nil {
		return nil, fmt.Errorf("%w: %s: unknown input format %q (want %s)", ErrInvalid, in.Name, name, FormatNames())
	}
	return f, nil
}

// chooseFormat checks the format decided for an input (nil: none given) against its content:
// an input with a format's magic bytes is of that format when none was given, and an error
// when another was; one given a format with magic bytes must have them. Without a format
// given nor magic bytes, the input's name decides. It returns the reader to read from.
func chooseFormat(in Input, given *inputFormat, src io.Reader) (*inputFormat, io.Reader, error) {
	if given != nil && given.magic != "" {
		// The reader checks the file itself.
		return given, src, nil
	}
	byContent, src, err := formatOfContent(src)
	if err != nil {
		return nil, src, readErr(in.Name, err)
	}
	switch {
	case byContent != nil && given != nil && byContent != given:
		return nil, src, inputErr("%s is a %s file; read it as %s, not %s", in.Name, byContent.title, byContent.name, given.name)
	case byContent != nil:
		return byContent, src, nil
	case given != nil:
		return given, src, nil
	}
	if f := formatOfName(in.Name); f != nil {
		if f.magic != "" {
			return nil, src, inputErr("%s: not a %s file (it does not start with %q)", in.Name, f.title, f.magic)
		}
		return f, src, nil
	}
	return nil, src, cannotTell(in.Name)
}

// newReader returns the reader of format f over src.
func newReader(f *inputFormat, pl *plan, name string, src io.Reader, opts readerOptions) (reader, error) {
	return f.newReader(pl, name, src, opts)
}

// recognitionHelp is SpecHelp's table of how an input's format is told, one line a format.
func recognitionHelp() string {
	var b strings.Builder
	for _, f := range formats {
		fmt.Fprintf(&b, "  %-8s %s", f.name, strings.Join(f.exts, ", "))
		if f.gzip {
			b.WriteString(", each optionally followed by .gz")
		}
		if f.magic != "" {
			fmt.Fprintf(&b, "; or whatever its name, a file with its magic bytes (%s), which read as\n"+
				"           another format is an error", f.magic)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// formatHelp is SpecHelp's paragraphs on each format.
func formatHelp() string {
	parts := make([]string, len(formats))
	for i, f := range formats {
		parts[i] = f.help
	}
	return strings.Join(parts, "\n")
}

// cannotTell is the error of an input whose format nothing says.
func cannotTell(name string) error {
	return fmt.Errorf("%w: %s: cannot tell the format from the name (%s) nor from the content; say it (%s)", ErrInvalid, name, extNames(), FormatNames())
}
