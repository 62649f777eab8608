package embed

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const secretKey = "sk-test-SECRET-123456"

// fakeOpenAI speaks the /v1/embeddings shape. fail(n) decides, for the n-th
// request (1-based), an error status (0 = succeed) and extra headers.
type fakeOpenAI struct {
	t        *testing.T
	mu       sync.Mutex
	requests []openAIRequest
	calls    atomic.Int32
	fail     func(n int) (int, map[string]string)
}

func (f *fakeOpenAI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := int(f.calls.Add(1))
	require.Equal(f.t, http.MethodPost, r.Method)
	require.Equal(f.t, "/v1/embeddings", r.URL.Path)
	require.Equal(f.t, "Bearer "+secretKey, r.Header.Get("Authorization"))
	require.Equal(f.t, "application/json", r.Header.Get("Content-Type"))
	var req openAIRequest
	require.NoError(f.t, json.NewDecoder(r.Body).Decode(&req))
	f.mu.Lock()
	f.requests = append(f.requests, req)
	f.mu.Unlock()
	if f.fail != nil {
		if status, hdr := f.fail(n); status != 0 {
			for k, v := range hdr {
				w.Header().Set(k, v)
			}
			w.WriteHeader(status)
			// A hostile/buggy server echoing the key must not leak it.
			fmt.Fprintf(w, `{"error":{"message":"rate limited for key %s","type":"requests"}}`, secretKey)
			return
		}
	}
	type item struct {
		Object    string    `json:"object"`
		Index     int       `json:"index"`
		Embedding []float32 `json:"embedding"`
	}
	resp := struct {
		Object string `json:"object"`
		Data   []item `json:"data"`
		Model  string `json:"model"`
	}{Object: "list", Model: req.Model}
	// Answer in reverse order: clients must use "index".
	for i := len(req.Input) - 1; i >= 0; i-- {
		v := make([]float32, req.Dimensions)
		v[i%req.Dimensions] = 2 // not unit length: the client normalizes
		v[(len(req.Input[i]))%req.Dimensions] += 1
		resp.Data = append(resp.Data, item{Object: "embedding", Index: i, Embedding: v})
	}
	w.Header().Set("Content-Type", "application/json")
	require.NoError(f.t, json.NewEncoder(w).Encode(resp))
}

type sleepRecorder struct {
	mu    sync.Mutex
	waits []time.Duration
}

func (s *sleepRecorder) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.waits = append(s.waits, d)
	s.mu.Unlock()
	return ctx.Err()
}

func newTestOpenAI(t *testing.T, url string, rec *sleepRecorder, mod func(*HTTPConfig)) *OpenAI {
	cfg := HTTPConfig{BaseURL: url, Model: "text-embedding-3-small", Dims: 8, APIKey: secretKey, BatchSize: 3, InitialBackoff: 100 * time.Millisecond, MaxRetries: 3}
	if mod != nil {
		mod(&cfg)
	}
	o, err := NewOpenAI(cfg)
	require.NoError(t, err)
	if rec != nil {
		o.h.sleep = rec.sleep
	}
	return o
}

func TestOpenAIBatchingAndShape(t *testing.T) {
	f := &fakeOpenAI{t: t}
	srv := httptest.NewServer(f)
	defer srv.Close()
	o := newTestOpenAI(t, srv.URL+"/", nil, nil)
	texts := []string{"a", "bb", "ccc", "dddd", "eeeee", "ffffff", "g"}
	vecs, err := o.Embed(context.Background(), texts)
	require.NoError(t, err)
	require.Len(t, vecs, len(texts))
	require.Len(t, f.requests, 3, "7 texts in batches of 3")
	require.Equal(t, []string{"a", "bb", "ccc"}, f.requests[0].Input)
	require.Equal(t, []string{"g"}, f.requests[2].Input)
	require.Equal(t, 8, f.requests[0].Dimensions)
	require.Equal(t, "text-embedding-3-small", f.requests[0].Model)
	for i, v := range vecs {
		require.Len(t, v, 8)
		require.InDelta(t, 1, Dot(v, v), 1e-5, "normalized")
		// Order preserved despite the reversed response: the largest
		// component is at (index within batch) % dims.
		require.Greater(t, v[(i%3)%8], float32(0.5))
	}
	require.Equal(t, "openai:text-embedding-3-small:8:v1", o.ModelID())
	require.Equal(t, 8, o.Dimensions())
}

