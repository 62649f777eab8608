package sources

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"time"

	"golang.org/x/net/html"

	"github.com/bmcis/knowledge/platform/docformat"
)

// webKind mirrors a web site's pages: those a sitemap lists (url ending in
// .xml or .xml.gz; sitemap indexes are followed), or those a bounded crawl
// from a start page reaches, in both cases only under prefix (default: the
// site for a sitemap, the start page's folder for a crawl). robots.txt is
// respected; the cursor keeps each page's ETag and Last-Modified, so an
// unchanged page costs one 304.
var webKind = &Kind{Name: "web", Check: checkWeb, Fetch: fetchWeb, Retry: retryWeb, Root: func(s map[string]string) string { return s["url"] }}

// userAgent names the crawler, for robots.txt groups and site logs.
const userAgent = "bmcis-knowledge-sources"

const (
	maxRedirects      = 5
	maxSitemapDepth   = 2 // an index of sitemaps, not an index of indexes of indexes
	maxSitemapBytes   = 50 << 20
	maxRobotsBytes    = 512 << 10
	sitemapOverFactor = 2 // entries (all prefixes) beyond MaxFiles times this end the run
)

type webCursor struct {
	Pages map[string]pageValidators `json:"pages"`
}

type pageValidators struct {
	ETag         string `json:"etag,omitempty"`
	LastModified string `json:"last_modified,omitempty"`
	// Links are a crawled HTML page's links, so a 304 still leads on.
	Links []string `json:"links,omitempty"`
}

// retryWeb forgets the pages' validators: a page without them is fetched
// whole, not asked whether it changed.
func retryWeb(cursor []byte, ids []string) []byte {
	var c webCursor
	if json.Unmarshal(cursor, &c) != nil {
		return nil // an unreadable cursor costs full GETs, nothing else
	}
	for _, id := range ids {
		delete(c.Pages, id)
	}
	out, _ := json.Marshal(c)
	return out
}

func checkWeb(s map[string]string, env Env) (map[string]string, error) {
	if err := onlyKeys(s, "url", "prefix"); err != nil {
		return nil, err
	}
	u, err := parseWebURL(s["url"])
	if err != nil {
		return nil, fail(BadSettings, nil, "url: %v", err)
	}
	if err := checkLiteralHost(u, env); err != nil {
		return nil, err
	}
	if s["prefix"] == "" {
		p := *u
		p.RawQuery, p.Fragment = "", ""
		if isSitemap(u) {
			p.Path = "/"
		} else {
			p.Path = p.Path[:strings.LastIndex(p.Path, "/")+1]
			if p.Path == "" {
				p.Path = "/"
			}
		}
		s["prefix"] = p.String()
	} else {
		p, err := parseWebURL(s["prefix"])
		if err != nil {
			return nil, fail(BadSettings, nil, "prefix: %v", err)
		}
		if p.Path == "" {
			p.Path = "/" // so https://example.com never matches https://example.com.other.org
		}
		s["prefix"] = p.String()
	}
	return s, nil
}

func parseWebURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return nil, errors.New("want an absolute http(s) URL")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("scheme %q: only http and https", u.Scheme)
	}
	if u.User != nil {
		return nil, errors.New("must not carry credentials")
	}
	return u, nil
}

func isSitemap(u *url.URL) bool {
	p := strings.ToLower(u.Path)
	return strings.HasSuffix(p, ".xml") || strings.HasSuffix(p, ".xml.gz")
}

type webRun struct {
	req    Request
	lim    Limits
	prefix string
	client *http.Client
	prev   map[string]pageValidators
	next   map[string]pageValidators
	robots map[string]*robotsRules // by scheme://host
	nextAt map[string]time.Time    // per host: the earliest next request
	cs     *ChangeSet
	total  int64
}

