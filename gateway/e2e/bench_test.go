package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/bmcis/knowledge/gateway/internal/benchutil"
	"github.com/bmcis/knowledge/gateway/internal/rest"
	authv1 "github.com/bmcis/knowledge/gen/go/bmcis/auth/v1"
	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
	vendorgraphv1 "github.com/bmcis/knowledge/gen/go/bmcis/vendorgraph/v1"
)

// BenchmarkRESTOverheadAgainstServices times REST calls through the gateway
// against the same calls made directly over gRPC, on the real services and
// database. "search" is the figure (over the ingested demo
// documents); "graph-status" is a second, cheaper call.
//
//	cd gateway && go test ./e2e -run '^$' -bench RESTOverheadAgainstServices -benchtime 1000x
func BenchmarkRESTOverheadAgainstServices(b *testing.B) {
	s := newStack(b, map[string]string{"BMCIS_GATEWAY_HEALTH_INTERVAL": "5s", "BMCIS_GATEWAY_STATS_INTERVAL": "10s"})
	key := s.createKey(`{"name":"e2e-bench","limits":{"tiers":[{"tier":"minute","value":1000000},{"tier":"hour","value":1000000},{"tier":"day","value":1000000}]}}`)
	s.ingest()
	ctx := context.Background()
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	defer hc.CloseIdleConnections()
	rest := func(method, path, body string) func() error {
		return func() error {
			var rd io.Reader
			if body != "" {
				rd = strings.NewReader(body)
			}
			req, err := http.NewRequest(method, s.url+path, rd)
			if err != nil {
				return err
			}
			req.Header.Set(rest.HeaderAPIKey, key)
			req.Header.Set("Content-Type", "application/json")
			resp, err := hc.Do(req)
			if err != nil {
				return err
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("%s %s: %s", method, path, resp.Status)
			}
			return nil
		}
	}
	direct := func(f func() (proto.Message, error)) func() error {
		return func() error { _, err := f(); return err }
	}
	checked := func(call func() error) func() error {
		return func() error {
			if _, err := s.auth.Check(ctx, &authv1.CheckRequest{ApiKey: key, Operation: "bench"}); err != nil {
				return err
			}
			return call()
		}
	}
	cases := []struct {
		name       string
		grpc, rest func() error
	}{
		{"search",
			direct(func() (proto.Message, error) {
				return s.search.Search(ctx, &searchv1.SearchRequest{Query: "cloud providers", Limit: 10})
			}),
			rest("POST", "/v1/search", `{"query":"cloud providers","limit":10}`)},
		{"graph-status",
			direct(func() (proto.Message, error) {
				return s.vendor.GetGraphStatus(ctx, &vendorgraphv1.GetGraphStatusRequest{})
			}),
			rest("GET", "/v1/graph/status", "")},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ResetTimer()
			r := benchutil.Measure(b, 100, b.N,
				benchutil.Path{Name: "grpc", Call: c.grpc},
				benchutil.Path{Name: "grpc+check", Call: checked(c.grpc)},
				benchutil.Path{Name: "rest", Call: c.rest})
			b.StopTimer()
			benchutil.Report(b, r)
		})
	}
}
