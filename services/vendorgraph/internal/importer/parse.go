// Package importer validates JSON Lines graph files and writes them in one
// transaction. Validation is complete before anything is written: every
// problem is collected with its line number, and one problem means nothing
// is written.
package importer

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"slices"
	"strings"

	"github.com/bmcis/knowledge/services/vendorgraph/internal/names"
)

// Limits on what one record may carry.
const (
	MaxIDLen      = 200
	MaxSnippetLen = 200
	MaxTypeLen    = 64
	MaxAliases    = 100
	// MaxLineBytes bounds one line; gRPC's default 4 MiB message limit is
	// the hard ceiling, this keeps the message clear well below it.
	MaxLineBytes = 1 << 20
	// MaxProblems bounds the problems reported (they travel in a trailer,
	// which proxies limit in size); the rest are counted.
	MaxProblems = 200
)

// validTypeName is what entity and relationship types look like,
// [A-Z][A-Z0-9_]*, so the open set stays tidy (PRODUCT, not "product" next
// to "Product").
func validTypeName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'A' && c <= 'Z' || i > 0 && (c >= '0' && c <= '9' || c == '_')) {
			return false
		}
	}
	return s != ""
}

// Problem is one invalid record.
type Problem struct {
	Line    int64
	Message string
}

// Alias is one of a vendor's other names.
type Alias struct {
	Alias, Normalized string
}

// Entity is a validated entity record.
type Entity struct {
	Line           int64
	ID             UUID
	Name           string
	NormalizedName string
	Type           string
	Confidence     float32
	Snippet        *string
	Attributes     []byte // canonical JSON object
	IsVendor       bool
	Aliases        []Alias
	Hash           [16]byte
}

// Relationship is a validated relationship record. A million of them are
// held at once, so it stays small: file ids are kept only for references
// not yet resolved (see Batch.refNames).
type Relationship struct {
	Line       int64
	ID         UUID
	Source     UUID
	Target     UUID
	Type       string
	Confidence float32
	Hash       [16]byte
	Metadata   []byte // canonical JSON object; nil when empty
}

// record is one line as decoded: pointers tell a missing field from a zero.
type record struct {
	Kind             *string         `json:"kind"`
	ID               *string         `json:"id"`
	Name             *string         `json:"name"`
	EntityType       *string         `json:"entity_type"`
	Confidence       *float64        `json:"confidence"`
	Snippet          *string         `json:"snippet"`
	Attributes       json.RawMessage `json:"attributes"`
	IsVendor         *bool           `json:"is_vendor"`
	Aliases          *[]string       `json:"aliases"`
	SourceID         *string         `json:"source_id"`
	TargetID         *string         `json:"target_id"`
	RelationshipType *string         `json:"relationship_type"`
	Metadata         json.RawMessage `json:"metadata"`
}

// parsed is one line after parsing: a record, or the problems found, or
// nothing (a blank line). Parsing needs no state shared between lines, so
// lines parse in parallel; Batch.accept then checks what spans lines.
type parsed struct {
	line     int64
	over     bool // past the line limit
	entity   *Entity
	rel      *Relationship
	problems []Problem
	// The record's id and, for relationships, its ends as written in the
	// file, for messages about duplicates and dangling references.
	fileID, sourceRef, targetRef string
}

// lineParser checks one line's fields and collects its problems.
type lineParser struct {
	parsed
}

func (p *lineParser) fail(format string, args ...any) {
	p.problems = append(p.problems, Problem{Line: p.line, Message: fmt.Sprintf(format, args...)})
}

// parseLine parses and checks one line on its own.
func parseLine(lineNo int64, line string) parsed {
	p := lineParser{parsed{line: lineNo}}
	if strings.TrimSpace(line) == "" {
		return p.parsed
	}
	if len(line) > MaxLineBytes {
		p.fail("line is %d bytes, at most %d", len(line), MaxLineBytes)
		return p.parsed
	}
	var r record
	if err := decodeStrict(line, &r); err != nil {
		p.fail("%s", err)
		return p.parsed
	}
	if r.Kind == nil {
		p.fail(`missing required field "kind" ("entity" or "relationship")`)
		return p.parsed
	}
	switch *r.Kind {
	case "entity":
		p.entity = p.parseEntity(&r)
	case "relationship":
		p.rel = p.parseRelationship(&r)
	default:
		p.fail(`field "kind": must be "entity" or "relationship", got %q`, *r.Kind)
	}
	return p.parsed
}

