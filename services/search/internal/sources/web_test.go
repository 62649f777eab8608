package sources

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// site is a small web site on loopback whose pages and sitemap a test
// changes between runs; it answers conditional GETs by ETag.
type site struct {
	mu       sync.Mutex
	pages    map[string]string // path -> HTML
	gone     map[string]bool   // path -> 410
	sitemap  []string          // paths
	robots   string
	extra    map[string]http.HandlerFunc
	full304s int // 304 answers
	srv      *httptest.Server
}

func newSite(t *testing.T) *site {
	s := &site{pages: map[string]string{}, gone: map[string]bool{}, extra: map[string]http.HandlerFunc{}}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *site) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if h, ok := s.extra[r.URL.Path]; ok {
		h(w, r)
		return
	}
	switch r.URL.Path {
	case "/robots.txt":
		if s.robots == "" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprint(w, s.robots)
		return
	case "/sitemap.xml":
		w.Header().Set("Content-Type", "application/xml")
		fmt.Fprint(w, `<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">`)
		for _, p := range s.sitemap {
			fmt.Fprintf(w, "<url><loc>%s%s</loc></url>", s.srv.URL, p)
		}
		fmt.Fprint(w, `</urlset>`)
		return
	}
	if s.gone[r.URL.Path] {
		http.Error(w, "gone", http.StatusGone)
		return
	}
	body, ok := s.pages[r.URL.Path]
	if !ok {
		http.NotFound(w, r)
		return
	}
	etag := fmt.Sprintf(`"%x"`, len(body)*31+int(body[len(body)-1]))
	if r.Header.Get("If-None-Match") == etag {
		s.full304s++
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.Header().Set("ETag", etag)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	fmt.Fprint(w, body)
}

func (s *site) set(f func(s *site)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s)
}

func page(title, body string, links ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "<html><head><title>%s</title></head><body><nav>menu</nav><main><h1>%s</h1><p>%s</p>", title, title, body)
	for _, l := range links {
		fmt.Fprintf(&b, `<a href="%s">%s</a>`, l, l)
	}
	b.WriteString("</main></body></html>")
	return b.String()
}

func fastEnv() Env {
	env := testEnv()
	env.Limits.RequestEvery = 0
	return env
}

func sortedIDs(ids []string) []string {
	out := append([]string(nil), ids...)
	sort.Strings(out)
	return out
}

// A sitemap run takes the listed pages, skips what robots.txt disallows,
// then costs a 304 per unchanged page; a page dropped from the sitemap
// falls out of the full listing, and one answering 410 is deleted.
func TestWebSitemapConditionalAndDeletions(t *testing.T) {
	s := newSite(t)
	s.set(func(s *site) {
		s.pages["/a"] = page("A", "alpha walrus")
		s.pages["/b"] = page("B", "bravo walrus")
		s.pages["/c"] = page("C", "charlie walrus")
		s.pages["/private/p"] = page("P", "secret")
		s.sitemap = []string{"/a", "/b", "/c", "/private/p", "/a"}
		s.robots = "User-agent: *\nDisallow: /private/\n"
	})
	env := fastEnv()
	settings := map[string]string{"url": s.srv.URL + "/sitemap.xml"}
	first := fetchOK(t, webKind, settings, nil, env)
	u := s.srv.URL
	require.True(t, first.Full)
	require.Equal(t, []string{u + "/a", u + "/b", u + "/c"}, upsertIDs(first))
	require.Len(t, first.Skipped, 1)
	require.Contains(t, first.Skipped[0].Reason, "robots.txt")
	require.Equal(t, "html", first.Upserts[0].Format)

	s.set(func(s *site) {
		s.pages["/a"] = page("A", "alpha walrus, edited")
		s.gone["/b"] = true
		s.sitemap = []string{"/a", "/b"} // c dropped
	})
	second := fetchOK(t, webKind, settings, first.Cursor, env)
	require.True(t, second.Full)
	require.Equal(t, []string{u + "/a"}, upsertIDs(second))
	require.Equal(t, []string{u + "/b"}, second.Deletes)
	require.Empty(t, second.Unchanged)

	third := fetchOK(t, webKind, settings, second.Cursor, env)
	require.Empty(t, third.Upserts)
	require.Equal(t, []string{u + "/a"}, third.Unchanged)
	s.set(func(s *site) { require.Equal(t, 1, s.full304s) })
}

