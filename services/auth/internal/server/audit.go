package server

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	authv1 "github.com/bmcis/knowledge/gen/go/bmcis/auth/v1"
	"github.com/bmcis/knowledge/platform/auditlog"
	"github.com/bmcis/knowledge/platform/docid"
	"github.com/bmcis/knowledge/platform/grpcserver"
	"github.com/bmcis/knowledge/platform/rpcauth"
	"github.com/bmcis/knowledge/services/auth/internal/audit"
)

// Bounds of the audit RPCs.
const (
	maxAuditBatch    = 1000
	maxAuditText     = auditlog.MaxText  // a query, a path; longer text is cut
	maxAuditLabel    = auditlog.MaxLabel // every other field
	defaultAuditPage = 100
	maxAuditPage     = 1000
	// maxAuditReplyBytes bounds a page of the trail in bytes: a thousand
	// entries naming many long document ids would pass gRPC's 4 MiB
	// message limit, and the page would fail whole.
	maxAuditReplyBytes = 2 << 20
)

// AppendAuditEvents stores a batch the adapter or the gateway recorded.
// The edge is the role of the caller's credential, not what it says.
func (s *Server) AppendAuditEvents(ctx context.Context, req *authv1.AppendAuditEventsRequest) (*authv1.AppendAuditEventsResponse, error) {
	if s.audit == nil {
		return nil, status.Error(codes.Unimplemented, "this auth service keeps no audit trail")
	}
	in := req.GetEvents()
	if len(in) > maxAuditBatch {
		return nil, status.Errorf(codes.InvalidArgument, "events: at most %d per call, got %d", maxAuditBatch, len(in))
	}
	edge := edgeOf(ctx)
	events := make([]audit.Event, 0, len(in))
	for i, e := range in {
		if e.GetTool() == "" || e.GetOutcome() == "" {
			return nil, status.Errorf(codes.InvalidArgument, "events[%d]: tool and outcome are required", i)
		}
		if e.GetTime() == nil || e.GetTime().CheckValid() != nil {
			return nil, status.Errorf(codes.InvalidArgument, "events[%d]: time is required", i)
		}
		if len(e.GetChunkIds()) > auditlog.MaxChunkIDs {
			return nil, status.Errorf(codes.InvalidArgument, "events[%d]: at most %d chunk_ids", i, auditlog.MaxChunkIDs)
		}
		if len(e.GetDocumentIds()) > auditlog.MaxDocumentIDs {
			return nil, status.Errorf(codes.InvalidArgument, "events[%d]: at most %d document_ids", i, auditlog.MaxDocumentIDs)
		}
		ev := audit.Event{
			Time: e.GetTime().AsTime(), Edge: edge,
			Principal: cut(e.GetPrincipal(), maxAuditLabel), PrincipalKind: cut(e.GetPrincipalKind(), maxAuditLabel),
			OAuthIssuer: cut(e.GetOauthIssuer(), maxAuditLabel), ClientAddress: cut(e.GetClientAddress(), maxAuditLabel),
			ClientName: cut(e.GetClientName(), maxAuditLabel), Tool: cut(e.GetTool(), maxAuditLabel),
			Target: cut(e.GetTarget(), maxAuditText), QuerySHA256: cut(e.GetQuerySha256(), maxAuditLabel),
			ChunkIDs: e.GetChunkIds(), DocumentIDs: documentIDs(e.GetDocumentIds()),
			Outcome: cut(e.GetOutcome(), maxAuditLabel), RequestID: cut(e.GetRequestId(), maxAuditLabel),
		}
		if e.GetQuery() != "" {
			q := cut(e.GetQuery(), maxAuditText)
			ev.Query = &q
		}
		events = append(events, ev)
	}
	if err := s.audit.Append(ctx, events); err != nil {
		return nil, err
	}
	return &authv1.AppendAuditEventsResponse{Appended: int32(len(events))}, nil
}