// decodeStrict decodes one JSON object, rejecting unknown fields, wrong field
// types, anything after the object, and what encoding/json lets through:
// a field name in another case ("Name" fills name) and a field given twice
// (the last would win), which another reader of the file would take
// differently.
func decodeStrict(line string, r *record) error {
	dec := json.NewDecoder(strings.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(r); err != nil {
		return describeJSONError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("malformed JSON: unexpected data after the object")
	}
	return checkFieldNames(line)
}

// recordFields are record's JSON field names, exactly as spelled.
var recordFields = func() map[string]bool {
	fields := map[string]bool{}
	t := reflect.TypeFor[record]()
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		fields[name] = true
	}
	return fields
}()

// checkFieldNames reads the top-level names of a line that decoded (so is
// one valid JSON object): each must be one of recordFields exactly, and
// given once. A byte scan, not a second decode: it runs on every line.
func checkFieldNames(line string) error {
	var seen []string
	depth, expectName := 0, false
	for i := 0; i < len(line); i++ {
		switch c := line[i]; c {
		case '"':
			end := i + 1
			for line[end] != '"' {
				if line[end] == '\\' {
					end++
				}
				end++
			}
			if depth == 1 && expectName {
				name := line[i+1 : end]
				if strings.IndexByte(name, '\\') >= 0 {
					_ = json.Unmarshal([]byte(line[i:end+1]), &name)
				}
				if err := checkFieldName(name, seen); err != nil {
					return err
				}
				seen = append(seen, name)
				expectName = false
			}
			i = end
		case '{', '[':
			depth++
			expectName = depth == 1
		case '}', ']':
			depth--
		case ',':
			expectName = depth == 1
		}
	}
	return nil
}

func checkFieldName(name string, seen []string) error {
	switch {
	case !recordFields[name]:
		for f := range recordFields {
			if strings.EqualFold(f, name) {
				return fmt.Errorf("unknown field %q (field names are lower case: %q)", name, f)
			}
		}
		return fmt.Errorf("unknown field %q", name)
	case slices.Contains(seen, name):
		return fmt.Errorf("field %q is given twice", name)
	}
	return nil
}

func describeJSONError(err error) error {
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &typeErr):
		if typeErr.Field == "" {
			return fmt.Errorf("malformed record: a line must be a JSON object, got %s", typeErr.Value)
		}
		return fmt.Errorf("field %q: expected %s, got %s", typeErr.Field, jsonTypeName(typeErr.Type.String()), typeErr.Value)
	case errors.As(err, &syntaxErr):
		return fmt.Errorf("malformed JSON at byte %d: %s", syntaxErr.Offset, strings.TrimPrefix(syntaxErr.Error(), "json: "))
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errors.New("malformed JSON: the line ends inside the object")
	case strings.HasPrefix(err.Error(), "json: unknown field"):
		return fmt.Errorf("unknown field %s", strings.TrimPrefix(err.Error(), "json: unknown field "))
	}
	return fmt.Errorf("malformed JSON: %s", strings.TrimPrefix(err.Error(), "json: "))
}

func jsonTypeName(goType string) string {
	switch goType {
	case "string", "*string":
		return "a string"
	case "float64", "*float64":
		return "a number"
	case "bool", "*bool":
		return "true or false"
	case "[]string", "*[]string":
		return "an array of strings"
	}
	return goType
}

// checkString validates a required (or, with required false, optional)
// string field and returns its value.
func (p *lineParser) checkString(field string, v *string, required bool, maxLen int) (string, bool) {
	if v == nil {
		if required {
			p.fail("missing required field %q", field)
			return "", false
		}
		return "", true
	}
	s := *v
	switch {
	case required && strings.TrimSpace(s) == "":
		p.fail("field %q: must not be empty", field)
		return "", false
	case names.Len(s) > maxLen:
		p.fail("field %q: %d characters, at most %d", field, names.Len(s), maxLen)
		return "", false
	case strings.IndexByte(s, 0) >= 0:
		p.fail("field %q: contains a NUL character", field)
		return "", false
	}
	return s, true
}

func (p *lineParser) checkType(field string, v *string) (string, bool) {
	s, ok := p.checkString(field, v, true, MaxTypeLen)
	if !ok {
		return "", false
	}
	if !validTypeName(s) {
		p.fail("field %q: %q must be upper case letters, digits and underscores, starting with a letter (e.g. PRODUCT)", field, s)
		return "", false
	}
	return s, true
}