// A crawl follows links within the prefix to the depth limit, and a 304
// page still leads to the pages it links (from the cursor).
func TestWebCrawlWithinPrefix(t *testing.T) {
	s := newSite(t)
	s.set(func(s *site) {
		s.pages["/docs/"] = page("Home", "start", "/docs/one", "/docs/two", "/blog/out", "mailto:x@example.com")
		s.pages["/docs/one"] = page("One", "first", "/docs/deep")
		s.pages["/docs/two"] = page("Two", "second", "/docs/#top")
		s.pages["/docs/deep"] = page("Deep", "deep", "/docs/deeper")
		s.pages["/docs/deeper"] = page("Deeper", "too deep")
		s.pages["/blog/out"] = page("Out", "outside")
	})
	env := fastEnv()
	env.Limits.MaxDepth = 2
	settings := map[string]string{"url": s.srv.URL + "/docs/"}
	u := s.srv.URL
	first := fetchOK(t, webKind, settings, nil, env)
	require.Equal(t, []string{u + "/docs/", u + "/docs/deep", u + "/docs/one", u + "/docs/two"}, upsertIDs(first))
	require.False(t, first.Full, "pages beyond the depth limit exist: nothing unreached may be deleted")

	env.Limits.MaxDepth = 3
	second := fetchOK(t, webKind, settings, first.Cursor, env)
	require.Equal(t, []string{u + "/docs/deeper"}, upsertIDs(second))
	require.Equal(t, []string{u + "/docs/", u + "/docs/deep", u + "/docs/one", u + "/docs/two"}, sortedIDs(second.Unchanged))
	require.True(t, second.Full)
}

// Bad input is a clear error on the run (so nothing is deleted): an
// unreachable start, a redirect loop, nested sitemap indexes, a sitemap
// listing too many entries, a gzip bomb; a huge page or a binary file is
// skipped with its reason.
func TestWebBadInput(t *testing.T) {
	s := newSite(t)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write([]byte(`<?xml version="1.0"?><urlset>`))
	_, _ = zw.Write(bytes.Repeat([]byte(" "), maxSitemapBytes+10))
	_ = zw.Close()
	s.set(func(s *site) {
		s.extra["/loop"] = func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/loop2", http.StatusFound) }
		s.extra["/loop2"] = func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/loop", http.StatusFound) }
		for i := 0; i < 5; i++ {
			s.extra[fmt.Sprintf("/index%d.xml", i)] = func(w http.ResponseWriter, r *http.Request) {
				fmt.Fprintf(w, `<sitemapindex><sitemap><loc>%s/index%d.xml</loc></sitemap></sitemapindex>`, s.srv.URL, i+1)
			}
		}
		s.extra["/many.xml"] = func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, `<urlset>`)
			for i := 0; i < 50; i++ {
				fmt.Fprintf(w, `<url><loc>%s/p%d</loc></url>`, s.srv.URL, i)
			}
			fmt.Fprint(w, `</urlset>`)
		}
		s.extra["/bomb.xml.gz"] = func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(gz.Bytes()) }
		s.extra["/binary"] = func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/octet-stream")
			_, _ = w.Write([]byte{0, 1, 2, 3})
		}
		s.pages["/huge"] = page("Huge", strings.Repeat("walrus ", 2000))
		s.pages["/ok"] = page("OK", "fine")
		s.sitemap = []string{"/ok", "/huge", "/binary"}
	})
	env := fastEnv()
	env.Limits.MaxFiles = 10
	env.Limits.MaxFileBytes = 4096
	run := func(raw string) error {
		t.Helper()
		st, err := webKind.Check(map[string]string{"url": raw}, env)
		require.NoError(t, err)
		_, err = webKind.Fetch(context.Background(), Request{Settings: st, Env: env})
		return err
	}
	err := run(s.srv.URL + "/loop")
	require.Equal(t, BadContent, CodeOf(err), "%v", err)
	require.Contains(t, err.Error(), "redirect")
	err = run(s.srv.URL + "/index0.xml")
	require.Equal(t, BadContent, CodeOf(err), "%v", err)
	require.Contains(t, err.Error(), "nested")
	err = run(s.srv.URL + "/many.xml")
	require.Equal(t, TooLarge, CodeOf(err), "%v", err)
	err = run(s.srv.URL + "/bomb.xml.gz")
	require.Equal(t, TooLarge, CodeOf(err), "%v", err)
	err = run(s.srv.URL + "/nothing-here")
	require.Equal(t, Unreachable, CodeOf(err), "%v", err)
	// An address that cannot answer (port 0 is never listened on).
	err = run("http://127.0.0.1:0/")
	require.Equal(t, Unreachable, CodeOf(err), "%v", err)

	st, err := webKind.Check(map[string]string{"url": s.srv.URL + "/sitemap.xml"}, env)
	require.NoError(t, err)
	cs, err := webKind.Fetch(context.Background(), Request{Settings: st, Env: env})
	require.NoError(t, err)
	require.Equal(t, []string{s.srv.URL + "/ok"}, upsertIDs(cs))
	reasons := map[string]string{}
	for _, sk := range cs.Skipped {
		reasons[strings.TrimPrefix(sk.ID, s.srv.URL)] = sk.Reason
	}
	require.Contains(t, reasons["/huge"], "too large")
	require.Contains(t, reasons["/binary"], "not a document format")
}

