package e2e

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/bmcis/knowledge/gateway/internal/rest"
	authv1 "github.com/bmcis/knowledge/gen/go/bmcis/auth/v1"
	"github.com/bmcis/knowledge/platform/auditlog"
	"github.com/bmcis/knowledge/platform/grpcclient"
	"github.com/bmcis/knowledge/platform/stacktest"
)

// auditEvents lists the trail as an operator, waiting until it holds at
// least n events matching f (entries reach auth a flush interval late).
func (s *stack) auditEvents(n int, f *authv1.ListAuditEventsRequest) []*authv1.AuditEvent {
	s.t.Helper()
	ctx := grpcclient.WithCredential(context.Background(), adminToken)
	var got []*authv1.AuditEvent
	require.Eventually(s.t, func() bool {
		resp, err := s.auth.ListAuditEvents(ctx, f)
		require.NoError(s.t, err)
		got = resp.GetEvents()
		return len(got) >= n
	}, 20*time.Second, 20*time.Millisecond, "want %d audit events for %v, have %d", n, f, len(got))
	return got
}

// TestRESTReadsAreAudited: a REST search, a chunk read and a failed read
// each leave an entry naming the key id (never the key), the route, the
// query, the chunk ids returned and the outcome; operators read them over
// GET /v1/audit, nobody else.
func TestRESTReadsAreAudited(t *testing.T) {
	s := newStack(t, map[string]string{"BMCIS_AUDIT_FLUSH_INTERVAL": "20ms"})
	s.ingest()
	key := s.createKey(`{"name":"audited"}`)
	keyID := stacktest.KeyID(key)

	r := s.do("POST", "/v1/search", `{"query":"object storage buckets","mode":"RETRIEVAL_MODE_BM25","limit":3}`, rest.HeaderAPIKey, key)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	var found struct {
		Results []struct {
			Chunk struct {
				ChunkID string `json:"chunkId"`
			} `json:"chunk"`
		} `json:"results"`
	}
	require.NoError(t, json.Unmarshal(r.body, &found))
	require.NotEmpty(t, found.Results)
	var ids []int64
	for _, res := range found.Results {
		id, err := strconv.ParseInt(res.Chunk.ChunkID, 10, 64)
		require.NoError(t, err)
		ids = append(ids, id)
	}
	r = s.do("GET", "/v1/chunks?chunk_ids="+strconv.FormatInt(ids[0], 10), "", rest.HeaderAPIKey, key)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	r = s.do("GET", "/v1/vendors/Nobody%20Inc", "", rest.HeaderAPIKey, key)
	require.Equal(t, http.StatusNotFound, r.status, "%s", r.body)
	r = s.do("GET", "/v1/vendor-suggestions?text=Nobo", "", rest.HeaderAPIKey, key)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)

	events := s.auditEvents(4, &authv1.ListAuditEventsRequest{Principal: keyID})
	byTool := map[string]*authv1.AuditEvent{}
	for _, e := range events {
		byTool[e.GetTool()] = e
		require.Equal(t, keyID, e.GetPrincipal())
		require.Equal(t, auditlog.KindAPIKey, e.GetPrincipalKind())
		require.Equal(t, "127.0.0.1", e.GetClientAddress())
		require.Equal(t, "read", e.GetEdge(), "recorded by the gateway's credential")
		require.NotContains(t, e.String(), key, "the key itself is never recorded")
	}
	search := byTool["POST /v1/search"]
	require.NotNil(t, search, "%v", events)
	require.Equal(t, "object storage buckets", search.GetQuery())
	require.Equal(t, auditlog.QueryHash("object storage buckets"), search.GetQuerySha256())
	require.Equal(t, ids, search.GetChunkIds())
	require.Equal(t, auditlog.OK, search.GetOutcome())
	chunks := byTool["GET /v1/chunks"]
	require.NotNil(t, chunks, "%v", events)
	require.Equal(t, ids[:1], chunks.GetChunkIds())
	require.Equal(t, auditlog.ChunkTarget(ids[:1]), chunks.GetTarget(), "the chunks asked for, as MCP's get_chunks records them")
	vendor := byTool["GET /v1/vendors/{name}"]
	require.NotNil(t, vendor, "%v", events)
	require.Equal(t, "Nobody Inc", vendor.GetQuery())
	require.Equal(t, "VENDOR_NOT_FOUND", vendor.GetOutcome(), "a failed read records its error code")
	suggest := byTool["GET /v1/vendor-suggestions"]
	require.NotNil(t, suggest, "%v", events)
	require.Equal(t, "Nobo", suggest.GetQuery(), "the text typed is the read's query")

	// The operator route: the admin token reads the trail, filtered.
	r = s.do("GET", "/v1/audit?principal="+keyID+"&tool=POST%20/v1/search", "", rest.HeaderAdminToken, adminToken)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	var listed struct {
		Events []struct {
			Principal string   `json:"principal"`
			ChunkIDs  []string `json:"chunkIds"`
		} `json:"events"`
	}
	require.NoError(t, json.Unmarshal(r.body, &listed))
	require.Len(t, listed.Events, 1)
	require.Equal(t, keyID, listed.Events[0].Principal)
	require.Len(t, listed.Events[0].ChunkIDs, len(ids))
	// An API key, the ingest credential or nothing: refused.
	r = s.do("GET", "/v1/audit", "", rest.HeaderAPIKey, key)
	require.Equal(t, http.StatusUnauthorized, r.status, "%s", r.body)
	r = s.do("GET", "/v1/audit", "", rest.HeaderAdminToken, ingestToken)
	require.Equal(t, http.StatusForbidden, r.status, "%s", r.body)
}

