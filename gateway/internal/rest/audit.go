package rest

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/bmcis/knowledge/platform/auditlog"
)

// noteQuery records the query text of the read in ctx for its audit entry.
func noteQuery(ctx context.Context, q string) {
	if rec := recorderFrom(ctx); rec != nil {
		rec.query = q
	}
}

// noteTarget records what the read in ctx asked for, in place of the path.
func noteTarget(ctx context.Context, target string) {
	if rec := recorderFrom(ctx); rec != nil {
		rec.target = target
	}
}

// noteChunks records the chunks the read in ctx returned and their
// documents (external ids, each once, in the order of the chunks).
func noteChunks(ctx context.Context, ids []int64, docs []string) {
	if rec := recorderFrom(ctx); rec != nil {
		rec.chunkIDs, rec.documentIDs = ids, docs
	}
}

// addDocument adds doc to docs unless it is there (or empty): an answer
// holds tens of chunks at most, so a scan beats a map.
func addDocument(docs []string, doc string) []string {
	if doc == "" || slices.Contains(docs, doc) {
		return docs
	}
	return append(docs, doc)
}

// withDocumentRead makes a read mask the caller sent name path, the
// documents' ids the audit entry needs, and reports whether it had to add
// it: the answer then leaves them out again, as the caller asked. An
// unset or empty mask reads every field already.
func withDocumentRead(fm *fieldmaskpb.FieldMask, path string) bool {
	if len(fm.GetPaths()) == 0 {
		return false
	}
	for _, p := range fm.GetPaths() {
		// A path names its field and, for a message, all of the fields below.
		if p = strings.TrimSpace(p); p == path || strings.HasPrefix(path, p+".") {
			return false
		}
	}
	fm.Paths = append(fm.Paths, path)
	return true
}

// maxClientName bounds the User-Agent kept as the client's name.
const maxClientName = 200

// audit records a finished REST read (a route an API key reads through)
// in the audit trail (docs/AUDIT.md); operator routes and the gateway's
// own pages are not reads of the knowledge base.
func (e *Edge) audit(r *http.Request, rec *recorder, status int, start time.Time, requestID string) {
	if e.auditlog == nil || rec.rt == nil || rec.rt.Access != APIKey {
		return
	}
	outcome := auditlog.OK
	if status >= 400 {
		outcome = rec.code
		if outcome == "" {
			outcome = "HTTP_" + strconv.Itoa(status)
		}
	}
	kind := ""
	if rec.keyID != "" {
		kind = auditlog.KindAPIKey
	}
	target := r.URL.Path
	if rec.target != "" {
		target = rec.target
	}
	ua := r.UserAgent()
	if len(ua) > maxClientName {
		ua = ua[:maxClientName]
	}
	e.auditlog.Record(auditlog.Entry{
		Time: start, Principal: rec.keyID, PrincipalKind: kind,
		ClientAddress: remoteHost(r), ClientName: ua,
		Tool: rec.route, Target: target, Query: rec.query, ChunkIDs: rec.chunkIDs, DocumentIDs: rec.documentIDs,
		Outcome: outcome, RequestID: requestID,
	})
}

// CloseAudit sends what the audit buffer holds, within ctx.
func (e *Edge) CloseAudit(ctx context.Context) { e.auditlog.Close(ctx) }