// Loopback, private and link-local targets are refused at dial time
// unless allowed, whatever the URL's host looks like: a name that resolves
// to one (here localhost, added while loopback was allowed), or a literal
// stored before Check refused literals.
func TestWebRefusesNonPublicAddresses(t *testing.T) {
	s := newSite(t)
	s.set(func(s *site) { s.pages["/"] = page("Home", "x") })
	env := fastEnv()
	env.AllowLoopback = false
	for _, raw := range []string{s.srv.URL + "/", "http://localhost:" + strings.Split(s.srv.URL, ":")[2] + "/"} {
		st, err := webKind.Check(map[string]string{"url": raw}, fastEnv())
		require.NoError(t, err)
		_, err = webKind.Fetch(context.Background(), Request{Settings: st, Env: env})
		require.Equal(t, Unreachable, CodeOf(err), "%v", err)
		require.Contains(t, err.Error(), "not public")
	}
	for ip, want := range map[string]bool{"10.1.2.3": false, "192.168.0.1": false, "169.254.169.254": false,
		"fd00::1": false, "fe80::1": false, "0.0.0.0": false, "8.8.8.8": true, "2001:4860:4860::8888": true} {
		require.Equal(t, want, addressAllowed(parseIP(t, ip), Env{}), ip)
	}
	require.True(t, addressAllowed(parseIP(t, "10.1.2.3"), Env{AllowPrivate: true}))
	_, err := webKind.Check(map[string]string{"url": "ftp://example.com/"}, env)
	require.Equal(t, BadSettings, CodeOf(err))
	st, err := webKind.Check(map[string]string{"url": "https://example.com/start", "prefix": "https://example.com"}, env)
	require.NoError(t, err)
	require.Equal(t, "https://example.com/", st["prefix"])
}

func parseIP(t *testing.T, s string) net.IP {
	ip := net.ParseIP(s)
	require.NotNil(t, ip, s)
	return ip
}

// Requests to one host wait for their slot: every request after the first
// to a host waits (at most) the interval; another host does not wait.
func TestWebRequestRatePerHost(t *testing.T) {
	var waits []time.Duration
	saved := waitFor
	waitFor = func(_ context.Context, d time.Duration) error { waits = append(waits, d); return nil }
	defer func() { waitFor = saved }()
	s := newSite(t)
	s.set(func(s *site) {
		s.pages["/docs/"] = page("Home", "start", "/docs/one", "/docs/two")
		s.pages["/docs/one"] = page("One", "first")
		s.pages["/docs/two"] = page("Two", "second")
	})
	env := fastEnv()
	env.Limits.RequestEvery = time.Hour
	cs := fetchOK(t, webKind, map[string]string{"url": s.srv.URL + "/docs/"}, nil, env)
	require.Len(t, cs.Upserts, 3)
	require.Len(t, waits, 3, "robots.txt goes first; each of the three pages waits its turn")
	for _, d := range waits {
		require.Positive(t, d)
		require.LessOrEqual(t, d, time.Hour)
	}
}

