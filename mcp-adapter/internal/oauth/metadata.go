package oauth

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
)

// MetadataPrefix is where RFC 9728 puts protected resource metadata.
const MetadataPrefix = "/.well-known/oauth-protected-resource"

// MetadataPaths are the paths the metadata is served at: the resource's
// own path inserted after the prefix (RFC 9728 section 3.1, what clients
// derive from the resource URL), and the bare prefix (what clients try
// when they know only the host).
func (v *Verifier) MetadataPaths() []string {
	paths := []string{MetadataPrefix}
	if p := v.resourcePath(); p != "" {
		paths = append(paths, MetadataPrefix+p)
	}
	return paths
}

// MetadataURL is the metadata's URL named in every 401 challenge.
func (v *Verifier) MetadataURL() string {
	u, err := url.Parse(v.cfg.Resource)
	if err != nil {
		return MetadataPrefix
	}
	return u.Scheme + "://" + u.Host + MetadataPrefix + v.resourcePath()
}

func (v *Verifier) resourcePath() string {
	u, err := url.Parse(v.cfg.Resource)
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(u.Path, "/")
}

// Scopes are the scopes advertised to clients.
func (v *Verifier) Scopes() []string { return v.cfg.Scopes }

// Metadata is the protected resource metadata document.
func (v *Verifier) Metadata() map[string]any {
	return map[string]any{
		"resource":                 v.cfg.Resource,
		"authorization_servers":    []string{v.cfg.Issuer},
		"scopes_supported":         v.cfg.Scopes,
		"bearer_methods_supported": []string{"header"},
		"resource_name":            "BMCIS Knowledge",
	}
}

// MetadataHandler serves Metadata to GET (cacheable for an hour).
func (v *Verifier) MetadataHandler() http.Handler {
	body, _ := json.Marshal(v.Metadata())
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "public, max-age=3600")
		_, _ = w.Write(body)
	})
}

// Challenge is the WWW-Authenticate value of a 401 (or of a 403 for
// ErrInsufficientScope): where the metadata is, the scope to ask for and,
// for a refused token, why (RFC 6750 section 3). err is nil when no
// credential was sent.
func (v *Verifier) Challenge(err error) string {
	if errors.Is(err, ErrInsufficientScope) {
		// RFC 6750 section 3.1; the MCP authorization spec's scope step-up.
		return `Bearer error="insufficient_scope", scope="` + strings.Join(v.cfg.Scopes, " ") +
			`", resource_metadata="` + v.MetadataURL() + `", error_description="` + ErrInsufficientScope.Error() + `"`
	}
	var b strings.Builder
	b.WriteString(`Bearer resource_metadata="` + v.MetadataURL() + `", scope="` + strings.Join(v.cfg.Scopes, " ") + `"`)
	if err != nil {
		desc := ErrInvalid.Error()
		if strings.HasPrefix(err.Error(), ErrExpired.Error()) {
			desc = ErrExpired.Error()
		}
		b.WriteString(`, error="invalid_token", error_description="` + desc + `"`)
	}
	return b.String()
}
