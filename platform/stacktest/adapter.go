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
	stop func()
}

// Stop interrupts the adapter and waits for it to end (killing it after
// 10 s); the test's end does the same.
func (a *Adapter) Stop() { a.stop() }

// Logs returns what the adapter wrote to stderr.
func (a *Adapter) Logs() string { return a.logs.String() }

// DrainLogs is what the adapter logged since the last drain, forgotten
// here: for a test that reads more than the buffer's 1 MiB over its life.
func (a *Adapter) DrainLogs() string { return a.logs.Drain() }

// StartAdapterHTTP runs the adapter binary over streamable HTTP against the
// stack, with extra environment (BMCIS_AUTH_ADDR, say, to use another auth
// process), and returns once /healthz answers. It is stopped when the test
// ends, and its log is printed when the test failed.
func (s *Stack) StartAdapterHTTP(t testing.TB, extra map[string]string) *Adapter {
	t.Helper()
	return s.StartAdapterHTTPOn(t, Listen(t), extra)
}

// Listen is a loopback listener (127.0.0.1, a port of the kernel's choice)
// for StartAdapterHTTPOn, for a test that must know the adapter's address
// before it starts. StartAdapterHTTPOn hands it to the adapter; otherwise it
// is closed when the test ends.
func Listen(t testing.TB) *net.TCPListener {
	t.Helper()
	l, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// StartAdapterHTTPOn is StartAdapterHTTP serving ln: the adapter gets the
// socket itself by socket activation (LISTEN_FDS, fd 3), so the port is held
// from before the start and no other listener can take it meanwhile.
// BMCIS_MCP_HTTP_ADDR is ln's address.
func (s *Stack) StartAdapterHTTPOn(t testing.TB, ln *net.TCPListener, extra map[string]string) *Adapter {
	t.Helper()
	bin, err := s.binary("mcp-adapter")
	if err != nil {
		t.Fatal(err)
	}
	return s.StartAdapterBinaryOn(t, bin, ln, extra)
}

// StartAdapterBinaryOn is StartAdapterHTTPOn with the adapter binary at bin
// (another release's, for a rolling upgrade test).
func (s *Stack) StartAdapterBinaryOn(t testing.TB, bin string, ln *net.TCPListener, extra map[string]string) *Adapter {
	t.Helper()
	addr := ln.Addr().String()
	sock, err := ln.File()
	if err != nil {
		t.Fatalf("stacktest: the adapter's socket: %v", err)
	}
	// Once the adapter runs, it alone holds the socket: when it ends, its
	// port refuses connections.
	defer func() { _ = sock.Close(); _ = ln.Close() }()
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
	// LISTEN_PID must be the adapter's own pid: the shell exports its pid
	// and execs the adapter in its place.
	cmd := exec.Command("/bin/sh", "-c", `LISTEN_PID=$$ LISTEN_FDS=1; export LISTEN_PID LISTEN_FDS; exec "$0"`, bin)
	cmd.Env = s.AdapterEnv(env)
	cmd.ExtraFiles = []*os.File{sock} // fd 3
	a := &Adapter{Base: "http://" + addr, logs: &SyncBuffer{}}
	cmd.Stderr = a.logs
	setParentDeathSignal(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatalf("stacktest: start mcp-adapter: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	var stopOnce sync.Once
	a.stop = func() {
		stopOnce.Do(func() {
			_ = cmd.Process.Signal(os.Interrupt)
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				_ = cmd.Process.Kill()
				<-done
			}
		})
	}
	t.Cleanup(func() {
		a.stop()
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

// Drain returns what was written and empties the buffer.
func (s *SyncBuffer) Drain() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.b.String()
	s.b = strings.Builder{}
	return out
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