func fetchWeb(ctx context.Context, req Request) (*ChangeSet, error) {
	start, err := parseWebURL(req.Settings["url"])
	if err != nil {
		return nil, fail(BadSettings, nil, "url: %v", err)
	}
	w := &webRun{req: req, lim: req.Env.Limits, prefix: req.Settings["prefix"], client: webClient(req.Env),
		next: map[string]pageValidators{}, robots: map[string]*robotsRules{}, nextAt: map[string]time.Time{},
		cs: &ChangeSet{}}
	// The client is this run's: its idle connections would outlive it.
	defer w.client.CloseIdleConnections()
	var last webCursor
	if len(req.Cursor) > 0 {
		_ = json.Unmarshal(req.Cursor, &last) // a bad cursor costs full GETs, nothing else
	}
	w.prev = last.Pages
	var complete bool
	if isSitemap(start) {
		pages, err := w.sitemap(ctx, start.String(), 0, new(int))
		if err != nil {
			return nil, err
		}
		complete = true
		seen := map[string]bool{}
		for _, p := range pages {
			if !w.within(p) || seen[p] {
				continue
			}
			seen[p] = true
			if len(w.next)+len(w.cs.Skipped) >= w.lim.MaxFiles {
				complete = false
				w.cs.Note = fmt.Sprintf("stopped at %d pages (BMCIS_SEARCH_SOURCES_MAX_FILES); pages beyond are neither fetched nor deleted", w.lim.MaxFiles)
				break
			}
			if _, _, err := w.page(ctx, p, false, false); err != nil {
				return nil, err
			}
		}
	} else {
		complete, err = w.crawl(ctx, start.String())
		if err != nil {
			return nil, err
		}
	}
	w.cs.Full = complete
	for _, sk := range w.cs.Skipped { // kept pages keep their validators
		if v, ok := w.prev[sk.ID]; ok {
			w.next[sk.ID] = v
		}
	}
	w.cs.Cursor, _ = json.Marshal(webCursor{Pages: w.next})
	return w.cs, nil
}

func (w *webRun) within(raw string) bool { return strings.HasPrefix(raw, w.prefix) }

// crawl follows links breadth first from start, within the prefix, to
// MaxDepth and MaxFiles. It reports whether every reachable page was
// visited: only then are pages no longer reached deleted.
func (w *webRun) crawl(ctx context.Context, start string) (bool, error) {
	type item struct {
		url   string
		depth int
	}
	queue := []item{{start, 0}}
	queued := map[string]bool{start: true}
	complete := true
	for len(queue) > 0 {
		it := queue[0]
		queue = queue[1:]
		if len(w.next)+len(w.cs.Skipped) >= w.lim.MaxFiles {
			w.cs.Note = fmt.Sprintf("stopped at %d pages (BMCIS_SEARCH_SOURCES_MAX_FILES); pages beyond are neither fetched nor deleted", w.lim.MaxFiles)
			return false, nil
		}
		links, known, err := w.page(ctx, it.url, it.depth == 0, true)
		if err != nil {
			return false, err
		}
		if !known {
			// Failed: its links are unknown, so pages only it leads to
			// must not look gone.
			complete = false
		}
		for _, l := range links {
			if queued[l] || !w.within(l) {
				continue
			}
			if it.depth+1 > w.lim.MaxDepth {
				complete = false
				continue
			}
			queued[l] = true
			queue = append(queue, item{l, it.depth + 1})
		}
	}
	return complete, nil
}

