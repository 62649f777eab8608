package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	authv1 "github.com/bmcis/knowledge/gen/go/bmcis/auth/v1"
	"github.com/bmcis/knowledge/platform/docid"
)

func init() {
	commands["audit"] = command{
		summary: "list the audit trail of reads (who read what, when): audit [--since 24h] [--principal KEY_ID] [--document ID]",
		run:     runAudit,
	}
}

// auditPage is how many events one ListAuditEvents call asks for.
const auditPage = 500

func runAudit(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("audit", stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: bmcisctl audit [--since D] [--principal P] [--tool T] [--document ID] [-n N] [-o table|json|yaml]

Lists the reads the MCP adapter and the gateway served, newest first:
time, principal (key id or OAuth subject), client, tool or route, query
(or its SHA-256), the documents and chunk ids returned, and the outcome
(docs/AUDIT.md). --document keeps the reads that returned that document
(its external id), before and after it changed: who read it.
--since takes a duration back from now (24h, 7d) or an RFC 3339 time.
-o json prints one JSON object per line; --json is the same. The issue's
single-dash forms (-since, -principal, -document, -json) work too.
Environment: BMCIS_AUTH_ADDR (default 127.0.0.1:50053), BMCIS_ADMIN_TOKEN.
`)
	}
	since := fs.String("since", "", "only events since this long ago (24h, 7d) or this RFC 3339 time")
	principal := fs.String("principal", "", "only this principal's events (a key id or an OAuth subject)")
	tool := fs.String("tool", "", `only this tool's or route's events (semantic_search, resources/read, "GET /v1/chunks")`)
	document := fs.String("document", "", "only the reads that returned this document (its external id, as ingested)")
	limit := fs.Int("limit", 100, "at most this many events (0: all)")
	output := outputFlag(fs)
	asJSON := fs.Bool("json", false, "the same as -o json")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *asJSON {
		*output = outputJSON
	}
	if err := checkOutput(*output); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf("unexpected argument %q", fs.Arg(0))
	}
	if *limit < 0 {
		return usageErrorf("--limit must be 0 or more")
	}
	req := &authv1.ListAuditEventsRequest{Principal: *principal, Tool: *tool, DocumentId: strings.TrimSpace(*document)}
	if flagGiven(fs, "document") {
		if err := docid.Check(req.DocumentId); err != nil {
			return usageErrorf("--document: %v", err)
		}
	}
	if *since != "" {
		t, err := parseSince(*since, time.Now())
		if err != nil {
			return usageErrorf("--since: %v", err)
		}
		req.Since = timestamppb.New(t)
	}
	client, ctx, done, err := keysClient(ctx)
	if err != nil {
		return err
	}
	defer done()
	var events []*authv1.AuditEvent
	for {
		req.PageSize = auditPage
		if *limit > 0 {
			req.PageSize = int32(min(auditPage, *limit-len(events)))
		}
		resp, err := client.ListAuditEvents(ctx, req)
		if err != nil {
			return fmt.Errorf("list audit events: %w", err)
		}
		events = append(events, resp.GetEvents()...)
		req.PageToken = resp.GetNextPageToken()
		if req.PageToken == "" || (*limit > 0 && len(events) >= *limit) {
			break
		}
	}
	if *output != outputTable {
		return writeRecords(stdout, *output, events)
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tPRINCIPAL\tCLIENT\tTOOL\tQUERY\tDOCUMENTS\tCHUNKS\tOUTCOME")
	for _, e := range events {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.GetTime().AsTime().Local().Format(time.DateTime),
			orDash(e.GetPrincipal()), orDash(auditClient(e)), auditTool(e), orDash(auditQuery(e)), auditDocuments(e.GetDocumentIds()),
			auditChunks(e.GetChunkIds()), e.GetOutcome())
	}
	return tw.Flush()
}

// parseSince reads --since: a duration back from now (days allowed) or an
// RFC 3339 time.
func parseSince(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	d, err := parseDays(s)
	if err != nil {
		return time.Time{}, fmt.Errorf("use a duration such as 24h or 7d, or an RFC 3339 time, got %q", s)
	}
	return now.Add(-d), nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func auditClient(e *authv1.AuditEvent) string {
	return strings.TrimSpace(e.GetClientName() + " " + e.GetClientAddress())
}

func auditTool(e *authv1.AuditEvent) string {
	if e.GetTarget() != "" && !strings.HasSuffix(e.GetTool(), e.GetTarget()) {
		return e.GetTool() + " " + e.GetTarget()
	}
	return e.GetTool()
}

// auditQuery is the query, or its hash's start when only the hash is kept.
func auditQuery(e *authv1.AuditEvent) string {
	switch q := e.GetQuery(); {
	case q != "":
		if len([]rune(q)) > 60 {
			return string([]rune(q)[:59]) + "…"
		}
		return strconv.Quote(q)
	case e.GetQuerySha256() != "":
		return "sha256:" + e.GetQuerySha256()[:min(12, len(e.GetQuerySha256()))]
	}
	return ""
}

// auditDocuments is the first documents of an entry, then how many more:
// -o json lists them all.
func auditDocuments(ids []string) string {
	switch len(ids) {
	case 0:
		return "-"
	case 1, 2:
		return strings.Join(ids, ",")
	}
	return fmt.Sprintf("%s,%s,+%d", ids[0], ids[1], len(ids)-2)
}

func auditChunks(ids []int64) string {
	if len(ids) == 0 {
		return "-"
	}
	parts := make([]string, 0, min(len(ids), 6))
	for i, id := range ids {
		if i == 5 {
			parts = append(parts, fmt.Sprintf("+%d", len(ids)-5))
			break
		}
		parts = append(parts, strconv.FormatInt(id, 10))
	}
	return strings.Join(parts, ",")
}
