package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
	"github.com/bmcis/knowledge/platform/grpcclient"
	"github.com/bmcis/knowledge/platform/stacktest"
)

// documentRecords have different lists and categories; "both" names a
// principal twice and in capitals, which the stored list normalises.
var documentRecords = []string{
	`{"_id":"pub","title":"Public","text":"The okapi policy for everyone.","category":"policy"}`,
	`{"_id":"hr","title":"Pay","text":"The okapi pay bands.","category":"policy","access":["group:hr"]}`,
	`{"_id":"hr-sec","title":"Badges","text":"The okapi badge rules.","category":"security","access":["group:hr"]}`,
	`{"_id":"legal","title":"Contracts","text":"The okapi contracts.","category":"legal","access":["group:legal"]}`,
	`{"_id":"both","title":"Shared","text":"The okapi shared notes.","category":"policy","access":["GROUP:Legal","group:hr","user:Alice","group:hr"]}`,
}

// listedDocs is `documents -o json`: the external ids and the lists.
func listedDocs(t *testing.T, args ...string) map[string][]string {
	t.Helper()
	code, out, errOut := ctlRun(t, append([]string{"documents", "-o", "json"}, args...)...)
	require.Equal(t, 0, code, errOut)
	got := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		var d struct {
			ID     string   `json:"external_id"`
			Access []string `json:"access"`
		}
		require.NoError(t, json.Unmarshal([]byte(line), &d), line)
		got[d.ID] = d.Access
	}
	return got
}

