package e2e

import (
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/platform/stacktest"
)

func TestMain(m *testing.M) { stacktest.Main(m) }

// demo is the package's shared stack: the demo documents and vendor graph.
func demo(t testing.TB) *stacktest.Stack {
	t.Helper()
	return stacktest.Shared(t, "demo", stacktest.Options{}, func(t testing.TB, s *stacktest.Stack) {
		s.IngestDemoDocs(t)
		s.ImportDemoGraph(t)
	})
}

var demoKey struct {
	sync.Mutex
	key string
}

// key is an API key of the demo stack with limits no test reaches.
func key(t testing.TB) string {
	t.Helper()
	s := demo(t)
	demoKey.Lock()
	defer demoKey.Unlock()
	if demoKey.key == "" {
		demoKey.key = s.CreateKey(t, stacktest.Key{Name: "mcp-e2e", PerMinute: 10_000_000, PerHour: 10_000_000, PerDay: 100_000_000})
	}
	return demoKey.key
}

// adapterEnv is the adapter's environment for the stack s.
func adapterEnv(s *stacktest.Stack, extra map[string]string) []string {
	env := os.Environ()
	for k, v := range s.ClientEnv() {
		if k != "BMCIS_ADMIN_TOKEN" {
			env = append(env, k+"="+v)
		}
	}
	for k, v := range extra {
		env = append(env, k+"="+v)
	}
	return env
}

// freeAddr is a loopback address free a moment ago.
func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// adapterHTTP runs the adapter binary over streamable HTTP against s and
// returns its base URL; it is stopped when the test ends.
func adapterHTTP(t testing.TB, s *stacktest.Stack, extra map[string]string) string {
	t.Helper()
	bin := stacktest.Binary(t, "mcp-adapter")
	addr := extra["BMCIS_MCP_HTTP_ADDR"] // a test that must know it first
	if addr == "" {
		addr = freeAddr(t)
	}
	env := map[string]string{
		"BMCIS_MCP_TRANSPORT": "http",
		"BMCIS_MCP_HTTP_ADDR": addr,
		"BMCIS_CURSOR_SECRET": "e2e-cursor-secret-0123456789abcdef0123456789",
		"BMCIS_LOG_LEVEL":     "warn",
	}
	for k, v := range extra {
		env[k] = v
	}
	cmd := exec.Command(bin)
	cmd.Env = adapterEnv(s, env)
	var logs strings.Builder
	stderr := &syncWriter{w: &logs}
	cmd.Stderr = stderr
	require.NoError(t, cmd.Start())
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("--- mcp-adapter log\n%s", logs.String())
		}
	})
	base := "http://" + addr
	adapterLogs.Store(base, stderr)
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(base + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return base
			}
		}
		select {
		case <-done:
			t.Fatalf("mcp-adapter exited:\n%s", logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("mcp-adapter /healthz did not answer in 30 s:\n%s", logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// adapterLogs holds each adapterHTTP process's stderr by base URL.
var adapterLogs sync.Map

// adapterLog is what the adapter at base has logged so far.
func adapterLog(base string) string {
	w, ok := adapterLogs.Load(base)
	if !ok {
		return ""
	}
	return w.(*syncWriter).String()
}

type syncWriter struct {
	mu sync.Mutex
	w  *strings.Builder
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func (s *syncWriter) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.String()
}
