// Package browsertest drives headless Chromium over the DevTools protocol for
// the dashboard tests, with the standard library only (a minimal WebSocket
// client included). Only tests import it. Tests skip when Chromium is absent.
package browsertest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// EnvChromium names a Chromium binary to use instead of the default.
const EnvChromium = "BMCIS_CHROMIUM"

// EnvArtifacts names the directory screenshots are written to; by default a
// bmcis-test-artifacts folder in the temporary directory.
const EnvArtifacts = "BMCIS_TEST_ARTIFACTS"

// Chromium returns the browser binary, or skips the test with how to get it.
func Chromium(t testing.TB) string {
	t.Helper()
	if p := os.Getenv(EnvChromium); p != "" {
		return p
	}
	for _, c := range []string{"/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(c); err == nil {
			return p
		}
	}
	t.Skip("headless Chromium not found: install Debian's chromium package (apt-get install chromium) or set " + EnvChromium)
	return ""
}

// ArtifactDir returns (creating it) the directory for test artifacts.
func ArtifactDir(t testing.TB) string {
	t.Helper()
	dir := os.Getenv(EnvArtifacts)
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "bmcis-test-artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("artifact dir: %v", err)
	}
	return dir
}

// Page is one browser tab under remote control.
type Page struct {
	t    testing.TB
	ws   *wsConn
	next int
	mu   sync.Mutex
	// Console collects console messages and uncaught exceptions.
	Console []string
}

var devtoolsRE = regexp.MustCompile(`DevTools listening on (ws://\S+)`)

