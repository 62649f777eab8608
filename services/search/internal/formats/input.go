package formats

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"unicode/utf8"
)

// checkBytes is how much an extractor may read between two checks of the
// caller's context: small enough that a cancelled extraction stops within
// milliseconds, large enough that the checks cost nothing.
const checkBytes = 64 << 10

// Input is one document as an extractor reads it, under the caller's
// context: the one place where extraction learns that its caller is gone.
// Readers from Reader and Wrap check the context every checkBytes bytes;
// an extractor calls Check at its own boundaries (a page, a stage). After
// one check saw the context end, every later check and read fails at once,
// without asking the context again.
type Input struct {
	ctx context.Context
	// Data is the document's bytes, for headers and whole-file parsers;
	// large work over it goes through Reader or Text.
	Data []byte
	// Name is the document's source file, for titles and messages.
	Name string

	// mu guards what follows: a PDF page may still be read on the
	// engine's goroutine after Extract has answered.
	mu     sync.Mutex
	stop   error
	read   int // bytes delivered by the Input's readers
	checks int // context checks made
}

// Check returns the context's error once it has ended.
func (in *Input) Check() error {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.checkLocked()
}

func (in *Input) checkLocked() error {
	if in.stop != nil {
		return in.stop
	}
	in.checks++
	in.stop = in.ctx.Err()
	return in.stop
}

func (in *Input) stopped() error {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.stop
}

// Reader reads Data, checking the context as it goes.
func (in *Input) Reader() io.Reader { return in.Wrap(bytes.NewReader(in.Data)) }

// Wrap returns r checking the context every checkBytes bytes (the first
// read included), for what an extractor inflates or decodes itself.
func (in *Input) Wrap(r io.Reader) io.Reader {
	return &checkedReader{in: in, r: r, unchecked: checkBytes}
}

type checkedReader struct {
	in        *Input
	r         io.Reader
	unchecked int // bytes read since the last check
}

func (c *checkedReader) Read(p []byte) (int, error) {
	if c.unchecked >= checkBytes {
		if err := c.in.Check(); err != nil {
			return 0, err
		}
		c.unchecked = 0
	} else if err := c.in.stopped(); err != nil {
		return 0, err
	}
	n, err := c.r.Read(p[:min(len(p), checkBytes-c.unchecked)])
	c.unchecked += n
	c.in.mu.Lock()
	c.in.read += n
	c.in.mu.Unlock()
	return n, err
}

// validUTF8 reports whether Data is UTF-8, validated in pieces of about
// checkBytes with a check before each; at reports the first invalid byte.
func (in *Input) validUTF8() (ok bool, at int, err error) {
	b := in.Data
	for start := 0; start < len(b); {
		if err := in.Check(); err != nil {
			return false, 0, err
		}
		end := min(start+checkBytes, len(b))
		// Cut before a rune's first byte, so no piece ends inside a rune
		// (past 3 continuation bytes the text is invalid there anyway).
		for back := 0; back < utf8.UTFMax-1 && end < len(b) && end > start+1 && !utf8.RuneStart(b[end]); back++ {
			end--
		}
		if !utf8.Valid(b[start:end]) {
			// The pieces before were whole and valid: the first invalid
			// byte of the rest is the first of the document.
			return false, start + invalidAt(b[start:]), nil
		}
		in.mu.Lock()
		in.read += end - start
		in.mu.Unlock()
		start = end
	}
	return true, 0, nil
}

// Text is Data as text for the text-based formats: content that is not
// UTF-8 text (binary, invalid UTF-8) is refused with the reason.
func (in *Input) Text() (string, error) {
	if isBinary(in.Data) {
		return "", errors.New("binary content (NUL or control bytes)")
	}
	ok, at, err := in.validUTF8()
	switch {
	case err != nil:
		return "", err
	case !ok:
		return "", fmt.Errorf("invalid UTF-8 at byte %d", at)
	}
	return string(in.Data), nil
}
