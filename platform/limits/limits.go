// Package limits states the request limits of the service contracts once.
// They are the protovalidate rules (buf.validate) on the request fields in
// proto/, read from the generated descriptors when the program starts: the
// services check every call against them, the MCP adapter checks tool
// arguments against them and declares them in its tools' input schemas, and
// bmcisctl checks its flags. Changing a limit is one edit in a proto.
//
// The checks stay hand-written at each layer, so each keeps the error codes
// and messages its contract gives; only the numbers come from here.
package limits

import (
	"fmt"
	"strings"

	"buf.build/gen/go/bufbuild/protovalidate/protocolbuffers/go/buf/validate"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
	vendorgraphv1 "github.com/bmcis/knowledge/gen/go/bmcis/vendorgraph/v1"
)

// Kind says what a limit counts.
type Kind string

// The kinds of limit.
const (
	// Characters bounds a string's length in Unicode code points.
	Characters Kind = "characters"
	// Value bounds an integer.
	Value Kind = "value"
	// Items bounds a repeated field's item count.
	Items Kind = "items"
)

// Limit is the inclusive range a request field must fall in.
type Limit struct {
	// Field is the request field, as message.field ("bmcis.search.v1.SearchRequest.query").
	Field string
	Kind  Kind
	Min   int
	Max   int
}

// Allows reports whether n is inside the limit.
func (l Limit) Allows(n int) bool { return n >= l.Min && n <= l.Max }

// The limits, by request field.
var (
	// SearchQuery bounds SearchRequest.query: 1..500 characters.
	SearchQuery = read(&searchv1.SearchRequest{}, "query")
	// SearchPageSize bounds SearchRequest.limit: 1..50 results a page.
	SearchPageSize = read(&searchv1.SearchRequest{}, "limit")
	// SearchOffset bounds SearchRequest.offset: not negative.
	SearchOffset = read(&searchv1.SearchRequest{}, "offset")
	// ChunkIDs bounds GetChunksRequest.chunk_ids: 1..100 ids.
	ChunkIDs = read(&searchv1.GetChunksRequest{}, "chunk_ids")
	// VendorName bounds GetVendorRequest.name: 1..200 characters.
	VendorName = read(&vendorgraphv1.GetVendorRequest{}, "name")
	// VendorEntities bounds GetVendorRequest.max_entities: 0 (the default) to 100.
	VendorEntities = read(&vendorgraphv1.GetVendorRequest{}, "max_entities")
	// VendorRelationships bounds GetVendorRequest.max_relationships: 0 (the default) to 500.
	VendorRelationships = read(&vendorgraphv1.GetVendorRequest{}, "max_relationships")
	// VendorDepth bounds GetVendorRequest.depth: 0 (meaning 1) to 2.
	VendorDepth = read(&vendorgraphv1.GetVendorRequest{}, "depth")
	// VendorEvidence bounds GetVendorRequest.max_evidence: 0 (the default) to 50.
	VendorEvidence = read(&vendorgraphv1.GetVendorRequest{}, "max_evidence")
	// SuggestText bounds SuggestVendorsRequest.text: 1..200 characters.
	SuggestText = read(&vendorgraphv1.SuggestVendorsRequest{}, "text")
	// Suggestions bounds SuggestVendorsRequest.limit: 0 (the default) to 50.
	Suggestions = read(&vendorgraphv1.SuggestVendorsRequest{}, "limit")

	// EntityNamesBatch bounds SyncEntityNamesRequest.names: the most
	// entities one message of the stream carries (vendorgraph's batches).
	EntityNamesBatch = read(&searchv1.SyncEntityNamesRequest{}, "names")
	// EntityNameText bounds EntityName.name.
	EntityNameText = read(&searchv1.EntityName{}, "name")
	// EntityAliases bounds EntityName.aliases.
	EntityAliases = read(&searchv1.EntityName{}, "aliases")
	// EntityType bounds EntityName.entity_type.
	EntityType = read(&searchv1.EntityName{}, "entity_type")
	// EntityEvidence bounds GetEntityEvidenceRequest.limit: 1..50, as
	// GetVendorRequest.max_evidence (vendorgraph passes its cap on).
	EntityEvidence = read(&searchv1.GetEntityEvidenceRequest{}, "limit")

	// The filters and paging of ListDocuments, an operator's listing
	// (docs/ACCESS.md), and GetDocument's id.
	DocumentsSource    = read(&searchv1.ListDocumentsRequest{}, "source")
	DocumentsCategory  = read(&searchv1.ListDocumentsRequest{}, "category")
	DocumentsPrincipal = read(&searchv1.ListDocumentsRequest{}, "principal")
	DocumentsIDPrefix  = read(&searchv1.ListDocumentsRequest{}, "id_prefix")
	DocumentsPageSize  = read(&searchv1.ListDocumentsRequest{}, "page_size")
	DocumentsPageToken = read(&searchv1.ListDocumentsRequest{}, "page_token")
	DocumentID         = read(&searchv1.GetDocumentRequest{}, "external_id")
)