// ListAuditEvents answers operators, newest first, a page at a time.
func (s *Server) ListAuditEvents(ctx context.Context, req *authv1.ListAuditEventsRequest) (*authv1.ListAuditEventsResponse, error) {
	if s.audit == nil {
		return nil, status.Error(codes.Unimplemented, "this auth service keeps no audit trail")
	}
	f := audit.Filter{
		Principal:  strings.TrimSpace(req.GetPrincipal()),
		Tool:       strings.TrimSpace(req.GetTool()),
		DocumentID: strings.TrimSpace(req.GetDocumentId()),
		Limit:      defaultAuditPage,
	}
	if f.DocumentID != "" {
		if err := docid.Check(f.DocumentID); err != nil {
			return nil, grpcserver.InvalidArgument("document_id", "%v", err)
		}
	}
	if req.GetSince() != nil {
		if err := req.GetSince().CheckValid(); err != nil {
			return nil, status.Error(codes.InvalidArgument, "since: not a valid time")
		}
		f.Since = req.GetSince().AsTime()
	}
	switch n := req.GetPageSize(); {
	case n < 0 || n > maxAuditPage:
		return nil, status.Errorf(codes.InvalidArgument, "page_size: must be 1..%d", maxAuditPage)
	case n > 0:
		f.Limit = int(n)
	}
	if t := req.GetPageToken(); t != "" {
		pos, err := audit.ParseToken(t)
		if err != nil {
			return nil, status.Error(codes.InvalidArgument, "page_token: not a token this service issued")
		}
		f.Before = pos
	}
	// One more than the page says whether another page follows.
	f.Limit++
	list, err := s.audit.List(ctx, f)
	if err != nil {
		return nil, fmt.Errorf("list audit events: %w", err)
	}
	resp := &authv1.ListAuditEventsResponse{}
	if len(list) == f.Limit {
		list = list[:f.Limit-1]
		last := list[len(list)-1]
		resp.NextPageToken = audit.Position{Time: last.Time, ID: last.ID}.Token()
	}
	resp.Events = make([]*authv1.AuditEvent, 0, len(list))
	size := 0
	for i, e := range list {
		ev := &authv1.AuditEvent{
			Time: timestamppb.New(e.Time), RecordedAt: timestamppb.New(e.RecordedAt), Edge: e.Edge,
			Principal: e.Principal, PrincipalKind: e.PrincipalKind, OauthIssuer: e.OAuthIssuer,
			ClientAddress: e.ClientAddress, ClientName: e.ClientName, Tool: e.Tool, Target: e.Target,
			QuerySha256: e.QuerySHA256, ChunkIds: e.ChunkIDs, DocumentIds: e.DocumentIDs, Outcome: e.Outcome, RequestId: e.RequestID,
		}
		if e.Query != nil {
			ev.Query = *e.Query
		}
		// A page ends early, with a token for the rest, rather than pass
		// the answer's byte bound; it always carries one entry.
		if size += proto.Size(ev) + 8; i > 0 && size > maxAuditReplyBytes {
			last := list[i-1]
			resp.NextPageToken = audit.Position{Time: last.Time, ID: last.ID}.Token()
			break
		}
		resp.Events = append(resp.Events, ev)
	}
	return resp, nil
}

// documentIDs is what an entry stores of the document ids an edge sent:
// each cut to the longest id ingestion accepts, as cut keeps every other
// field (the edges send ids the search service returned, so nothing is cut
// but a forged one).
func documentIDs(ids []string) []string {
	if len(ids) == 0 {
		return nil
	}
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = cut(id, docid.MaxBytes)
	}
	return out
}

// edgeOf names the edge that appends: the role its credential holds
// ("unverified" where credentials are off, in development).
func edgeOf(ctx context.Context) string {
	switch {
	case rpcauth.Holds(ctx, rpcauth.Adapter):
		return string(rpcauth.Adapter)
	case rpcauth.Holds(ctx, rpcauth.Read):
		return string(rpcauth.Read)
	}
	return "unverified"
}

// cut keeps at most n bytes of s, on a rune boundary. A NUL byte (valid
// UTF-8, so proto lets it through) becomes U+FFFD: PostgreSQL text cannot
// hold one, and one caller's NUL would otherwise fail the whole batch.
func cut(s string, n int) string {
	s = strings.ReplaceAll(s, "\x00", "\uFFFD")
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
