package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
	"github.com/bmcis/knowledge/platform/chunker"
	"github.com/bmcis/knowledge/platform/syntheticdocs"
)

func init() {
	commands["bench"] = command{
		summary:  "benchmark a running search service: bench search [-chunks 100000] [-duration 10s] ...",
		run:      runBench,
		complete: subcommands("search"),
	}
}

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "search" {
		fmt.Fprintln(stderr, "usage: bmcisctl bench search [flags]   (bmcisctl bench search -h for flags)")
		return usageErrorf("bench needs a target: search")
	}
	fs := newFlags("bench search", stderr)
	addr := fs.String("addr", searchAddrFlag(), "search gRPC address (BMCIS_SEARCH_ADDR)")
	metricsURL := fs.String("metrics-url", envOr("BMCIS_SEARCH_METRICS_URL", "http://127.0.0.1:9091/metrics"), "the search process's /metrics (BMCIS_SEARCH_METRICS_URL)")
	chunks := fs.Int("chunks", 100_000, "synthetic chunks to ingest (0: skip ingestion)")
	seed := fs.Uint64("seed", 1, "corpus seed")
	vocab := fs.Int("vocab", 30_000, "vocabulary size")
	nq := fs.Int("queries", 500, "distinct queries")
	duration := fs.Duration("duration", 10*time.Second, "measuring time per scenario")
	modes := fs.String("modes", "hybrid,bm25,vector", "modes")
	concs := fs.String("concurrency", "1,16", "concurrency levels")
	category := fs.String("category", "", "also filter every query on this category (e.g. rare)")
	addChunks := fs.Int("add-chunks", 5000, "after the main ingestion, ingest this many more chunks with the model active (0: skip)")
	profileDir := fs.String("profile", "", "write a CPU profile of the service per uncached scenario into this directory (the service needs BMCIS_PPROF=true)")
	if err := parse(fs, args[1:]); err != nil {
		return err
	}
	// Every flag is checked before anything is ingested or measured.
	switch {
	case fs.NArg() != 0:
		return usageErrorf("unexpected argument %q (bench search takes flags only)", fs.Arg(0))
	case *chunks < 0:
		return usageErrorf("-chunks must be 0 (skip ingestion) or more, got %d", *chunks)
	case *addChunks < 0:
		return usageErrorf("-add-chunks must be 0 (skip) or more, got %d", *addChunks)
	case *vocab < 2:
		return usageErrorf("-vocab must be at least 2 words, got %d", *vocab)
	case *nq < 1:
		return usageErrorf("-queries must be at least 1, got %d", *nq)
	case *duration <= 0:
		return usageErrorf("-duration must be positive, got %s", *duration)
	}
	if *profileDir != "" {
		if err := os.MkdirAll(*profileDir, 0o755); err != nil {
			return usageErrorf("-profile: %v", err)
		}
	}
	modeList, err := parseSearchModes(*modes)
	if err != nil {
		return err
	}
	var concList []int
	for _, cs := range strings.Split(*concs, ",") {
		conc, err := strconv.Atoi(strings.TrimSpace(cs))
		if err != nil || conc < 1 {
			return usageErrorf("bad -concurrency %q: a comma-separated list of numbers of at least 1", *concs)
		}
		concList = append(concList, conc)
	}
	c, closeConn, err := searchDial(*addr, envReadToken)
	if err != nil {
		return err
	}
	defer closeConn()
	g := syntheticdocs.New(*seed, *vocab)

	fmt.Fprintf(stdout, "machine: %d CPUs (GOMAXPROCS %d), %s; load average %s\n", runtime.NumCPU(), runtime.GOMAXPROCS(0), memTotal(), loadAvg())
	if *chunks > 0 {
		if _, err := benchIngest(ctx, c, g, 0, *chunks, *metricsURL, stdout, stderr); err != nil {
			return err
		}
	}
	if *addChunks > 0 {
		st, err := c.GetIndexStatus(ctx, &searchv1.GetIndexStatusRequest{})
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "\nincremental ingestion (model active, %d documents indexed):\n", st.Documents)
		if _, err := benchIngest(ctx, c, g, int(st.Documents)+1_000_000, *addChunks, *metricsURL, stdout, stderr); err != nil {
			return err
		}
	}
	st, err := c.GetIndexStatus(ctx, &searchv1.GetIndexStatusRequest{})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "index: %d documents, %d chunks, embedder %s (%s, %d dims)\n", st.Documents, st.Chunks, st.EmbedderProvider, st.EmbedderModel, st.EmbedderDimensions)
	if st.EmbedderModel != "" {
		if err := awaitMirror(ctx, *metricsURL, st.Chunks, stdout); err != nil {
			return err
		}
	}
	queries := make([]string, *nq)
	for i := range queries {
		queries[i] = g.Query(i)
	}
	var cats []string
	if *category != "" {
		cats = []string{*category}
	}
	fmt.Fprintf(stdout, "\nsearch latency at the gRPC client, limit 10, %d distinct queries, %s per scenario", len(queries), *duration)
	if len(cats) > 0 {
		fmt.Fprintf(stdout, ", category filter %q", *category)
	}
	fmt.Fprintln(stdout)
	fmt.Fprintf(stdout, "(server: the answers' search_time_ms, the service's own time)\n")
	fmt.Fprintf(stdout, "\n| mode | cache | concurrency | requests | QPS | P50 ms | P95 ms | P99 ms | server P50 ms | server P95 ms |\n|---|---|---|---|---|---|---|---|---|---|\n")
	var stageLines []string
	for _, mode := range modeList {
		for _, cached := range []bool{false, true} {
			if cached {
				// Warm: every query once, so the measured requests all hit.
				for _, q := range queries {
					if _, err := c.Search(ctx, &searchv1.SearchRequest{Query: q, Mode: mode, Limit: 10, Categories: cats}); err != nil {
						return err
					}
				}
			}
			for _, conc := range concList {
				label := "uncached"
				if cached {
					label = "cached"
				}
				var prof chan error
				if *profileDir != "" && !cached {
					prof = make(chan error, 1)
					file := fmt.Sprintf("%s/%s-%s-c%d.pprof", *profileDir, searchModeName(mode), label, conc)
					go func() { prof <- cpuProfile(ctx, *metricsURL, *duration, file) }()
				}
				before, stErr := readService(ctx, *metricsURL)
				r, err := benchSearch(ctx, c, queries, mode, cats, !cached, conc, *duration)
				if after, err2 := readService(ctx, *metricsURL); stErr == nil && err2 == nil && !cached {
					stageLines = append(stageLines, fmt.Sprintf("%s %s c%d: %s", searchModeName(mode), label, conc, after.since(before)))
				}
				if prof != nil {
					if perr := <-prof; perr != nil && err == nil {
						err = perr
					}
				}
				if err != nil {
					return err
				}
				fmt.Fprintf(stdout, "| %s | %s | %d | %d | %.0f | %.2f | %.2f | %.2f | %.2f | %.2f |\n", searchModeName(mode), label, conc, r.n, r.qps,
					r.client.p50, r.client.p95, r.client.p99, r.server.p50, r.server.p95)
			}
		}
	}
	if len(stageLines) > 0 {
		fmt.Fprintf(stdout, "\nservice stages, mean ms per observation (bmcis_search_stage_seconds):\n")
		for _, l := range stageLines {
			fmt.Fprintf(stdout, "  %s\n", l)
		}
	}
	if rss, err := processRSS(ctx, *metricsURL); err == nil {
		fmt.Fprintf(stdout, "\nsearch process resident memory after the searches: %.0f MiB\n", rss/(1<<20))
	} else {
		fmt.Fprintf(stdout, "\nsearch process memory: not read (%v)\n", err)
	}
	return nil
}

