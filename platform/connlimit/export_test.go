package connlimit

import (
	"net"
	"net/http"
)

// ServeCountingIdle is Limits.Serve with a count of the connections the
// listener holds as idle, for tests to wait on: the server marks a
// connection idle a moment after its client has read the answer.
func ServeCountingIdle(l Limits, srv *http.Server, ln net.Listener) (serveFn func() error, idle func() int) {
	g := newListener(ln, l.withDefaults())
	return func() error { return serve(srv, g) }, func() int {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.idle.Len()
	}
}