// DefaultPageSize is the page size the edges (the MCP adapter's page_size,
// the REST gateway's limit, bmcisctl's -limit) use when the caller names
// none. The contract has no default: SearchRequest.limit must be given.
const DefaultPageSize = 10

// All lists every limit, for tests that hold each layer to them: at either
// end a request passes. ListDocuments' principal and page token, and
// GetDocument's id, are left out: a value at their maximum is still refused
// or not found for what it says (an unknown principal form, a token not
// issued, no such document), so their lengths are checked where they are
// read.
func All() []Limit {
	return []Limit{SearchQuery, SearchPageSize, SearchOffset, ChunkIDs, VendorName, VendorEntities,
		VendorRelationships, VendorDepth, VendorEvidence, SuggestText, Suggestions,
		DocumentsSource, DocumentsCategory, DocumentsIDPrefix, DocumentsPageSize}
}

// unbounded stands for a side a rule leaves open: large enough for any
// request, small enough to add one to.
const unbounded = 1 << 40

// read returns the rule on one field of a request message. A missing or
// unsupported rule is a mistake in the protos or here, so it panics: any
// test of a package that imports this one finds it.
func read(msg proto.Message, field string) Limit {
	md := msg.ProtoReflect().Descriptor()
	fd := md.Fields().ByName(protoreflect.Name(field))
	if fd == nil {
		panic(fmt.Sprintf("limits: %s has no field %q", md.FullName(), field))
	}
	l := Limit{Field: string(fd.FullName()), Min: -unbounded, Max: unbounded}
	rules, _ := proto.GetExtension(fd.Options(), validate.E_Field).(*validate.FieldRules)
	switch {
	case rules.GetString() != nil:
		r := rules.GetString()
		l.Kind, l.Min = Characters, 0
		if r.HasMinLen() {
			l.Min = int(r.GetMinLen())
		}
		if r.HasMaxLen() {
			l.Max = int(r.GetMaxLen())
		}
	case rules.GetInt32() != nil:
		r := rules.GetInt32()
		l.Kind = Value
		switch {
		case r.HasGte():
			l.Min = int(r.GetGte())
		case r.HasGt():
			l.Min = int(r.GetGt()) + 1
		}
		switch {
		case r.HasLte():
			l.Max = int(r.GetLte())
		case r.HasLt():
			l.Max = int(r.GetLt()) - 1
		}
	case rules.GetRepeated() != nil:
		r := rules.GetRepeated()
		l.Kind, l.Min = Items, 0
		if r.HasMinItems() {
			l.Min = int(r.GetMinItems())
		}
		if r.HasMaxItems() {
			l.Max = int(r.GetMaxItems())
		}
	default:
		panic(fmt.Sprintf("limits: %s has no string, int32 or repeated rule (buf.validate.field)", l.Field))
	}
	if l.Min == -unbounded && l.Max == unbounded {
		panic(fmt.Sprintf("limits: %s's rule bounds nothing", l.Field))
	}
	return l
}

// Message is the full name of the request message the limit's field is in.
func (l Limit) Message() protoreflect.FullName {
	return protoreflect.FullName(l.Field).Parent()
}

// Name is the field's name ("query").
func (l Limit) Name() string { return string(protoreflect.FullName(l.Field).Name()) }

// With returns a copy of base (a message of l.Message()) with the field set
// to n: n characters (multi-byte, so a count of bytes shows), n items or the
// value n. Tests use it to build requests at and past each limit.
func With[M proto.Message](l Limit, base M, n int) M {
	out := proto.Clone(base).(M)
	m := out.ProtoReflect()
	if m.Descriptor().FullName() != l.Message() {
		panic(fmt.Sprintf("limits: %s is not in %s", l.Field, m.Descriptor().FullName()))
	}
	fd := m.Descriptor().Fields().ByName(protoreflect.Name(l.Name()))
	switch l.Kind {
	case Characters:
		m.Set(fd, protoreflect.ValueOfString(strings.Repeat("é", n)))
	case Value:
		m.Set(fd, protoreflect.ValueOfInt32(int32(n)))
	case Items:
		list := m.NewField(fd).List()
		for i := range n {
			list.Append(protoreflect.ValueOfInt64(int64(i + 1)))
		}
		m.Set(fd, protoreflect.ValueOfList(list))
	}
	return out
}

// Under is the value one below the minimum, and whether a request can
// carry it (no string or list is shorter than empty).
func (l Limit) Under() (int, bool) {
	return l.Min - 1, l.Min > -unbounded && (l.Kind == Value || l.Min > 0)
}

// Over is the value one above the maximum, and whether there is one.
func (l Limit) Over() (int, bool) { return l.Max + 1, l.Max < unbounded }
