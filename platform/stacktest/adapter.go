package stacktest

import (
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// AdapterEnv is the MCP adapter's environment for the stack: the process's,
// the stack's client environment with the adapter's own credential as
// BMCIS_SERVICE_TOKEN and without the admin credential (the adapter never
// administers keys), then extra.
func (s *Stack) AdapterEnv(extra map[string]string) []string {
	env := os.Environ()
	for k, v := range s.ClientEnv() {
		switch k {
		case "BMCIS_ADMIN_TOKEN":
		case "BMCIS_SERVICE_TOKEN":
			env = append(env, k+"="+AdapterToken)
		default:
			env = append(env, k+"="+v)
		}
	}
	for k, v := range extra {
		env = append(env, k+"="+v)
	}
	return env
}

// Adapter is the mcp-adapter binary serving streamable HTTP on loopback.
type Adapter struct {
	// Base is its base URL (http://127.0.0.1:PORT).
	Base string
	logs *SyncBuffer
}

// Logs returns what the adapter wrote to stderr.
func (a *Adapter) Logs() string { return a.logs.String() }

// StartAdapterHTTP runs the adapter binary over streamable HTTP against the
// stack, with extra environment (BMCIS_AUTH_ADDR, say, to use another auth
// process), and returns once /healthz answers. It is stopped when the test
// ends, and its log is printed when the test failed.
func (s *Stack) StartAdapterHTTP(t testing.TB, extra map[string]string) *Adapter {
	t.Helper()
	bin := Binary(t, "mcp-adapter")
	addr := extra["BMCIS_MCP_HTTP_ADDR"] // a test that must know it before the start
	if addr == "" {
		addr = FreeAddr(t)
	}
	env := map[string]string{
		"BMCIS_MCP_TRANSPORT": "http",
		"BMCIS_MCP_HTTP_ADDR": addr,
		"BMCIS_CURSOR_SECRET": "stacktest-cursor-secret-0123456789abcdef0123456789",
		"BMCIS_LOG_LEVEL":     "warn",
	}
	for k, v := range extra {
		env[k] = v
	}
	env["BMCIS_MCP_HTTP_ADDR"] = addr
	cmd := exec.Command(bin)
	cmd.Env = s.AdapterEnv(env)
	a := &Adapter{Base: "http://" + addr, logs: &SyncBuffer{}}
	cmd.Stderr = a.logs
	setParentDeathSignal(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatalf("stacktest: start mcp-adapter: %v", err)
	}
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
			t.Logf("--- mcp-adapter log\n%s", a.logs.String())
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(a.Base + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return a
			}
		}
		select {
		case <-done:
			t.Fatalf("stacktest: mcp-adapter exited:\n%s", a.logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("stacktest: mcp-adapter /healthz did not answer in 30 s:\n%s", a.logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// FreeAddr is a loopback address that was free a moment ago.
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

// SyncBuffer is an output buffer safe for concurrent writes (a process's
// stderr) and reads; it keeps the first MiB.
type SyncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.b.Len() > 1<<20 {
		return len(p), nil
	}
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
