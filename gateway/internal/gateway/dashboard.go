package gateway

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc/codes"

	"github.com/bmcis/knowledge/gen/openapi"
	"github.com/bmcis/knowledge/platform/version"
)

//go:embed web
var webFS embed.FS

// contentSecurityPolicy lets the dashboard load only its own files and call
// only this origin: no inline script, no CDN.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// routes assembles the whole HTTP surface.
func (g *Gateway) routes() http.Handler {
	mux := http.NewServeMux()
	// rt is the route-table row of a local route that stands for an RPC
	// (the upload): with it the shared error handling treats the route as
	// the table says (admin codes, denial counts, the service's name).
	handle := func(method, path string, access Access, op string, rt *Route, h http.HandlerFunc) {
		route := method + " " + path
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			if rec := recorderFrom(r.Context()); rec != nil {
				rec.route = route
				rec.rt = rt
			}
			if r.Method != method && !(method == http.MethodGet && r.Method == http.MethodHead) {
				w.Header().Set("Allow", method)
				g.handleError(r.Context(), g.rest, nil, w, r, &runtime.HTTPStatusError{HTTPStatus: http.StatusMethodNotAllowed,
					Err: newError(codes.Unimplemented, "METHOD_NOT_ALLOWED", r.Method+" is not allowed on "+r.URL.Path, nil).Err()})
				return
			}
			r2, err := g.authorize(w, r, access, op, "", "")
			if err != nil {
				g.handleError(r.Context(), g.rest, nil, w, r, err)
				return
			}
			h(w, r2)
		})
	}
	local := func(method, path string, access Access, op string, h http.HandlerFunc) {
		handle(method, path, access, op, nil, h)
	}
	// localRPC serves a route of the table with the gateway's own code.
	localRPC := func(rt Route, h http.HandlerFunc) {
		handle(rt.Method, rt.Path, rt.Access, rt.Operation(), &rt, h)
	}
	local("GET", "/healthz", Public, "", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	local("GET", "/api/health", Public, "", g.apiHealth)
	local("GET", "/api/servers", Public, "", g.apiServers)
	local("GET", "/api/tools", Public, "", g.apiTools)
	local("GET", "/api/config", APIKey, "rest.dashboard.config", g.apiConfig)
	local("GET", "/api/stats", APIKey, "rest.dashboard.stats", g.apiStats)
	if rt, ok := routeFor(http.MethodPost, UploadPath); ok {
		localRPC(rt, g.upload)
	}
	local("GET", "/openapi.json", Public, "", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-cache")
		_, _ = w.Write(g.openapi)
	})

	web, _ := fs.Sub(webFS, "web")
	index, _ := fs.ReadFile(web, "index.html")
	local("GET", "/{$}", Public, "", func(w http.ResponseWriter, _ *http.Request) {
		h := w.Header()
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("Cache-Control", "no-cache")
		_, _ = w.Write(index)
	})
	assets := http.StripPrefix("/assets/", http.FileServerFS(web))
	local("GET", "/assets/", Public, "", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/assets/" || strings.HasSuffix(r.URL.Path, "/") || strings.HasSuffix(r.URL.Path, "index.html") {
			g.notFound(w, r)
			return
		}
		w.Header().Set("Cache-Control", "no-cache")
		assets.ServeHTTP(w, r)
	})

	mux.Handle("/v1/", g.rest)
	mux.HandleFunc("/", g.notFound)
	return g.outer(g.cors(g.security(mux)))
}

func (g *Gateway) notFound(w http.ResponseWriter, r *http.Request) {
	g.handleError(r.Context(), g.rest, nil, w, r, newError(codes.NotFound, "ROUTE_NOT_FOUND", "no route for "+r.Method+" "+r.URL.Path, nil).Err())
}

// --- /api/health, /api/servers, /api/tools ---

