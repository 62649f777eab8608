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

// Reader reads what Writer wrote. It keeps its own buffer so a varint is
// decoded in place (a byte-at-a-time io.ByteReader cost twice as much on
// the hundreds of millions of varints of a big index).
type Reader struct {
	src io.Reader
	buf []byte
	pos int
	end int
	eof bool
	err error
}

// NewReader buffers r.
func NewReader(r io.Reader) *Reader { return &Reader{src: r, buf: make([]byte, 256<<10)} }

// fill moves the unread bytes to the front and reads more, until at least
// want bytes are buffered or the source ends.
func (r *Reader) fill(want int) {
	if r.pos > 0 {
		r.end = copy(r.buf, r.buf[r.pos:r.end])
		r.pos = 0
	}
	for r.end < want && !r.eof {
		n, err := r.src.Read(r.buf[r.end:])
		r.end += n
		if err == io.EOF {
			r.eof = true
		} else if err != nil {
			r.fail(err)
			return
		}
	}
}

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
	if r.end-r.pos < binary.MaxVarintLen64 && !r.eof {
		r.fill(binary.MaxVarintLen64)
	}
	v, n := binary.Uvarint(r.buf[r.pos:r.end])
	if n <= 0 {
		if n == 0 {
			r.fail(io.ErrUnexpectedEOF)
		} else {
			r.Failf("varint overflows 64 bits")
		}
		return 0
	}
	r.pos += n
	return v
}

// Varint reads a zig-zag varint.
func (r *Reader) Varint() int64 {
	u := r.Uvarint()
	v := int64(u >> 1)
	if u&1 != 0 {
		v = ^v
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
	r.Raw(b)
	if r.err != nil {
		return ""
	}
	return string(b)
}

// Raw fills b.
func (r *Reader) Raw(b []byte) {
	for len(b) > 0 && r.err == nil {
		if r.pos == r.end {
			if r.eof {
				r.fail(io.ErrUnexpectedEOF)
				return
			}
			r.fill(1)
			continue
		}
		k := copy(b, r.buf[r.pos:r.end])
		r.pos += k
		b = b[k:]
	}
}

// Err is the first error.
func (r *Reader) Err() error { return r.err }

// Rest reads what is left of the stream and reports how many bytes it was
// (a complete stream has none after its end marker).
func (r *Reader) Rest() int64 {
	n := int64(r.end - r.pos)
	r.pos = r.end
	for !r.eof && r.err == nil {
		r.pos, r.end = 0, 0
		r.fill(len(r.buf))
		n += int64(r.end)
		r.pos = r.end
	}
	return n
}

// Fail records an encoding failure (the first one wins).
func (w *Writer) Fail(err error) {
	if w.err == nil {
		w.err = err
	}
}
