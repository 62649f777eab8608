package server

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
	"github.com/bmcis/knowledge/platform/access"
	"github.com/bmcis/knowledge/platform/grpcserver"
	"github.com/bmcis/knowledge/platform/limits"
	"github.com/bmcis/knowledge/services/search/internal/store"
)

// defaultDocumentsPage is ListDocuments' page size when the request names none.
const defaultDocumentsPage = 100

// documentsTokenPrefix marks a ListDocuments page token, so a token of
// another list (or a bare id) is refused instead of read as a position.
const documentsTokenPrefix = "docs1:"

// documentsToken is the page token that continues after external id last.
func documentsToken(last string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(documentsTokenPrefix + last))
}

// parseDocumentsToken reads a documentsToken.
func parseDocumentsToken(tok string) (string, bool) {
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return "", false
	}
	last, ok := strings.CutPrefix(string(b), documentsTokenPrefix)
	return last, ok && last != ""
}

// ListDocuments lists documents with their access lists, a page at a time.
// The rule table lets only operators call it; it reads search's own tables,
// so it shows every document whatever the caller's own scope, and
// readable_by narrows it to what a read with that scope may return.
func (s *Server) ListDocuments(ctx context.Context, req *searchv1.ListDocumentsRequest) (*searchv1.ListDocumentsResponse, error) {
	f := store.DocumentFilter{
		Source:   strings.TrimSpace(req.GetSource()),
		Category: strings.TrimSpace(req.GetCategory()),
		IDPrefix: req.GetIdPrefix(),
		NoSource: req.GetNoSource(),
		Limit:    defaultDocumentsPage,
	}
	if f.NoSource && f.Source != "" {
		// Both cannot hold: say so rather than answer an empty list.
		return nil, grpcserver.InvalidArgument("no_source", "selects the documents of no source; it cannot be given with source %q", f.Source)
	}
	for _, c := range []struct {
		limit limits.Limit
		value string
	}{
		{limits.DocumentsSource, f.Source}, {limits.DocumentsCategory, f.Category},
		{limits.DocumentsPrincipal, req.GetPrincipal()}, {limits.DocumentsIDPrefix, f.IDPrefix},
		{limits.DocumentsPageToken, req.GetPageToken()},
	} {
		if n := len([]rune(c.value)); !c.limit.Allows(n) {
			return nil, grpcserver.InvalidArgument(c.limit.Name(), "must be at most %d characters, got %d", c.limit.Max, n)
		}
	}
	if p := strings.TrimSpace(req.GetPrincipal()); p != "" {
		// The spelling ingestion accepts, normalised as lists are stored.
		norm, err := access.ParsePrincipal(p)
		if err != nil {
			return nil, grpcserver.InvalidArgument("principal", "%v", err)
		}
		f.Principal = norm
	}
	if rb := req.GetReadableBy(); rb != nil {
		// What a read carrying this scope is answered for: the categories
		// resolved by readScope and the set parsed by platform/access, as
		// Search and GetChunks take them (the set never empty: it always
		// holds everyone; without one, lists do not narrow, as for the
		// operator's own reads).
		set, err := access.ParseSet(rb.GetAccess())
		if err != nil {
			return nil, grpcserver.InvalidArgument("readable_by.access", "%v", err)
		}
		f.ReadableBy = set
		if sc := s.readScope(rb); sc.limited {
			f.ReadableCategories = sc.categories()
		}
	}
	switch n := req.GetPageSize(); {
	case !limits.DocumentsPageSize.Allows(int(n)):
		return nil, grpcserver.InvalidArgument("page_size", "must be %d..%d (0: %d), got %d",
			max(limits.DocumentsPageSize.Min, 1), limits.DocumentsPageSize.Max, defaultDocumentsPage, n)
	case n > 0:
		f.Limit = int(n)
	}
	if tok := req.GetPageToken(); tok != "" {
		last, ok := parseDocumentsToken(tok)
		if !ok {
			return nil, grpcserver.InvalidArgument("page_token", "not a token ListDocuments issued (pass next_page_token as it came)")
		}
		f.After = last
	}
	page := f.Limit
	// One more than the page says whether another page follows.
	f.Limit++
	dctx, cancel := s.dbCtx(ctx)
	docs, err := s.st.Documents(dctx, f)
	cancel()
	if err != nil {
		return nil, dbError(ctx, err)
	}
	resp := &searchv1.ListDocumentsResponse{}
	if len(docs) > page {
		docs = docs[:page]
		resp.NextPageToken = documentsToken(docs[len(docs)-1].ExternalID)
	}
	resp.Documents = make([]*searchv1.StoredDocument, len(docs))
	for i, d := range docs {
		resp.Documents[i] = storedDocumentProto(d)
	}
	return resp, nil
}

// GetDocument is one document as ListDocuments shows it.
func (s *Server) GetDocument(ctx context.Context, req *searchv1.GetDocumentRequest) (*searchv1.GetDocumentResponse, error) {
	id := req.GetExternalId()
	if n := len([]rune(id)); !limits.DocumentID.Allows(n) || strings.TrimSpace(id) == "" {
		return nil, grpcserver.InvalidArgument("external_id", "must be %d..%d characters, not blank, got %d",
			limits.DocumentID.Min, limits.DocumentID.Max, n)
	}
	dctx, cancel := s.dbCtx(ctx)
	d, err := s.st.DocumentByID(dctx, id)
	cancel()
	if errors.Is(err, store.ErrNotFound) {
		return nil, status.Errorf(codes.NotFound, "no document with external_id %q", id)
	}
	if err != nil {
		return nil, dbError(ctx, err)
	}
	return &searchv1.GetDocumentResponse{Document: storedDocumentProto(d)}, nil
}

func storedDocumentProto(d store.DocumentInfo) *searchv1.StoredDocument {
	p := &searchv1.StoredDocument{
		ExternalId: d.ExternalID, Title: d.Title, Category: d.Category, Source: d.Source, SourceFile: d.SourceFile,
		Access: d.Access, AccessFromSource: d.AccessFromSource, ChunkCount: int32(d.Chunks),
	}
	if !d.UpdatedAt.IsZero() {
		p.UpdatedAt = timestamppb.New(d.UpdatedAt)
	}
	return p
}
