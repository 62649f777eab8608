package e2e

// The stack under test: the real search, vendorgraph and auth binaries (built
// from this repository once per test run, since their server packages are
// internal to their modules) on a fresh migrated database from
// platform/testdb, and the gateway in-process in front of them.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/bmcis/knowledge/gateway/internal/gateway"
	authv1 "github.com/bmcis/knowledge/gen/go/bmcis/auth/v1"
	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
	vendorgraphv1 "github.com/bmcis/knowledge/gen/go/bmcis/vendorgraph/v1"
	"github.com/bmcis/knowledge/platform/config"
	"github.com/bmcis/knowledge/platform/grpcclient"
	"github.com/bmcis/knowledge/platform/logging"
	"github.com/bmcis/knowledge/platform/testdb"
)

const (
	serviceToken = "e2e-service-token-0123456789abcdef"
	adminToken   = "e2e-admin-token-0123456789abcdef"
)

var services = []struct{ name, pkg string }{
	{gateway.Search, "./services/search/cmd/search"},
	{gateway.VendorGraph, "./services/vendorgraph/cmd/vendorgraph"},
	{gateway.Auth, "./services/auth/cmd/auth"},
}

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// repoRoot is the workspace root (gateway/e2e/../..).
func repoRoot(t testing.TB) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	_, err = os.Stat(filepath.Join(root, "go.work"))
	require.NoError(t, err, "expected the go.work workspace at %s", root)
	return root
}

// buildServices builds the three service binaries once.
func buildServices(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "bmcis-e2e-bin-")
		if buildErr != nil {
			return
		}
		args := []string{"build", "-o", binDir + string(os.PathSeparator)}
		for _, s := range services {
			args = append(args, s.pkg)
		}
		cmd := exec.Command("go", args...)
		cmd.Dir = repoRoot(t)
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build the services: %v\n%s", err, out)
		}
	})
	require.NoError(t, buildErr)
	return binDir
}

// service is one running service process.
type service struct {
	name        string
	cmd         *exec.Cmd
	grpcAddr    string
	metricsAddr string
	logs        *logTail
	exited      chan struct{}
}

type logTail struct {
	mu    sync.Mutex
	lines []string
}

func (l *logTail) add(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, s)
	if len(l.lines) > 200 {
		l.lines = l.lines[len(l.lines)-200:]
	}
}

func (l *logTail) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// stop sends SIGTERM and waits for the process to end.
func (s *service) stop(t testing.TB) {
	t.Helper()
	select {
	case <-s.exited:
		return
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(15 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
}

func startService(t testing.TB, bin, name, dbURL string) *service {
	t.Helper()
	cmd := exec.Command(filepath.Join(bin, name))
	env := append(os.Environ(),
		"DATABASE_URL="+dbURL,
		"BMCIS_GRPC_ADDR=127.0.0.1:0",
		"BMCIS_METRICS_ADDR=127.0.0.1:0",
		"BMCIS_SERVICE_TOKEN="+serviceToken,
		"BMCIS_ADMIN_TOKEN="+adminToken,
		"BMCIS_SHUTDOWN_DRAIN=0s",
		"BMCIS_SHUTDOWN_TIMEOUT=5s",
		"BMCIS_LOG_LEVEL=info",
	)
	if r := os.Getenv("BMCIS_TEST_REDIS_URL"); r != "" {
		env = append(env, "REDIS_URL="+r)
	}
	cmd.Env = env
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	cmd.Stdout = io.Discard
	require.NoError(t, cmd.Start(), "start %s", name)
	s := &service{name: name, cmd: cmd, logs: &logTail{}, exited: make(chan struct{})}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<16), 1<<20)
		once := sync.Once{}
		for sc.Scan() {
			line := sc.Text()
			s.logs.add(line)
			var l struct{ Msg, Addr string }
			if json.Unmarshal([]byte(line), &l) == nil {
				switch l.Msg {
				case "metrics listening":
					s.metricsAddr = l.Addr
				case "grpc listening":
					s.grpcAddr = l.Addr
					once.Do(func() { close(ready) })
				}
			}
		}
	}()
	go func() {
		_ = cmd.Wait()
		close(s.exited)
	}()
	t.Cleanup(func() {
		s.stop(t)
		if t.Failed() {
			t.Logf("--- %s log (last lines)\n%s", name, s.logs.String())
		}
	})
	select {
	case <-ready:
	case <-s.exited:
		t.Fatalf("%s exited before serving:\n%s", name, s.logs.String())
	case <-time.After(90 * time.Second):
		t.Fatalf("%s did not start in 90 s:\n%s", name, s.logs.String())
	}
	return s
}

// stack is the three services and a gateway in front of them.
type stack struct {
	t        testing.TB
	services map[string]*service
	gw       *gateway.Gateway
	url      string
	conns    map[string]*grpc.ClientConn
	search   searchv1.SearchServiceClient
	vendor   vendorgraphv1.VendorGraphServiceClient
	auth     authv1.AuthServiceClient
}

