// Package cursor issues and checks pagination cursors.
//
// A cursor is base64url(JSON{query_hash, offset, response_mode, page_size})
// "." base64url(HMAC-SHA256(secret, payload)[:12]). Any replica holding the
// same secret accepts any other replica's cursors, and nobody without the
// secret can forge or alter one.
package cursor

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"unicode"
)

// Cursor is the decoded position of the next page.
type Cursor struct {
	QueryHash    string `json:"query_hash"`
	Offset       int    `json:"offset"`
	ResponseMode string `json:"response_mode"`
	PageSize     int    `json:"page_size"`
}

// macLen is the length of the truncated tag (96 bits, the usual truncation
// of HMAC-SHA256; every byte of a cursor costs the caller tokens).
const macLen = 12

// maxLen bounds what Decode will look at.
const maxLen = 1024

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

// Encode returns the cursor string for c.
func (k *Codec) Encode(c Cursor) string {
	payload, _ := json.Marshal(c) // a struct of strings and ints always encodes
	enc := base64.RawURLEncoding
	return enc.EncodeToString(payload) + "." + enc.EncodeToString(k.tag(payload))
}

func (k *Codec) tag(payload []byte) []byte {
	m := hmac.New(sha256.New, k.secret)
	m.Write(payload)
	return m.Sum(nil)[:macLen]
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
	payloadB64, tagB64, ok := strings.Cut(s, ".")
	if !ok || strings.Contains(tagB64, ".") {
		return Cursor{}, &Error{Malformed}
	}
	enc := base64.RawURLEncoding
	payload, err := enc.DecodeString(payloadB64)
	if err != nil {
		return Cursor{}, &Error{Malformed}
	}
	tag, err := enc.DecodeString(tagB64)
	if err != nil || len(tag) != macLen {
		return Cursor{}, &Error{Malformed}
	}
	if !hmac.Equal(tag, k.tag(payload)) {
		return Cursor{}, &Error{Tampered}
	}
	var c Cursor
	dec := json.NewDecoder(strings.NewReader(string(payload)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil || c.Offset < 0 || c.PageSize < 1 || c.QueryHash == "" {
		return Cursor{}, &Error{Malformed}
	}
	if !hmac.Equal([]byte(c.QueryHash), []byte(queryHash)) {
		return Cursor{}, &Error{OtherQuery}
	}
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