// page fetches one page into the change set and returns its links (HTML
// pages of a crawl) and whether they are known (false: the page failed). A
// failure of the first page of a crawl fails the run; of any other page,
// skips it (its stored version stays).
func (w *webRun) page(ctx context.Context, raw string, first, crawl bool) ([]string, bool, error) {
	allowed, why, err := w.allowed(ctx, raw)
	if err != nil {
		return nil, false, err
	}
	if !allowed {
		// Its stored version stays, so its links are unknown, as for a
		// page that failed.
		w.cs.Skipped = append(w.cs.Skipped, Skip{ID: raw, Reason: why})
		return nil, false, nil
	}
	hdr := http.Header{}
	if v, ok := w.prev[raw]; ok {
		if v.ETag != "" {
			hdr.Set("If-None-Match", v.ETag)
		}
		if v.LastModified != "" {
			hdr.Set("If-Modified-Since", v.LastModified)
		}
	}
	resp, err := w.get(ctx, raw, hdr)
	if err != nil {
		if first {
			return nil, false, err
		}
		w.cs.Skipped = append(w.cs.Skipped, Skip{ID: raw, Reason: err.Error()})
		return nil, false, nil
	}
	defer resp.Body.Close()
	if final := resp.Request.URL.String(); final != raw && !w.within(final) {
		// Not this page (a sign-in page once a session expired, most
		// often): its content and links are not the source's.
		if first {
			return nil, false, fail(BadContent, nil, "start page %s was redirected outside the prefix, to %s", redact(raw), redact(final))
		}
		w.cs.Skipped = append(w.cs.Skipped, Skip{ID: raw, Reason: "redirected outside the prefix, to " + redact(final)})
		return nil, false, nil
	}
	switch {
	case resp.StatusCode == http.StatusNotModified:
		w.next[raw] = w.prev[raw]
		w.cs.Unchanged = append(w.cs.Unchanged, raw)
		return w.prev[raw].Links, true, nil
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone:
		if first {
			return nil, false, fail(Unreachable, nil, "start page %s answered %d", redact(raw), resp.StatusCode)
		}
		w.cs.Deletes = append(w.cs.Deletes, raw)
		return nil, true, nil
	case resp.StatusCode != http.StatusOK:
		if first {
			return nil, false, fail(Unreachable, nil, "start page %s answered %d", redact(raw), resp.StatusCode)
		}
		w.cs.Skipped = append(w.cs.Skipped, Skip{ID: raw, Reason: fmt.Sprintf("answered %d", resp.StatusCode)})
		return nil, false, nil
	}
	f, ok := docformat.ForMediaType(resp.Header.Get("Content-Type"))
	if !ok || f.Container() {
		if first {
			// A crawl that starts nowhere would list nothing and delete all.
			return nil, false, fail(BadContent, nil, "start page %s: content type %q is not a document format", redact(raw), resp.Header.Get("Content-Type"))
		}
		w.cs.Skipped = append(w.cs.Skipped, Skip{ID: raw, Reason: fmt.Sprintf("content type %q is not a document format", resp.Header.Get("Content-Type"))})
		return nil, true, nil // no links to follow, none missed
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, w.lim.MaxFileBytes+1))
	if err != nil {
		w.cs.Skipped = append(w.cs.Skipped, Skip{ID: raw, Reason: "read: " + err.Error()})
		return nil, false, nil
	}
	if int64(len(body)) > w.lim.MaxFileBytes {
		w.cs.Skipped = append(w.cs.Skipped, Skip{ID: raw, Reason: fmt.Sprintf("too large: over %d bytes", w.lim.MaxFileBytes)})
		return nil, false, nil
	}
	if err := w.count(len(body)); err != nil {
		return nil, false, err
	}
	v := pageValidators{ETag: resp.Header.Get("ETag"), LastModified: resp.Header.Get("Last-Modified")}
	file := File{ID: raw, Content: body, Format: f.Name}
	if t, err := http.ParseTime(resp.Header.Get("Last-Modified")); err == nil {
		file.UpdatedAt = t
	}
	w.cs.Upserts = append(w.cs.Upserts, file)
	if crawl && f.Name == "html" {
		v.Links = w.followable(links(resp.Request.URL, body))
	}
	w.next[raw] = v
	return v.Links, true, nil
}

// count adds n bytes read (a page, a sitemap) to the run's total and fails
// the run past its limit.
func (w *webRun) count(n int) error {
	w.total += int64(n)
	if w.lim.MaxTotalBytes > 0 && w.total > w.lim.MaxTotalBytes {
		return fail(TooLarge, nil, "the pages and sitemaps exceed %d bytes (BMCIS_SEARCH_SOURCES_MAX_TOTAL_BYTES)", w.lim.MaxTotalBytes)
	}
	return nil
}

// followable keeps the links a crawl may follow (within the prefix), each
// once: they are kept in the cursor.
func (w *webRun) followable(all []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, l := range all {
		if w.within(l) && !seen[l] {
			seen[l] = true
			out = append(out, l)
		}
	}
	return out
}

// links returns the page's absolute http(s) link targets without fragments.
func links(base *url.URL, body []byte) []string {
	var out []string
	z := html.NewTokenizer(bytes.NewReader(body))
	for {
		tt := z.Next()
		if tt == html.ErrorToken {
			return out
		}
		if tt != html.StartTagToken && tt != html.SelfClosingTagToken {
			continue
		}
		name, hasAttr := z.TagName()
		if string(name) != "a" || !hasAttr {
			continue
		}
		for {
			k, v, more := z.TagAttr()
			if string(k) == "href" {
				if u, err := base.Parse(string(v)); err == nil && (u.Scheme == "http" || u.Scheme == "https") {
					u.Fragment, u.RawFragment = "", ""
					out = append(out, u.String())
				}
			}
			if !more {
				break
			}
		}
	}
}

