// Package connlimit keeps an HTTP server answering a new caller while
// others hold connections open. It bounds the connections open at once, in
// total and per client address; when the bound is reached it closes the
// longest-idle keep-alive connection to admit the new one; and it keeps the
// wait for a request's header short, so a request sent in halves gives its
// slot back within seconds. One policy serves the MCP adapter's HTTP server
// and the gateway.
package connlimit

import (
	"container/list"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/bmcis/knowledge/platform/config"
)

// Limits bound the connections an HTTP server holds.
type Limits struct {
	// MaxConns bounds the connections open at once. At the bound, the
	// connection idle the longest is closed to admit a new one; when none
	// is idle, the new one waits in the listen backlog until one closes.
	MaxConns int
	// MaxConnsPerClient bounds the connections of one client address (an
	// IPv4 address, or an IPv6 /64). Beyond it, that client's
	// longest-idle connection is closed to admit the new one; when none of
	// its connections is idle, the new one is closed at once. Behind a
	// reverse proxy every connection comes from the proxy: raise it to
	// MaxConns there and let the proxy bound its clients.
	MaxConnsPerClient int
	// ReadHeaderTimeout bounds the wait for a request's header, from the
	// connection's start or from the first byte after an idle wait.
	ReadHeaderTimeout time.Duration
}

// Defaults. A quarter of the connections per client leaves three quarters
// to everyone else.
const (
	DefaultMaxConns          = 512
	DefaultMaxConnsPerClient = DefaultMaxConns / 4
	DefaultReadHeaderTimeout = 5 * time.Second
)

// Load reads the limits from prefix+"MAX_CONNS", prefix+"MAX_CONNS_PER_CLIENT"
// and prefix+"READ_HEADER_TIMEOUT" (prefix "BMCIS_GATEWAY_", say); every
// problem is recorded in env.
func Load(env *config.Reader, prefix string) Limits {
	l := Limits{
		MaxConns:          env.Int(prefix+"MAX_CONNS", DefaultMaxConns, 1, 1_000_000),
		ReadHeaderTimeout: env.Duration(prefix+"READ_HEADER_TIMEOUT", DefaultReadHeaderTimeout, 100*time.Millisecond, time.Minute),
	}
	l.MaxConnsPerClient = env.Int(prefix+"MAX_CONNS_PER_CLIENT", min(DefaultMaxConnsPerClient, l.MaxConns), 1, 1_000_000)
	if l.MaxConnsPerClient > l.MaxConns {
		env.Failf(prefix+"MAX_CONNS_PER_CLIENT", "must not exceed %sMAX_CONNS (%d), got %d", prefix, l.MaxConns, l.MaxConnsPerClient)
	}
	return l
}

// withDefaults fills zero fields with the defaults.
func (l Limits) withDefaults() Limits {
	if l.MaxConns <= 0 {
		l.MaxConns = DefaultMaxConns
	}
	if l.MaxConnsPerClient <= 0 || l.MaxConnsPerClient > l.MaxConns {
		l.MaxConnsPerClient = min(DefaultMaxConnsPerClient, l.MaxConns)
	}
	if l.ReadHeaderTimeout <= 0 {
		l.ReadHeaderTimeout = DefaultReadHeaderTimeout
	}
	return l
}

// Serve serves srv on ln within the limits (zero fields take the defaults)
// until srv closes, as srv.Serve does. It sets srv.ReadHeaderTimeout and
// chains a hook before srv.ConnState, which must not change afterwards.
func (l Limits) Serve(srv *http.Server, ln net.Listener) error {
	return serve(srv, newListener(ln, l.withDefaults()))
}

func serve(srv *http.Server, g *listener) error {
	srv.ReadHeaderTimeout = g.limits.ReadHeaderTimeout
	next := srv.ConnState
	srv.ConnState = func(c net.Conn, s http.ConnState) {
		g.connState(c, s)
		if next != nil {
			next(c, s)
		}
	}
	return srv.Serve(g)
}

// listener admits connections within the limits and tracks which are idle.
type listener struct {
	net.Listener
	limits Limits

	mu      sync.Mutex
	open    int
	clients map[netip.Prefix]int
	idle    *list.List // of *conn, longest idle first
	waiting bool       // Accept waits for a slot
	freed   chan struct{}
	done    chan struct{}
	once    sync.Once
}

func newListener(ln net.Listener, l Limits) *listener {
	return &listener{Listener: ln, limits: l, clients: map[netip.Prefix]int{}, idle: list.New(),
		freed: make(chan struct{}, 1), done: make(chan struct{})}
}

