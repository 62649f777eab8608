package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	authv1 "github.com/bmcis/knowledge/gen/go/bmcis/auth/v1"
	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
	"github.com/bmcis/knowledge/platform/access"
)

func init() {
	commands["documents"] = command{
		summary: "list documents with their access lists, or show who may read one: documents [--principal group:hr] | documents show ID",
		run:     runDocuments,
		complete: func(_ context.Context, args []string) []string {
			if len(args) == 0 {
				return []string{"show"}
			}
			return nil
		},
	}
}

// documentsPage is how many documents one ListDocuments call asks for.
const documentsPage = 500

func documentsUsage(w io.Writer) {
	fmt.Fprint(w, `usage:
  bmcisctl documents [--source S|-] [--category C] [--principal P] [--readable-by KEY_ID|PRINCIPALS] [--prefix ID] [-n N] [-o table|json|yaml]
  bmcisctl documents show ID [-o table|json|yaml]

documents lists the stored documents by external id with their category,
source, access list, chunk count and last change (docs/ACCESS.md).
A document of no source (plain ingestion) shows source -; --source -
keeps those.
--principal keeps the documents whose list names P (group:NAME or user:ID);
--principal everyone keeps those every caller may read. A caller in group
hr reads both: --principal group:hr and --principal everyone.
--readable-by keeps exactly the documents a caller may read: an API key
(KEY_ID: its groups and category scope, read from the auth service with
the admin credential) or an access set given directly
(group:hr,group:legal or user:ID; everyone is always in it). It is the
search service's own rule, the one its reads apply. For a key it also
says the key's tool scope and whether those tools read document text
(find_vendor_info alone reads only vendor evidence snippets); in json and
yaml that line goes to stderr, so stdout stays one document a line.
show prints one document and who may read it: its list, the active API
keys whose groups and category scope allow it, each with its tools and
whether they read the text (with the admin credential, from the auth
service), and the OAuth callers its list names.
Environment: BMCIS_SEARCH_ADDR and BMCIS_INGEST_TOKEN (the ingest
credential: only it may read documents' lists); for show's keys and
--readable-by KEY_ID, BMCIS_AUTH_ADDR and BMCIS_ADMIN_TOKEN (the admin
credential: only it may list keys). show without the admin credential
shows the document and its list, and says the keys were not listed.
`)
}

func runDocuments(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		switch args[0] {
		case "show":
			return runDocumentsShow(ctx, args[1:], stdout, stderr)
		case "-h", "--help", "help":
			documentsUsage(stderr)
			return flag.ErrHelp
		}
	}
	return runDocumentsList(ctx, args, stdout, stderr)
}