// sitemap returns the page URLs a sitemap (or sitemap index) lists.
func (w *webRun) sitemap(ctx context.Context, raw string, depth int, entries *int) ([]string, error) {
	if depth > maxSitemapDepth {
		return nil, fail(BadContent, nil, "sitemap %s: sitemap indexes nested deeper than %d", redact(raw), maxSitemapDepth)
	}
	resp, err := w.get(ctx, raw, nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fail(Unreachable, nil, "sitemap %s answered %d", redact(raw), resp.StatusCode)
	}
	var r io.Reader = resp.Body
	if strings.HasSuffix(strings.ToLower(resp.Request.URL.Path), ".gz") {
		gz, err := gzip.NewReader(io.LimitReader(resp.Body, maxSitemapBytes))
		if err != nil {
			return nil, fail(BadContent, err, "sitemap %s is not gzip", redact(raw))
		}
		r = gz
	}
	body, err := io.ReadAll(io.LimitReader(r, maxSitemapBytes+1))
	if err != nil {
		return nil, fail(BadContent, err, "read sitemap %s", redact(raw))
	}
	if len(body) > maxSitemapBytes {
		return nil, fail(TooLarge, nil, "sitemap %s is over %d bytes (uncompressed)", redact(raw), maxSitemapBytes)
	}
	if err := w.count(len(body)); err != nil {
		return nil, err
	}
	var doc struct {
		XMLName xml.Name
		URLs    []struct {
			Loc string `xml:"loc"`
		} `xml:"url"`
		Sitemaps []struct {
			Loc string `xml:"loc"`
		} `xml:"sitemap"`
	}
	if err := xml.Unmarshal(body, &doc); err != nil {
		return nil, fail(BadContent, err, "sitemap %s is not a sitemap", redact(raw))
	}
	if doc.XMLName.Local != "urlset" && doc.XMLName.Local != "sitemapindex" {
		return nil, fail(BadContent, nil, "sitemap %s: root element <%s>, want <urlset> or <sitemapindex>", redact(raw), doc.XMLName.Local)
	}
	*entries += len(doc.URLs) + len(doc.Sitemaps)
	if *entries > w.lim.MaxFiles*sitemapOverFactor {
		return nil, fail(TooLarge, nil, "sitemaps list more than %d entries", w.lim.MaxFiles*sitemapOverFactor)
	}
	var out []string
	for _, u := range doc.URLs {
		loc := strings.TrimSpace(u.Loc)
		if _, err := parseWebURL(loc); err == nil {
			out = append(out, loc)
		}
	}
	for _, sm := range doc.Sitemaps {
		loc := strings.TrimSpace(sm.Loc)
		if _, err := parseWebURL(loc); err != nil {
			continue
		}
		more, err := w.sitemap(ctx, loc, depth+1, entries)
		if err != nil {
			return nil, err
		}
		out = append(out, more...)
	}
	return out, nil
}

// get sends one GET, waiting for the host's request slot first.
func (w *webRun) get(ctx context.Context, raw string, hdr http.Header) (*http.Response, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fail(BadContent, err, "bad URL")
	}
	host := u.Scheme + "://" + u.Host
	if at, ok := w.nextAt[host]; ok {
		if d := time.Until(at); d > 0 {
			if err := waitFor(ctx, d); err != nil {
				return nil, err
			}
		}
	}
	w.nextAt[host] = time.Now().Add(w.lim.RequestEvery)
	rctx, cancel := context.WithTimeout(ctx, w.lim.Timeout)
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, raw, nil)
	if err != nil {
		cancel()
		return nil, fail(BadContent, err, "bad URL %s", redact(raw))
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	req.Header.Set("User-Agent", userAgent)
	resp, err := w.client.Do(req)
	if err != nil {
		cancel()
		if ctx.Err() != nil {
			return nil, ctx.Err() // the run ends, not this page
		}
		var le *redirectError
		if errors.As(err, &le) {
			return nil, fail(BadContent, nil, "%s: %s", redact(raw), le.msg)
		}
		var de *dialRefused
		if errors.As(err, &de) {
			return nil, fail(Unreachable, nil, "%s: %s", redact(raw), de.Error())
		}
		// The transport's reason (refused, no such host, a TLS failure)
		// without the URL, which url.Error would repeat query and all.
		why := err
		var ue *url.Error
		if errors.As(err, &ue) {
			why = ue.Err
		}
		return nil, fail(Unreachable, errors.New(scrub(why.Error(), raw, redact(raw))), "GET %s", redact(raw))
	}
	resp.Body = cancelOnClose{resp.Body, cancel}
	return resp, nil
}

