package oauth

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// One key-set fetch per interval, redirect hops included in the one fetch
// (a jwks_uri that redirects must stay fetchable).
func TestFetchIntervalLetsRedirectHopsThrough(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/old-jwks", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/jwks", http.StatusFound) })
	mux.HandleFunc("/jwks", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(`{"keys":[]}`)) })
	srv := httptest.NewServer(mux)
	defer srv.Close()

	c := &http.Client{Transport: &fetchInterval{base: http.DefaultTransport, every: time.Hour}}
	resp, err := c.Get(srv.URL + "/old-jwks")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	_, err = c.Get(srv.URL + "/jwks")
	require.ErrorIs(t, err, ErrUnavailable, "a second fetch within the interval waits")
}
