package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"time"
)

// mcpStdio is a minimal MCP client over stdio: it starts the adapter binary
// as Claude Desktop does and speaks newline-delimited JSON-RPC to it. It
// knows initialize and tools/call, all `eval -tokens` needs, which keeps
// the search module free of an MCP SDK.
type mcpStdio struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	out    *bufio.Reader
	mu     sync.Mutex
	nextID int
}

// mcpToolResult is the part of a tools/call result eval reads.
type mcpToolResult struct {
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text,omitempty"`
		URI  string `json:"uri,omitempty"`
	} `json:"content"`
	StructuredContent struct {
		Metadata struct {
			Status string `json:"status"`
		} `json:"_metadata"`
		Results          []map[string]any `json:"results"`
		ExecutionContext struct {
			TokensUsed int `json:"tokens_used"`
		} `json:"execution_context"`
		Error *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	} `json:"structuredContent"`
	IsError bool `json:"isError"`
}

// startMCPStdio starts bin with env added to this process's environment
// and initializes the session; the adapter's log goes to logw.
func startMCPStdio(ctx context.Context, bin string, env []string, logw io.Writer) (*mcpStdio, error) {
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = logw
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	c := &mcpStdio{cmd: cmd, stdin: stdin, out: bufio.NewReaderSize(stdout, 1<<20)}
	var init struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	err = c.request(ctx, "initialize", map[string]any{
		"protocolVersion": "2025-06-18",
		"capabilities":    map[string]any{},
		"clientInfo":      map[string]any{"name": "bmcisctl-eval", "version": "1"},
	}, &init)
	if err == nil {
		err = c.notify("notifications/initialized")
	}
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("initialize %s: %w", bin, err)
	}
	return c, nil
}

// Close ends the adapter: closing its stdin ends a stdio MCP server.
func (c *mcpStdio) Close() {
	_ = c.stdin.Close()
	done := make(chan struct{})
	go func() { _ = c.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = c.cmd.Process.Kill()
		<-done
	}
}

// CallTool calls a tool and returns its result.
func (c *mcpStdio) CallTool(ctx context.Context, name string, args map[string]any) (*mcpToolResult, error) {
	var res mcpToolResult
	if err := c.request(ctx, "tools/call", map[string]any{"name": name, "arguments": args}, &res); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if e := res.StructuredContent.Error; e != nil {
		return nil, fmt.Errorf("%s: %s: %s", name, e.Code, e.Message)
	}
	return &res, nil
}

func (c *mcpStdio) notify(method string) error {
	b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": method})
	if err != nil {
		return err
	}
	_, err = c.stdin.Write(append(b, '\n'))
	return err
}

// request sends one request and reads lines until its answer; the
// adapter sends nothing else unasked to a client that declares no
// capabilities, so other messages are skipped.
func (c *mcpStdio) request(ctx context.Context, method string, params, result any) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nextID++
	id := c.nextID
	b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	if err != nil {
		return err
	}
	if _, err := c.stdin.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	type reply struct {
		ID     *int            `json:"id"`
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		line, err := c.out.ReadBytes('\n')
		if err != nil {
			return fmt.Errorf("read: %w", err)
		}
		var r reply
		if json.Unmarshal(line, &r) != nil || r.ID == nil || *r.ID != id {
			continue
		}
		if r.Error != nil {
			return fmt.Errorf("JSON-RPC error %d: %s", r.Error.Code, r.Error.Message)
		}
		if len(r.Result) == 0 {
			return errors.New("empty result")
		}
		return json.Unmarshal(r.Result, result)
	}
}