func TestOpenAIRetries429ThenSucceeds(t *testing.T) {
	f := &fakeOpenAI{t: t, fail: func(n int) (int, map[string]string) {
		switch n {
		case 1:
			return http.StatusTooManyRequests, map[string]string{"Retry-After": "2"}
		case 2:
			return http.StatusServiceUnavailable, nil
		}
		return 0, nil
	}}
	srv := httptest.NewServer(f)
	defer srv.Close()
	rec := &sleepRecorder{}
	o := newTestOpenAI(t, srv.URL, rec, nil)
	vecs, err := o.Embed(context.Background(), []string{"x"})
	require.NoError(t, err)
	require.Len(t, vecs, 1)
	require.Equal(t, int32(3), f.calls.Load())
	require.Len(t, rec.waits, 2)
	require.Equal(t, 2*time.Second, rec.waits[0], "Retry-After honoured")
	// Second wait is the doubled backoff (200ms) +-20% jitter.
	require.InDelta(t, float64(200*time.Millisecond), float64(rec.waits[1]), float64(40*time.Millisecond))
}

func TestOpenAIRealSleepHonoursRetryAfter(t *testing.T) {
	f := &fakeOpenAI{t: t, fail: func(n int) (int, map[string]string) {
		if n == 1 {
			return http.StatusTooManyRequests, map[string]string{"Retry-After": "1"}
		}
		return 0, nil
	}}
	srv := httptest.NewServer(f)
	defer srv.Close()
	o := newTestOpenAI(t, srv.URL, nil, nil)
	t0 := time.Now()
	_, err := o.Embed(context.Background(), []string{"x"})
	require.NoError(t, err)
	require.GreaterOrEqual(t, time.Since(t0), time.Second)
}

func TestOpenAIErrorAfterRetriesHidesKey(t *testing.T) {
	f := &fakeOpenAI{t: t, fail: func(int) (int, map[string]string) { return http.StatusInternalServerError, nil }}
	srv := httptest.NewServer(f)
	defer srv.Close()
	rec := &sleepRecorder{}
	o := newTestOpenAI(t, srv.URL, rec, nil)
	_, err := o.Embed(context.Background(), []string{"x"})
	require.Error(t, err)
	require.Equal(t, int32(4), f.calls.Load(), "1 attempt + 3 retries")
	var se *StatusError
	require.ErrorAs(t, err, &se)
	require.Equal(t, 500, se.Status)
	require.Equal(t, 4, se.Attempts)
	require.NotContains(t, err.Error(), secretKey)
	require.Contains(t, err.Error(), "[REDACTED]")
	// Exponential: 100ms, 200ms, 400ms (+-20%).
	require.Len(t, rec.waits, 3)
	for i, base := range []time.Duration{100, 200, 400} {
		require.InDelta(t, float64(base*time.Millisecond), float64(rec.waits[i]), float64(base*time.Millisecond)/4)
	}
}

func TestOpenAINoRetryOn4xx(t *testing.T) {
	f := &fakeOpenAI{t: t, fail: func(int) (int, map[string]string) { return http.StatusUnauthorized, nil }}
	srv := httptest.NewServer(f)
	defer srv.Close()
	o := newTestOpenAI(t, srv.URL, &sleepRecorder{}, nil)
	_, err := o.Embed(context.Background(), []string{"x"})
	require.ErrorContains(t, err, "HTTP 401")
	require.NotContains(t, err.Error(), secretKey)
	require.Equal(t, int32(1), f.calls.Load())
}

func TestOpenAITransportErrorsAreRetriedAndRedacted(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close() // connection refused from now on
	rec := &sleepRecorder{}
	o := newTestOpenAI(t, strings.Replace(url, "http://", "http://user:"+secretKey+"@", 1), rec, func(c *HTTPConfig) { c.MaxRetries = 2 })
	_, err := o.Embed(context.Background(), []string{"x"})
	require.Error(t, err)
	require.Len(t, rec.waits, 2)
	require.NotContains(t, err.Error(), secretKey)
}