// TestAuditOutageNeverFailsARead takes the audit trail's write away from
// auth (its role loses INSERT on the table, so every append fails while
// Check works): reads still answer, and the entries kept in the buffer
// arrive once appends work again.
func TestAuditOutageNeverFailsARead(t *testing.T) {
	s := newStack(t, map[string]string{"BMCIS_AUDIT_FLUSH_INTERVAL": "20ms"})
	s.ingest()
	key := s.createKey(`{"name":"outage"}`)
	s.st.Exec(t, "REVOKE INSERT ON auth.audit_events FROM bmcis_auth")
	_, err := s.auth.AppendAuditEvents(context.Background(), &authv1.AppendAuditEventsRequest{Events: []*authv1.AuditEvent{{
		Time: timestamppb.Now(), Tool: "probe", Outcome: auditlog.OK,
	}}})
	require.Error(t, err, "appends fail")

	for range 3 {
		r := s.do("POST", "/v1/search", `{"query":"cloud providers","limit":2}`, rest.HeaderAPIKey, key)
		require.Equal(t, http.StatusOK, r.status, "a read never fails because of the audit: %s", r.body)
	}
	s.st.Exec(t, "GRANT INSERT ON auth.audit_events TO bmcis_auth")
	events := s.auditEvents(3, &authv1.ListAuditEventsRequest{Principal: stacktest.KeyID(key)})
	require.True(t, slices.ContainsFunc(events, func(e *authv1.AuditEvent) bool { return e.GetQuery() == "cloud providers" }))
}

// TestRESTRefusalsAreLimitedPerAddress: refused keys over REST are
// limited per client address as the adapter's are (platform/auditlog):
// the first BMCIS_AUDIT_REFUSALS_PER_ADDRESS of a window recorded, one
// entry counting the rest when it ends (here at the gateway's stop, which
// writes the windows still open: a window of an hour holds all the
// requests however slow the machine); another address and a valid key's
// reads from the flooding one are not limited.
func TestRESTRefusalsAreLimitedPerAddress(t *testing.T) {
	s := newStack(t, map[string]string{"BMCIS_AUDIT_FLUSH_INTERVAL": "20ms",
		"BMCIS_AUDIT_REFUSALS_PER_ADDRESS": "3", "BMCIS_AUDIT_REFUSAL_WINDOW": "1h"})
	key := s.createKey(`{"name":"not-limited"}`)
	since := time.Now()
	for range 8 {
		r := s.do("GET", "/v1/vendor-suggestions?text=Nobo", "", rest.HeaderAPIKey, "not-a-key")
		require.Equal(t, http.StatusUnauthorized, r.status, "%s", r.body)
		r = s.do("GET", "/v1/vendor-suggestions?text=Nobo", "", rest.HeaderAPIKey, key)
		require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	}
	// From another address of the loopback network.
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
	other := &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
	for range 2 {
		req, err := http.NewRequest(http.MethodGet, s.url+"/v1/vendor-suggestions?text=Nobo", nil)
		require.NoError(t, err)
		req.Header.Set(rest.HeaderAPIKey, "not-a-key")
		resp, err := other.Do(req)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	}

	// The stop sends every entry and the open windows' summaries before
	// it returns: the trail is then complete, 8 + 3 + 1 + 2 entries.
	s.gw.Close()
	events := s.auditEvents(14, &authv1.ListAuditEventsRequest{Tool: "GET /v1/vendor-suggestions", Since: timestamppb.New(since)})
	require.Len(t, events, 14)
	byAddress := map[string][]*authv1.AuditEvent{}
	for _, e := range events {
		if e.GetPrincipal() == "" {
			byAddress[e.GetClientAddress()] = append(byAddress[e.GetClientAddress()], e)
		}
	}
	flooder := byAddress["127.0.0.1"]
	require.Len(t, flooder, 4, "the limit, and one summary")
	require.Equal(t, "5 further refusals from 127.0.0.1 suppressed", flooder[0].GetTarget(), "the newest")
	for _, e := range flooder {
		require.Equal(t, "AUTH_INVALID", e.GetOutcome())
		require.Equal(t, "read", e.GetEdge())
	}
	require.Len(t, byAddress["127.0.0.2"], 2)
	for _, e := range byAddress["127.0.0.2"] {
		require.NotContains(t, e.GetTarget(), "suppressed")
	}
}
