// Operator dashboard. Plain JavaScript, no build step, no third-party code.
// Everything it shows comes from /api/health, /api/tools, /api/stats,
// GET /v1/sources, POST /v1/search and GET /v1/vendors/{name} on this origin.
// Text is always inserted as text, never HTML.
"use strict";

(function () {
  const KEY_STORE = "bmcis.apiKey";
  const POLL_MS = 5000;
  const $ = (id) => document.getElementById(id);

  function apiKey() {
    try { return sessionStorage.getItem(KEY_STORE) || ""; } catch (e) { return ""; }
  }
  function setApiKey(k) {
    try {
      if (k) sessionStorage.setItem(KEY_STORE, k); else sessionStorage.removeItem(KEY_STORE);
    } catch (e) { /* storage disabled: the key lives until reload */ }
    memoryKey = k;
  }
  let memoryKey = "";
  function currentKey() { return apiKey() || memoryKey; }

  // el builds an element: el("td", {class: "num"}, "text", child, ...)
  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null) continue;
      if (k === "class") e.className = v; else e.setAttribute(k, v);
    }
    for (const c of children) {
      if (c === undefined || c === null) continue;
      e.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return e;
  }
  function fill(tbody, rows) { tbody.replaceChildren(...rows); }
  function fmtNum(n) { return n === null || n === undefined ? "–" : Number(n).toLocaleString("en-US"); }
  function fmtMs(n) { return n === null || n === undefined ? "–" : Number(n).toFixed(n < 10 ? 2 : 1); }
  function fmtScore(n) { return n === null || n === undefined ? "–" : Number(n).toFixed(3); }
  function fmtUptime(s) {
    if (!s) return "–";
    const d = Math.floor(s / 86400), h = Math.floor((s % 86400) / 3600), m = Math.floor((s % 3600) / 60);
    if (d) return d + "d " + h + "h";
    if (h) return h + "h " + m + "m";
    if (m) return m + "m " + Math.floor(s % 60) + "s";
    return Math.floor(s) + "s";
  }
  function fmtTime(iso) { return iso ? new Date(iso).toLocaleTimeString() : "–"; }

  // call fetches JSON; errors come back as {code, message, details}.
  async function call(method, path, body, needsKey) {
    const headers = { "Accept": "application/json" };
    if (body !== undefined) headers["Content-Type"] = "application/json";
    const key = currentKey();
    if (needsKey && key) headers["X-API-Key"] = key;
    const resp = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), cache: "no-store" });
    let data = null;
    try { data = await resp.json(); } catch (e) { data = null; }
    const requestId = resp.headers.get("X-Request-Id") || "";
    if (!resp.ok) {
      const err = new Error((data && data.message) || resp.statusText);
      err.code = (data && data.code) || String(resp.status);
      err.status = resp.status;
      err.requestId = requestId;
      err.retryAfter = resp.headers.get("Retry-After");
      throw err;
    }
    return { data, requestId };
  }
  function describe(err) {
    let s = err.code + ": " + err.message;
    if (err.retryAfter) s += " (retry after " + err.retryAfter + " s)";
    if (err.requestId) s += " · request " + err.requestId;
    return s;
  }

  // --- services ---
  function renderHealth(h) {
    const pill = $("overall-status");
    pill.textContent = h.status;
    pill.className = "pill pill-" + (h.status === "ok" ? "ok" : "error");
    $("overall-state").textContent = h.state;
    $("overall-time").textContent = "as of " + fmtTime(h.timestamp);
    const cards = h.servers.map((s) => {
      const dl = el("dl", {},
        el("dt", {}, "transport"), el("dd", {}, s.transportType),
        el("dt", {}, "uptime"), el("dd", {}, fmtUptime(s.uptime)),
        el("dt", {}, "started"), el("dd", {}, s.lastStarted ? new Date(s.lastStarted).toLocaleString() : "–"),
        el("dt", {}, "version"), el("dd", {}, s.serverInfo ? s.serverInfo.name + " " + s.serverInfo.version : "–"),
        el("dt", {}, "tools"), el("dd", {}, s.capabilities.tools.map((t) => t.name).join(", ") || "–"),
        el("dt", {}, "resources"), el("dd", {}, s.capabilities.resourceTemplates.map((t) => t.uriTemplate).join(", ") || "–"));
      return el("div", { class: "card " + s.status, "data-server": s.name },
        el("h4", {}, s.displayName, el("span", { class: "pill status pill-" + s.status }, s.status)),
        el("div", { class: "muted" }, s.description),
        dl,
        s.error ? el("div", { class: "err" }, s.error) : null);
    });
    $("servers").replaceChildren(...cards);
  }
  async function loadHealth() {
    try {
      const { data } = await call("GET", "/api/health");
      renderHealth(data);
    } catch (err) {
      const pill = $("overall-status");
      pill.textContent = "unreachable";
      pill.className = "pill pill-error";
      $("overall-state").textContent = describe(err);
    }
  }

  // --- tools ---
  async function loadTools() {
    try {
      const { data } = await call("GET", "/api/tools");
      fill($("tools-table").tBodies[0], data.tools.map((t) => el("tr", { "data-tool": t.name },
        el("td", {}, el("code", {}, t.name)),
        el("td", {}, t.serverDisplayName),
        el("td", { class: t.enabled ? "yes" : "no" }, t.enabled ? "yes" : "no"),
        el("td", {}, t.categories.join(", ")),
        el("td", {}, t.description))));
    } catch (err) {
      fill($("tools-table").tBodies[0], [el("tr", {}, el("td", { colspan: 5, class: "error-msg" }, describe(err)))]);
    }
  }

  // --- stats ---
  function renderChart(history) {
    const box = $("latency-chart");
    const W = 600, H = 140, L = 40, R = 8, T = 8, B = 18;
    const ns = "http://www.w3.org/2000/svg";
    const svg = document.createElementNS(ns, "svg");
    svg.setAttribute("viewBox", "0 0 " + W + " " + H);
    svg.setAttribute("preserveAspectRatio", "none");
    svg.setAttribute("role", "img");
    svg.setAttribute("aria-label", "RPC latency p50 and p95");
    const pts = history.filter((p) => p.p50Ms !== null || p.p95Ms !== null);
    const maxY = Math.max(1, ...pts.map((p) => p.p95Ms || p.p50Ms || 0)) * 1.1;
    for (let i = 0; i <= 4; i++) {
      const y = T + (H - T - B) * i / 4;
      const line = document.createElementNS(ns, "line");
      line.setAttribute("x1", L); line.setAttribute("x2", W - R);
      line.setAttribute("y1", y); line.setAttribute("y2", y);
      line.setAttribute("class", "grid");
      svg.append(line);
      const label = document.createElementNS(ns, "text");
      label.setAttribute("x", 2); label.setAttribute("y", y + 3);
      label.textContent = (maxY * (1 - i / 4)).toFixed(maxY < 10 ? 1 : 0);
      svg.append(label);
    }
    const n = history.length;
    const x = (i) => L + (n <= 1 ? 0 : (W - L - R) * i / (n - 1));
    const y = (v) => T + (H - T - B) * (1 - v / maxY);
    for (const [field, cls] of [["p50Ms", "p50"], ["p95Ms", "p95"]]) {
      const coords = [];
      history.forEach((p, i) => { if (p[field] !== null) coords.push(x(i).toFixed(1) + "," + y(p[field]).toFixed(1)); });
      if (!coords.length) continue;
      const pl = document.createElementNS(ns, "polyline");
      pl.setAttribute("points", coords.join(" "));
      pl.setAttribute("class", cls);
      svg.append(pl);
      for (const c of coords) {
        const [cx, cy] = c.split(",");
        const dot = document.createElementNS(ns, "circle");
        dot.setAttribute("cx", cx); dot.setAttribute("cy", cy); dot.setAttribute("r", 2.5);
        dot.setAttribute("class", "dot " + cls);
        svg.append(dot);
      }
    }
    if (!pts.length) {
      const t = document.createElementNS(ns, "text");
      t.setAttribute("x", W / 2 - 60); t.setAttribute("y", H / 2);
      t.textContent = "no calls in the window yet";
      svg.append(t);
    }
    box.replaceChildren(svg);
  }
  function renderStats(s) {
    $("stats-status").textContent = "";
    $("stats-updated").textContent = "· " + fmtTime(s.timestamp);
    const t = s.totals;
    const box = (v, label) => el("div", {}, el("b", {}, v), el("span", {}, label));
    $("totals").replaceChildren(
      box(fmtNum(t.requests), "RPC requests"),
      box(fmtNum(t.errors), "RPC errors"),
      box(fmtNum(t.restRequests), "REST requests"),
      box(fmtNum(t.authDenials), "auth denials"),
      box(fmtNum(t.rateLimitDenials), "rate-limit denials"));
    renderChart(s.history);
    const num = (v) => el("td", { class: "num" }, v);
    fill($("rpc-table").tBodies[0], s.rpcs.map((r) => el("tr", {},
      el("td", {}, r.service), el("td", {}, r.rpc), num(fmtNum(r.requests)), num(fmtNum(r.errors)),
      num(fmtMs(r.p50Ms)), num(fmtMs(r.p95Ms)), num(fmtMs(r.recentP50Ms)), num(fmtMs(r.recentP95Ms)))));
    fill($("tool-stats-table").tBodies[0], s.tools.map((r) => el("tr", {},
      el("td", {}, el("code", {}, r.name)), el("td", {}, r.source === "rpc" ? r.service + "." + r.rpc : r.source),
      num(fmtNum(r.requests)), num(fmtNum(r.errors)), num(fmtMs(r.p50Ms)), num(fmtMs(r.p95Ms)))));
    const caches = s.cache.map((c) => el("tr", {},
      el("td", {}, c.service), el("td", {}, c.cache), num(fmtNum(c.hits)), num(fmtNum(c.misses)),
      num(c.hitRate === null ? "–" : (100 * c.hitRate).toFixed(1) + " %")));
    fill($("cache-table").tBodies[0], caches.length ? caches : [el("tr", {}, el("td", { colspan: 5, class: "muted" }, "no cache metrics exported yet"))]);
  }
  // The index and its semantic model: how old, how much of the corpus's
  // vocabulary it knows, and whether a background retrain is due.
  function renderIndex(st) {
    const box = (v, label) => el("div", {}, el("b", {}, v), el("span", {}, label));
    const age = st.modelTrainedAt ? fmtAge(Date.now() - Date.parse(st.modelTrainedAt)) : "–";
    const cov = st.modelTermCoverage === undefined ? "–" : (100 * st.modelTermCoverage).toFixed(0) + " %";
    $("index-status").replaceChildren(
      box(fmtNum(Number(st.documents || 0)), "documents"),
      box(fmtNum(Number(st.chunks || 0)), "chunks"),
      box(age, "model age"),
      box(cov, "model term coverage"),
      el("div", { "data-retrain": st.retrainPending ? "pending" : "none", title: st.retrainReason || "" },
        el("b", {}, st.retrainPending ? "pending" : "no"), el("span", {}, "retrain")));
  }
  function fmtAge(ms) {
    const s = Math.max(0, Math.round(ms / 1000));
    if (s < 120) return s + " s";
    if (s < 7200) return Math.round(s / 60) + " min";
    if (s < 172800) return Math.round(s / 3600) + " h";
    return Math.round(s / 86400) + " d";
  }
  async function loadIndex() {
    try {
      const { data } = await call("GET", "/v1/index/status", undefined, true);
      renderIndex(data);
    } catch (err) {
      $("index-status").replaceChildren(el("p", { class: "error-msg" }, describe(err)));
    }
  }
  async function loadStats() {
    if (!currentKey()) {
      $("stats-status").textContent = "Stats need an API key.";
      return;
    }
    try {
      const { data } = await call("GET", "/api/stats", undefined, true);
      renderStats(data);
      loadIndex();
    } catch (err) {
      $("stats-status").textContent = describe(err);
      $("stats-status").className = "error-msg";
      return;
    }
    $("stats-status").className = "muted";
  }

  // --- sources (folders synced with bmcisctl sync, uploads, and the git,
  // web and folder sources the search service syncs itself) ---
  function fmtDateTime(iso) { return iso ? new Date(iso).toLocaleString() : "never"; }
  function fmtEvery(seconds) {
    const s = Number(seconds || 0);
    if (!s) return "–";
    if (s % 86400 === 0) return s / 86400 + " d";
    if (s % 3600 === 0) return s / 3600 + " h";
    return Math.round(s / 60) + " min";
  }
  // The last run of a scheduled source: the error text is an operator's
  // (bmcisctl sources), the read credential sees that it failed.
  function fmtRunStatus(s) {
    if (s.running) return "running";
    if (s.lastStatus === "failed") return "failed ×" + (s.consecutiveFailures || 1);
    return s.lastStatus || "–";
  }
  async function loadSources() {
    const status = $("sources-status");
    const table = $("sources-table");
    if (!currentKey()) {
      status.className = "muted";
      status.textContent = "Sources need an API key.";
      table.classList.add("hidden");
      return;
    }
    try {
      const { data } = await call("GET", "/v1/sources", undefined, true);
      const num = (v) => el("td", { class: "num" }, v);
      const rows = (data.sources || []).map((s) => el("tr", { "data-source": s.name },
        el("td", {}, el("code", {}, s.name)), num(fmtNum(s.documentCount)), num(fmtNum(s.chunkCount)),
        el("td", {}, fmtDateTime(s.lastSyncAt)), num(fmtNum(s.lastWritten)), num(fmtNum(s.lastUnchanged)),
        num(fmtNum(s.lastFailed)), num(fmtNum(s.lastDeleted)), el("td", {}, s.kind || "folder"),
        el("td", {}, fmtEvery(s.everySeconds)),
        el("td", { class: s.lastStatus === "failed" ? "error-msg" : "" }, fmtRunStatus(s))));
      fill(table.tBodies[0], rows);
      table.classList.toggle("hidden", rows.length === 0);
      status.className = "muted";
      status.textContent = rows.length ? rows.length + " source" + (rows.length === 1 ? "" : "s") :
        "No sources yet: bmcisctl sync NAME PATH mirrors a folder; bmcisctl sources add a repository or a site.";
    } catch (err) {
      table.classList.add("hidden");
      status.className = "error-msg";
      status.textContent = describe(err);
    }
  }

  // --- search console ---
  async function search(ev) {
    if (ev) ev.preventDefault();
    const q = $("q").value.trim();
    if (!q) return;
    const status = $("search-status");
    const table = $("search-results");
    status.className = "muted";
    status.textContent = "Searching…";
    const body = { query: q, mode: $("mode").value, limit: Number($("limit").value) };
    try {
      const { data, requestId } = await call("POST", "/v1/search", body, true);
      const rows = data.results.map((r) => {
        const c = r.chunk || {};
        const text = (c.chunkText || "").replace(/\s+/g, " ");
        return el("tr", { "data-chunk": c.chunkId },
          el("td", { class: "num" }, r.rank),
          el("td", { class: "num" }, c.chunkId),
          el("td", {}, el("div", {}, c.title || c.sourceFile || c.documentId || "–"),
            el("div", { class: "muted" }, c.contextHeader || c.sourceFile || "")),
          el("td", { class: "num score" }, fmtScore(r.hybridScore)),
          el("td", { class: "num" }, fmtScore(r.bm25Score)),
          el("td", { class: "num" }, fmtScore(r.similarityScore)),
          el("td", { class: "text" }, text.length > 220 ? text.slice(0, 220) + "…" : text));
      });
      fill(table.tBodies[0], rows);
      table.classList.toggle("hidden", rows.length === 0);
      status.textContent = rows.length + " of " + data.totalAvailable + " results · " +
        String(data.mode || "").replace("RETRIEVAL_MODE_", "").toLowerCase() + " · " +
        fmtMs(data.searchTimeMs) + " ms" + (data.cacheHit ? " · cached" : "") + " · request " + requestId;
    } catch (err) {
      fill(table.tBodies[0], []);
      table.classList.add("hidden");
      status.className = "error-msg";
      status.textContent = describe(err);
    }
    loadStats();
  }

  // --- API key ---
  // --- vendor graph ---
  // A vendor's neighbourhood as a picture: the vendor in the middle, its
  // entities on a ring grouped (and coloured) by type, relationships as
  // labelled lines; the documents that mention it beside. Plain SVG.
  const TYPE_COLOURS = ["#2456c9", "#1a7f37", "#b58100", "#8e44ad", "#c62828", "#00838f", "#6d4c41", "#5c6bc0"];
  const SVGNS = "http://www.w3.org/2000/svg";
  function svg(tag, attrs, text) {
    const e = document.createElementNS(SVGNS, tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function short(s, n) { return s.length > n ? s.slice(0, n - 1) + "…" : s; }
  function renderVendor(v) {
    const entities = v.entities || [];
    const types = [...new Set(entities.map((e) => e.entityType))].sort();
    const colour = (t) => TYPE_COLOURS[types.indexOf(t) % TYPE_COLOURS.length];
    const W = 760, H = 460, cx = W / 2, cy = H / 2, r = Math.min(W, H) / 2 - 60;
    // Entities by type, then by relevance (the reply's order), round the ring.
    const ordered = [...entities].sort((a, b) => types.indexOf(a.entityType) - types.indexOf(b.entityType));
    const pos = new Map([[v.vendorId, { x: cx, y: cy }]]);
    ordered.forEach((e, i) => {
      const a = (2 * Math.PI * i) / Math.max(ordered.length, 1) - Math.PI / 2;
      pos.set(e.entityId, { x: cx + r * Math.cos(a), y: cy + r * Math.sin(a) });
    });
    const root = svg("svg", { viewBox: "0 0 " + W + " " + H, role: "img", "aria-label": "Neighbourhood of " + v.vendorName });
    const edges = svg("g", { class: "edges" });
    for (const rel of v.relationships || []) {
      const a = pos.get(rel.sourceId), b = pos.get(rel.targetId);
      if (!a || !b) continue;
      const g = svg("g", { class: "edge", "data-type": rel.relationshipType });
      g.append(svg("line", { x1: a.x, y1: a.y, x2: b.x, y2: b.y }));
      g.append(svg("text", { class: "elabel", x: (a.x + b.x) / 2, y: (a.y + b.y) / 2 - 3, "text-anchor": "middle" }, rel.relationshipType));
      g.append(svg("title", {}, (rel.sourceName || rel.sourceId) + " " + rel.relationshipType + " " + (rel.targetName || rel.targetId)));
      edges.append(g);
    }
    root.append(edges);
    const nodes = svg("g", { class: "nodes" });
    for (const e of ordered) {
      const p = pos.get(e.entityId);
      const g = svg("g", { class: "node", "data-type": e.entityType, "data-id": e.entityId });
      g.append(svg("circle", { cx: p.x, cy: p.y, r: 9, fill: colour(e.entityType) }));
      const left = p.x < cx - 5;
      g.append(svg("text", { class: "nlabel", x: p.x + (left ? -13 : 13), y: p.y + 4, "text-anchor": left ? "end" : "start" }, short(e.name, 28)));
      g.append(svg("title", {}, e.name + " (" + e.entityType + ")"));
      nodes.append(g);
    }
    const vg = svg("g", { class: "node vendor", "data-id": v.vendorId });
    vg.append(svg("circle", { cx, cy, r: 16, fill: "#fff" }));
    vg.append(svg("text", { class: "nlabel", x: cx, y: cy + 32, "text-anchor": "middle" }, v.vendorName));
    nodes.append(vg);
    root.append(nodes);
    $("vendor-graph").replaceChildren(root);
    const swatch = (t) => { const i = el("i", {}); i.style.background = colour(t); return i; }; // CSSOM: the CSP allows no style attributes
    $("vendor-legend").replaceChildren(...types.map((t) => el("span", { "data-type": t }, swatch(t), t)),
      el("span", {}, (v.statistics ? fmtNum(v.statistics.entityCount) + " entities, " + fmtNum(v.statistics.relationshipCount) + " relationships in all" : "")));
    fill($("vendor-documents"), (v.evidenceDocuments || []).map((d) => el("li", { "data-document": d.documentId },
      el("b", {}, d.sourceFile), " · " + fmtNum(d.mentionCount) + " mentions in " + fmtNum(d.chunkCount) + " chunks")));
    fill($("vendor-evidence"), (v.evidence || []).map((c) => el("li", { "data-chunk": c.chunkId },
      el("b", {}, c.sourceFile), " · chunk " + c.chunkId + " · " + fmtNum(c.mentionCount) + " mentions",
      el("blockquote", {}, c.snippet))));
    if (!(v.evidence || []).length) fill($("vendor-evidence"), [el("li", { class: "muted" }, "No document mentions this vendor.")]);
    $("vendor-view").classList.remove("hidden");
  }
  async function showVendor(ev) {
    if (ev) ev.preventDefault();
    const name = $("vendor-name").value.trim();
    const status = $("vendor-status");
    if (!name) return;
    status.textContent = "Loading " + name + "…";
    status.className = "muted";
    try {
      const path = "/v1/vendors/" + encodeURIComponent(name) + "?maxEntities=24&maxRelationships=60&maxEvidence=5";
      const { data, requestId } = await call("GET", path, undefined, true);
      renderVendor(data);
      status.textContent = data.vendorName + " · " + (data.entities || []).length + " entities, " +
        (data.relationships || []).length + " relationships shown · " + fmtNum(data.evidenceChunkCount || 0) +
        " chunks mention it · request " + requestId;
    } catch (err) {
      $("vendor-view").classList.add("hidden");
      status.textContent = describe(err);
      status.className = "error-msg";
    }
  }

  function showKeyState() {
    $("key-state").textContent = currentKey() ? "key set for this tab" : "no key";
  }
  function init() {
    $("key-form").addEventListener("submit", (ev) => {
      ev.preventDefault();
      const k = $("api-key").value.trim();
      setApiKey(k);
      $("api-key").value = "";
      showKeyState();
      loadStats(); loadSources();
    });
    $("key-forget").addEventListener("click", () => { setApiKey(""); showKeyState(); loadStats(); loadSources(); });
    $("search-form").addEventListener("submit", search);
    $("vendor-form").addEventListener("submit", showVendor);
    showKeyState();
    loadHealth(); loadTools(); loadStats(); loadSources();
    setInterval(() => { loadHealth(); loadTools(); loadStats(); loadSources(); }, POLL_MS);
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init); else init();
})();
