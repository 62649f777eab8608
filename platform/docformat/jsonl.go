package docformat

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/timestamppb"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
	"github.com/bmcis/knowledge/platform/access"
)

// MaxRecordBytes is the largest JSON Lines record sent: one gRPC message
// carries one document and gRPC's default limit is 4 MiB.
const MaxRecordBytes = 3 << 20

type jsonRecord struct {
	UID       json.RawMessage `json:"_id"`
	ID        json.RawMessage `json:"id"`
	Title     string          `json:"title"`
	Text      *string         `json:"text"`
	Category  string          `json:"category"`
	UpdatedAt string          `json:"updated_at"`
	// Access is who may read the document (platform/access); absent:
	// the source's default. The service checks every entry.
	Access []string `json:"access"`
}

// ReadJSONL reads {"_id"|"id", "title", "text", "category"?,
// "updated_at"?, "access"?} records from r (so a BEIR corpus.jsonl reads as it is);
// name is their source file.
func ReadJSONL(r io.Reader, name string, fn func(Record) error) error {
	br := bufio.NewReaderSize(r, 1<<20)
	for lineNo := 1; ; lineNo++ {
		line, err := br.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			if ferr := fn(parseRecord(name, lineNo, line)); ferr != nil {
				return ferr
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fn(Record{Where: fmt.Sprintf("%s:%d", name, lineNo), Problem: err.Error()})
		}
	}
}

func parseRecord(name string, lineNo int, line []byte) Record {
	it := Record{Where: fmt.Sprintf("%s:%d", name, lineNo)}
	switch {
	case len(line) > MaxRecordBytes:
		it.Problem = fmt.Sprintf("too large: %d bytes (at most %d fit in one message)", len(line), MaxRecordBytes)
		return it
	case !utf8.Valid(line):
		it.Problem = "invalid UTF-8"
		return it
	}
	var rec jsonRecord
	if err := json.Unmarshal(line, &rec); err != nil {
		it.Problem = "invalid JSON: " + err.Error()
		return it
	}
	id := jsonID(rec.UID)
	if id == "" {
		id = jsonID(rec.ID)
	}
	if id == "" {
		it.Problem = `missing "_id" or "id"`
		return it
	}
	if rec.Text == nil {
		it.Problem = fmt.Sprintf(`record %s has no "text"`, id)
		return it
	}
	doc := &searchv1.Document{ExternalId: id, SourceFile: name, Title: strings.TrimSpace(rec.Title),
		Category: strings.TrimSpace(rec.Category), Content: []byte(*rec.Text), FormatName: "text",
		Format: searchv1.ContentFormat_CONTENT_FORMAT_TEXT, Access: rec.Access}
	if rec.UpdatedAt != "" {
		ts, err := ParseTime(rec.UpdatedAt)
		if err != nil {
			it.Problem = fmt.Sprintf("record %s: updated_at: %v", id, err)
			return it
		}
		doc.UpdatedAt = timestamppb.New(ts)
	}
	it.Doc = doc
	return it
}

// CheckJSONLAccess reads every record's "access" list from r (named name)
// and returns an error naming the first record with an entry of an
// unknown form (platform/access): a client checks a whole file with it
// before sending any of it, so a bad entry writes nothing. Lines that are
// not records are left to ReadJSONL to report.
func CheckJSONLAccess(r io.Reader, name string) error {
	br := bufio.NewReaderSize(r, 1<<20)
	for lineNo := 1; ; lineNo++ {
		line, err := br.ReadBytes('\n')
		if bytes.Contains(line, []byte(`"access"`)) {
			var rec jsonRecord
			if json.Unmarshal(line, &rec) == nil && len(rec.Access) > 0 {
				if _, aerr := access.ParseList(rec.Access); aerr != nil {
					id := jsonID(rec.UID)
					if id == "" {
						id = jsonID(rec.ID)
					}
					return fmt.Errorf("%s:%d: record %q: %w", name, lineNo, id, aerr)
				}
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", name, err)
		}
	}
}

// jsonID accepts a string or a number.
func jsonID(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return strings.TrimSpace(s)
	}
	var n json.Number
	if json.Unmarshal(raw, &n) == nil {
		if _, err := strconv.ParseFloat(string(n), 64); err == nil {
			return n.String()
		}
	}
	return ""
}

// ParseTime reads an RFC 3339 time or a plain date (front matter and
// records write both).
func ParseTime(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02 15:04:05Z07:00", "2006-01-02 15:04:05", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is not an RFC 3339 time or a date", s)
}
