// Package origin decides whether a browser Origin may call an HTTP
// listener. Browsers attach Origin to cross-site requests, so checking it
// stops a web page (DNS rebinding included) from driving a server the
// user's machine can reach; clients that are not browsers send none and
// pass. One policy serves the MCP adapter's HTTP server and the gateway.
package origin

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// Policy is an allow-list of exact origins (scheme://host[:port]).
type Policy struct {
	any     bool
	allowed map[string]bool
}

// New allows the listed origins plus the listener's own loopback origins
// (http and https on localhost, 127.0.0.1 and [::1] at listenAddr's
// port), so a page served by the listener itself keeps working. "*" in
// the list allows every origin.
func New(listenAddr string, allowed ...string) Policy {
	p := Policy{allowed: map[string]bool{}}
	for _, o := range allowed {
		if o == "*" {
			p.any = true
			continue
		}
		p.allowed[normalize(o)] = true
	}
	for _, o := range Loopback(listenAddr) {
		p.allowed[o] = true
	}
	return p
}

// Loopback returns the loopback origins of a listen address ("" when it
// has no port).
func Loopback(listenAddr string) []string {
	_, port, err := net.SplitHostPort(listenAddr)
	if err != nil || port == "" || port == "0" {
		return nil
	}
	var out []string
	for _, scheme := range []string{"http", "https"} {
		for _, host := range []string{"localhost", "127.0.0.1", "[::1]"} {
			out = append(out, scheme+"://"+host+":"+port)
		}
	}
	return out
}

// Allows reports whether a request with this Origin header may proceed:
// no Origin (not a browser) or one on the list.
func (p Policy) Allows(origin string) bool {
	if origin == "" || p.any {
		return true
	}
	return p.allowed[normalize(origin)]
}

// AllowsRequest is Allows, and also lets through a page the listener served
// itself on a loopback address: its Origin names the request's own Host,
// and that host is localhost, 127.0.0.1 or ::1 (whatever port the listener
// really has, which its configured address may not say). A page reached
// through another name (DNS rebinding) is not let through this way.
func (p Policy) AllowsRequest(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if p.Allows(o) {
		return true
	}
	u, err := url.Parse(o)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || !strings.EqualFold(u.Host, r.Host) {
		return false
	}
	switch strings.ToLower(u.Hostname()) {
	case "localhost", "127.0.0.1", "::1":
		return true
	}
	return false
}

// Validate reports the first entry of list that is not an origin.
func Validate(list []string) error {
	for _, o := range list {
		if o == "*" {
			continue
		}
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
			(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil {
			return fmt.Errorf("%q is not an origin such as https://app.example.com", o)
		}
	}
	return nil
}

// normalize lowercases an origin and drops a trailing slash; browsers send
// origins lowercased and without one.
func normalize(o string) string {
	return strings.TrimSuffix(strings.ToLower(strings.TrimSpace(o)), "/")
}