func benchIngest(ctx context.Context, c searchv1.SearchServiceClient, g *syntheticdocs.Generator, first, target int, metricsURL string, stdout, stderr io.Writer) (int, error) {
	ck, err := chunker.NewDefault()
	if err != nil {
		return 0, err
	}
	// Generate until the chunker says the corpus has the target size.
	var docs []*searchv1.Document
	var bytes int64
	for n := 0; n < target; {
		d := g.Document(first + len(docs))
		cs, err := ck.Split(ctx, chunker.Markdown, d.Title, string(d.Content))
		if err != nil {
			return 0, err
		}
		n += len(cs)
		bytes += int64(len(d.Content))
		docs = append(docs, d)
	}
	if rss, err := processRSS(ctx, metricsURL); err == nil {
		fmt.Fprintf(stdout, "search process resident memory before ingestion: %.0f MiB\n", rss/(1<<20))
	}
	fmt.Fprintf(stderr, "ingesting %d synthetic documents (%.1f MiB)...\n", len(docs), float64(bytes)/(1<<20))
	t0 := time.Now()
	ictx, err := withCredential(ctx, envIngestToken)
	if err != nil {
		return 0, err
	}
	stream, err := c.IngestDocuments(ictx)
	if err != nil {
		return 0, err
	}
	bar := newSearchProgressBar(stderr, len(docs), false)
	for i, d := range docs {
		if err := stream.Send(&searchv1.IngestDocumentsRequest{Document: d}); err != nil {
			break
		}
		bar.update(i + 1)
	}
	sent := time.Since(t0)
	bar.done()
	resp, err := stream.CloseAndRecv()
	if err != nil {
		return 0, fmt.Errorf("ingest: %w", err)
	}
	el := time.Since(t0)
	fmt.Fprintf(stdout, "ingestion: %d documents (%d written, %d unchanged, %d failed), %d chunks, %.1f MiB of markdown\n",
		resp.DocumentsReceived, resp.DocumentsWritten, resp.DocumentsUnchanged, resp.DocumentsFailed, resp.ChunksWritten, float64(bytes)/(1<<20))
	fmt.Fprintf(stdout, "  stream sent in %.1f s (documents stored and keyword-searchable: %.0f chunks/s)\n", sent.Seconds(), float64(resp.ChunksWritten)/sent.Seconds())
	fmt.Fprintf(stdout, "  answered after %.1f s, embedding and HNSW index included: %.0f chunks/s end to end\n", el.Seconds(), float64(resp.ChunksWritten)/el.Seconds())
	if rss, err := processRSS(ctx, metricsURL); err == nil {
		fmt.Fprintf(stdout, "search process resident memory after ingestion: %.0f MiB\n", rss/(1<<20))
	}
	return len(docs), nil
}

