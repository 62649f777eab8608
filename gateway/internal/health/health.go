// Package health watches the servers behind the gateway: each gRPC service
// through the standard health protocol on the gateway's own connection to
// it, the MCP adapter through its HTTP health endpoint, every interval.
// /api/health and /api/tools read the probes' states.
package health

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/bmcis/knowledge/gateway/internal/backends"
)

// Server statuses, as /api/health reports them.
const (
	StatusConnected    = "connected"
	StatusConnecting   = "connecting"
	StatusDisconnected = "disconnected"
	StatusError        = "error"
)

// Probe watches one server: a gRPC service through the standard health
// protocol on the gateway's connection to it, or the MCP adapter through its
// HTTP health endpoint.
type Probe struct {
	name        string
	grpcService string // the service name asked about; empty for HTTP probes
	conn        *grpc.ClientConn
	hc          healthpb.HealthClient
	url         string // HTTP health URL (adapter); empty for gRPC services
	http        *http.Client

	mu             sync.Mutex
	status         string
	err            string
	checked        time.Time
	connectedSince time.Time
	info           struct{ name, version string } // from the adapter's health body
}

// NewGRPCProbe watches the gRPC service grpcService on conn.
func NewGRPCProbe(name, grpcService string, conn *grpc.ClientConn) *Probe {
	return &Probe{name: name, grpcService: grpcService, conn: conn, hc: healthpb.NewHealthClient(conn), status: StatusConnecting}
}

// NewHTTPProbe watches an HTTP health endpoint (the MCP adapter's).
func NewHTTPProbe(name, url string, timeout time.Duration) *Probe {
	return &Probe{name: name, url: url, http: &http.Client{Timeout: timeout}, status: StatusConnecting}
}

// State is a probe's state at one moment.
type State struct {
	Status, Err    string
	Checked        time.Time
	ConnectedSince time.Time
	// Name and Version are what the adapter's health body said, if anything.
	Name, Version string
}

// State returns the probe's state now.
func (p *Probe) State() State {
	p.mu.Lock()
	defer p.mu.Unlock()
	return State{Status: p.status, Err: p.err, Checked: p.checked, ConnectedSince: p.connectedSince, Name: p.info.name, Version: p.info.version}
}

func (p *Probe) set(status, errMsg string, now time.Time) {
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
func (p *Probe) check(ctx context.Context, timeout time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if p.url != "" {
		p.checkHTTP(ctx)
		return
	}
	st, msg := p.checkGRPC(ctx)
	p.set(st, msg, time.Now())
}

func (p *Probe) checkGRPC(ctx context.Context) (string, string) {
	resp, err := p.hc.Check(ctx, &healthpb.HealthCheckRequest{Service: p.grpcService})
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
		return StatusDisconnected, backends.UnreachableReason(status.Convert(err).Message())
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

func (p *Probe) checkHTTP(ctx context.Context) {
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
		p.set(StatusDisconnected, backends.UnreachableReason(err.Error()), time.Now())
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

// Monitor runs the probes.
type Monitor struct {
	probes   []*Probe
	interval time.Duration
	timeout  time.Duration
	ready    chan struct{}
	once     sync.Once
}

// NewMonitor checks every probe each interval, each check within timeout.
func NewMonitor(interval, timeout time.Duration, probes ...*Probe) *Monitor {
	return &Monitor{probes: probes, interval: interval, timeout: timeout, ready: make(chan struct{})}
}

func (m *Monitor) checkAll(ctx context.Context) {
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

// Run checks until ctx ends.
func (m *Monitor) Run(ctx context.Context) {
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

// Ready reports whether the first round of checks is done.
func (m *Monitor) Ready() bool {
	select {
	case <-m.ready:
		return true
	default:
		return false
	}
}

// Probe returns the named server's probe, or nil when it is not monitored.
func (m *Monitor) Probe(name string) *Probe {
	for _, p := range m.probes {
		if p.name == name {
			return p
		}
	}
	return nil
}