// ServerInfo names a server's software.
type ServerInfo struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// ServerEntry is one server in /api/health and /api/servers.
type ServerEntry struct {
	Name             string       `json:"name"`
	DisplayName      string       `json:"displayName"`
	Description      string       `json:"description"`
	TransportType    string       `json:"transportType"`
	Status           string       `json:"status"`
	Error            *string      `json:"error"`
	Capabilities     Capabilities `json:"capabilities"`
	Uptime           float64      `json:"uptime"`
	LastStarted      *string      `json:"lastStarted"`
	LastChecked      *string      `json:"lastChecked"`
	AuthorizationURL *string      `json:"authorizationUrl"`
	ServerInfo       *ServerInfo  `json:"serverInfo"`
	ConfigSource     string       `json:"config_source"`
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

func (g *Gateway) servers() []ServerEntry {
	now := time.Now()
	latest := g.collector.latest()
	out := make([]ServerEntry, 0, len(serverMetas))
	for _, m := range serverMetas {
		e := ServerEntry{
			Name: m.name, DisplayName: m.displayName, Description: m.description, TransportType: m.transport,
			Capabilities: capabilitiesOf(m.name), ConfigSource: "environment",
		}
		p := g.monitor.probe(m.name)
		if p == nil {
			e.Status = StatusDisconnected
			msg := "not monitored: BMCIS_MCP_HEALTH_URL is off"
			e.Error = &msg
			out = append(out, e)
			continue
		}
		st := p.state()
		e.Status = st.status
		if st.err != "" {
			msg := st.err
			e.Error = &msg
		}
		if !st.checked.IsZero() {
			c := isoTime(st.checked)
			e.LastChecked = &c
		}
		if st.status == StatusConnected {
			started := st.connectedSince
			ver := st.version
			name := st.name
			if latest != nil {
				if s := latest.targets[m.name]; s != nil && s.ok {
					if s.startTime > 0 {
						sec, frac := math.Modf(s.startTime)
						started = time.Unix(int64(sec), int64(frac*1e9))
					}
					if s.version != "" {
						ver = s.version
					}
				}
			}
			if ver == "" {
				ver = "unknown"
			}
			if name == "" {
				name = "bmcis-" + m.name
			}
			if !started.IsZero() {
				ls := isoTime(started)
				e.LastStarted = &ls
				e.Uptime = math.Max(0, math.Floor(now.Sub(started).Seconds()))
			}
			e.ServerInfo = &ServerInfo{Name: name, Version: ver}
		}
		out = append(out, e)
	}
	return out
}

func (g *Gateway) health() HealthResponse {
	servers := g.servers()
	status := "ok"
	for _, s := range servers {
		if s.TransportType == "grpc" && s.Status != StatusConnected {
			status = "error"
		}
	}
	state := StateReady
	switch {
	case g.stopped.Load():
		state, status = StateStopped, "error"
	case !g.monitor.isReady():
		state = StateStarting
	}
	return HealthResponse{
		Status: status, State: state, ServerID: g.cfg.ServerID, Version: version.Version,
		ActiveClients: g.inflight.Load(), Timestamp: isoTime(time.Now()), Servers: servers,
	}
}

func (g *Gateway) apiHealth(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, g.health())
}

func (g *Gateway) apiServers(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"servers": g.servers()})
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
func (g *Gateway) toolSummaries() []ToolSummary {
	connected := func(name string) bool {
		p := g.monitor.probe(name)
		return p != nil && p.state().status == StatusConnected
	}
	adapterOK := g.monitor.probe(MCPAdapter) == nil || connected(MCPAdapter)
	meta := metaOf(MCPAdapter)
	out := make([]ToolSummary, 0, len(tools))
	for _, t := range tools {
		out = append(out, ToolSummary{
			Server: MCPAdapter, ServerDisplayName: meta.displayName, Name: t.Name, Description: t.Description,
			Enabled: adapterOK && connected(t.backend), Categories: []string{t.backend},
		})
	}
	return out
}

func (g *Gateway) apiTools(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"tools": g.toolSummaries()})
}

func (g *Gateway) apiConfig(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"config": g.cfg.Effective()})
}

func (g *Gateway) apiStats(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, g.collector.buildStats(g.collector.recent(r.Context())))
}

// --- /openapi.json ---

