package gateway

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// Server statuses, as /api/health reports them.
const (
	StatusConnected    = "connected"
	StatusConnecting   = "connecting"
	StatusDisconnected = "disconnected"
	StatusError        = "error"
)

// timeFormat is ISO 8601 in UTC with milliseconds.
const timeFormat = "2006-01-02T15:04:05.000Z07:00"

func isoTime(t time.Time) string { return t.UTC().Format(timeFormat) }

// probe watches one server: a gRPC service through the standard health
// protocol on the gateway's connection to it, or the MCP adapter through its
// HTTP health endpoint.
type probe struct {
	meta serverMeta
	conn *grpc.ClientConn
	hc   healthpb.HealthClient
	url  string // HTTP health URL (adapter); empty for gRPC services
	http *http.Client

	mu             sync.Mutex
	status         string
	err            string
	checked        time.Time
	connectedSince time.Time
	info           struct{ name, version string } // from the adapter's health body
}

// snapshot is a probe's state at one moment.
type probeState struct {
	status, err    string
	checked        time.Time
	connectedSince time.Time
	name, version  string
}

func (p *probe) state() probeState {
	p.mu.Lock()
	defer p.mu.Unlock()
	return probeState{status: p.status, err: p.err, checked: p.checked, connectedSince: p.connectedSince, name: p.info.name, version: p.info.version}
}

func (p *probe) set(status, errMsg string, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if status == StatusConnected && p.status != StatusConnected {
		p.connectedSince = now
	}
	if status != StatusConnected {
		p.connectedSince = time.Time{}
	}
	p.status, p.err, p.checked = status, errMsg, now
}

// check runs one health check and records the result.
func (p *probe) check(ctx context.Context, timeout time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if p.url != "" {
		p.checkHTTP(ctx)
		return
	}
	st, msg := p.checkGRPC(ctx)
	p.set(st, msg, time.Now())
}

func (p *probe) checkGRPC(ctx context.Context) (string, string) {
	resp, err := p.hc.Check(ctx, &healthpb.HealthCheckRequest{Service: p.meta.grpcService})
	if status.Code(err) == codes.NotFound { // the service name is unknown: ask about the server
		resp, err = p.hc.Check(ctx, &healthpb.HealthCheckRequest{})
	}
	if err == nil {
		if resp.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			return StatusConnected, ""
		}
		return StatusError, "health check reports " + resp.GetStatus().String()
	}
	switch status.Code(err) {
	case codes.Unavailable:
		if p.conn.GetState() == connectivity.Connecting {
			return StatusConnecting, ""
		}
		return StatusDisconnected, transportReason(status.Convert(err).Message())
	case codes.DeadlineExceeded:
		if s := p.conn.GetState(); s == connectivity.Connecting || s == connectivity.Idle {
			return StatusConnecting, ""
		}
		return StatusError, "health check timed out"
	case codes.Unimplemented:
		return StatusError, "the server does not implement grpc.health.v1"
	case codes.Canceled:
		return StatusConnecting, ""
	default:
		return StatusError, "health check failed: " + status.Code(err).String()
	}
}

// transportReason turns a dial error into a short reason without addresses:
// /api/health is public.
func transportReason(msg string) string {
	for _, r := range []string{"connection refused", "no such host", "i/o timeout", "connection reset", "network is unreachable", "EOF"} {
		if strings.Contains(msg, r) {
			return "not reachable: " + r
		}
	}
	return "not reachable"
}

func (p *probe) checkHTTP(ctx context.Context) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.url, nil)
	if err != nil {
		p.set(StatusError, "bad health URL", time.Now())
		return
	}
	resp, err := p.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			p.set(StatusError, "health check timed out", time.Now())
			return
		}
		p.set(StatusDisconnected, transportReason(err.Error()), time.Now())
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 != 2 {
		p.set(StatusError, "health endpoint answered "+resp.Status, time.Now())
		return
	}
	// The body is optional; when it is JSON, take the server's name and version.
	var info struct {
		Name       string `json:"name"`
		Version    string `json:"version"`
		ServerInfo *struct {
			Name    string `json:"name"`
			Version string `json:"version"`
		} `json:"serverInfo"`
	}
	if json.Unmarshal(body, &info) == nil {
		if info.ServerInfo != nil {
			info.Name, info.Version = info.ServerInfo.Name, info.ServerInfo.Version
		}
		p.mu.Lock()
		p.info.name, p.info.version = info.Name, info.Version
		p.mu.Unlock()
	}
	p.set(StatusConnected, "", time.Now())
}

// monitor runs the probes.
type monitor struct {
	probes   []*probe
	interval time.Duration
	timeout  time.Duration
	ready    chan struct{}
	once     sync.Once
}

func (m *monitor) checkAll(ctx context.Context) {
	var wg sync.WaitGroup
	for _, p := range m.probes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.check(ctx, m.timeout)
		}()
	}
	wg.Wait()
	m.once.Do(func() { close(m.ready) })
}

func (m *monitor) run(ctx context.Context) {
	t := time.NewTicker(m.interval)
	defer t.Stop()
	for {
		m.checkAll(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (m *monitor) isReady() bool {
	select {
	case <-m.ready:
		return true
	default:
		return false
	}
}

func (m *monitor) probe(name string) *probe {
	for _, p := range m.probes {
		if p.meta.name == name {
			return p
		}
	}
	return nil
}
