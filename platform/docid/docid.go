// Package docid is what a document's external id may be, where a caller
// names one: ingestion refuses an id longer than MaxBytes, and the audit
// trail's document filter (auth's ListAuditEvents, GET /v1/audit,
// bmcisctl audit --document) refuses what could never be an ingested id.
package docid

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxBytes is the longest external id ingestion accepts.
const MaxBytes = 1024

// Errors of Check; the message names the rule, never the value.
var (
	ErrEmpty   = errors.New("must not be empty")
	ErrTooLong = fmt.Errorf("must be at most %d bytes (the longest external id ingestion accepts)", MaxBytes)
	ErrUTF8    = errors.New("must be valid UTF-8")
	ErrControl = errors.New("must not contain control characters")
)

// Check reports why id cannot name a document to look up, or nil.
func Check(id string) error {
	switch {
	case id == "":
		return ErrEmpty
	case len(id) > MaxBytes:
		return ErrTooLong
	case !utf8.ValidString(id):
		return ErrUTF8
	case strings.ContainsFunc(id, unicode.IsControl):
		return ErrControl
	}
	return nil
}