// A page robots.txt disallows keeps its stored version, so what only it
// links to was not reached either: a crawl through such a page is not a
// full listing, and deletes nothing it did not see.
func TestWebCrawlDisallowedPageIsNotFull(t *testing.T) {
	s := newSite(t)
	s.set(func(s *site) {
		s.pages["/docs/"] = page("Home", "start", "/docs/hub")
		s.pages["/docs/hub"] = page("Hub", "hub", "/docs/leaf")
		s.pages["/docs/leaf"] = page("Leaf", "leaf")
	})
	env := fastEnv()
	settings := map[string]string{"url": s.srv.URL + "/docs/"}
	first := fetchOK(t, webKind, settings, nil, env)
	require.True(t, first.Full)
	require.Len(t, first.Upserts, 3)

	s.set(func(s *site) { s.robots = "User-agent: *\nDisallow: /docs/hub\n" })
	second := fetchOK(t, webKind, settings, first.Cursor, env)
	require.Len(t, second.Skipped, 1)
	require.False(t, second.Full, "the leaf behind the disallowed hub was not reached: it must not look gone")
}

// Addresses that are not public beyond RFC 1918: shared address space
// (a cloud's metadata service answers at 100.100.100.200), "this network",
// and IPv6 forms that carry a private IPv4 address (NAT64, 6to4).
func TestWebAddressRuleEmbeddedAndSharedRanges(t *testing.T) {
	for ip, want := range map[string]bool{
		"100.100.100.200": false, "100.64.0.1": false, "0.1.2.3": false,
		"64:ff9b::a01:203": false, "64:ff9b::a9fe:a9fe": false, "2002:a01:203::1": false, "2002:7f00:1::1": false,
		"::ffff:169.254.169.254": false, "255.255.255.255": false,
		"64:ff9b::808:808": true, "2002:808:808::1": true, "100.128.0.1": true,
	} {
		require.Equal(t, want, addressAllowed(parseIP(t, ip), Env{}), ip)
	}
	require.True(t, addressAllowed(parseIP(t, "100.100.100.200"), Env{AllowPrivate: true}))
	require.True(t, addressAllowed(parseIP(t, "64:ff9b::7f00:1"), Env{AllowLoopback: true}))
	require.False(t, addressAllowed(parseIP(t, "64:ff9b::7f00:1"), Env{AllowPrivate: true}))
}

// A start page that stops being a document (a server answering its
// maintenance blob as application/octet-stream) leads nowhere: the crawl
// fails instead of listing nothing and deleting every page it had.
func TestWebCrawlStartNotADocumentFails(t *testing.T) {
	s := newSite(t)
	s.set(func(s *site) {
		s.pages["/docs/"] = page("Home", "start", "/docs/one")
		s.pages["/docs/one"] = page("One", "first")
	})
	env := fastEnv()
	settings := map[string]string{"url": s.srv.URL + "/docs/"}
	first := fetchOK(t, webKind, settings, nil, env)
	require.True(t, first.Full)
	require.Len(t, first.Upserts, 2)

	s.set(func(s *site) {
		s.extra["/docs/"] = func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/octet-stream")
			fmt.Fprint(w, "maintenance")
		}
	})
	st, err := webKind.Check(settings, env)
	require.NoError(t, err)
	_, err = webKind.Fetch(context.Background(), Request{Name: "t", Settings: st, Cursor: first.Cursor, Env: env})
	require.Equal(t, BadContent, CodeOf(err), "%v", err)
	require.Contains(t, err.Error(), "not a document format")
}