func ids(m map[string][]string) []string {
	out := make([]string, 0, len(m))
	for id := range m {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

// documents lists what is stored with its access lists, filtered; show says
// who may read one; only the operator's credential gets either.
func TestDocumentsAndWhoMayRead(t *testing.T) {
	s := stacktest.Start(t, stacktest.Options{Services: []string{stacktest.Search, stacktest.Auth}})
	for k, v := range s.ClientEnv() {
		t.Setenv(k, v)
	}
	jsonl := filepath.Join(t.TempDir(), "docs.jsonl")
	require.NoError(t, os.WriteFile(jsonl, []byte(strings.Join(documentRecords, "\n")+"\n"), 0o644))
	code, _, errOut := ctlRun(t, "ingest", "-q", jsonl)
	require.Equal(t, 0, code, errOut)
	// A synced source whose documents take its default list.
	dir := t.TempDir()
	ctlWrite(t, dir, "ops/runbook.md", "# Runbook\n\nThe okapi runbook.\n")
	code, _, errOut = ctlRun(t, "sync", "handbook", dir, "--access", "group:ops")
	require.Equal(t, 0, code, errOut)

	t.Run("every document with its normalised list", func(t *testing.T) {
		require.Equal(t, map[string][]string{
			"pub": {}, "hr": {"group:hr"}, "hr-sec": {"group:hr"}, "legal": {"group:legal"},
			"both":                    {"group:hr", "group:legal", "user:Alice"},
			"handbook:ops/runbook.md": {"group:ops"},
		}, listedDocs(t))
		code, out, errOut := ctlRun(t, "documents")
		require.Equal(t, 0, code, errOut)
		require.Regexp(t, `(?m)^ID\s+TITLE\s+CATEGORY\s+SOURCE\s+ACCESS\s+CHUNKS\s+UPDATED$`, out)
		require.Regexp(t, `(?m)^pub\s+Public\s+policy\s+-\s+everyone\s+1\s`, out)
		require.Regexp(t, `(?m)^handbook:ops/runbook.md\s+Runbook\s+ops\s+handbook\s+group:ops \(source default\)\s+1\s`, out)
	})

	t.Run("filters", func(t *testing.T) {
		for _, tc := range []struct {
			args []string
			want []string
		}{
			{[]string{"--principal", "group:hr"}, []string{"both", "hr", "hr-sec"}},
			{[]string{"--principal", "GROUP:HR"}, []string{"both", "hr", "hr-sec"}},
			{[]string{"--principal", "user:Alice"}, []string{"both"}},
			{[]string{"--principal", "user:alice"}, nil}, // a user id keeps its case
			{[]string{"--principal", "everyone"}, []string{"pub"}},
			{[]string{"--category", "POLICY"}, []string{"both", "hr", "pub"}},
			{[]string{"--category", "policy", "--principal", "group:hr"}, []string{"both", "hr"}},
			{[]string{"--source", "handbook"}, []string{"handbook:ops/runbook.md"}},
			// "-", as the listing shows no source: plain ingestion's.
			{[]string{"--source", "-"}, []string{"both", "hr", "hr-sec", "legal", "pub"}},
			{[]string{"--source", "-", "--principal", "group:hr"}, []string{"both", "hr", "hr-sec"}},
			{[]string{"--prefix", "h"}, []string{"handbook:ops/runbook.md", "hr", "hr-sec"}},
			{[]string{"--limit", "2"}, []string{"both", "handbook:ops/runbook.md"}},
		} {
			t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
				got := ids(listedDocs(t, tc.args...))
				if tc.want == nil {
					require.Empty(t, got)
					return
				}
				require.Equal(t, tc.want, got)
			})
		}
	})

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, closeConn, err := searchDial(s.Addr(stacktest.Search), envIngestToken)
	require.NoError(t, err)
	defer closeConn()

	t.Run("pages", func(t *testing.T) {
		var got []string
		req := &searchv1.ListDocumentsRequest{PageSize: 2}
		pages := 0
		for {
			resp, err := c.ListDocuments(ctx, req)
			require.NoError(t, err)
			require.LessOrEqual(t, len(resp.GetDocuments()), 2)
			for _, d := range resp.GetDocuments() {
				got = append(got, d.GetExternalId())
			}
			pages++
			if req.PageToken = resp.GetNextPageToken(); req.PageToken == "" {
				break
			}
		}
		require.Equal(t, 3, pages)
		require.Equal(t, []string{"both", "handbook:ops/runbook.md", "hr", "hr-sec", "legal", "pub"}, got, "every document once, by id")
	})

	t.Run("bad input", func(t *testing.T) {
		for _, tc := range []struct {
			name  string
			req   *searchv1.ListDocumentsRequest
			field string
		}{
			{"unknown principal form", &searchv1.ListDocumentsRequest{Principal: "role:hr"}, "principal"},
			{"bad group name", &searchv1.ListDocumentsRequest{Principal: "group:h r"}, "principal"},
			{"malformed page token", &searchv1.ListDocumentsRequest{PageToken: "not-a-token"}, "page_token"},
			{"another list's token", &searchv1.ListDocumentsRequest{PageToken: "MTcwMDAwMDAwMDAwMDAwMDAuMQ"}, "page_token"},
			{"page too large", &searchv1.ListDocumentsRequest{PageSize: 1001}, "page_size"},
			{"no source and a source", &searchv1.ListDocumentsRequest{Source: "handbook", NoSource: true}, "no_source"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				_, err := c.ListDocuments(ctx, tc.req)
				require.Equal(t, codes.InvalidArgument, status.Code(err), "%v", err)
				require.True(t, strings.HasPrefix(status.Convert(err).Message(), tc.field+": "), "%v", err)
			})
		}
		code, _, errOut := ctlRun(t, "documents", "--principal", "hr")
		require.Equal(t, exitUsage, code)
		require.Contains(t, errOut, `want everyone, group:NAME or user:ID`)
		_, err := c.GetDocument(ctx, &searchv1.GetDocumentRequest{ExternalId: "nothing"})
		require.Equal(t, codes.NotFound, status.Code(err), "%v", err)
		code, _, errOut = ctlRun(t, "documents", "show", "nothing")
		require.Equal(t, exitFailed, code)
		require.Equal(t, "bmcisctl documents: show document \"nothing\" via "+s.Addr(stacktest.Search)+
			": no document with external_id \"nothing\" (NotFound); if it was deleted, its reads stay in the audit trail: bmcisctl audit --document nothing\n", errOut)
		// The command it suggests runs as printed: an id a shell would split
		// or expand is quoted.
		for id, arg := range map[string]string{
			"HR Policies/leave.md": `'HR Policies/leave.md'`,
			"it's $HOME;x":         `'it'\''s $HOME;x'`,
		} {
			code, _, errOut = ctlRun(t, "documents", "show", id)
			require.Equal(t, exitFailed, code)
			require.True(t, strings.HasSuffix(errOut, ": bmcisctl audit --document "+arg+"\n"), "%s", errOut)
		}
	})

	t.Run("only operators", func(t *testing.T) {
		for name, cred := range map[string]string{"read": stacktest.ServiceToken, "adapter": stacktest.AdapterToken, "admin": stacktest.AdminToken} {
			cctx := grpcclient.WithCredential(ctx, cred)
			_, err := c.ListDocuments(cctx, &searchv1.ListDocumentsRequest{})
			require.Contains(t, []codes.Code{codes.PermissionDenied, codes.Unauthenticated}, status.Code(err), "%s: %v", name, err)
			_, err = c.GetDocument(cctx, &searchv1.GetDocumentRequest{ExternalId: "hr"})
			require.Contains(t, []codes.Code{codes.PermissionDenied, codes.Unauthenticated}, status.Code(err), "%s: %v", name, err)
		}
		t.Setenv(envIngestToken, stacktest.ServiceToken)
		code, _, errOut := ctlRun(t, "documents")
		require.Equal(t, exitRefused, code, errOut)
	})

	// Keys: one in hr, one in no group, one in hr limited to security,
	// one in hr revoked (no longer reads anything).
	hrKey := stacktest.KeyID(s.CreateKey(t, stacktest.Key{Name: "hr", Groups: []string{"hr"}}))
	plainKey := stacktest.KeyID(s.CreateKey(t, stacktest.Key{Name: "plain"}))
	secKey := stacktest.KeyID(s.CreateKey(t, stacktest.Key{Name: "hr-security", Groups: []string{"hr"}, Categories: []string{"Security"}}))
	gone := s.CreateKey(t, stacktest.Key{Name: "hr-revoked", Groups: []string{"hr"}})
	s.RevokeKey(t, gone)
	// Tool-scoped keys in hr: one whose only tool returns vendor evidence
	// snippets, one that reads chunks in full.
	vendorKey := stacktest.KeyID(s.CreateKey(t, stacktest.Key{Name: "hr-vendors", Groups: []string{"hr"}, Tools: []string{"find_vendor_info"}}))
	chunksKey := stacktest.KeyID(s.CreateKey(t, stacktest.Key{Name: "hr-chunks", Groups: []string{"hr"}, Tools: []string{"get_chunks", "find_vendor_info"}}))

	t.Run("show lists exactly the keys that may read", func(t *testing.T) {
		for _, tc := range []struct {
			id   string
			keys []string
		}{
			{"hr", []string{hrKey, vendorKey, chunksKey}},
			{"hr-sec", []string{hrKey, secKey, vendorKey, chunksKey}},
			{"pub", []string{hrKey, plainKey, vendorKey, chunksKey}},
			{"legal", nil},
			{"both", []string{hrKey, vendorKey, chunksKey}},
		} {
			t.Run(tc.id, func(t *testing.T) {
				code, out, errOut := ctlRun(t, "documents", "show", tc.id, "-o", "json")
				require.Equal(t, 0, code, errOut)
				var got struct {
					Document struct {
						ID     string   `json:"external_id"`
						Access []string `json:"access"`
					} `json:"document"`
					KeysListed bool `json:"keys_listed"`
					APIKeys    []struct {
						KeyID     string `json:"key_id"`
						ToolReach struct {
							Tools     []string `json:"tools"`
							ReadsText bool     `json:"reads_text"`
						} `json:"tool_reach"`
					} `json:"api_keys"`
					OAuth string `json:"oauth"`
				}
				require.NoError(t, json.Unmarshal([]byte(out), &got), out)
				require.Equal(t, tc.id, got.Document.ID)
				require.True(t, got.KeysListed)
				var keys []string
				for _, k := range got.APIKeys {
					keys = append(keys, k.KeyID)
					// Only the key limited to find_vendor_info reads no text.
					require.Equal(t, k.KeyID != vendorKey, k.ToolReach.ReadsText, k.KeyID)
					if k.KeyID == vendorKey {
						require.Equal(t, []string{"find_vendor_info"}, k.ToolReach.Tools)
					}
				}
				sort.Strings(keys)
				want := append([]string(nil), tc.keys...)
				sort.Strings(want)
				if want == nil {
					require.Empty(t, keys)
				} else {
					require.Equal(t, want, keys)
				}
				require.Contains(t, got.OAuth, "OAuth")
			})
		}
		code, out, errOut := ctlRun(t, "documents", "show", "hr-sec")
		require.Equal(t, 0, code, errOut)
		require.Regexp(t, `(?m)^access\s+group:hr$`, out)
		require.Regexp(t, `(?m)^source\s+-$`, out)
		require.Regexp(t, `(?m)^\s+KEY ID\s+NAME\s+OWNER\s+GROUPS\s+SCOPES\s+TEXT$`, out)
		require.Regexp(t, `(?m)^\s+`+hrKey+`\s+hr\s+hr\s+hr\s+all\s+yes$`, out)
		require.Regexp(t, `(?m)^\s+`+secKey+`\s+hr-security\s+hr-security\s+hr\s+categories=(?i:security)\s+yes$`, out)
		require.Regexp(t, `(?m)^\s+`+vendorKey+`\s+hr-vendors\s+hr-vendors\s+hr\s+tools=find_vendor_info\s+no$`, out)
		require.Regexp(t, `(?m)^\s+`+chunksKey+`\s+hr-chunks\s+hr-chunks\s+hr\s+tools=get_chunks,find_vendor_info\s+yes$`, out)
		require.NotContains(t, out, plainKey)
		require.NotContains(t, out, stacktest.KeyID(gone))
		require.Contains(t, out, "OAuth: OAuth callers whose token maps to group:hr may read it too; their groups come from the identity provider")
	})

	t.Run("readable by a key or a set", func(t *testing.T) {
		for _, tc := range []struct {
			who  string
			want []string
		}{
			{hrKey, []string{"both", "hr", "hr-sec", "pub"}},
			{plainKey, []string{"pub"}},
			{secKey, []string{"hr-sec"}},
			{"group:ops", []string{"handbook:ops/runbook.md", "pub"}},
			{"GROUP:Legal, user:Alice", []string{"both", "legal", "pub"}},
			{"everyone", []string{"pub"}},
			{vendorKey, []string{"both", "hr", "hr-sec", "pub"}}, // its groups' documents, whatever its tools
		} {
			t.Run(tc.who, func(t *testing.T) {
				require.Equal(t, tc.want, ids(listedDocs(t, "--readable-by", tc.who)))
			})
		}
		require.Equal(t, []string{"both", "hr", "pub"}, ids(listedDocs(t, "--readable-by", hrKey, "--category", "policy")), "with the other filters")

		// Beside the list: the key's tool scope and whether its tools read
		// the text (on stdout in a table, on stderr beside json records).
		for _, tc := range []struct {
			key, line string
		}{
			{hrKey, "API key " + hrKey + ": tools every tool; reads text: yes; through its tools it reads the full text of these documents (semantic_search, get_chunks) and their vendor evidence (find_vendor_info)\n"},
			{vendorKey, "API key " + vendorKey + ": tools find_vendor_info; reads text: no; through its tools it reads no document text: find_vendor_info returns only vendor evidence"},
			{chunksKey, "API key " + chunksKey + ": tools get_chunks,find_vendor_info; reads text: yes; through its tools it reads the full text of these documents (get_chunks) and their vendor evidence"},
		} {
			t.Run("tools of "+tc.key, func(t *testing.T) {
				code, out, errOut := ctlRun(t, "documents", "--readable-by", tc.key)
				require.Equal(t, 0, code, errOut)
				require.True(t, strings.HasPrefix(out, tc.line), "%s", out)
				require.Regexp(t, `(?m)^ID\s+TITLE`, out)
				code, out, errOut = ctlRun(t, "documents", "--readable-by", tc.key, "-o", "json")
				require.Equal(t, 0, code, errOut)
				require.True(t, strings.HasPrefix(errOut, tc.line), "%s", errOut)
				for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
					require.True(t, json.Valid([]byte(line)), "stdout stays one document a line: %s", line)
				}
			})
		}
		code, out, errOut := ctlRun(t, "documents", "--readable-by", "group:hr")
		require.Equal(t, 0, code, errOut)
		require.NotContains(t, out, "reads text", "a set given directly has no tool scope")

		for _, tc := range []struct {
			name, who string
			code      int
			msg       string
		}{
			{"revoked key", stacktest.KeyID(gone), exitFailed, "API key " + stacktest.KeyID(gone) + " is revoked: it reads no document"},
			{"unknown key", "nokey", exitFailed, `--readable-by: no API key has the id "nokey"`},
			{"bad principal", "group:h r", exitUsage, "--readable-by: invalid access principal"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				code, _, errOut := ctlRun(t, "documents", "--readable-by", tc.who)
				require.Equal(t, tc.code, code, errOut)
				require.Contains(t, errOut, tc.msg)
			})
		}
		_, err := c.ListDocuments(ctx, &searchv1.ListDocumentsRequest{ReadableBy: &searchv1.ReadScope{Access: []string{"hr"}}})
		require.Equal(t, codes.InvalidArgument, status.Code(err), "%v", err)
		require.True(t, strings.HasPrefix(status.Convert(err).Message(), "readable_by.access: "), "%v", err)
	})

	t.Run("readable by a key needs the admin credential", func(t *testing.T) {
		t.Setenv(envAdminToken, "")
		t.Setenv(envCredentialsFile, filepath.Join(t.TempDir(), "none.json"))
		code, out, errOut := ctlRun(t, "documents", "--readable-by", hrKey)
		require.Equal(t, exitUsage, code, out)
		// One sentence: what is missing, then why this needs it; "usage:"
		// only where the message starts.
		require.True(t, strings.HasPrefix(errOut, "bmcisctl documents: usage: BMCIS_ADMIN_TOKEN is not set"), errOut)
		require.Contains(t, errOut, "; --readable-by "+hrKey+" names an API key, whose groups and category scope come from the auth service's ListKeys with the admin credential\n")
		require.Equal(t, 1, strings.Count(errOut, "usage:"), errOut)
		require.Empty(t, out)
		require.Equal(t, []string{"hr", "hr-sec"}, ids(listedDocs(t, "--readable-by", "group:hr", "--principal", "group:hr", "--prefix", "hr")),
			"a set given directly needs no admin credential")
	})

	t.Run("show without the admin credential", func(t *testing.T) {
		t.Setenv(envAdminToken, "")
		t.Setenv(envCredentialsFile, filepath.Join(t.TempDir(), "none.json"))
		code, out, errOut := ctlRun(t, "documents", "show", "hr")
		require.Equal(t, 0, code, errOut)
		require.Regexp(t, `(?m)^access\s+group:hr$`, out)
		require.Contains(t, out, "API keys not listed: BMCIS_ADMIN_TOKEN (the admin credential) is not set; only it may list keys (ListKeys)")
		require.NotContains(t, out, hrKey)
	})

	// The document and its list are the ingest role's alone (GetDocument,
	// ListDocuments): the admin credential cannot stand in for it, and the
	// error names the one missing.
	t.Run("without the ingest credential", func(t *testing.T) {
		t.Setenv(envIngestToken, "")
		t.Setenv(envCredentialsFile, filepath.Join(t.TempDir(), "none.json"))
		for _, tc := range []struct {
			args []string
			msg  string
		}{
			{[]string{"documents", "show", "hr"}, "; documents show reads the document and its access list with GetDocument, which only the ingest credential may call\n"},
			{[]string{"documents", "--readable-by", hrKey}, "; documents reads the lists with ListDocuments, which only the ingest credential may call\n"},
		} {
			t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
				code, out, errOut := ctlRun(t, tc.args...)
				require.Equal(t, exitUsage, code, out)
				require.Contains(t, errOut, "BMCIS_INGEST_TOKEN is not set")
				require.True(t, strings.HasSuffix(errOut, tc.msg), "%s", errOut)
				require.NotContains(t, errOut, envAdminToken)
				require.Empty(t, out)
			})
		}
	})
}

// documents show's OAuth line says how each principal of a list admits an
// OAuth caller: a group through the token's mapped groups, a user through
// the token's subject (which no group map touches).
func TestOAuthReadersNameGroupsAndSubjects(t *testing.T) {
	for _, tc := range []struct {
		list []string
		want string
	}{
		{nil, "every OAuth caller may read it (the list is everyone's)"},
		{[]string{"group:hr"}, "OAuth callers whose token maps to group:hr may read it too; their groups come from the identity provider and are not listed here"},
		{[]string{"group:hr", "group:legal"}, "OAuth callers whose token maps to group:hr or group:legal may read it too; their groups come from the identity provider and are not listed here"},
		{[]string{"user:alice@example.com"}, "the OAuth caller whose token's subject is alice@example.com may read it too"},
		{[]string{"user:a", "user:b"}, "the OAuth callers whose token's subject is a or b may read it too"},
		{[]string{"group:board", "user:ceo@example.com"}, "OAuth callers whose token maps to group:board, and the OAuth caller whose token's subject is ceo@example.com, may read it too; their groups come from the identity provider and are not listed here"},
	} {
		require.Equal(t, tc.want, oauthReaders(tc.list), "%v", tc.list)
	}
}