// Accept returns the next connection within the limits. A connection
// beyond its client's bound is closed at once; one beyond the total bound
// waits here, in hand, while the rest wait in the listen backlog.
func (ln *listener) Accept() (net.Conn, error) {
	for {
		c, err := ln.Listener.Accept()
		if err != nil {
			return nil, err
		}
		client := clientOf(c.RemoteAddr())
		if !ln.makeRoomFor(client) {
			_ = c.Close()
			continue
		}
		if err := ln.reserve(client); err != nil {
			_ = c.Close()
			return nil, err
		}
		return &conn{Conn: c, ln: ln, client: client}, nil
	}
}

// makeRoomFor reports whether client may open one more connection,
// closing its longest-idle one when it is at its bound.
func (ln *listener) makeRoomFor(client netip.Prefix) bool {
	for {
		ln.mu.Lock()
		if ln.clients[client] < ln.limits.MaxConnsPerClient {
			ln.mu.Unlock()
			return true
		}
		victim := ln.takeIdle(func(v *conn) bool { return v.client == client })
		ln.mu.Unlock()
		if victim == nil {
			return false
		}
		_ = victim.Close()
	}
}

// reserve takes a slot for client's new connection, closing the
// longest-idle connection when there is none, or waits until one frees.
func (ln *listener) reserve(client netip.Prefix) error {
	for {
		ln.mu.Lock()
		if ln.open < ln.limits.MaxConns {
			ln.open++
			ln.clients[client]++
			ln.waiting = false
			ln.mu.Unlock()
			return nil
		}
		victim := ln.takeIdle(func(*conn) bool { return true })
		ln.waiting = victim == nil
		ln.mu.Unlock()
		if victim != nil {
			_ = victim.Close()
			continue
		}
		select {
		case <-ln.freed:
		case <-ln.done:
			return net.ErrClosed
		}
	}
}

// takeIdle removes and returns the longest-idle connection that matches,
// or nil. The caller holds mu and closes it after unlocking.
func (ln *listener) takeIdle(match func(*conn) bool) *conn {
	for e := ln.idle.Front(); e != nil; e = e.Next() {
		if c := e.Value.(*conn); match(c) {
			ln.idle.Remove(e)
			c.idle = nil
			return c
		}
	}
	return nil
}

// release gives back client's slot.
func (ln *listener) release(client netip.Prefix) {
	ln.mu.Lock()
	defer ln.mu.Unlock()
	ln.open--
	if ln.clients[client]--; ln.clients[client] <= 0 {
		delete(ln.clients, client)
	}
	ln.signal()
}

// signal wakes a waiting Accept; the caller holds mu.
func (ln *listener) signal() {
	if ln.waiting {
		select {
		case ln.freed <- struct{}{}:
		default:
		}
	}
}

// connState tracks idle connections; one that turns idle while Accept
// waits for a slot is closed at once.
func (ln *listener) connState(nc net.Conn, s http.ConnState) {
	c := tracked(nc)
	if c == nil {
		return
	}
	ln.mu.Lock()
	if c.idle != nil {
		ln.idle.Remove(c.idle)
		c.idle = nil
	}
	closeNow := false
	if s == http.StateIdle && !c.closed {
		if ln.waiting {
			closeNow = true
		} else {
			c.idle = ln.idle.PushBack(c)
		}
	}
	ln.mu.Unlock()
	if closeNow {
		_ = c.Close()
	}
}

// Close stops Accept, including one waiting for a slot.
func (ln *listener) Close() error {
	ln.once.Do(func() { close(ln.done) })
	return ln.Listener.Close()
}

// tracked returns the connection this listener handed out under nc (TLS
// wraps it), or nil.
func tracked(nc net.Conn) *conn {
	for {
		switch c := nc.(type) {
		case *conn:
			return c
		case interface{ NetConn() net.Conn }:
			nc = c.NetConn()
		default:
			return nil
		}
	}
}

// conn is an admitted connection; closing it gives back its slot once.
type conn struct {
	net.Conn
	ln     *listener
	client netip.Prefix
	idle   *list.Element // guarded by ln.mu
	closed bool          // guarded by ln.mu
}

func (c *conn) Close() error {
	c.ln.mu.Lock()
	first := !c.closed
	c.closed = true
	if c.idle != nil {
		c.ln.idle.Remove(c.idle)
		c.idle = nil
	}
	c.ln.mu.Unlock()
	err := c.Conn.Close()
	if first {
		c.ln.release(c.client)
	}
	return err
}

// clientOf is the address a client is counted by: its IPv4 address, or
// the /64 of its IPv6 address (one host commonly holds a whole /64).
func clientOf(a net.Addr) netip.Prefix {
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		return netip.PrefixFrom(netip.IPv4Unspecified(), 32) // not TCP: one shared client
	}
	ip := ap.Addr().Unmap()
	bits := 32
	if ip.Is6() {
		bits = 64
	}
	p, _ := ip.Prefix(bits)
	return p
}