func newStack(t testing.TB, env map[string]string) *stack {
	t.Helper()
	_, dbURL := testdb.New(t)
	bin := buildServices(t)
	s := &stack{t: t, services: map[string]*service{}, conns: map[string]*grpc.ClientConn{}}
	var wg sync.WaitGroup
	var mu sync.Mutex
	for _, svc := range services {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := startService(t, bin, svc.name, dbURL)
			mu.Lock()
			s.services[svc.name] = p
			mu.Unlock()
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	vars := map[string]string{
		"BMCIS_SERVICE_TOKEN":           serviceToken,
		"BMCIS_MCP_HEALTH_URL":          "off",
		"BMCIS_GATEWAY_METRICS_ADDR":    "off",
		"BMCIS_GATEWAY_HEALTH_INTERVAL": "200ms",
		"BMCIS_GATEWAY_HEALTH_TIMEOUT":  "500ms",
		"BMCIS_GATEWAY_STATS_INTERVAL":  "300ms",
	}
	for _, svc := range services {
		p := s.services[svc.name]
		up := strings.ToUpper(svc.name)
		vars["BMCIS_"+up+"_ADDR"] = p.grpcAddr
		vars["BMCIS_"+up+"_METRICS_URL"] = "http://" + p.metricsAddr + "/metrics"
	}
	for k, v := range env {
		vars[k] = v
	}
	r := config.FromMap(vars)
	cfg := gateway.LoadConfig(r)
	require.NoError(t, r.Err())
	gw, err := gateway.New(cfg, logging.New(io.Discard, "gateway", "error"))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	gw.Start(ctx)
	srv := httptest.NewServer(gw.Handler())
	s.gw, s.url = gw, srv.URL
	for _, svc := range services {
		conn, err := grpcclient.Dial(s.services[svc.name].grpcAddr, serviceToken)
		require.NoError(t, err)
		s.conns[svc.name] = conn
	}
	s.search = searchv1.NewSearchServiceClient(s.conns[gateway.Search])
	s.vendor = vendorgraphv1.NewVendorGraphServiceClient(s.conns[gateway.VendorGraph])
	s.auth = authv1.NewAuthServiceClient(s.conns[gateway.Auth])
	t.Cleanup(func() {
		srv.Close()
		cancel()
		gw.Close()
		for _, c := range s.conns {
			_ = c.Close()
		}
	})
	s.waitStatus(gateway.StatusConnected, gateway.Search, gateway.VendorGraph, gateway.Auth)
	return s
}

// waitStatus waits until /api/health reports every named server in st.
func (s *stack) waitStatus(st string, names ...string) gateway.HealthResponse {
	s.t.Helper()
	var h gateway.HealthResponse
	require.Eventually(s.t, func() bool {
		h = s.gw.Health()
		for _, srv := range h.Servers {
			for _, n := range names {
				if srv.Name == n && srv.Status != st {
					return false
				}
			}
		}
		return true
	}, 20*time.Second, 50*time.Millisecond, "servers %v did not turn %s", names, st)
	return h
}

// implemented reports whether a service answers an RPC (anything but
// UNIMPLEMENTED); tests of behaviour that waits on a service's implementation
// skip with a note until it does.
func implemented(err error) bool { return status.Code(err) != codes.Unimplemented }

// response is a decoded HTTP response.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) errBody(t testing.TB) gateway.ErrorBody {
	t.Helper()
	var e gateway.ErrorBody
	require.NoError(t, json.Unmarshal(r.body, &e), "body: %s", r.body)
	require.NotNil(t, e.Details, "details must be an array: %s", r.body)
	return e
}

func (s *stack) do(method, path, body string, headers ...string) response {
	s.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, s.url+path, rd)
	require.NoError(s.t, err)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(s.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(s.t, err)
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

// createKey makes an API key through the REST admin route; ok is false (and
// the reason logged) while the auth service does not implement CreateKey.
func (s *stack) createKey(body string) (key string, ok bool) {
	s.t.Helper()
	r := s.do("POST", "/v1/keys", body, gateway.HeaderAdminToken, adminToken)
	if r.status == http.StatusNotImplemented {
		s.t.Logf("waits on auth CreateKey: the auth service answers UNIMPLEMENTED")
		return "", false
	}
	require.Equal(s.t, http.StatusOK, r.status, "create key: %s", r.body)
	var resp struct {
		APIKey string `json:"apiKey"`
	}
	require.NoError(s.t, json.Unmarshal(r.body, &resp))
	require.NotEmpty(s.t, resp.APIKey)
	return resp.APIKey, true
}

// checkImplemented reports whether auth.Check answers.
func (s *stack) checkImplemented() bool {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := s.auth.Check(ctx, &authv1.CheckRequest{Operation: "e2e.probe"})
	return implemented(err)
}

// ingest loads a few documents through the search service's streaming RPC
// (not exposed over REST); false while it is unimplemented.
func (s *stack) ingest(docs map[string]string) bool {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	stream, err := s.search.IngestDocuments(ctx)
	require.NoError(s.t, err)
	for id, text := range docs {
		err := stream.Send(&searchv1.IngestDocumentsRequest{Document: &searchv1.Document{
			ExternalId: id, SourceFile: id + ".md", Category: "guides", Title: strings.SplitN(text, "\n", 2)[0],
			Content: []byte(text), Format: searchv1.ContentFormat_CONTENT_FORMAT_MARKDOWN,
		}})
		if err != nil {
			break // the error arrives with CloseAndRecv
		}
	}
	resp, err := stream.CloseAndRecv()
	if !implemented(err) {
		s.t.Logf("waits on search IngestDocuments: UNIMPLEMENTED")
		return false
	}
	require.NoError(s.t, err)
	require.Zero(s.t, resp.GetDocumentsFailed(), "ingest failures: %v", resp.GetFailures())
	return true
}

var demoDocs = map[string]string{
	"cloud-providers": "# Cloud providers\n\nAWS, Azure and Google Cloud Platform are the leading cloud providers. " +
		"Each offers compute, storage and networking with distinct pricing models.\n",
	"object-storage": "# Object storage\n\nObject storage keeps blobs in buckets; S3-compatible APIs are common. " +
		"Lifecycle rules move cold data to cheaper tiers.\n",
	"vendor-onboarding": "# Vendor onboarding\n\nNew vendors are reviewed for security and compliance before contracts are signed.\n",
}