func (p *lineParser) checkConfidence(v *float64) (float32, bool) {
	if v == nil {
		p.fail(`missing required field "confidence"`)
		return 0, false
	}
	if *v < 0 || *v > 1 || math.IsNaN(*v) {
		p.fail(`field "confidence": must be between 0 and 1, got %g`, *v)
		return 0, false
	}
	return float32(*v), true
}

func (p *lineParser) checkObject(field string, raw json.RawMessage) ([]byte, bool) {
	obj, err := canonicalObject(raw)
	if err != nil {
		p.fail("field %q: %s", field, err)
		return nil, false
	}
	return obj, true
}

// field is a field name and whether the record has it.
type field struct {
	name    string
	present bool
}

// notAllowed reports fields of the other kind of record.
func (p *lineParser) notAllowed(kind string, fields ...field) bool {
	ok := true
	for _, f := range fields {
		if f.present {
			p.fail("field %q does not belong in %s record", f.name, kind)
			ok = false
		}
	}
	return ok
}

func (p *lineParser) parseEntity(r *record) *Entity {
	ok := p.notAllowed("an entity",
		field{"source_id", r.SourceID != nil}, field{"target_id", r.TargetID != nil},
		field{"relationship_type", r.RelationshipType != nil}, field{"metadata", r.Metadata != nil})
	fileID, idOK := p.checkString("id", r.ID, true, MaxIDLen)
	name, nameOK := p.checkString("name", r.Name, true, names.MaxLen)
	norm := names.Normalize(name)
	if nameOK && norm == "" {
		p.fail(`field "name": must contain a letter or a digit`)
		nameOK = false
	}
	typ, typeOK := p.checkType("entity_type", r.EntityType)
	conf, confOK := p.checkConfidence(r.Confidence)
	snippet, snipOK := p.checkString("snippet", r.Snippet, false, MaxSnippetLen)
	attrs, attrsOK := p.checkObject("attributes", r.Attributes)
	isVendor := r.IsVendor != nil && *r.IsVendor
	aliases, aliasesOK := p.checkAliases(r.Aliases, isVendor, norm)
	if !(ok && idOK && nameOK && typeOK && confOK && snipOK && attrsOK && aliasesOK) {
		return nil
	}
	p.fileID = fileID
	e := &Entity{
		Line: p.line, ID: EntityID(fileID), Name: name, NormalizedName: norm, Type: typ,
		Confidence: conf, Attributes: attrs, IsVendor: isVendor, Aliases: aliases,
	}
	if snippet != "" {
		e.Snippet = &snippet
	}
	e.Hash = entityHash(e)
	return e
}

func (p *lineParser) checkAliases(v *[]string, isVendor bool, norm string) ([]Alias, bool) {
	if v == nil || len(*v) == 0 {
		return nil, true
	}
	if !isVendor {
		p.fail(`field "aliases": only vendors (is_vendor true) have aliases`)
		return nil, false
	}
	if len(*v) > MaxAliases {
		p.fail(`field "aliases": %d aliases, at most %d`, len(*v), MaxAliases)
		return nil, false
	}
	out := make([]Alias, 0, len(*v))
	seen := map[string]bool{norm: true} // an alias equal to the name adds nothing
	ok := true
	for i, a := range *v {
		field := fmt.Sprintf("aliases[%d]", i)
		s, good := p.checkString(field, &a, true, names.MaxLen)
		if !good {
			ok = false
			continue
		}
		n := names.Normalize(s)
		if n == "" {
			p.fail("field %q: must contain a letter or a digit", field)
			ok = false
			continue
		}
		if seen[n] {
			continue
		}
		seen[n] = true
		out = append(out, Alias{Alias: s, Normalized: n})
	}
	slices.SortFunc(out, func(x, y Alias) int { return strings.Compare(x.Normalized, y.Normalized) })
	return out, ok
}

