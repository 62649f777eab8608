package connlimit_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/platform/config"
	"github.com/bmcis/knowledge/platform/connlimit"
	"github.com/bmcis/knowledge/platform/connlimit/floodtest"
)

// serve runs a server answering "ok" within l on a loopback listener and
// returns its address and a wait for n connections to be held idle.
func serve(t *testing.T, l connlimit.Limits) (addr string, waitIdle func(n int)) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })}
	serveFn, idle := connlimit.ServeCountingIdle(l, srv, ln)
	done := make(chan struct{})
	go func() { defer close(done); _ = serveFn() }()
	t.Cleanup(func() { _ = srv.Close(); <-done })
	return ln.Addr().String(), func(n int) {
		t.Helper()
		require.Eventually(t, func() bool { return idle() == n }, time.Minute, time.Millisecond, "%d idle connections", n)
	}
}

// get asks addr from the loopback address from on a new connection.
func get(addr, from string) error {
	c := floodtest.Client(from)
	c.Timeout = 10 * time.Second
	defer c.CloseIdleConnections()
	resp, err := c.Get("http://" + addr + "/")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && string(b) != "ok" {
		return fmt.Errorf("answer %q", b)
	}
	return err
}

// finish sends the rest of floodtest.HalfSent's request on c and reads the
// answer.
func finish(t *testing.T, c net.Conn) {
	t.Helper()
	_, err := io.WriteString(c, "ication/json\r\nContent-Length: 0\r\n\r\n")
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusOK, resp.StatusCode)
}

// At the bound, a new connection is admitted by closing the longest-idle
// one; a connection sending its request stays.
func TestFullServerReclaimsTheLongestIdle(t *testing.T) {
	addr, waitIdle := serve(t, connlimit.Limits{MaxConns: 3, ReadHeaderTimeout: time.Minute})
	half := floodtest.HalfSent(t, addr, []string{"127.0.0.2"}, 1)
	idle := floodtest.Idle(t, addr, []string{"127.0.0.3"}, 1, "/")
	waitIdle(1)
	idle = append(idle, floodtest.Idle(t, addr, []string{"127.0.0.3"}, 1, "/")...)
	waitIdle(2)

	floodtest.Idle(t, addr, []string{"127.0.0.1"}, 1, "/")
	floodtest.WaitCut(t, idle[:1], time.Now().Add(time.Minute))
	// The first caller's connection is idle too, but newer.
	waitIdle(2)
	floodtest.Idle(t, addr, []string{"127.0.0.1"}, 1, "/")
	floodtest.WaitCut(t, idle[1:], time.Now().Add(time.Minute))
	finish(t, half[0])
}

// One client at its bound with nothing idle cannot take more; other
// clients are served.
func TestPerClientBound(t *testing.T) {
	addr, waitIdle := serve(t, connlimit.Limits{MaxConns: 100, MaxConnsPerClient: 4, ReadHeaderTimeout: time.Minute})
	var idle []net.Conn
	for i := range 4 { // one at a time: idle in this order
		idle = append(idle, floodtest.Idle(t, addr, []string{"127.0.0.2"}, 1, "/")...)
		waitIdle(i + 1)
	}
	// Its idle connections make room for its new ones, longest idle first.
	half := floodtest.HalfSent(t, addr, []string{"127.0.0.2"}, 1)
	floodtest.WaitCut(t, idle[:1], time.Now().Add(time.Minute))
	waitIdle(3)
	half = append(half, floodtest.HalfSent(t, addr, []string{"127.0.0.2"}, 3)...)
	floodtest.WaitCut(t, idle[1:], time.Now().Add(time.Minute))
	// Then it has nothing idle.
	extra := floodtest.HalfSent(t, addr, []string{"127.0.0.2"}, 3)
	floodtest.WaitCut(t, extra, time.Now().Add(time.Minute))
	require.Error(t, get(addr, "127.0.0.2"), "the client is at its bound")
	require.NoError(t, get(addr, "127.0.0.1"))
	finish(t, half[0])
}

// When every slot is taken by a connection that is not idle, a new one
// waits in the backlog and is served when a slot frees.
func TestFullServerWaitsForASlot(t *testing.T) {
	addr, _ := serve(t, connlimit.Limits{MaxConns: 1, ReadHeaderTimeout: time.Minute})
	held := floodtest.HalfSent(t, addr, []string{"127.0.0.2"}, 1)
	errc := make(chan error, 1)
	go func() { errc <- get(addr, "127.0.0.1") }()
	// The holder's request completes and its connection turns idle, which
	// frees the slot.
	finish(t, held[0])
	require.NoError(t, <-errc)
}

// A request sent in halves is cut at the header timeout.
func TestHalfSentRequestIsCut(t *testing.T) {
	addr, _ := serve(t, connlimit.Limits{ReadHeaderTimeout: 200 * time.Millisecond})
	half := floodtest.HalfSent(t, addr, []string{"127.0.0.2"}, 3)
	floodtest.WaitCut(t, half, time.Now().Add(time.Minute))
}

// The flood, on the default limits: 600 idle keep-alive
// connections and 50 half-sent requests held, from a few addresses; a new
// caller is answered within 1 s and the half-sent requests are cut within
// 20 s.
func TestFloodOnDefaults(t *testing.T) {
	addr, _ := serve(t, connlimit.Limits{})
	floodtest.Idle(t, addr, floodtest.Addrs(2, 5), 600, "/")
	sent := time.Now()
	half := floodtest.HalfSent(t, addr, floodtest.Addrs(20, 2), 50)

	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/", nil)
	require.NoError(t, err)
	resp, err := floodtest.Client("127.0.0.1").Do(req)
	require.NoError(t, err, "a new caller is answered within 1 s")
	_, err = io.Copy(io.Discard, resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusOK, resp.StatusCode)

	floodtest.WaitCut(t, half, sent.Add(20*time.Second))
}

func TestLoad(t *testing.T) {
	env := config.FromMap(nil)
	require.Equal(t, connlimit.Limits{MaxConns: 512, MaxConnsPerClient: 128, ReadHeaderTimeout: 5 * time.Second}, connlimit.Load(env, "X_"))
	require.NoError(t, env.Err())

	env = config.FromMap(map[string]string{"X_MAX_CONNS": "64", "X_READ_HEADER_TIMEOUT": "2s"})
	require.Equal(t, connlimit.Limits{MaxConns: 64, MaxConnsPerClient: 64, ReadHeaderTimeout: 2 * time.Second}, connlimit.Load(env, "X_"))
	require.NoError(t, env.Err())

	env = config.FromMap(map[string]string{"X_MAX_CONNS": "64", "X_MAX_CONNS_PER_CLIENT": "65"})
	connlimit.Load(env, "X_")
	require.ErrorContains(t, env.Err(), "X_MAX_CONNS_PER_CLIENT: must not exceed X_MAX_CONNS (64), got 65")

	env = config.FromMap(map[string]string{"X_READ_HEADER_TIMEOUT": "forever", "X_MAX_CONNS": "0"})
	connlimit.Load(env, "X_")
	require.ErrorContains(t, env.Err(), "X_READ_HEADER_TIMEOUT")
	require.ErrorContains(t, env.Err(), "X_MAX_CONNS")
}
