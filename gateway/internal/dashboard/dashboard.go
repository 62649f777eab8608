// Package dashboard is the operator dashboard: the JSON endpoints
// /api/health, /api/servers, /api/tools, /api/config and /api/stats, and the
// one static page (web/) that reads them. It shows what the health monitor
// and the stats collector know; it holds no state of its own.
package dashboard

import (
	"embed"
	"io/fs"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/bmcis/knowledge/gateway/internal/backends"
	"github.com/bmcis/knowledge/gateway/internal/catalog"
	"github.com/bmcis/knowledge/gateway/internal/health"
	"github.com/bmcis/knowledge/gateway/internal/httpjson"
	"github.com/bmcis/knowledge/gateway/internal/rest"
	"github.com/bmcis/knowledge/gateway/internal/stats"
	"github.com/bmcis/knowledge/platform/version"
)

//go:embed web
var webFS embed.FS

// contentSecurityPolicy lets the dashboard load only its own files and call
// only this origin: no inline script, no CDN.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// Gateway states, as /api/health reports them.
const (
	StateStarting = "starting"
	StateReady    = "ready"
	StateStopped  = "stopped"
)

// Sources are what the dashboard reads.
type Sources struct {
	Monitor  *health.Monitor
	Stats    *stats.Collector
	ServerID string // server_id of /api/health
	// Config is /api/config's view of the configuration (secrets redacted).
	Config func() map[string]any
	// ActiveClients is the number of requests in flight.
	ActiveClients func() int64
	// Stopped reports the gateway shutting down.
	Stopped func() bool
}

// Dashboard serves the dashboard's routes.
type Dashboard struct {
	src Sources
}

// New builds the dashboard on its sources.
func New(src Sources) *Dashboard { return &Dashboard{src: src} }

// Mount serves the dashboard's routes on the edge, which checks each
// route's access. A new panel's endpoint is one more line here and its row
// in rest's localRoutes (which /api/config lists; the edge refuses a route
// that is not there).
func (d *Dashboard) Mount(e *rest.Edge) {
	e.Handle("GET", "/api/health", rest.Public, "", d.apiHealth)
	e.Handle("GET", "/api/servers", rest.Public, "", d.apiServers)
	e.Handle("GET", "/api/tools", rest.Public, "", d.apiTools)
	e.Handle("GET", "/api/config", rest.Admin, "rest.dashboard.config", d.apiConfig)
	e.Handle("GET", "/api/stats", rest.APIKey, "rest.dashboard.stats", d.apiStats)

	web, _ := fs.Sub(webFS, "web")
	index, _ := fs.ReadFile(web, "index.html")
	e.Handle("GET", "/{$}", rest.Public, "", func(w http.ResponseWriter, _ *http.Request) {
		h := w.Header()
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("Cache-Control", "no-cache")
		_, _ = w.Write(index)
	})
	assets := http.StripPrefix("/assets/", http.FileServerFS(web))
	e.Handle("GET", "/assets/", rest.Public, "", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/assets/" || strings.HasSuffix(r.URL.Path, "/") || strings.HasSuffix(r.URL.Path, "index.html") {
			e.NotFound(w, r)
			return
		}
		w.Header().Set("Cache-Control", "no-cache")
		assets.ServeHTTP(w, r)
	})
}

// --- /api/health, /api/servers, /api/tools ---

// ServerInfo names a server's software.
type ServerInfo struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// ServerEntry is one server in /api/health and /api/servers.
type ServerEntry struct {
	Name             string               `json:"name"`
	DisplayName      string               `json:"displayName"`
	Description      string               `json:"description"`
	TransportType    string               `json:"transportType"`
	Status           string               `json:"status"`
	Error            *string              `json:"error"`
	Capabilities     catalog.Capabilities `json:"capabilities"`
	Uptime           float64              `json:"uptime"`
	LastStarted      *string              `json:"lastStarted"`
	LastChecked      *string              `json:"lastChecked"`
	AuthorizationURL *string              `json:"authorizationUrl"`
	ServerInfo       *ServerInfo          `json:"serverInfo"`
	ConfigSource     string               `json:"config_source"`
}

// HealthResponse is the body of /api/health.
type HealthResponse struct {
	Status        string        `json:"status"`
	State         string        `json:"state"`
	ServerID      string        `json:"server_id"`
	Version       string        `json:"version"`
	ActiveClients int64         `json:"activeClients"`
	Timestamp     string        `json:"timestamp"`
	Servers       []ServerEntry `json:"servers"`
}

