// Package weburl is the rule for a URL a component sends a credential to or
// takes tokens on trust from: https, or plain http only to a loopback host
// (tests, local runs), where nothing crosses a network. The auth service's
// OAuth issuers, the MCP adapter's OAuth settings and its Desktop bridge's
// endpoint all follow it.
package weburl

import (
	"net"
	"net/url"
)

// Secure reports whether raw is an absolute https URL, or an http URL whose
// host is loopback. A URL without a host, or carrying user info (a
// credential has no place in it), is not.
func Secure(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.User != nil {
		return false
	}
	switch u.Scheme {
	case "https":
		return true
	case "http":
		return Loopback(u.Hostname())
	}
	return false
}

// Loopback reports whether host (a URL's Hostname) is localhost or a
// loopback address.
func Loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