// A run leaves no connection behind: each run has its own client, so its
// idle keep-alive connections (and their goroutines) would otherwise stay
// open as long as the site lets them, one set per scheduled run.
func TestWebRunClosesItsConnections(t *testing.T) {
	s := &site{pages: map[string]string{}, gone: map[string]bool{}, extra: map[string]http.HandlerFunc{}}
	s.pages["/docs/"] = page("Home", "start", "/docs/one")
	s.pages["/docs/one"] = page("One", "first")
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	var mu sync.Mutex
	open := map[net.Conn]bool{}
	s.srv.Config.ConnState = func(c net.Conn, st http.ConnState) {
		mu.Lock()
		defer mu.Unlock()
		switch st {
		case http.StateNew:
			open[c] = true
		case http.StateClosed, http.StateHijacked:
			delete(open, c)
		}
	}
	s.srv.Start()
	t.Cleanup(s.srv.Close)
	cs := fetchOK(t, webKind, map[string]string{"url": s.srv.URL + "/docs/"}, nil, fastEnv())
	require.Len(t, cs.Upserts, 2)
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(open) == 0
	}, 10*time.Second, 10*time.Millisecond, "the run's connections are closed when it ends")
}

// Sitemaps count toward the run's byte limit like pages: an index of
// sitemaps each under the per-sitemap bound would otherwise download
// without limit (up to twice MaxFiles sitemaps of 50 MiB each).
func TestWebSitemapsCountTowardTheRunLimit(t *testing.T) {
	s := newSite(t)
	padding := strings.Repeat(" ", 64<<10)
	s.set(func(s *site) {
		s.extra["/index.xml"] = func(w http.ResponseWriter, _ *http.Request) {
			fmt.Fprint(w, `<sitemapindex>`)
			for i := range 8 {
				fmt.Fprintf(w, `<sitemap><loc>%s/part%d.xml</loc></sitemap>`, s.srv.URL, i)
			}
			fmt.Fprint(w, `</sitemapindex>`)
		}
		for i := range 8 {
			s.extra[fmt.Sprintf("/part%d.xml", i)] = func(w http.ResponseWriter, _ *http.Request) {
				fmt.Fprintf(w, `<urlset><url><loc>%s/p%d</loc></url>%s</urlset>`, s.srv.URL, i, padding)
			}
		}
	})
	env := fastEnv()
	env.Limits.MaxTotalBytes = 256 << 10 // four parts' worth
	st, err := webKind.Check(map[string]string{"url": s.srv.URL + "/index.xml"}, env)
	require.NoError(t, err)
	_, err = webKind.Fetch(context.Background(), Request{Settings: st, Env: env})
	require.Equal(t, TooLarge, CodeOf(err), "%v", err)
	require.Contains(t, err.Error(), "MAX_TOTAL_BYTES")
}

// The cursor keeps, per page, only the links a later run may follow: those
// within the prefix, each once (it is stored in the source's row after
// every run, so a page of off-site links would otherwise grow it).
func TestWebCursorKeepsOnlyFollowableLinks(t *testing.T) {
	s := newSite(t)
	s.set(func(s *site) {
		s.pages["/docs/"] = page("Home", "start", "/docs/one", "/docs/one", "/docs/one#part", "https://elsewhere.example/x", "/blog/y")
		s.pages["/docs/one"] = page("One", "first")
	})
	cs := fetchOK(t, webKind, map[string]string{"url": s.srv.URL + "/docs/"}, nil, fastEnv())
	var cur webCursor
	require.NoError(t, json.Unmarshal(cs.Cursor, &cur))
	require.Equal(t, []string{s.srv.URL + "/docs/one"}, cur.Pages[s.srv.URL+"/docs/"].Links)
}

// A page redirected outside the prefix (a sign-in page once a session
// expires) is not the page: it is left out with its stored version kept,
// and a start page redirected so fails the run, which would otherwise
// follow the sign-in page's links and delete every page it had.
func TestWebRedirectOutsideThePrefix(t *testing.T) {
	s := newSite(t)
	s.set(func(s *site) {
		s.pages["/docs/"] = page("Home", "start", "/docs/one")
		s.pages["/docs/one"] = page("One", "first")
		s.pages["/login"] = page("Sign in", "who are you")
	})
	env := fastEnv()
	settings := map[string]string{"url": s.srv.URL + "/docs/"}
	first := fetchOK(t, webKind, settings, nil, env)
	require.Len(t, first.Upserts, 2)

	toLogin := func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/login", http.StatusFound) }
	s.set(func(s *site) { s.extra["/docs/one"] = toLogin })
	second := fetchOK(t, webKind, settings, first.Cursor, env)
	require.Empty(t, upsertIDs(second), "the sign-in page is not stored as /docs/one")
	require.Len(t, second.Skipped, 1)
	require.Contains(t, second.Skipped[0].Reason, "outside the prefix")
	require.False(t, second.Full)

	s.set(func(s *site) { s.extra["/docs/"] = toLogin })
	st, err := webKind.Check(settings, env)
	require.NoError(t, err)
	_, err = webKind.Fetch(context.Background(), Request{Name: "t", Settings: st, Cursor: first.Cursor, Env: env})
	require.Equal(t, BadContent, CodeOf(err), "%v", err)
	require.Contains(t, err.Error(), "outside the prefix")
}