type benchResult struct {
	n   int
	qps float64
	// client is the latency the client saw; server the answers'
	// search_time_ms.
	client, server percentiles
}

type percentiles struct{ p50, p95, p99 float64 }

// percentilesOf sorts ms and reads its percentiles (nearest rank).
func percentilesOf(ms []float64) percentiles {
	if len(ms) == 0 {
		return percentiles{}
	}
	slices.Sort(ms)
	at := func(p float64) float64 { return ms[min(len(ms)-1, int(p*float64(len(ms))))] }
	return percentiles{at(0.50), at(0.95), at(0.99)}
}

func benchSearch(ctx context.Context, c searchv1.SearchServiceClient, queries []string, mode searchv1.RetrievalMode, cats []string, noCache bool, conc int, d time.Duration) (benchResult, error) {
	var mu sync.Mutex
	var lat, srv []float64
	var firstErr error
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < conc; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			var mine, mineSrv []float64
			for i := w; time.Now().Before(deadline); i += conc {
				q := queries[i%len(queries)]
				t0 := time.Now()
				resp, err := c.Search(ctx, &searchv1.SearchRequest{Query: q, Mode: mode, Limit: 10, NoCache: noCache, Categories: cats})
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
				mine = append(mine, float64(time.Since(t0).Microseconds())/1000)
				mineSrv = append(mineSrv, resp.SearchTimeMs)
			}
			mu.Lock()
			lat = append(lat, mine...)
			srv = append(srv, mineSrv...)
			mu.Unlock()
		}(w)
	}
	wg.Wait()
	el := time.Since(start)
	if firstErr != nil {
		return benchResult{}, firstErr
	}
	return benchResult{n: len(lat), qps: float64(len(lat)) / el.Seconds(), client: percentilesOf(lat), server: percentilesOf(srv)}, nil
}

