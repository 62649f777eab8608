package tools

import (
	"context"
	"slices"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	authv1 "github.com/bmcis/knowledge/gen/go/bmcis/auth/v1"
	"github.com/bmcis/knowledge/mcp-adapter/internal/backend"
	"github.com/bmcis/knowledge/mcp-adapter/internal/envelope"
	"github.com/bmcis/knowledge/mcp-adapter/internal/oauth"
	"github.com/bmcis/knowledge/mcp-adapter/internal/respond"
	"github.com/bmcis/knowledge/platform/auditlog"
)

// ToolResourceRead is the audit trail's tool for a kb:// resource read.
const ToolResourceRead = "resources/read"

// auditNote collects, while a call runs, what its audit entry says beyond
// the answer: who auth said the caller is, and what was asked.
type auditNote struct {
	principal, kind, issuer string
	tool                    string // set for resource reads
	target                  string // a resource's URI, or the chunks get_chunks asked for
	query                   string
	// The chunk and document of each result the backend answered with,
	// in order (search, get_chunks: one result a chunk). An answer trimmed
	// to the token limit keeps the first ones, and whatever fields the
	// caller chose, the entry names the chunks and documents of those.
	results []chunkDocument
	// The document of each evidence chunk of a vendor answer, which names
	// the chunks it returned (chunkIDs).
	documents []chunkDocument
}

// chunkDocument ties a chunk to its document's external id.
type chunkDocument struct {
	chunk    int64
	document string
}

// Read-mask paths of what the audit entry names of each result: the chunk
// and its document, read beside the fields the caller chose (which may
// leave both out).
var (
	searchAuditReads = []string{"results.chunk.chunk_id", "results.chunk.document_id"}
	chunksAuditReads = []string{"chunks.chunk_id", "chunks.document_id"}
)

// withAuditReads adds paths to a read mask; an empty mask (every field)
// has them already.
func withAuditReads(mask []string, paths []string) []string {
	if len(mask) == 0 {
		return mask
	}
	for _, p := range paths {
		if !slices.Contains(mask, p) {
			mask = append(mask, p)
		}
	}
	return mask
}

// noteResult records the chunk and document of the backend's next
// result. Called on the call's own path, never from a fetch guarded may
// start early (that one writes nothing of the caller's).
func noteResult(ctx context.Context, chunk int64, document string) {
	n := noteOf(ctx)
	n.results = append(n.results, chunkDocument{chunk, document})
}

// noteDocument records the document of a vendor's evidence chunk, on the
// call's own path as noteResult.
func noteDocument(ctx context.Context, chunk int64, document string) {
	n := noteOf(ctx)
	n.documents = append(n.documents, chunkDocument{chunk, document})
}

type auditNoteKey struct{}

func withAuditNote(ctx context.Context) context.Context {
	return context.WithValue(ctx, auditNoteKey{}, &auditNote{})
}

// noteOf returns the call's note; a throwaway one outside a call.
func noteOf(ctx context.Context) *auditNote {
	if n, ok := ctx.Value(auditNoteKey{}).(*auditNote); ok {
		return n
	}
	return &auditNote{}
}

// notePrincipal records who auth verified: the key id, or the OAuth
// token's subject (never the key itself).
func notePrincipal(ctx context.Context, p *authv1.Principal) {
	n := noteOf(ctx)
	if id, ok := oauth.FromContext(ctx); ok {
		n.principal, n.kind, n.issuer = id.Subject, auditlog.KindOAuth, id.Issuer
		return
	}
	if p.GetKeyId() != "" {
		n.principal, n.kind = p.GetKeyId(), auditlog.KindAPIKey
	}
}

// noteResource marks the call as a read of a kb:// resource.
func noteResource(ctx context.Context, uri string) {
	n := noteOf(ctx)
	n.tool, n.target = ToolResourceRead, uri
}

// audit records the finished call: its outcome and the chunks and
// documents its answer returned: the results the final envelope kept, or
// for a vendor the chunk ids it names.
func (s *Server) audit(ctx context.Context, call *respond.Call, res *mcp.CallToolResult) {
	if s.opts.Audit == nil {
		return
	}
	n := noteOf(ctx)
	e := auditlog.Entry{
		Time: call.Started, Principal: n.principal, PrincipalKind: n.kind, OAuthIssuer: n.issuer,
		ClientAddress: backend.ClientAddress(ctx), ClientName: clientName(ctx),
		Tool: call.Operation, Target: n.target, Query: n.query, Outcome: outcomeOf(call, res), RequestID: call.RequestID,
	}
	if n.tool != "" {
		e.Tool = n.tool
	}
	if env := call.Final; env != nil {
		if n.results != nil {
			e.ChunkIDs, e.DocumentIDs = returned(n.results[:min(len(env.Results), len(n.results))])
		} else {
			e.ChunkIDs = chunkIDs(env.Results)
			e.DocumentIDs = documentIDs(e.ChunkIDs, n.documents)
		}
	}
	s.opts.Audit.Record(e)
}

// chunkIDs lists the chunks an answer returned: each result's chunk_id,
// and a vendor's evidence (evidence_chunk_ids, or evidence[].chunk_id),
// each id once.
func chunkIDs(results []envelope.Object) []int64 {
	var ids []int64
	// Answers hold tens of chunks at most: a scan beats a map.
	add := func(id int64) {
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	for _, r := range results {
		if id, ok := r.Int("chunk_id"); ok {
			add(int64(id))
		}
		if v, ok := r.Get("evidence_chunk_ids"); ok {
			list, _ := v.([]int64)
			for _, id := range list {
				add(id)
			}
		}
		if v, ok := r.Get("evidence"); ok {
			list, _ := v.([]envelope.Object)
			for _, e := range list {
				if id, ok := e.Int("chunk_id"); ok {
					add(int64(id))
				}
			}
		}
	}
	return ids
}

// returned lists the chunks and the documents of results, each once, in
// order.
func returned(results []chunkDocument) (chunks []int64, documents []string) {
	for _, r := range results {
		if !slices.Contains(chunks, r.chunk) {
			chunks = append(chunks, r.chunk)
		}
		if r.document != "" && !slices.Contains(documents, r.document) {
			documents = append(documents, r.document)
		}
	}
	return chunks, documents
}

// documentIDs lists the documents of the chunks returned, each once, in
// the order the chunks first name them. Tens of chunks at most: scans.
func documentIDs(chunks []int64, docs []chunkDocument) []string {
	var out []string
	for _, id := range chunks {
		for _, d := range docs {
			if d.chunk == id {
				if d.document != "" && !slices.Contains(out, d.document) {
					out = append(out, d.document)
				}
				break
			}
		}
	}
	return out
}

// clientName is the MCP client's name: this request's (protocol
// 2026-07-28 on), else the session's initialize.
func clientName(ctx context.Context) string {
	if info := server.RequestProtocolInfoFromContext(ctx); info != nil && info.ClientInfo != nil {
		return info.ClientInfo.Name
	}
	if s, ok := server.ClientSessionFromContext(ctx).(server.SessionWithClientInfo); ok {
		return s.GetClientInfo().Name
	}
	return ""
}
