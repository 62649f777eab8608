// Package binfmt is the varint writer and reader of the index snapshot
// format (internal/snapshot): sticky errors, so encoders and decoders of
// big structures check once at the end, and a reader that never allocates
// more than its input justifies (a corrupt length fails instead of asking
// for gigabytes).
package binfmt

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// ErrCorrupt is wrapped by every decoding failure that is not an I/O error.
var ErrCorrupt = errors.New("corrupt snapshot")

// Writer writes varints and strings to a buffered stream.
type Writer struct {
	w   *bufio.Writer
	buf [binary.MaxVarintLen64]byte
	err error
}

// NewWriter buffers w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: bufio.NewWriterSize(w, 256<<10)} }

// Uvarint writes v.
func (w *Writer) Uvarint(v uint64) {
	if w.err != nil {
		return
	}
	n := binary.PutUvarint(w.buf[:], v)
	_, w.err = w.w.Write(w.buf[:n])
}

// Varint writes v (zig-zag).
func (w *Writer) Varint(v int64) {
	if w.err != nil {
		return
	}
	n := binary.PutVarint(w.buf[:], v)
	_, w.err = w.w.Write(w.buf[:n])
}

// String writes a length-prefixed string.
func (w *Writer) String(s string) {
	w.Uvarint(uint64(len(s)))
	if w.err == nil {
		_, w.err = w.w.WriteString(s)
	}
}

// Raw writes b as is.
func (w *Writer) Raw(b []byte) {
	if w.err == nil {
		_, w.err = w.w.Write(b)
	}
}

// Flush writes what is buffered and returns the first error.
func (w *Writer) Flush() error {
	if w.err == nil {
		w.err = w.w.Flush()
	}
	return w.err
}

// Err is the first error.
func (w *Writer) Err() error { return w.err }

// Reader reads what Writer wrote.
type Reader struct {
	r   *bufio.Reader
	err error
}

// NewReader buffers r.
func NewReader(r io.Reader) *Reader { return &Reader{r: bufio.NewReaderSize(r, 256<<10)} }

func (r *Reader) fail(err error) {
	if r.err != nil {
		return
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		err = fmt.Errorf("%w: truncated", ErrCorrupt)
	}
	r.err = err
}

// Failf records a decoding failure (the first one wins).
func (r *Reader) Failf(format string, args ...any) {
	r.fail(fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...)))
}

// Uvarint reads an unsigned varint (0 after an error).
func (r *Reader) Uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, err := binary.ReadUvarint(r.r)
	if err != nil {
		r.fail(err)
		return 0
	}
	return v
}

// Varint reads a zig-zag varint.
func (r *Reader) Varint() int64 {
	if r.err != nil {
		return 0
	}
	v, err := binary.ReadVarint(r.r)
	if err != nil {
		r.fail(err)
		return 0
	}
	return v
}

// Count reads a length that must not exceed limit (a corrupt count would
// otherwise size an allocation).
func (r *Reader) Count(what string, limit uint64) int {
	v := r.Uvarint()
	if v > limit {
		r.Failf("%s %d over the limit %d", what, v, limit)
		return 0
	}
	return int(v)
}

// maxString bounds one string (titles, paths, terms).
const maxString = 1 << 20

// String reads a length-prefixed string.
func (r *Reader) String() string {
	n := r.Count("string length", maxString)
	if r.err != nil || n == 0 {
		return ""
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r.r, b); err != nil {
		r.fail(err)
		return ""
	}
	return string(b)
}

// Raw fills b.
func (r *Reader) Raw(b []byte) {
	if r.err != nil {
		return
	}
	if _, err := io.ReadFull(r.r, b); err != nil {
		r.fail(err)
	}
}

// Err is the first error.
func (r *Reader) Err() error { return r.err }

// Fail records an encoding failure (the first one wins).
func (w *Writer) Fail(err error) {
	if w.err == nil {
		w.err = err
	}
}

// Rest reads what is left of the stream and reports how many bytes it was
// (a complete stream has none after its end marker).
func (r *Reader) Rest() int64 {
	n, err := io.Copy(io.Discard, r.r)
	if err != nil {
		r.fail(err)
	}
	return n
}