// openAPIDocument is the generated OpenAPI v2 document with what the
// generator cannot know: title and version, the credential schemes, which
// routes need which, and the gateway's error body.
func openAPIDocument() ([]byte, error) {
	var doc map[string]any
	if err := json.Unmarshal(openapi.JSON, &doc); err != nil {
		return nil, fmt.Errorf("embedded OpenAPI document: %w", err)
	}
	doc["info"] = map[string]any{
		"title":       "BMCIS Knowledge REST API",
		"version":     version.Version,
		"description": "REST transcoding of the search, vendorgraph and auth gRPC services. Data routes take an API key (X-API-Key or Authorization: Bearer); key administration and document deletion take the admin token (X-Admin-Token). Errors are {code, message, details}.",
	}
	doc["securityDefinitions"] = map[string]any{
		"ApiKey":     map[string]any{"type": "apiKey", "in": "header", "name": HeaderAPIKey},
		"Bearer":     map[string]any{"type": "apiKey", "in": "header", "name": "Authorization", "description": "Bearer <API key>"},
		"AdminToken": map[string]any{"type": "apiKey", "in": "header", "name": HeaderAdminToken},
	}
	doc["security"] = []any{map[string]any{"ApiKey": []any{}}, map[string]any{"Bearer": []any{}}}
	defs, _ := doc["definitions"].(map[string]any)
	if defs == nil {
		defs = map[string]any{}
		doc["definitions"] = defs
	}
	defs["gatewayError"] = map[string]any{
		"type": "object",
		"properties": map[string]any{
			"code":    map[string]any{"type": "string", "description": "Stable upper-case code: AUTH_REQUIRED, RATE_LIMIT, NOT_FOUND, ..."},
			"message": map[string]any{"type": "string"},
			"details": map[string]any{"type": "array", "items": map[string]any{"$ref": "#/definitions/protobufAny"}},
		},
		"required": []any{"code", "message", "details"},
	}
	paths, _ := doc["paths"].(map[string]any)
	if paths == nil {
		paths = map[string]any{}
		doc["paths"] = paths
	}
	addUploadOperation(paths, defs)
	for path, v := range paths {
		ops, _ := v.(map[string]any)
		for method, o := range ops {
			op, _ := o.(map[string]any)
			if op == nil {
				continue
			}
			if rt, ok := routeIndex[routeKey(strings.ToUpper(method), path)]; ok && rt.Access == Admin {
				op["security"] = []any{map[string]any{"AdminToken": []any{}}}
			}
			if resps, _ := op["responses"].(map[string]any); resps != nil {
				resps["default"] = map[string]any{
					"description": "An error: {code, message, details}; Retry-After on 429 and 503.",
					"schema":      map[string]any{"$ref": "#/definitions/gatewayError"},
				}
			}
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Health returns what /api/health shows.
func (g *Gateway) Health() HealthResponse { return g.health() }

// Stats returns what /api/stats shows, scraping first when the last scrape is stale.
func (g *Gateway) Stats(ctx context.Context) StatsResponse {
	return g.collector.buildStats(g.collector.recent(ctx))
}

// Tools returns what /api/tools shows.
func (g *Gateway) Tools() []ToolSummary { return g.toolSummaries() }

// addUploadOperation documents the upload route, which the gateway serves
// itself (a client stream has no transcoding).
func addUploadOperation(paths, defs map[string]any) {
	num := func(desc string) map[string]any {
		return map[string]any{"type": "integer", "format": "int32", "description": desc}
	}
	defs["v1IngestFailure"] = map[string]any{"type": "object", "properties": map[string]any{
		"externalId": map[string]any{"type": "string"},
		"sourceFile": map[string]any{"type": "string"},
		"reason":     map[string]any{"type": "string", "description": "Why the file was not ingested (unknown format, corrupt, too large, ...)."},
	}}
	defs["v1IngestDocumentsResponse"] = map[string]any{"type": "object", "properties": map[string]any{
		"documentsReceived":  num("Files received."),
		"documentsWritten":   num("Files written (new or changed)."),
		"documentsUnchanged": num("Files whose content had not changed."),
		"documentsFailed":    num("Files rejected; see failures."),
		"documentsDeleted":   num("Always 0 for an upload: it deletes nothing."),
		"chunksWritten":      num("Chunks written."),
		"failures":           map[string]any{"type": "array", "items": map[string]any{"$ref": "#/definitions/v1IngestFailure"}},
		"seconds":            map[string]any{"type": "number", "format": "double"},
	}}
	paths[UploadPath] = map[string]any{"post": map[string]any{
		"operationId": "SearchService_UploadFiles",
		"summary":     "Upload one file, or a zip of files, into a named source (ingest credential in X-Admin-Token).",
		"description": "The body is the file's bytes; ?file= names it and its extension picks the format. A .zip is unpacked: " +
			"entries with absolute paths, '..', backslashes or links refuse the whole archive, hidden files are skipped, " +
			"at most 10000 entries, each at most BMCIS_GATEWAY_MAX_UPLOAD_BYTES, all together at most four times it. " +
			"Files become documents NAME:path of the source; nothing is deleted. A file that cannot be read is listed in failures and the others go in (200); " +
			"when no file goes in, the answer is 400 UPLOAD_REJECTED with this summary, failures included, in its details. " +
			"The credential is checked before the body is read: a wrong one is refused at once (401/403 ADMIN_TOKEN_INVALID).",
		"tags":     []any{"SearchService"},
		"consumes": []any{"application/octet-stream", "application/zip"},
		"parameters": []any{
			map[string]any{"name": "name", "in": "path", "required": true, "type": "string", "description": "Source name: 1..64 of a-z 0-9 . _ -"},
			map[string]any{"name": "file", "in": "query", "required": true, "type": "string", "description": "File name, e.g. handbook.pdf or docs.zip"},
			map[string]any{"name": "body", "in": "body", "required": true, "schema": map[string]any{"type": "string", "format": "binary"}},
		},
		"responses": map[string]any{
			"200": map[string]any{
				"description": "What went in: at least one file written or unchanged; the others in failures.",
				"schema":      map[string]any{"$ref": "#/definitions/v1IngestDocumentsResponse"},
			},
			"400": map[string]any{
				"description": "BAD_UPLOAD, BAD_ZIP, or UPLOAD_REJECTED when no file went in (details: ErrorInfo, then the v1IngestDocumentsResponse with the failures).",
				"schema":      map[string]any{"$ref": "#/definitions/gatewayError"},
			},
		},
	}}
}