// Launch starts headless Chromium (killed when the test ends) and returns
// its first tab.
func Launch(t testing.TB) *Page {
	t.Helper()
	bin := Chromium(t)
	// Not t.TempDir: Chromium's helper processes may still be writing to
	// the profile for a moment after the browser is killed, which makes
	// t.TempDir's clean-up fail the test. Removal is retried briefly instead.
	profile, err := os.MkdirTemp("", "bmcis-chromium-profile-")
	if err != nil {
		t.Fatalf("chromium profile: %v", err)
	}
	t.Cleanup(func() {
		for i := 0; i < 20 && os.RemoveAll(profile) != nil; i++ {
			time.Sleep(100 * time.Millisecond)
		}
	})
	cmd := exec.Command(bin,
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-extensions", "--disable-default-apps", "--mute-audio", "--hide-scrollbars",
		"--user-data-dir="+profile, "--remote-debugging-port=0", "--remote-debugging-address=127.0.0.1",
		"--window-size=1280,1800", "about:blank")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatalf("chromium: %v", err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	found := make(chan string, 1)
	var logTail bytes.Buffer
	go func() {
		sc := bufio.NewScanner(stderr)
		sent := false
		for sc.Scan() {
			line := sc.Text()
			if logTail.Len() < 8192 {
				logTail.WriteString(line + "\n")
			}
			if m := devtoolsRE.FindStringSubmatch(line); m != nil && !sent {
				found <- m[1]
				sent = true
			}
		}
		if !sent {
			close(found)
		}
	}()
	var browserURL string
	select {
	case u, ok := <-found:
		if !ok {
			t.Fatalf("chromium exited before DevTools listened:\n%s", logTail.String())
		}
		browserURL = u
	case <-time.After(30 * time.Second):
		t.Fatalf("chromium did not start DevTools in 30 s")
	}
	bu, err := url.Parse(browserURL)
	if err != nil {
		t.Fatalf("devtools url: %v", err)
	}
	var pageWS string
	deadline := time.Now().Add(15 * time.Second)
	for pageWS == "" && time.Now().Before(deadline) {
		resp, err := http.Get("http://" + bu.Host + "/json/list")
		if err == nil {
			var targets []struct{ Type, WebSocketDebuggerURL string }
			_ = json.NewDecoder(resp.Body).Decode(&targets)
			resp.Body.Close()
			for _, tg := range targets {
				if tg.Type == "page" && tg.WebSocketDebuggerURL != "" {
					pageWS = tg.WebSocketDebuggerURL
					break
				}
			}
		}
		if pageWS == "" {
			time.Sleep(100 * time.Millisecond)
		}
	}
	if pageWS == "" {
		t.Fatalf("no page target in chromium")
	}
	ws, err := dialWS(pageWS)
	if err != nil {
		t.Fatalf("connect to the page: %v", err)
	}
	t.Cleanup(func() { ws.close() })
	p := &Page{t: t, ws: ws}
	for _, m := range []string{"Page.enable", "Runtime.enable"} {
		if _, err := p.Call(m, nil); err != nil {
			t.Fatalf("%s: %v", m, err)
		}
	}
	return p
}

// Call sends one DevTools command and waits for its reply, collecting
// console events on the way.
func (p *Page) Call(method string, params any) (json.RawMessage, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.next++
	id := p.next
	msg, err := json.Marshal(map[string]any{"id": id, "method": method, "params": params})
	if err != nil {
		return nil, err
	}
	if err := p.ws.writeText(msg); err != nil {
		return nil, err
	}
	_ = p.ws.conn.SetReadDeadline(time.Now().Add(60 * time.Second))
	for {
		data, err := p.ws.readMessage()
		if err != nil {
			return nil, err
		}
		var reply struct {
			ID     int             `json:"id"`
			Method string          `json:"method"`
			Result json.RawMessage `json:"result"`
			Params json.RawMessage `json:"params"`
			Error  *struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal(data, &reply); err != nil {
			return nil, err
		}
		switch {
		case reply.ID == id && reply.Error != nil:
			return nil, fmt.Errorf("%s: %s", method, reply.Error.Message)
		case reply.ID == id:
			return reply.Result, nil
		case reply.Method == "Runtime.consoleAPICalled" || reply.Method == "Runtime.exceptionThrown":
			p.Console = append(p.Console, reply.Method+": "+truncate(string(reply.Params), 500))
		}
	}
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// Navigate loads url and waits for the document to finish loading.
func (p *Page) Navigate(url string) {
	p.t.Helper()
	if _, err := p.Call("Page.navigate", map[string]any{"url": url}); err != nil {
		p.t.Fatalf("navigate: %v", err)
	}
	p.WaitFor(`document.readyState === "complete" && location.href !== "about:blank"`, 20*time.Second)
}

// Eval evaluates a JavaScript expression (awaiting promises) and decodes its
// value into out (when not nil).
func (p *Page) Eval(expr string, out any) error {
	res, err := p.Call("Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true, "awaitPromise": true})
	if err != nil {
		return err
	}
	var r struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		ExceptionDetails *struct {
			Text      string `json:"text"`
			Exception struct {
				Description string `json:"description"`
			} `json:"exception"`
		} `json:"exceptionDetails"`
	}
	if err := json.Unmarshal(res, &r); err != nil {
		return err
	}
	if r.ExceptionDetails != nil {
		return fmt.Errorf("javascript: %s %s", r.ExceptionDetails.Text, r.ExceptionDetails.Exception.Description)
	}
	if out != nil && len(r.Result.Value) > 0 {
		return json.Unmarshal(r.Result.Value, out)
	}
	return nil
}

// MustEval is Eval that fails the test on error.
func (p *Page) MustEval(expr string, out any) {
	p.t.Helper()
	if err := p.Eval(expr, out); err != nil {
		p.t.Fatalf("eval %q: %v", truncate(expr, 120), err)
	}
}

// WaitFor polls a JavaScript condition until it is true.
func (p *Page) WaitFor(cond string, timeout time.Duration) {
	p.t.Helper()
	if !p.Poll(cond, timeout) {
		p.t.Fatalf("timed out after %s waiting for %s\nconsole: %s", timeout, cond, strings.Join(p.Console, "\n"))
	}
}

// Poll is WaitFor returning whether the condition came true.
func (p *Page) Poll(cond string, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for {
		var ok bool
		if err := p.Eval("!!("+cond+")", &ok); err == nil && ok {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Screenshot writes a PNG of the whole page to the artifact directory and
// returns its path.
func (p *Page) Screenshot(name string) string {
	p.t.Helper()
	res, err := p.Call("Page.captureScreenshot", map[string]any{"format": "png", "captureBeyondViewport": true})
	if err != nil {
		p.t.Fatalf("screenshot: %v", err)
	}
	var r struct {
		Data string `json:"data"`
	}
	if err := json.Unmarshal(res, &r); err != nil {
		p.t.Fatalf("screenshot: %v", err)
	}
	png, err := base64.StdEncoding.DecodeString(r.Data)
	if err != nil {
		p.t.Fatalf("screenshot: %v", err)
	}
	path := filepath.Join(ArtifactDir(p.t), name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		p.t.Fatalf("write screenshot: %v", err)
	}
	return path
}

// DOM returns the page's current HTML.
func (p *Page) DOM() string {
	p.t.Helper()
	var html string
	p.MustEval("document.documentElement.outerHTML", &html)
	return html
}

// --- a minimal WebSocket client (RFC 6455), enough for DevTools ---

type wsConn struct {
	conn net.Conn
	rd   *bufio.Reader
	wmu  sync.Mutex
}

func dialWS(rawURL string) (*wsConn, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", u.Host)
	if err != nil {
		return nil, err
	}
	var k [16]byte
	_, _ = rand.Read(k[:])
	key := base64.StdEncoding.EncodeToString(k[:])
	req := "GET " + u.RequestURI() + " HTTP/1.1\r\nHost: " + u.Host + "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: " + key + "\r\nSec-WebSocket-Version: 13\r\n\r\n"
	if _, err := io.WriteString(conn, req); err != nil {
		conn.Close()
		return nil, err
	}
	rd := bufio.NewReaderSize(conn, 1<<16)
	resp, err := http.ReadResponse(rd, &http.Request{Method: "GET"})
	if err != nil {
		conn.Close()
		return nil, err
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		conn.Close()
		return nil, fmt.Errorf("websocket handshake: %s", resp.Status)
	}
	h := sha1.Sum([]byte(key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
	if resp.Header.Get("Sec-WebSocket-Accept") != base64.StdEncoding.EncodeToString(h[:]) {
		conn.Close()
		return nil, errors.New("websocket handshake: bad accept key")
	}
	return &wsConn{conn: conn, rd: rd}, nil
}

func (c *wsConn) writeFrame(opcode byte, payload []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	var hdr []byte
	hdr = append(hdr, 0x80|opcode)
	n := len(payload)
	switch {
	case n < 126:
		hdr = append(hdr, 0x80|byte(n))
	case n < 1<<16:
		hdr = append(hdr, 0x80|126, byte(n>>8), byte(n))
	default:
		hdr = append(hdr, 0x80|127)
		hdr = binary.BigEndian.AppendUint64(hdr, uint64(n))
	}
	var mask [4]byte
	_, _ = rand.Read(mask[:])
	hdr = append(hdr, mask[:]...)
	masked := make([]byte, n)
	for i := range payload {
		masked[i] = payload[i] ^ mask[i%4]
	}
	_ = c.conn.SetWriteDeadline(time.Now().Add(30 * time.Second))
	_, err := c.conn.Write(append(hdr, masked...))
	return err
}

func (c *wsConn) writeText(b []byte) error { return c.writeFrame(0x1, b) }

// readMessage returns the next whole text or binary message, answering pings.
func (c *wsConn) readMessage() ([]byte, error) {
	var msg []byte
	for {
		var h [2]byte
		if _, err := io.ReadFull(c.rd, h[:]); err != nil {
			return nil, err
		}
		fin, opcode := h[0]&0x80 != 0, h[0]&0x0f
		n := uint64(h[1] & 0x7f)
		switch n {
		case 126:
			var b [2]byte
			if _, err := io.ReadFull(c.rd, b[:]); err != nil {
				return nil, err
			}
			n = uint64(binary.BigEndian.Uint16(b[:]))
		case 127:
			var b [8]byte
			if _, err := io.ReadFull(c.rd, b[:]); err != nil {
				return nil, err
			}
			n = binary.BigEndian.Uint64(b[:])
		}
		var mask [4]byte
		masked := h[1]&0x80 != 0
		if masked {
			if _, err := io.ReadFull(c.rd, mask[:]); err != nil {
				return nil, err
			}
		}
		if n > 256<<20 {
			return nil, errors.New("websocket frame too large")
		}
		payload := make([]byte, n)
		if _, err := io.ReadFull(c.rd, payload); err != nil {
			return nil, err
		}
		if masked {
			for i := range payload {
				payload[i] ^= mask[i%4]
			}
		}
		switch opcode {
		case 0x8:
			return nil, io.EOF
		case 0x9:
			_ = c.writeFrame(0xA, payload)
			continue
		case 0xA:
			continue
		}
		msg = append(msg, payload...)
		if fin {
			return msg, nil
		}
	}
}

func (c *wsConn) close() {
	_ = c.writeFrame(0x8, nil)
	_ = c.conn.Close()
}
