// Package cursor issues and checks pagination cursors.
//
// A cursor is base64url(payload || tag), about 20 characters, since every
// character costs the caller tokens. The payload is binary: the response
// mode's index in the mode table (0xff for none), the first 2 bytes of the
// query hash, then the offset and the page size as unsigned varints. The tag
// is HMAC-SHA256(secret, payload || full query hash) cut to 8 bytes. The
// full hash is signed but not carried: a cursor replayed with another query
// fails the tag, and the 2 bytes carried tell that case apart from an
// altered cursor. Any replica holding the same secret accepts any other
// replica's cursors, and nobody without the secret can forge or alter one
// (a 64-bit tag: a forger gets one guess per request, each checked by the
// server and rate-limited).
package cursor

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"slices"
	"strings"
	"unicode"

	"github.com/bmcis/knowledge/mcp-adapter/internal/projection"
)

// Cursor is the decoded position of the next page.
type Cursor struct {
	QueryHash    string
	Offset       int
	ResponseMode string
	PageSize     int
}

// tagLen is the length of the truncated tag.
const tagLen = 8

// hashLen is how many bytes of the query hash a cursor carries.
const hashLen = 2

// noMode stands for a cursor without a response mode.
const noMode = 0xff

// maxLen bounds what Decode will look at.
const maxLen = 64

// Codec signs and verifies cursors with one secret.
type Codec struct {
	secret []byte
}

// New returns a codec for secret, which must not be empty.
func New(secret []byte) (*Codec, error) {
	if len(secret) == 0 {
		return nil, errors.New("cursor secret is empty")
	}
	return &Codec{secret: append([]byte(nil), secret...)}, nil
}

// Encode returns the cursor string for c. Its QueryHash is a QueryHash
// result.
func (k *Codec) Encode(c Cursor) string {
	mode := byte(noMode)
	if i := slices.Index(projection.Names(), c.ResponseMode); i >= 0 && i < noMode {
		mode = byte(i)
	}
	qh, _ := hex.DecodeString(c.QueryHash)
	payload := make([]byte, 0, 1+hashLen+2*binary.MaxVarintLen64+tagLen)
	payload = append(payload, mode)
	payload = append(payload, pad(qh)[:hashLen]...)
	payload = binary.AppendUvarint(payload, uint64(max(c.Offset, 0)))
	payload = binary.AppendUvarint(payload, uint64(max(c.PageSize, 0)))
	return base64.RawURLEncoding.EncodeToString(append(payload, k.tag(payload, c.QueryHash)...))
}

func pad(b []byte) []byte {
	for len(b) < hashLen {
		b = append(b, 0)
	}
	return b
}

func (k *Codec) tag(payload []byte, queryHash string) []byte {
	m := hmac.New(sha256.New, k.secret)
	m.Write(payload)
	m.Write([]byte(queryHash))
	return m.Sum(nil)[:tagLen]
}

// Problem says why a cursor was refused.
type Problem string

// Reasons a cursor is refused.
const (
	Malformed  Problem = "the cursor is malformed"
	Tampered   Problem = "the cursor was altered or issued by another deployment"
	OtherQuery Problem = "the cursor belongs to a different query"
)

// Error is a refused cursor.
type Error struct{ Problem Problem }

func (e *Error) Error() string { return string(e.Problem) }

// Decode verifies s and checks that it was issued for queryHash.
func (k *Codec) Decode(s, queryHash string) (Cursor, error) {
	s = strings.TrimSpace(s)
	if s == "" || len(s) > maxLen {
		return Cursor{}, &Error{Malformed}
	}
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(raw) < 1+hashLen+2+tagLen {
		return Cursor{}, &Error{Malformed}
	}
	payload, tag := raw[:len(raw)-tagLen], raw[len(raw)-tagLen:]
	if !hmac.Equal(tag, k.tag(payload, queryHash)) {
		qh, _ := hex.DecodeString(queryHash)
		if !hmac.Equal(payload[1:1+hashLen], pad(qh)[:hashLen]) {
			return Cursor{}, &Error{OtherQuery}
		}
		return Cursor{}, &Error{Tampered}
	}
	c := Cursor{QueryHash: queryHash}
	if m := int(payload[0]); m != noMode {
		names := projection.Names()
		if m >= len(names) {
			return Cursor{}, &Error{Malformed}
		}
		c.ResponseMode = names[m]
	}
	rest := payload[1+hashLen:]
	offset, n := binary.Uvarint(rest)
	if n <= 0 {
		return Cursor{}, &Error{Malformed}
	}
	size, m := binary.Uvarint(rest[n:])
	if m <= 0 || n+m != len(rest) || offset > 1<<31 || size < 1 || size > 1<<16 {
		return Cursor{}, &Error{Malformed}
	}
	c.Offset, c.PageSize = int(offset), int(size)
	return c, nil
}

// QueryHash identifies a query for cursors: the first 6 bytes, in hex, of
// SHA-256 over the query with surrounding white space removed (the adapter
// sends the search service the query trimmed the same way). Any other
// difference, even in case or inner spacing, is another query: the service
// could rank it differently, and pages would then overlap or skip results.
func QueryHash(query string) string {
	sum := sha256.Sum256([]byte(strings.TrimSpace(query)))
	return hex.EncodeToString(sum[:6])
}

// Normalize lowercases a name and collapses white space (for cache keys).
func Normalize(name string) string {
	return strings.Join(strings.FieldsFunc(strings.ToLower(name), unicode.IsSpace), " ")
}