// robots.txt as RFC 9309 §2.3.1 reads it: 4xx allows every page; 5xx, or
// a file that cannot be read (a redirect loop, a body cut short), disallows
// every page, which is left out with the reason and keeps its stored
// version.
func TestWebRobotsUnavailableOrUnreachable(t *testing.T) {
	for _, tc := range []struct {
		name    string
		robots  http.HandlerFunc
		allowed bool
		reason  string
	}{
		{"404 allows", http.NotFound, true, ""},
		{"403 allows", func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "no", http.StatusForbidden) }, true, ""},
		{"500 disallows", func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "down", http.StatusInternalServerError) },
			false, "robots.txt answered 500"},
		{"503 disallows", func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "deploying", http.StatusServiceUnavailable)
		},
			false, "robots.txt answered 503"},
		{"redirect loop disallows", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/robots.txt", http.StatusFound) },
			false, "robots.txt could not be read"},
		{"cut body disallows", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Length", "1000")
			fmt.Fprint(w, "User-agent: *\n")
		}, false, "robots.txt could not be read"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSite(t)
			s.set(func(s *site) {
				s.pages["/a"] = page("A", "alpha")
				s.pages["/b"] = page("B", "bravo")
				s.sitemap = []string{"/a", "/b"}
				s.extra["/robots.txt"] = tc.robots
			})
			cs := fetchOK(t, webKind, map[string]string{"url": s.srv.URL + "/sitemap.xml"}, nil, fastEnv())
			if tc.allowed {
				require.Equal(t, []string{s.srv.URL + "/a", s.srv.URL + "/b"}, upsertIDs(cs))
				require.Empty(t, cs.Skipped)
				return
			}
			require.Empty(t, cs.Upserts)
			require.Len(t, cs.Skipped, 2)
			for _, sk := range cs.Skipped {
				require.Contains(t, sk.Reason, tc.reason)
			}
		})
	}
}

// A host that cannot be reached says why (refused, no such host), so an
// operator can tell a typo from a firewall, and the URL's query (which
// may hold a secret) stays out of the message.
func TestWebUnreachableSaysWhy(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closed := ln.Addr().String()
	require.NoError(t, ln.Close())
	env := fastEnv()
	for _, tc := range []struct{ url, why string }{
		{"http://" + closed + "/start?token=s3cret", "connection refused"},
		{"http://no-such-host.invalid/start?token=s3cret", "no such host"},
	} {
		st, err := webKind.Check(map[string]string{"url": tc.url}, env)
		require.NoError(t, err)
		_, err = webKind.Fetch(context.Background(), Request{Settings: st, Env: env})
		require.Equal(t, Unreachable, CodeOf(err), "%v", err)
		require.Contains(t, err.Error(), tc.why)
		require.NotContains(t, err.Error(), "s3cret")
	}
}

// A chain of maxRedirects redirects is followed to its page; one more
// fails the run, and the message counts the redirects it followed.
func TestWebRedirectLimit(t *testing.T) {
	s := newSite(t)
	s.set(func(s *site) {
		for i := range maxRedirects + 1 {
			s.extra[fmt.Sprintf("/hop%d", i)] = func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, fmt.Sprintf("/hop%d", i+1), http.StatusFound)
			}
		}
		s.pages[fmt.Sprintf("/hop%d", maxRedirects+1)] = page("End", "reached")
	})
	env := fastEnv()
	fetch := func(start int) (*ChangeSet, error) {
		st, err := webKind.Check(map[string]string{"url": fmt.Sprintf("%s/hop%d", s.srv.URL, start)}, env)
		require.NoError(t, err)
		return webKind.Fetch(context.Background(), Request{Settings: st, Env: env})
	}
	cs, err := fetch(1) // hop1 → … → hop(max+1): maxRedirects redirects
	require.NoError(t, err)
	require.Len(t, cs.Upserts, 1)
	_, err = fetch(0) // one more
	require.Equal(t, BadContent, CodeOf(err), "%v", err)
	require.Contains(t, err.Error(), fmt.Sprintf("stopped after %d redirects", maxRedirects))
}