func runDocumentsList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("documents", stderr)
	addr := fs.String("addr", searchAddrFlag(), "search gRPC address (BMCIS_SEARCH_ADDR)")
	output := outputFlag(fs)
	sourceName := fs.String("source", "", `only documents of this source ("-": of no source, plain ingestion)`)
	category := fs.String("category", "", "only documents of this category")
	principal := fs.String("principal", "", "only documents whose access list names this principal (group:NAME, user:ID, or everyone)")
	prefix := fs.String("prefix", "", "only documents whose external id starts with this")
	readableBy := fs.String("readable-by", "", "only documents this caller may read: an API key's id, or principals (group:hr,user:ID)")
	limit := fs.Int("limit", 0, "at most this many documents (0: all)")
	fs.Usage = func() { documentsUsage(stderr); fs.PrintDefaults() }
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := checkOutput(*output); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf("unexpected argument %q (documents show ID shows one)", fs.Arg(0))
	}
	if *limit < 0 {
		return usageErrorf("--limit must be 0 or more")
	}
	req := &searchv1.ListDocumentsRequest{Source: *sourceName, Category: *category, IdPrefix: *prefix}
	if strings.TrimSpace(*sourceName) == noSource {
		// The listing's mark for no source; no source name can be "-".
		req.Source, req.NoSource = "", true
	}
	if *principal != "" {
		// The spelling ingestion accepts; the service checks it again.
		p, err := access.ParsePrincipal(*principal)
		if err != nil {
			return usageErrorf("--principal: %v", err)
		}
		req.Principal = p
	}
	// The ingest credential first: without it nothing can be listed, so a
	// missing one is named before the auth service is asked anything.
	if err := needCredential(envIngestToken, "documents reads the lists with ListDocuments, which only the ingest credential may call"); err != nil {
		return err
	}
	c, closeConn, err := searchDial(*addr, envIngestToken)
	if err != nil {
		return err
	}
	defer closeConn()
	var key *authv1.ApiKey
	if *readableBy != "" {
		rb, k, err := readerScope(ctx, *readableBy)
		if err != nil {
			return err
		}
		req.ReadableBy, key = rb, k
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	var docs []*searchv1.StoredDocument
	for {
		req.PageSize = documentsPage
		if *limit > 0 {
			req.PageSize = int32(min(documentsPage, *limit-len(docs)))
		}
		resp, err := c.ListDocuments(ctx, req)
		if status.Code(err) == codes.InvalidArgument {
			return usageErrorf("%s", status.Convert(err).Message())
		}
		if err != nil {
			return fmt.Errorf("list documents via %s: %w", *addr, err)
		}
		docs = append(docs, resp.GetDocuments()...)
		req.PageToken = resp.GetNextPageToken()
		if req.PageToken == "" || (*limit > 0 && len(docs) >= *limit) {
			break
		}
	}
	if *output != outputTable {
		if key != nil {
			// Beside the records, not among them: stdout stays one
			// document a line for the scripts that read it.
			fmt.Fprintln(stderr, keyReachLine(key))
		}
		return writeRecords(stdout, *output, docs)
	}
	if key != nil {
		fmt.Fprintln(stdout, keyReachLine(key))
	}
	if len(docs) == 0 {
		_, err := fmt.Fprintln(stdout, "no documents")
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tTITLE\tCATEGORY\tSOURCE\tACCESS\tCHUNKS\tUPDATED")
	for _, d := range docs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\n", d.GetExternalId(), orDash(d.GetTitle()), orDash(d.GetCategory()),
			sourceText(d.GetSource()), accessText(d), d.GetChunkCount(), keysTime(d.GetUpdatedAt(), "-"))
	}
	return tw.Flush()
}

// needCredential is nil when the credential named by env var name is set,
// else the usage error naming it, followed by why the command cannot go on
// without it: one sentence, "usage:" only at its start.
func needCredential(name, why string) error {
	if _, err := credential(name); err != nil {
		return fmt.Errorf("%w; %s", err, why)
	}
	return nil
}

// noSource is how the listing shows a document of no source (plain
// ingestion), and what --source takes to select them: no source name can
// start with "-" (sourcename.Rule).
const noSource = "-"

// sourceText is a document's source for people: noSource for none.
func sourceText(source string) string {
	if source == "" {
		return noSource
	}
	return source
}

// The MCP tools (mcp-adapter/internal/tools, docs/MCP.md) by what they
// return of the documents a key may read. semantic_search and get_chunks
// return chunk text (get_chunks any readable chunk by id, in full);
// find_vendor_info returns only a vendor's evidence: chunk ids, file names
// and snippets of up to 240 characters around the vendor's mentions. The
// gateway's REST routes count as these tools (Route.ScopeTool).
var textTools = []string{"semantic_search", "get_chunks"}

// toolReach is what a key's tool scope lets it read of the documents its
// groups and categories allow.
type toolReach struct {
	// Tools is the key's tool scope; empty: every tool.
	Tools []string `json:"tools"`
	// ReadsText: one of its tools returns document text.
	ReadsText bool `json:"reads_text"`
	// Reads says what its tools return, in words.
	Reads string `json:"reads"`
}