func (d *Dashboard) servers() []ServerEntry {
	now := time.Now()
	out := make([]ServerEntry, 0, len(catalog.Servers))
	for _, m := range catalog.Servers {
		e := ServerEntry{
			Name: m.Name, DisplayName: m.DisplayName, Description: m.Description, TransportType: m.Transport,
			Capabilities: catalog.CapabilitiesOf(m.Name), ConfigSource: "environment",
		}
		p := d.src.Monitor.Probe(m.Name)
		if p == nil {
			e.Status = health.StatusDisconnected
			msg := "not monitored: BMCIS_MCP_HEALTH_URL is off"
			e.Error = &msg
			out = append(out, e)
			continue
		}
		st := p.State()
		e.Status = st.Status
		if st.Err != "" {
			msg := st.Err
			e.Error = &msg
		}
		if !st.Checked.IsZero() {
			c := httpjson.Time(st.Checked)
			e.LastChecked = &c
		}
		if st.Status == health.StatusConnected {
			started := st.ConnectedSince
			ver := st.Version
			name := st.Name
			if startTime, scraped, ok := d.src.Stats.ServerInfo(m.Name); ok {
				if startTime > 0 {
					sec, frac := math.Modf(startTime)
					started = time.Unix(int64(sec), int64(frac*1e9))
				}
				if scraped != "" {
					ver = scraped
				}
			}
			if ver == "" {
				ver = "unknown"
			}
			if name == "" {
				name = "bmcis-" + m.Name
			}
			if !started.IsZero() {
				ls := httpjson.Time(started)
				e.LastStarted = &ls
				e.Uptime = math.Max(0, math.Floor(now.Sub(started).Seconds()))
			}
			e.ServerInfo = &ServerInfo{Name: name, Version: ver}
		}
		out = append(out, e)
	}
	return out
}

func (d *Dashboard) health() HealthResponse {
	servers := d.servers()
	status := "ok"
	for _, s := range servers {
		if s.TransportType == "grpc" && s.Status != health.StatusConnected {
			status = "error"
		}
	}
	state := StateReady
	switch {
	case d.src.Stopped():
		state, status = StateStopped, "error"
	case !d.src.Monitor.Ready():
		state = StateStarting
	}
	return HealthResponse{
		Status: status, State: state, ServerID: d.src.ServerID, Version: version.Version,
		ActiveClients: d.src.ActiveClients(), Timestamp: httpjson.Time(time.Now()), Servers: servers,
	}
}

func (d *Dashboard) apiHealth(w http.ResponseWriter, _ *http.Request) {
	httpjson.Write(w, http.StatusOK, d.health())
}

func (d *Dashboard) apiServers(w http.ResponseWriter, _ *http.Request) {
	httpjson.Write(w, http.StatusOK, map[string]any{"servers": d.servers()})
}

// ToolSummary is one tool in /api/tools.
type ToolSummary struct {
	Server            string   `json:"server"`
	ServerDisplayName string   `json:"serverDisplayName"`
	Name              string   `json:"name"`
	Description       string   `json:"description"`
	Enabled           bool     `json:"enabled"`
	Categories        []string `json:"categories"`
}

// toolSummaries lists the MCP tools. A tool is enabled when it can answer
// now: its service is connected, and so is the adapter when it is monitored.
func (d *Dashboard) toolSummaries() []ToolSummary {
	connected := func(name string) bool {
		p := d.src.Monitor.Probe(name)
		return p != nil && p.State().Status == health.StatusConnected
	}
	adapterOK := d.src.Monitor.Probe(backends.MCPAdapter) == nil || connected(backends.MCPAdapter)
	meta := catalog.ServerNamed(backends.MCPAdapter)
	out := make([]ToolSummary, 0, len(catalog.Tools()))
	for _, t := range catalog.Tools() {
		out = append(out, ToolSummary{
			Server: backends.MCPAdapter, ServerDisplayName: meta.DisplayName, Name: t.Name, Description: t.Description,
			Enabled: adapterOK && connected(t.Backend()), Categories: []string{t.Backend()},
		})
	}
	return out
}

func (d *Dashboard) apiTools(w http.ResponseWriter, _ *http.Request) {
	httpjson.Write(w, http.StatusOK, map[string]any{"tools": d.toolSummaries()})
}

func (d *Dashboard) apiConfig(w http.ResponseWriter, _ *http.Request) {
	httpjson.Write(w, http.StatusOK, map[string]any{"config": d.src.Config()})
}

func (d *Dashboard) apiStats(w http.ResponseWriter, r *http.Request) {
	httpjson.Write(w, http.StatusOK, d.src.Stats.Stats(r.Context()))
}

// Health returns what /api/health shows.
func (d *Dashboard) Health() HealthResponse { return d.health() }

// Tools returns what /api/tools shows.
func (d *Dashboard) Tools() []ToolSummary { return d.toolSummaries() }
