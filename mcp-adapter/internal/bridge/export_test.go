package bridge

import "net/http"

// SetTransport makes b send its requests through rt (a test TLS server's
// client transport, which trusts its certificate).
func SetTransport(b *Bridge, rt http.RoundTripper) { b.transport = rt }