// keyReach is toolReach for key k.
func keyReach(k *authv1.ApiKey) toolReach {
	tools := k.GetScopes().GetTools()
	r := toolReach{Tools: append([]string{}, tools...)}
	if len(tools) == 0 {
		r.ReadsText = true
		r.Reads = "the full text of these documents (semantic_search, get_chunks) and their vendor evidence (find_vendor_info)"
		return r
	}
	var text []string
	vendor := false
	for _, t := range tools {
		switch {
		case slices.Contains(textTools, t):
			text = append(text, t)
		case t == "find_vendor_info":
			vendor = true
		}
	}
	switch {
	case len(text) > 0:
		r.ReadsText = true
		r.Reads = "the full text of these documents (" + strings.Join(text, ", ") + ")"
		if vendor {
			r.Reads += " and their vendor evidence (find_vendor_info)"
		}
	case vendor:
		r.Reads = "no document text: find_vendor_info returns only vendor evidence (chunk ids, file names and snippets of up to 240 characters around a vendor's mention) from those of these documents that mention a vendor"
	default:
		r.Reads = "nothing: none of its tools reads documents"
	}
	return r
}

// keyReachLine is keyReach as the line printed beside a key's listing.
func keyReachLine(k *authv1.ApiKey) string {
	r := keyReach(k)
	tools := "every tool"
	if len(r.Tools) > 0 {
		tools = strings.Join(r.Tools, ",")
	}
	return fmt.Sprintf("API key %s: tools %s; reads text: %s; through its tools it reads %s", k.GetKeyId(), tools, yesNo(r.ReadsText), r.Reads)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// readerScope is the read scope --readable-by names: principals given
// directly (a value with a ":", or everyone), or an API key's, as its edge
// sends it with each read: its access set (everyone and its groups) and
// its category scope.
func readerScope(ctx context.Context, v string) (*searchv1.ReadScope, *authv1.ApiKey, error) {
	v = strings.TrimSpace(v)
	if strings.Contains(v, ":") || strings.EqualFold(v, access.Everyone) {
		var entries []string
		for _, e := range strings.Split(v, ",") {
			if e = strings.TrimSpace(e); e != "" {
				entries = append(entries, e)
			}
		}
		set, err := access.ParseSet(entries)
		if err != nil {
			return nil, nil, usageErrorf("--readable-by: %v", err)
		}
		return &searchv1.ReadScope{Access: set}, nil, nil
	}
	if err := needCredential(envAdminToken, "--readable-by "+v+" names an API key, whose groups and category scope come from the auth service's ListKeys with the admin credential"); err != nil {
		return nil, nil, err
	}
	client, ctx, done, err := keysClient(ctx)
	if err != nil {
		return nil, nil, err
	}
	defer done()
	// Inactive keys too, so a revoked one is named as such, not as unknown.
	resp, err := client.ListKeys(ctx, &authv1.ListKeysRequest{IncludeInactive: true})
	if err != nil {
		return nil, nil, fmt.Errorf("list keys: %w", err)
	}
	for _, k := range resp.GetKeys() {
		if k.GetKeyId() != v {
			continue
		}
		if st := keysStatus(k, time.Now()); st != "active" {
			return nil, nil, fmt.Errorf("API key %s is %s: it reads no document", v, st)
		}
		return keyScope(k), k, nil
	}
	return nil, nil, fmt.Errorf("--readable-by: no API key has the id %q (a set of principals is written group:NAME,user:ID)", v)
}

// accessText is a document's list for people: "everyone" for an empty
// one, and a mark when it is the source's default.
func accessText(d *searchv1.StoredDocument) string {
	text := access.Everyone
	if len(d.GetAccess()) > 0 {
		text = strings.Join(d.GetAccess(), ",")
	}
	if d.GetAccessFromSource() {
		text += " (source default)"
	}
	return text
}

// documentReaders is who may read a document, as show reports it.
type documentReaders struct {
	Document any `json:"document"`
	// KeysListed: the auth service was asked (the admin credential is set).
	KeysListed bool `json:"keys_listed"`
	// APIKeys are the active keys whose groups and category scope allow
	// the document, each with its tool reach ("tool_reach", a toolReach):
	// whether its tools read the text at all.
	APIKeys []any `json:"api_keys"`
	// Note says why keys were not listed, when they were not.
	Note string `json:"note,omitempty"`
	// OAuth says which OAuth callers may read it.
	OAuth string `json:"oauth"`
}

func runDocumentsShow(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("documents show", stderr)
	addr := fs.String("addr", searchAddrFlag(), "search gRPC address (BMCIS_SEARCH_ADDR)")
	output := outputFlag(fs)
	fs.Usage = func() { documentsUsage(stderr); fs.PrintDefaults() }
	pos, err := parseKeysFlags(fs, args)
	if err != nil {
		return err
	}
	if err := checkOutput(*output); err != nil {
		return err
	}
	if len(pos) != 1 || strings.TrimSpace(pos[0]) == "" {
		return usageErrorf("give one document ID")
	}
	id := pos[0]
	// The document and its list come from GetDocument, which only the
	// ingest credential may call (platform/rpcauth): without it there is
	// nothing to show. The keys (ListKeys) are the admin credential's
	// alone; without that one the rest is still shown (below).
	if err := needCredential(envIngestToken, "documents show reads the document and its access list with GetDocument, which only the ingest credential may call"); err != nil {
		return err
	}
	c, closeConn, err := searchDial(*addr, envIngestToken)
	if err != nil {
		return err
	}
	defer closeConn()
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	resp, err := c.GetDocument(sctx, &searchv1.GetDocumentRequest{ExternalId: id})
	if status.Code(err) == codes.InvalidArgument {
		return usageErrorf("%s", status.Convert(err).Message())
	}
	if status.Code(err) == codes.NotFound {
		// A deleted document's list is gone with it; its reads are not.
		return fmt.Errorf("show document %q via %s: %w; if it was deleted, its reads stay in the audit trail: bmcisctl audit --document %s", id, *addr, err, shellArg(id))
	}
	if err != nil {
		return fmt.Errorf("show document %q via %s: %w", id, *addr, err)
	}
	doc := resp.GetDocument()
	out := documentReaders{OAuth: oauthReaders(doc.GetAccess())}
	if out.Document, err = protoValue(doc); err != nil {
		return err
	}
	var keys []*authv1.ApiKey
	var keysErr error
	if _, credErr := credential(envAdminToken); credErr != nil {
		out.Note = "API keys not listed: " + envAdminToken + " (the admin credential) is not set; only it may list keys (ListKeys)"
	} else {
		keys, keysErr = keysReading(sctx, c, doc)
		out.KeysListed = keysErr == nil
		if keysErr != nil {
			out.Note = "API keys not listed: " + describe(keysErr)
		}
	}
	out.APIKeys = []any{}
	for _, k := range keys {
		v, err := protoValue(k)
		if err != nil {
			return err
		}
		if m, ok := v.(map[string]any); ok {
			m["tool_reach"] = keyReach(k)
		}
		out.APIKeys = append(out.APIKeys, v)
	}
	err = writeResult(stdout, *output, out, func(w io.Writer) error { return documentTable(w, doc, keys, out) })
	if err != nil {
		return err
	}
	// The document was shown; a failed key listing still sets the exit code
	// (refused, unavailable) so a script sees the answer is incomplete.
	return keysErr
}

// shellArg is s as one POSIX shell word, so a command printed for the
// operator to run does what it says: as it is when no shell would split or
// expand it, else in single quotes (an id may hold spaces, $, ;, quotes).
func shellArg(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-+=.,/:@%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// keyScope is the read scope a key's edge sends with each of its reads:
// its access set (everyone and its groups) and its category scope.
func keyScope(k *authv1.ApiKey) *searchv1.ReadScope {
	return &searchv1.ReadScope{Access: access.CallerSet("", k.GetGroups()), Categories: k.GetScopes().GetCategories()}
}

// keysReading lists the active API keys that may read doc. The search
// service decides for each key, as it does for the key's reads: its
// listing of doc's id (the first id with that prefix) under the key's read
// scope holds doc or nothing. One small call a key; an operator's command.
func keysReading(ctx context.Context, search searchv1.SearchServiceClient, doc *searchv1.StoredDocument) ([]*authv1.ApiKey, error) {
	client, ctx, done, err := keysClient(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	resp, err := client.ListKeys(ctx, &authv1.ListKeysRequest{})
	if err != nil {
		return nil, fmt.Errorf("list keys: %w", err)
	}
	var out []*authv1.ApiKey
	// Keys share scopes (most hold none, or a team's groups): one call a
	// distinct scope, not one a key.
	reads := map[string]bool{}
	for _, k := range resp.GetKeys() {
		scope := keyScope(k)
		id := strings.Join(scope.GetAccess(), "\n") + "\x00" + strings.Join(scope.GetCategories(), "\n")
		may, seen := reads[id]
		if !seen {
			page, err := search.ListDocuments(ctx, &searchv1.ListDocumentsRequest{IdPrefix: doc.GetExternalId(), ReadableBy: scope, PageSize: 1})
			if err != nil {
				return nil, fmt.Errorf("check key %s's read scope: %w", k.GetKeyId(), err)
			}
			d := page.GetDocuments()
			may = len(d) == 1 && d[0].GetExternalId() == doc.GetExternalId()
			reads[id] = may
		}
		if may {
			out = append(out, k)
		}
	}
	return out, nil
}

// oauthReaders says which OAuth callers a list admits: a group:G through
// the groups their tokens map to, which come from the identity provider and
// so cannot be listed here; a user:SUB through the token's subject alone.
func oauthReaders(list []string) string {
	var groups, subjects []string
	for _, p := range list {
		switch {
		case strings.HasPrefix(p, "user:"):
			subjects = append(subjects, strings.TrimPrefix(p, "user:"))
		case p == "everyone":
			return oauthReaders(nil)
		default:
			groups = append(groups, p)
		}
	}
	who := "the OAuth caller whose token's subject is "
	if len(subjects) > 1 {
		who = "the OAuth callers whose token's subject is "
	}
	who += strings.Join(subjects, " or ")
	switch {
	case len(groups) == 0 && len(subjects) == 0:
		return "every OAuth caller may read it (the list is everyone's)"
	case len(groups) == 0:
		return who + " may read it too"
	}
	mapped := "OAuth callers whose token maps to " + strings.Join(groups, " or ")
	if len(subjects) > 0 {
		mapped += ", and " + who + ","
	}
	return mapped + " may read it too; their groups come from the identity provider and are not listed here"
}

func documentTable(w io.Writer, doc *searchv1.StoredDocument, keys []*authv1.ApiKey, r documentReaders) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, row := range [][2]string{
		{"document", doc.GetExternalId()}, {"title", orDash(doc.GetTitle())}, {"category", orDash(doc.GetCategory())},
		{"source", sourceText(doc.GetSource())}, {"file", orDash(doc.GetSourceFile())}, {"access", accessText(doc)},
		{"chunks", fmt.Sprint(doc.GetChunkCount())}, {"updated", keysTime(doc.GetUpdatedAt(), "-")},
	} {
		fmt.Fprintf(tw, "%s\t%s\n", row[0], row[1])
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	switch {
	case !r.KeysListed:
		fmt.Fprintln(w, r.Note)
	case len(keys) == 0:
		fmt.Fprintln(w, "API keys that may read it: none")
	default:
		fmt.Fprintln(w, "API keys that may read it (active keys whose groups and category scope allow it;")
		fmt.Fprintln(w, "TEXT no: its tools return no document text, only find_vendor_info's evidence snippets):")
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  KEY ID\tNAME\tOWNER\tGROUPS\tSCOPES\tTEXT")
		for _, k := range keys {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\n", k.GetKeyId(), k.GetName(), k.GetOwner(), keysGroups(k.GetGroups()),
				keysScopes(k.GetScopes()), yesNo(keyReach(k).ReadsText))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintln(w, "OAuth: "+r.OAuth)
	return err
}