func TestOpenAITimeoutPerAttempt(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		select {
		case <-r.Context().Done():
		case <-time.After(2 * time.Second):
		}
	}))
	defer srv.Close()
	o := newTestOpenAI(t, srv.URL, &sleepRecorder{}, func(c *HTTPConfig) { c.Timeout = 50 * time.Millisecond; c.MaxRetries = 1 })
	t0 := time.Now()
	_, err := o.Embed(context.Background(), []string{"x"})
	require.Error(t, err)
	require.Less(t, time.Since(t0), 1500*time.Millisecond)
	require.Equal(t, int32(2), calls.Load())
}

func TestOpenAIDimensionMismatch(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"data":[{"index":0,"embedding":[1,0,0]}]}`)
	}))
	defer srv.Close()
	o := newTestOpenAI(t, srv.URL, nil, nil)
	_, err := o.Embed(context.Background(), []string{"x"})
	require.ErrorContains(t, err, "3 dimensions, configured 8")
}

func TestOllama(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := calls.Add(1)
		require.Equal(t, "/api/embed", r.URL.Path)
		require.Empty(t, r.Header.Get("Authorization"))
		var req ollamaRequest
		require.NoError(t, json.NewDecoder(r.Body).Decode(&req))
		require.Equal(t, "nomic-embed-text", req.Model)
		if n == 1 {
			w.WriteHeader(http.StatusTooManyRequests)
			fmt.Fprint(w, `{"error":"server busy"}`)
			return
		}
		resp := ollamaResponse{Model: req.Model}
		for i := range req.Input {
			resp.Embeddings = append(resp.Embeddings, []float32{float32(i + 1), 0, 0, 1})
		}
		require.NoError(t, json.NewEncoder(w).Encode(resp))
	}))
	defer srv.Close()
	o, err := NewOllama(HTTPConfig{BaseURL: srv.URL, Model: "nomic-embed-text", Dims: 4, BatchSize: 2})
	require.NoError(t, err)
	rec := &sleepRecorder{}
	o.h.sleep = rec.sleep
	vecs, err := o.Embed(context.Background(), []string{"a", "b", "c"})
	require.NoError(t, err)
	require.Len(t, vecs, 3)
	require.Equal(t, int32(3), calls.Load(), "one 429 retry + 2 batches")
	require.Len(t, rec.waits, 1)
	require.InDelta(t, 1, Dot(vecs[1], vecs[1]), 1e-6)
	require.Equal(t, "ollama:nomic-embed-text:4:v1", o.ModelID())
}

func TestOllamaErrorAfterRetries(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.WriteHeader(http.StatusBadGateway)
		fmt.Fprint(w, `{"error":"model runner crashed"}`)
	}))
	defer srv.Close()
	o, err := NewOllama(HTTPConfig{BaseURL: srv.URL, Model: "m", Dims: 4, MaxRetries: 2})
	require.NoError(t, err)
	o.h.sleep = (&sleepRecorder{}).sleep
	_, err = o.Embed(context.Background(), []string{"a"})
	require.ErrorContains(t, err, "HTTP 502 after 3 attempt(s): model runner crashed")
	require.Equal(t, int32(3), calls.Load())
}

func TestHTTPConfigValidation(t *testing.T) {
	tests := []struct {
		cfg  HTTPConfig
		want string
	}{
		{HTTPConfig{Model: "m", Dims: 1}, "base URL"},
		{HTTPConfig{BaseURL: "http://x", Dims: 1}, "model"},
		{HTTPConfig{BaseURL: "http://x", Model: "m"}, "dimensions"},
	}
	for _, tc := range tests {
		_, err := NewOpenAI(tc.cfg)
		require.ErrorContains(t, err, tc.want)
		_, err = NewOllama(tc.cfg)
		require.ErrorContains(t, err, tc.want)
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Duration
	}{
		{"", 0},
		{"3", 3 * time.Second},
		{"0.5", 500 * time.Millisecond},
		{"-1", 0},
		{"soon", 0},
		{now.Add(7 * time.Second).Format(http.TimeFormat), 7 * time.Second},
		{now.Add(-7 * time.Second).Format(http.TimeFormat), 0},
	}
	for _, tc := range tests {
		require.Equal(t, tc.want, parseRetryAfter(tc.in, now), tc.in)
	}
}
