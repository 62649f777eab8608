package embed

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// HTTPConfig configures the remote (openai, ollama) providers.
type HTTPConfig struct {
	// BaseURL is the server root, e.g. "https://api.openai.com" or
	// "http://localhost:11434" (no trailing /v1 or /api).
	BaseURL string
	// Model is the provider's model name.
	Model string
	// Dims is the vector dimension the stored column holds. OpenAI is asked
	// for it (the "dimensions" parameter); every response is checked.
	Dims int
	// APIKey is sent as a Bearer token (openai only). It never appears in
	// errors or logs produced by this package.
	APIKey string
	// BatchSize is the most texts per request (default 128).
	BatchSize int
	// Timeout bounds each attempt (default 30s).
	Timeout time.Duration
	// MaxRetries is the number of retries after the first attempt on 429,
	// 5xx and transport errors (default 4).
	MaxRetries int
	// InitialBackoff doubles after every retry up to MaxBackoff (defaults
	// 500ms and 20s). A Retry-After header overrides the computed wait.
	InitialBackoff time.Duration
	MaxBackoff     time.Duration
	// Client is the HTTP client (default: a new client; per-attempt
	// timeouts come from Timeout via the request context).
	Client *http.Client
	// Version is appended to ModelID; bump it when the provider changes the
	// model behind a name (default "v1").
	Version string
}

func (c HTTPConfig) withDefaults() HTTPConfig {
	if c.BatchSize <= 0 {
		c.BatchSize = 128
	}
	if c.Timeout <= 0 {
		c.Timeout = 30 * time.Second
	}
	if c.MaxRetries < 0 {
		c.MaxRetries = 0
	} else if c.MaxRetries == 0 {
		c.MaxRetries = 4
	}
	if c.InitialBackoff <= 0 {
		c.InitialBackoff = 500 * time.Millisecond
	}
	if c.MaxBackoff <= 0 {
		c.MaxBackoff = 20 * time.Second
	}
	if c.Client == nil {
		c.Client = &http.Client{}
	}
	if c.Version == "" {
		c.Version = "v1"
	}
	c.BaseURL = strings.TrimRight(c.BaseURL, "/")
	return c
}

func (c HTTPConfig) validate(provider string) error {
	if c.BaseURL == "" {
		return fmt.Errorf("%s embedder: base URL is required", provider)
	}
	if _, err := url.Parse(c.BaseURL); err != nil {
		return fmt.Errorf("%s embedder: invalid base URL", provider)
	}
	if c.Model == "" {
		return fmt.Errorf("%s embedder: model is required", provider)
	}
	if c.Dims <= 0 {
		return fmt.Errorf("%s embedder: dimensions must be positive", provider)
	}
	return nil
}

// StatusError is a non-2xx answer from a provider after retries.
type StatusError struct {
	Provider string
	Status   int
	Message  string // provider's error message, secrets redacted
	Attempts int
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("%s embedder: HTTP %d after %d attempt(s): %s", e.Provider, e.Status, e.Attempts, e.Message)
}

// httpCaller performs JSON POSTs with retries.
type httpCaller struct {
	cfg      HTTPConfig
	provider string
	// errMessage extracts a human message from an error body.
	errMessage func([]byte) string
	// sleep is replaceable in tests.
	sleep func(context.Context, time.Duration) error
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// redact removes the API key and URL credentials from s.
func (h *httpCaller) redact(s string) string {
	if h.cfg.APIKey != "" {
		s = strings.ReplaceAll(s, h.cfg.APIKey, "[REDACTED]")
	}
	if u, err := url.Parse(h.cfg.BaseURL); err == nil && u.User != nil {
		s = strings.ReplaceAll(s, u.User.String(), "[REDACTED]")
	}
	return s
}

// post sends body to path and decodes a 2xx JSON answer into out.
func (h *httpCaller) post(ctx context.Context, path string, body, out any) error {
	payload, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("%s embedder: encode request: %w", h.provider, err)
	}
	endpoint := h.cfg.BaseURL + path
	backoff := h.cfg.InitialBackoff
	var lastErr error
	for attempt := 1; ; attempt++ {
		retryAfter, err := h.attempt(ctx, endpoint, payload, out, attempt)
		if err == nil {
			return nil
		}
		lastErr = err
		var se *StatusError
		retryable := errors.As(err, &se) && (se.Status == http.StatusTooManyRequests || se.Status >= 500) ||
			!errors.As(err, &se) && ctx.Err() == nil && !errors.Is(err, errDecode)
		if !retryable || attempt > h.cfg.MaxRetries {
			return lastErr
		}
		wait := backoff
		// +-20% jitter keeps many clients from retrying in lockstep.
		wait += time.Duration((rand.Float64()*0.4 - 0.2) * float64(wait))
		if retryAfter > 0 {
			wait = retryAfter
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			return fmt.Errorf("%s embedder: retry wait %v exceeds deadline: %w", h.provider, wait, lastErr)
		}
		if err := h.sleep(ctx, wait); err != nil {
			return fmt.Errorf("%s embedder: %w (last error: %v)", h.provider, err, lastErr)
		}
		backoff = min(backoff*2, h.cfg.MaxBackoff)
	}
}

var errDecode = errors.New("decode response")

func (h *httpCaller) attempt(ctx context.Context, endpoint string, payload []byte, out any, attempt int) (time.Duration, error) {
	actx, cancel := context.WithTimeout(ctx, h.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(actx, http.MethodPost, endpoint, bytes.NewReader(payload))
	if err != nil {
		return 0, fmt.Errorf("%s embedder: build request: %s", h.provider, h.redact(err.Error()))
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if h.cfg.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+h.cfg.APIKey)
	}
	resp, err := h.cfg.Client.Do(req)
	if err != nil {
		// url.Error carries the URL; redact credentials it may hold.
		return 0, fmt.Errorf("%s embedder: attempt %d: %s", h.provider, attempt, h.redact(err.Error()))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return 0, fmt.Errorf("%s embedder: attempt %d: read body: %s", h.provider, attempt, h.redact(err.Error()))
	}
	if resp.StatusCode/100 != 2 {
		msg := h.errMessage(data)
		if msg == "" {
			msg = strings.TrimSpace(string(data))
		}
		if len(msg) > 300 {
			msg = msg[:300] + "..."
		}
		return parseRetryAfter(resp.Header.Get("Retry-After"), time.Now()), &StatusError{
			Provider: h.provider, Status: resp.StatusCode, Message: h.redact(msg), Attempts: attempt,
		}
	}
	if err := json.Unmarshal(data, out); err != nil {
		return 0, fmt.Errorf("%s embedder: %w: %s", h.provider, errDecode, h.redact(err.Error()))
	}
	return 0, nil
}

// parseRetryAfter reads delay-seconds or an HTTP date; 0 when absent/invalid.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s < 0 {
			return 0
		}
		return time.Duration(s * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return d
		}
	}
	return 0
}

// checkVectors validates shape and normalizes.
func checkVectors(provider string, vecs [][]float32, want, dims int) error {
	if len(vecs) != want {
		return fmt.Errorf("%s embedder: got %d vectors for %d inputs", provider, len(vecs), want)
	}
	for i, v := range vecs {
		if len(v) != dims {
			return fmt.Errorf("%s embedder: vector %d has %d dimensions, configured %d", provider, i, len(v), dims)
		}
		Normalize(v)
	}
	return nil
}