// A web or git URL whose host is a literal address the run would refuse
// (addressAllowed), or localhost or a name under it (loopback by RFC 6761),
// is refused when the source is added, with the run's reason; the
// deployment's allowances let it through as they let the run. Other names
// are left to the run: what they resolve to may change.
func TestLiteralAddressesRefusedWhenAdded(t *testing.T) {
	none := Env{Limits: DefaultLimits()}
	private := Env{Limits: DefaultLimits(), AllowPrivate: true}
	loopback := Env{Limits: DefaultLimits(), AllowLoopback: true}
	tests := []struct {
		kind    *Kind
		url     string
		env     Env
		refused bool
	}{
		{webKind, "https://10.1.2.3/docs/", none, true},
		{webKind, "https://10.1.2.3/docs/", private, false},
		{webKind, "http://169.254.169.254/latest/meta-data/", none, true},
		{webKind, "https://100.100.100.200/", none, true},
		{webKind, "https://[fe80::1%25eth0]/", none, true},
		{webKind, "https://[fe80::1]/sitemap.xml", private, false},
		{webKind, "https://[::ffff:192.168.0.1]/", none, true},
		{webKind, "https://[64:ff9b::a01:203]/", none, true},
		{webKind, "http://127.0.0.1:8080/", none, true},
		{webKind, "http://127.0.0.1:8080/", private, true},
		{webKind, "http://127.0.0.1:8080/", loopback, false},
		{webKind, "https://0.0.0.0/", loopback, true},
		{webKind, "https://8.8.8.8/docs/", none, false},
		{webKind, "https://intranet.example.com/", none, false},
		// RFC 6761: localhost and every name under it are loopback.
		{webKind, "http://localhost:8080/", none, true},
		{webKind, "http://localhost:8080/", private, true},
		{webKind, "http://localhost:8080/", loopback, false},
		{webKind, "https://docs.localhost/", none, true},
		{webKind, "https://a.b.LocalHost./", none, true},
		{webKind, "https://docs.localhost/", loopback, false},
		{webKind, "https://localhost.example.com/", none, false},
		{webKind, "https://mylocalhost/", none, false},
		{gitKind, "https://localhost/r.git", none, true},
		{gitKind, "https://localhost/r.git", loopback, false},
		{gitKind, "https://git.localhost/r.git", none, true},
		{gitKind, "https://10.1.2.3/r.git", none, true},
		{gitKind, "https://10.1.2.3/r.git", private, false},
		{gitKind, "https://[::1]/r.git", none, true},
		{gitKind, "https://[::1]/r.git", loopback, false},
		{gitKind, "https://140.82.112.3/r.git", none, false},
	}
	for _, tc := range tests {
		t.Run(tc.kind.Name+" "+tc.url, func(t *testing.T) {
			_, err := tc.kind.Check(map[string]string{"url": tc.url}, tc.env)
			if !tc.refused {
				require.NoError(t, err)
				return
			}
			require.Equal(t, BadSettings, CodeOf(err), "%v", err)
			require.Contains(t, err.Error(), "url: address")
			require.Contains(t, err.Error(), "is not public; private and link-local targets need BMCIS_SEARCH_SOURCES_ALLOW_PRIVATE")
		})
	}
}

// The dialer names the address it refuses, an IPv6 zone included.
func TestWebDialRefusalNamesTheAddress(t *testing.T) {
	for _, raw := range []string{"http://[fe80::1%25lo]:9/", "http://127.0.0.1:9/"} {
		_, err := webClient(Env{}).Get(raw)
		require.Error(t, err, raw)
		var refused *dialRefused
		require.ErrorAs(t, err, &refused, raw)
		require.NotContains(t, err.Error(), "<nil>", raw)
		require.Contains(t, err.Error(), "is not public", raw)
	}
}