// waitFor waits d or until ctx ends (a variable so a test can see the
// waits without taking them).
var waitFor = func(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (c cancelOnClose) Close() error {
	err := c.ReadCloser.Close()
	c.cancel()
	return err
}

type redirectError struct{ msg string }

func (e *redirectError) Error() string { return e.msg }

// dialRefused is a connection the address rules refused.
type dialRefused struct{ host string }

func (e *dialRefused) Error() string {
	return fmt.Sprintf("address %s is not public; private and link-local targets need BMCIS_SEARCH_SOURCES_ALLOW_PRIVATE, loopback BMCIS_SEARCH_SOURCES_ALLOW_LOOPBACK", e.host)
}

// hostIP is host as an address, without its IPv6 zone (which names an
// interface, not an address); nil for a name.
func hostIP(host string) net.IP {
	h, _, _ := strings.Cut(host, "%")
	return net.ParseIP(h)
}

// webClient is an HTTP client whose every connection (redirects included)
// is checked against the address rules after name resolution, at dial
// time, so a name resolving to a private address is refused too.
func webClient(env Env) *http.Client {
	d := &net.Dialer{Timeout: 10 * time.Second, Control: func(_, address string, _ syscall.RawConn) error {
		host, _, err := net.SplitHostPort(address)
		if err != nil {
			return err
		}
		if ip := hostIP(host); ip == nil || !addressAllowed(ip, env) {
			return &dialRefused{host: host}
		}
		return nil
	}}
	tr := &http.Transport{Proxy: nil, DialContext: d.DialContext, MaxIdleConnsPerHost: 2, IdleConnTimeout: time.Minute,
		TLSHandshakeTimeout: 10 * time.Second, ResponseHeaderTimeout: 30 * time.Second}
	return &http.Client{Transport: tr, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if len(via) > maxRedirects { // via holds the first request too
			return &redirectError{msg: fmt.Sprintf("stopped after %d redirects (a redirect loop?)", maxRedirects)}
		}
		if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
			return &redirectError{msg: "redirected to a non-http(s) URL"}
		}
		return nil
	}}
}

// checkLiteralHost refuses a URL whose host is an address literal the
// run's dialer would refuse (addressAllowed), or localhost or a name under
// it, which RFC 6761 fixes to loopback (so it is judged as a loopback
// address), so adding the source says so instead of its first run. Other
// names are left to the dialer: what they resolve to may change.
func checkLiteralHost(u *url.URL, env Env) error {
	host := u.Hostname()
	ip := hostIP(host)
	switch {
	case ip != nil:
		host = ip.String() // without an IPv6 zone
	case localhostName(host):
		ip = net.IPv6loopback
	}
	if ip == nil || addressAllowed(ip, env) {
		return nil
	}
	return fail(BadSettings, nil, "url: %v", &dialRefused{host: host})
}

// localhostName reports whether host is localhost or a name under it
// (RFC 6761 §6.3), in any case, with or without the root's dot.
func localhostName(host string) bool {
	h := strings.ToLower(strings.TrimSuffix(host, "."))
	return h == "localhost" || strings.HasSuffix(h, ".localhost")
}

// addressAllowed is the SSRF rule: public unicast addresses, and the
// private or loopback ones the deployment allows. An IPv6 address that
// carries an IPv4 one (NAT64, 6to4) is judged by the IPv4 address.
func addressAllowed(ip net.IP, env Env) bool {
	if v4 := embeddedIPv4(ip); v4 != nil {
		ip = v4
	}
	switch {
	case ip.IsLoopback():
		return env.AllowLoopback
	case ip.IsUnspecified(), ip.IsMulticast(), ip.IsInterfaceLocalMulticast(),
		thisNetwork.Contains(ip), ip.Equal(net.IPv4bcast):
		return false
	case ip.IsPrivate(), ip.IsLinkLocalUnicast(), ip.IsLinkLocalMulticast(), sharedAddressSpace.Contains(ip):
		return env.AllowPrivate
	}
	return true
}

var (
	// thisNetwork (0.0.0.0/8) is no host to fetch from.
	thisNetwork = mustCIDR("0.0.0.0/8")
	// sharedAddressSpace (RFC 6598) is a provider's inside network, where
	// one cloud's metadata service answers (100.100.100.200).
	sharedAddressSpace = mustCIDR("100.64.0.0/10")
	nat64              = mustCIDR("64:ff9b::/96")
	sixToFour          = mustCIDR("2002::/16")
)

