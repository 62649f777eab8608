// Package floodtest holds connections open against an HTTP server on
// loopback the way a connection flood does, for tests of
// platform/connlimit's servers. Every connection starts from a chosen
// loopback address (all of 127.0.0.0/8 is loopback on Linux), so a test can
// flood from some addresses and call from another, as distinct clients do.
package floodtest

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// Dialer dials from the loopback address from (127.0.0.2, say).
func Dialer(from string) *net.Dialer {
	return &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 10 * time.Second}
}

// Client is an HTTP client whose connections start from the address from.
func Client(from string) *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: Dialer(from).DialContext}}
}

// Idle opens n keep-alive connections to addr, spread evenly over the
// addresses from, sends GET path on each, reads the answer and leaves the
// connection open. The connections close when the test ends.
func Idle(t testing.TB, addr string, from []string, n int, path string) []net.Conn {
	t.Helper()
	conns := make([]net.Conn, 0, n)
	for i := range n {
		c := dial(t, addr, from[i%len(from)])
		conns = append(conns, c)
		_ = c.SetDeadline(time.Now().Add(30 * time.Second))
		if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: flood\r\n\r\n"); err != nil {
			t.Fatalf("floodtest: idle connection %d: send: %v", i, err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("floodtest: idle connection %d: read the answer: %v", i, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		_ = c.SetDeadline(time.Time{})
	}
	return conns
}

// HalfSent opens n connections to addr, spread evenly over the addresses
// from, sends the first half of a POST request's header on each and holds
// it there. The connections close when the test ends.
func HalfSent(t testing.TB, addr string, from []string, n int) []net.Conn {
	t.Helper()
	conns := make([]net.Conn, 0, n)
	for i := range n {
		c := dial(t, addr, from[i%len(from)])
		conns = append(conns, c)
		if _, err := io.WriteString(c, "POST /mcp HTTP/1.1\r\nHost: flood\r\nContent-Type: appl"); err != nil {
			t.Fatalf("floodtest: half-sent connection %d: send: %v", i, err)
		}
	}
	return conns
}

// WaitCut waits until the server has closed every connection in conns,
// and fails the test when one is still open at deadline.
func WaitCut(t testing.TB, conns []net.Conn, deadline time.Time) {
	t.Helper()
	buf := make([]byte, 512)
	for i, c := range conns {
		_ = c.SetReadDeadline(deadline)
		for {
			_, err := c.Read(buf)
			if err == nil {
				continue // an error answer before the close
			}
			if errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("floodtest: connection %d of %d was still open at the deadline", i+1, len(conns))
			}
			if !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
				t.Fatalf("floodtest: connection %d: %v", i+1, err)
			}
			break
		}
	}
}

// Addrs are the loopback addresses 127.0.0.first to 127.0.0.(first+n-1).
func Addrs(first, n int) []string {
	out := make([]string, n)
	for i := range n {
		out[i] = "127.0.0." + strconv.Itoa(first+i)
	}
	return out
}

func dial(t testing.TB, addr, from string) net.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Dialer(from).DialContext(ctx, "tcp", addr)
	if err != nil {
		t.Fatalf("floodtest: dial %s from %s: %v", addr, from, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}