func (p *lineParser) parseRelationship(r *record) *Relationship {
	ok := p.notAllowed("a relationship",
		field{"name", r.Name != nil}, field{"entity_type", r.EntityType != nil}, field{"snippet", r.Snippet != nil},
		field{"attributes", r.Attributes != nil}, field{"is_vendor", r.IsVendor != nil}, field{"aliases", r.Aliases != nil})
	fileID, idOK := p.checkString("id", r.ID, false, MaxIDLen)
	if idOK && r.ID != nil && strings.TrimSpace(fileID) == "" {
		p.fail(`field "id": must not be empty (or leave it out)`)
		idOK = false
	}
	src, srcOK := p.checkString("source_id", r.SourceID, true, MaxIDLen)
	tgt, tgtOK := p.checkString("target_id", r.TargetID, true, MaxIDLen)
	typ, typeOK := p.checkType("relationship_type", r.RelationshipType)
	conf, confOK := p.checkConfidence(r.Confidence)
	meta, metaOK := p.checkObject("metadata", r.Metadata)
	if !(ok && idOK && srcOK && tgtOK && typeOK && confOK && metaOK) {
		return nil
	}
	rel := &Relationship{Line: p.line, Source: EntityID(src), Target: EntityID(tgt), Type: typ, Confidence: conf}
	if len(meta) > 2 {
		rel.Metadata = meta
	}
	if rel.Source == rel.Target {
		p.fail("source_id and target_id are the same entity %q", src)
		return nil
	}
	if fileID != "" {
		rel.ID = RelationshipID(fileID)
	} else {
		fileID = "(derived from source_id, relationship_type, target_id)"
		rel.ID = edgeID(rel.Source, typ, rel.Target)
	}
	p.fileID, p.sourceRef, p.targetRef = fileID, src, tgt
	rel.Hash = relationshipHash(rel)
	return rel
}

// canonicalObject checks that raw is a JSON object (absent or null means
// empty) and returns it re-encoded with sorted keys and no insignificant
// space, so the same content always hashes the same. Numbers keep their text.
func canonicalObject(raw json.RawMessage) ([]byte, error) {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		return []byte("{}"), nil
	}
	if trimmed[0] != '{' {
		return nil, errors.New("must be a JSON object")
	}
	if bytes.Equal(trimmed, []byte("{}")) {
		return []byte("{}"), nil
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.UseNumber()
	var v map[string]any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("must be a JSON object: %v", err)
	}
	if hasNUL(v) {
		return nil, errors.New("contains a NUL character, which PostgreSQL cannot store")
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("re-encode: %v", err)
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

func hasNUL(v any) bool {
	switch x := v.(type) {
	case string:
		return strings.IndexByte(x, 0) >= 0
	case map[string]any:
		for k, e := range x {
			if strings.IndexByte(k, 0) >= 0 || hasNUL(e) {
				return true
			}
		}
	case []any:
		for _, e := range x {
			if hasNUL(e) {
				return true
			}
		}
	}
	return false
}

// hashWriter feeds length-prefixed fields to SHA-256, so no two different
// field lists can produce the same stream.
type hashWriter struct{ buf []byte }

func (h *hashWriter) str(s string) {
	h.buf = binary.AppendUvarint(h.buf, uint64(len(s)))
	h.buf = append(h.buf, s...)
}

func (h *hashWriter) bytes(b []byte) {
	h.buf = binary.AppendUvarint(h.buf, uint64(len(b)))
	h.buf = append(h.buf, b...)
}

func (h *hashWriter) sum() [16]byte {
	s := sha256.Sum256(h.buf)
	return [16]byte(s[:16])
}

// entityHash covers everything an import sets, aliases included, so an
// unchanged record is recognised and left alone (updated_at kept).
func entityHash(e *Entity) [16]byte {
	var h hashWriter
	h.str("entity/v1")
	h.str(e.Name)
	h.str(e.Type)
	h.buf = binary.BigEndian.AppendUint32(h.buf, math.Float32bits(e.Confidence))
	if e.Snippet != nil {
		h.str("s")
		h.str(*e.Snippet)
	} else {
		h.str("-")
	}
	h.bytes(e.Attributes)
	if e.IsVendor {
		h.str("vendor")
	} else {
		h.str("-")
	}
	for _, a := range e.Aliases {
		h.str(a.Alias)
	}
	return h.sum()
}

func relationshipHash(r *Relationship) [16]byte {
	var h hashWriter
	h.str("relationship/v1")
	h.bytes(r.Source[:])
	h.bytes(r.Target[:])
	h.str(r.Type)
	h.buf = binary.BigEndian.AppendUint32(h.buf, math.Float32bits(r.Confidence))
	if r.Metadata == nil {
		h.bytes([]byte("{}"))
	} else {
		h.bytes(r.Metadata)
	}
	return h.sum()
}