// embeddedIPv4 is the IPv4 address a NAT64 or 6to4 address reaches (nil
// for others; IPv4-mapped addresses are IPv4 to net.IP already).
func embeddedIPv4(ip net.IP) net.IP {
	if ip.To4() != nil || len(ip) != net.IPv6len {
		return nil
	}
	switch {
	case nat64.Contains(ip):
		return net.IPv4(ip[12], ip[13], ip[14], ip[15])
	case sixToFour.Contains(ip):
		return net.IPv4(ip[2], ip[3], ip[4], ip[5])
	}
	return nil
}

func mustCIDR(s string) *net.IPNet {
	_, n, err := net.ParseCIDR(s)
	if err != nil {
		panic(err)
	}
	return n
}

// robotsRules are the Allow and Disallow lines of robots.txt's group for
// this crawler (or "*"). closed, when set, says why robots.txt disallows
// everything.
type robotsRules struct {
	allow, disallow []string
	closed          string
}

// robotsFor reads a host's robots.txt as RFC 9309 §2.3.1 asks: a success
// is parsed; 4xx (none there) allows everything; 5xx, or a file that
// cannot be read for a reason other than an unreachable host (a redirect
// loop, a broken body), disallows everything, so a site that is failing
// is not crawled past its rules. An unreachable host fails the run.
func (w *webRun) robotsFor(ctx context.Context, host string) (*robotsRules, error) {
	resp, err := w.get(ctx, host+"/robots.txt", nil)
	if err != nil {
		var e *Error
		if ctx.Err() != nil || errors.As(err, &e) && e.Code == Unreachable {
			return nil, err // the run ends, or the host cannot be reached at all
		}
		return &robotsRules{closed: "robots.txt could not be read"}, nil
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		b, err := io.ReadAll(io.LimitReader(resp.Body, maxRobotsBytes))
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return &robotsRules{closed: "robots.txt could not be read"}, nil
		}
		return parseRobots(bytes.NewReader(b)), nil
	case resp.StatusCode >= 500:
		return &robotsRules{closed: fmt.Sprintf("robots.txt answered %d", resp.StatusCode)}, nil
	}
	return &robotsRules{}, nil
}

// allowed says whether robots.txt lets the crawler fetch raw; when it does
// not, reason says why.
func (w *webRun) allowed(ctx context.Context, raw string) (ok bool, reason string, err error) {
	u, err := url.Parse(raw)
	if err != nil {
		return false, "not a URL", nil
	}
	host := u.Scheme + "://" + u.Host
	rules, ok := w.robots[host]
	if !ok {
		if rules, err = w.robotsFor(ctx, host); err != nil {
			return false, "", err
		}
		w.robots[host] = rules
	}
	if rules.closed != "" {
		return false, rules.closed + ": taken as disallowing every page", nil
	}
	p := u.EscapedPath()
	if u.RawQuery != "" {
		p += "?" + u.RawQuery
	}
	best, allow := -1, true
	for _, a := range rules.allow {
		if strings.HasPrefix(p, a) && len(a) > best {
			best, allow = len(a), true
		}
	}
	for _, d := range rules.disallow {
		if strings.HasPrefix(p, d) && len(d) > best {
			best, allow = len(d), false
		}
	}
	return allow, "disallowed by robots.txt", nil
}

// parseRobots reads the group naming this crawler, or else the "*" group.
func parseRobots(r io.Reader) *robotsRules {
	groups := map[string]*robotsRules{}
	var current []string
	inRules := false
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "#")
		key, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		key, val = strings.ToLower(strings.TrimSpace(key)), strings.TrimSpace(val)
		switch key {
		case "user-agent":
			if inRules {
				current, inRules = nil, false
			}
			agent := strings.ToLower(val)
			current = append(current, agent)
			if groups[agent] == nil {
				groups[agent] = &robotsRules{}
			}
		case "allow", "disallow":
			inRules = true
			if val == "" {
				continue
			}
			for _, a := range current {
				if key == "allow" {
					groups[a].allow = append(groups[a].allow, val)
				} else {
					groups[a].disallow = append(groups[a].disallow, val)
				}
			}
		}
	}
	if g := groups[userAgent]; g != nil {
		return g
	}
	if g := groups["*"]; g != nil {
		return g
	}
	return &robotsRules{}
}
