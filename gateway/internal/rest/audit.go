package rest

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/bmcis/knowledge/platform/auditlog"
)

// noteQuery records the query text of the read in ctx for its audit entry.
func noteQuery(ctx context.Context, q string) {
	if rec := recorderFrom(ctx); rec != nil {
		rec.query = q
	}
}

// noteChunks records the chunks the read in ctx returned.
func noteChunks(ctx context.Context, ids []int64) {
	if rec := recorderFrom(ctx); rec != nil {
		rec.chunkIDs = ids
	}
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
	ua := r.UserAgent()
	if len(ua) > maxClientName {
		ua = ua[:maxClientName]
	}
	e.auditlog.Record(auditlog.Entry{
		Time: start, Principal: rec.keyID, PrincipalKind: kind,
		ClientAddress: remoteHost(r), ClientName: ua,
		Tool: rec.route, Target: r.URL.Path, Query: rec.query, ChunkIDs: rec.chunkIDs,
		Outcome: outcome, RequestID: requestID,
	})
}

// CloseAudit sends what the audit buffer holds, within ctx.
func (e *Edge) CloseAudit(ctx context.Context) { e.auditlog.Close(ctx) }
