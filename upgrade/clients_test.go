package upgrade_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bmcis/knowledge/platform/stacktest"
)

// outcome is one client call as the load saw it.
type outcome struct {
	// OK: the call succeeded.
	OK bool
	// Documented names a failure the upgrade promise allows (docs/UPGRADE.md:
	// a retryable "unavailable" while a service restarts); "" otherwise.
	Documented string
	// Detail describes a failure.
	Detail string
}

func (o outcome) String() string {
	switch {
	case o.OK:
		return "ok"
	case o.Documented != "":
		return "documented " + o.Documented + ": " + o.Detail
	default:
		return "UNDOCUMENTED: " + o.Detail
	}
}

var rpcID atomic.Int64

// callMCP calls one tool on an adapter over streamable HTTP (JSON-RPC over
// POST /mcp) with key, and sorts the answer.
func callMCP(client *http.Client, base, key, tool string, args map[string]any) outcome {
	body, _ := json.Marshal(map[string]any{
		"jsonrpc": "2.0", "id": rpcID.Add(1), "method": "tools/call",
		"params": map[string]any{"name": tool, "arguments": args},
	})
	req, err := http.NewRequest(http.MethodPost, base+"/mcp", bytes.NewReader(body))
	if err != nil {
		return outcome{Detail: err.Error()}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := client.Do(req)
	if err != nil {
		return outcome{Detail: "transport: " + err.Error()}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return outcome{Detail: "transport: " + err.Error()}
	}
	if resp.StatusCode != http.StatusOK {
		return outcome{Detail: fmt.Sprintf("HTTP %d: %s", resp.StatusCode, raw)}
	}
	raw = stacktest.MCPReplyJSON(raw)
	var rpc struct {
		Error  *struct{ Message string }
		Result struct {
			StructuredContent struct {
				Metadata struct {
					Status string `json:"status"`
				} `json:"_metadata"`
				Error *struct {
					Code      string `json:"code"`
					Retryable bool   `json:"retryable"`
					Message   string `json:"message"`
				} `json:"error"`
			} `json:"structuredContent"`
		}
	}
	if err := json.Unmarshal(raw, &rpc); err != nil {
		return outcome{Detail: fmt.Sprintf("decode %q: %v", raw, err)}
	}
	if rpc.Error != nil {
		return outcome{Detail: "JSON-RPC error: " + rpc.Error.Message}
	}
	env := rpc.Result.StructuredContent
	switch {
	case env.Metadata.Status == "":
		return outcome{Detail: fmt.Sprintf("no envelope in %s", raw)}
	case env.Error == nil && env.Metadata.Status != "error":
		return outcome{OK: true}
	case env.Error == nil:
		return outcome{Detail: fmt.Sprintf("status error without an error: %s", raw)}
	}
	o := outcome{Detail: fmt.Sprintf("%s (retryable %t): %s", env.Error.Code, env.Error.Retryable, env.Error.Message)}
	if env.Error.Retryable && env.Error.Code == "SERVICE_UNAVAILABLE" {
		o.Documented = "mcp SERVICE_UNAVAILABLE"
	}
	return o
}

// callGateway POSTs a search to a gateway with key.
func callGateway(client *http.Client, base, key, query string) outcome {
	body, _ := json.Marshal(map[string]any{"query": query, "limit": 5})
	req, err := http.NewRequest(http.MethodPost, base+"/v1/search", bytes.NewReader(body))
	if err != nil {
		return outcome{Detail: err.Error()}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-API-Key", key)
	resp, err := client.Do(req)
	if err != nil {
		return outcome{Detail: "transport: " + err.Error()}
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	switch {
	case resp.StatusCode == http.StatusOK:
		return outcome{OK: true}
	case resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") != "":
		return outcome{Documented: "gateway 503 with Retry-After", Detail: string(raw)}
	}
	return outcome{Detail: fmt.Sprintf("HTTP %d: %s", resp.StatusCode, raw)}
}

// gatewayGet GETs path from a gateway with key and decodes the JSON answer.
func gatewayGet(client *http.Client, base, key, path string, into any) error {
	req, err := http.NewRequest(http.MethodGet, base+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("X-API-Key", key)
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: HTTP %d: %s", path, resp.StatusCode, raw)
	}
	return json.Unmarshal(raw, into)
}

// gatewayProc is a gateway binary serving on a loopback port of the
// kernel's choice, read back from its log.
type gatewayProc struct {
	base string
	cmd  *exec.Cmd
	done chan struct{}
	logs *stacktest.SyncBuffer
	once sync.Once
}

// startGateway runs the gateway binary bin in front of s until Stop or the
// test's end.
func startGateway(t *testing.T, s *stacktest.Stack, bin string) *gatewayProc {
	t.Helper()
	env := os.Environ()
	for k, v := range s.ClientEnv() {
		env = append(env, k+"="+v)
	}
	env = append(env, "BMCIS_GATEWAY_ADDR=127.0.0.1:0", "BMCIS_GATEWAY_METRICS_ADDR=127.0.0.1:0",
		"BMCIS_MCP_HEALTH_URL=off", "BMCIS_LOG_LEVEL=info")
	cmd := exec.Command(bin)
	cmd.Env = env
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatalf("start gateway %s: %v", bin, err)
	}
	g := &gatewayProc{cmd: cmd, done: make(chan struct{}), logs: &stacktest.SyncBuffer{}}
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<16), 1<<20)
		for sc.Scan() {
			_, _ = g.logs.Write(append(sc.Bytes(), '\n'))
			var l struct{ Msg, Addr string }
			if json.Unmarshal(sc.Bytes(), &l) == nil && l.Msg == "gateway listening" {
				select {
				case ready <- "http://" + l.Addr:
				default:
				}
			}
		}
	}()
	go func() { _ = cmd.Wait(); close(g.done) }()
	t.Cleanup(func() {
		g.Stop()
		if t.Failed() {
			t.Logf("--- gateway %s log\n%s", bin, g.logs.String())
		}
	})
	select {
	case g.base = <-ready:
		return g
	case <-g.done:
		t.Fatalf("gateway exited before serving:\n%s", g.logs.String())
	case <-time.After(90 * time.Second):
		t.Fatalf("gateway did not serve within 90 s:\n%s", g.logs.String())
	}
	return nil
}

// Stop interrupts the gateway (it drains) and waits for it to end.
func (g *gatewayProc) Stop() {
	g.once.Do(func() {
		_ = g.cmd.Process.Signal(os.Interrupt)
		select {
		case <-g.done:
		case <-time.After(30 * time.Second):
			_ = g.cmd.Process.Kill()
			<-g.done
		}
	})
}

// run runs a binary with extra environment and returns its combined output.
func run(ctx context.Context, bin string, env map[string]string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = os.Environ()
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w\n%s", bin, strings.Join(args, " "), err, out)
	}
	return string(out), nil
}