// cpuProfile writes the service's CPU profile over d (whole seconds, at
// least one) to file, from the /debug/pprof/ beside its metrics URL.
func cpuProfile(ctx context.Context, metricsURL string, d time.Duration, file string) error {
	secs := max(1, int(d/time.Second))
	url := strings.TrimSuffix(metricsURL, "/metrics") + "/debug/pprof/profile?seconds=" + strconv.Itoa(secs)
	ctx, cancel := context.WithTimeout(ctx, time.Duration(secs)*time.Second+30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("CPU profile: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("CPU profile: %s answered %s (does the service run with BMCIS_PPROF=true?)", url, resp.Status)
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		_ = f.Close()
		return fmt.Errorf("CPU profile: %w", err)
	}
	return f.Close()
}

// processRSS reads process_resident_memory_bytes from a /metrics page.
func processRSS(ctx context.Context, url string) (float64, error) {
	return metricValue(ctx, url, "process_resident_memory_bytes")
}

// awaitMirror waits (at most 10 minutes) until the service's vector
// mirror holds a vector for each of chunks, or a steady number while no
// graph is being built (0: the mirror is off), so the searches measure the
// replica as it runs once settled, not while it builds the graph.
func awaitMirror(ctx context.Context, url string, chunks int64, stdout io.Writer) error {
	t0 := time.Now()
	last, since := -1.0, time.Now()
	for {
		n, err := metricValue(ctx, url, "bmcis_search_mirrored_vectors")
		if n != last {
			last, since = n, time.Now()
		}
		switch {
		case err != nil:
			fmt.Fprintf(stdout, "vector mirror: not read (%v)\n", err)
			return nil
		case int64(n) >= chunks:
			fmt.Fprintf(stdout, "vector mirror: %.0f vectors, waited %.1f s\n", n, time.Since(t0).Seconds())
			return nil
		case time.Since(since) > 5*time.Second:
			// Steady and no graph being built: vectors still queued are
			// searched beside it, and 0 is a mirror that is off.
			if b, err := metricValue(ctx, url, "bmcis_search_mirror_building"); err == nil && b == 0 {
				fmt.Fprintf(stdout, "vector mirror: %.0f of %d vectors, steady for 5 s, waited %.1f s\n", n, chunks, time.Since(t0).Seconds())
				return nil
			}
		case time.Since(t0) > 10*time.Minute:
			fmt.Fprintf(stdout, "vector mirror: %.0f of %d vectors after 10 min (off, or over BMCIS_SEARCH_VECTOR_MIRROR_MB); measuring anyway\n", n, chunks)
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// metricValue reads an unlabelled sample from a /metrics page.
func metricValue(ctx context.Context, url, name string) (float64, error) {
	var v float64
	found := false
	err := scrapeMetrics(ctx, url, func(line string) error {
		if s, ok := strings.CutPrefix(line, name+" "); ok && !found {
			f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
			v, found = f, err == nil
			return err
		}
		return nil
	})
	if err == nil && !found {
		err = fmt.Errorf("%s not found at %s", name, url)
	}
	return v, err
}

// serviceReading is what the search service's /metrics said at one
// moment: per stage of bmcis_search_stage_seconds, the sum of seconds and
// the count of observations, and per path of
// bmcis_search_vector_path_total, the vector sides it answered; each
// summed over every other label.
type serviceReading struct {
	stages map[string][2]float64
	paths  map[string]float64
}

func readService(ctx context.Context, url string) (serviceReading, error) {
	out := serviceReading{stages: map[string][2]float64{}, paths: map[string]float64{}}
	err := scrapeMetrics(ctx, url, func(line string) error {
		var key string
		kind := -1
		switch {
		case strings.HasPrefix(line, "bmcis_search_stage_seconds_sum{"):
			kind, key = 0, `stage="`
		case strings.HasPrefix(line, "bmcis_search_stage_seconds_count{"):
			kind, key = 1, `stage="`
		case strings.HasPrefix(line, "bmcis_search_vector_path_total{"):
			kind, key = 2, `path="`
		}
		_, name, ok := strings.Cut(line, key)
		sp := strings.LastIndexByte(line, ' ')
		if kind < 0 || !ok || sp < 0 {
			return nil
		}
		name, _, _ = strings.Cut(name, `"`)
		v, err := strconv.ParseFloat(line[sp+1:], 64)
		if err != nil {
			return fmt.Errorf("metric line %q: %w", line, err)
		}
		if kind == 2 {
			out.paths[name] += v
			return nil
		}
		cur := out.stages[name]
		cur[kind] += v
		out.stages[name] = cur
		return nil
	})
	return out, err
}

// scrapeMetrics reads a /metrics page, line by line, within 5 s.
func scrapeMetrics(ctx context.Context, url string, each func(line string) error) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if err := each(sc.Text()); err != nil {
			return err
		}
	}
	return sc.Err()
}

// since formats what happened between before and this reading: the mean
// milliseconds per observation of each stage observed, in name order, and
// how many vector sides each path answered.
func (r serviceReading) since(before serviceReading) string {
	var parts []string
	for _, stage := range slices.Sorted(maps.Keys(r.stages)) {
		sum, n := r.stages[stage][0]-before.stages[stage][0], r.stages[stage][1]-before.stages[stage][1]
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%s %.3f", stage, 1000*sum/n))
		}
	}
	var paths []string
	for _, p := range slices.Sorted(maps.Keys(r.paths)) {
		if n := r.paths[p] - before.paths[p]; n > 0 {
			paths = append(paths, fmt.Sprintf("%s %.0f", p, n))
		}
	}
	out := strings.Join(parts, ", ")
	if len(paths) > 0 {
		out += "; vector sides answered by " + strings.Join(paths, ", ")
	}
	return out
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func memTotal() string {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return "memory unknown"
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "MemTotal:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return fmt.Sprintf("%.0f GiB RAM", kb/(1<<20))
		}
	}
	return "memory unknown"
}
