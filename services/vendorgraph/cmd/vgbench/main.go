// Command vgbench generates the synthetic vendor graph and measures a
// running vendorgraph service through gRPC.
//
//	vgbench generate -vendors 1000 -entities 200000 -relationships 1000000 -o synth.jsonl
//	vgbench getvendor -addr 127.0.0.1:50052 -n 2000 -expect miss|hit
//
// Import the generated file with `bmcisctl graph import synth.jsonl`.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	vendorgraphv1 "github.com/bmcis/knowledge/gen/go/bmcis/vendorgraph/v1"
	"github.com/bmcis/knowledge/platform/grpcclient"
	"github.com/bmcis/knowledge/services/vendorgraph/internal/synth"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "vgbench:", err)
		}
		os.Exit(2)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return errors.New("usage: vgbench generate|getvendor [flags] (-h for flags)")
	}
	switch args[0] {
	case "generate":
		return generate(args[1:], stdout, stderr)
	case "getvendor":
		return getVendor(ctx, args[1:], stdout, stderr)
	}
	return fmt.Errorf("unknown command %q: want generate or getvendor", args[0])
}

func generate(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("vgbench generate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var p synth.Params
	fs.IntVar(&p.Vendors, "vendors", 1000, "vendors")
	fs.IntVar(&p.Entities, "entities", 200000, "entities, vendors included")
	fs.IntVar(&p.Relationships, "relationships", 1000000, "relationships")
	fs.Uint64Var(&p.Seed, "seed", 1, "random seed; the same seed gives the same file")
	out := fs.String("o", "-", "output file (- for stdout)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := p.Validate(); err != nil {
		return err
	}
	w := stdout
	if *out != "-" {
		f, err := os.Create(*out)
		if err != nil {
			return fmt.Errorf("create output: %w", err)
		}
		defer f.Close()
		w = f
	}
	start := time.Now()
	if err := synth.Write(w, p); err != nil {
		return fmt.Errorf("generate: %w", err)
	}
	fmt.Fprintf(stderr, "generated %d vendors, %d entities, %d relationships in %.1fs\n",
		p.Vendors, p.Entities, p.Relationships, time.Since(start).Seconds())
	return nil
}

func getVendor(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("vgbench getvendor", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:50052", "vendorgraph gRPC address")
	vendors := fs.Int("vendors", 1000, "vendors in the generated graph (names are derived from the index)")
	pick := fs.Int("pick", 50, "how many qualifying vendors to cycle through")
	minEnt := fs.Int("min-entities", 100, "a qualifying vendor's neighbourhood has at least this many entities")
	minRel := fs.Int("min-relationships", 500, "... and at least this many relationships")
	maxEnt := fs.Int("max-entities", 100, "GetVendor max_entities")
	maxRel := fs.Int("max-relationships", 500, "GetVendor max_relationships")
	depth := fs.Int("depth", 1, "GetVendor depth (1 or 2)")
	n := fs.Int("n", 2000, "measured calls")
	expect := fs.String("expect", "miss", "miss (run the service with BMCIS_VENDOR_CACHE_SIZE=0) or hit (cache on; calls are warmed first)")
	metricsURL := fs.String("metrics", "", "the service's /metrics URL: also report its own handling time for these calls")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *expect != "miss" && *expect != "hit" {
		return fmt.Errorf("-expect must be miss or hit, got %q", *expect)
	}
	token := os.Getenv("BMCIS_SERVICE_TOKEN")
	if token == "" {
		return errors.New("BMCIS_SERVICE_TOKEN is not set")
	}
	conn, err := grpcclient.Dial(*addr, token)
	if err != nil {
		return err
	}
	defer conn.Close()
	client := vendorgraphv1.NewVendorGraphServiceClient(conn)
	req := func(name string) *vendorgraphv1.GetVendorRequest {
		return &vendorgraphv1.GetVendorRequest{Name: name, MaxEntities: int32(*maxEnt), MaxRelationships: int32(*maxRel), Depth: int32(*depth)}
	}

	// Select vendors whose neighbourhood fills the caps; this also warms the
	// cache (and the database's buffers) for them.
	var chosen []string
	var size, hoodEnt, hoodRel int
	for i := 0; i < *vendors && len(chosen) < *pick; i++ {
		resp, err := client.GetVendor(ctx, req(synth.VendorName(i)))
		if err != nil {
			return fmt.Errorf("GetVendor %q: %w", synth.VendorName(i), err)
		}
		st := resp.GetStatistics()
		if int(st.GetEntityCount()) >= *minEnt && int(st.GetRelationshipCount()) >= *minRel {
			chosen = append(chosen, resp.GetVendorName())
			size += proto.Size(resp)
			hoodEnt += int(st.GetEntityCount())
			hoodRel += int(st.GetRelationshipCount())
		}
	}
	if len(chosen) == 0 {
		return errors.New("no vendor qualifies: lower -min-entities / -min-relationships")
	}
	var before map[float64]float64
	if *metricsURL != "" {
		if before, err = scrapeHandling(ctx, *metricsURL); err != nil {
			return err
		}
	}
	lat := make([]time.Duration, 0, *n)
	mismatched := 0
	var ents, rels int
	for i := 0; i < *n; i++ {
		t0 := time.Now()
		resp, err := client.GetVendor(ctx, req(chosen[i%len(chosen)]))
		lat = append(lat, time.Since(t0))
		if err != nil {
			return fmt.Errorf("GetVendor: %w", err)
		}
		if resp.GetCacheHit() != (*expect == "hit") {
			mismatched++
		}
		ents += len(resp.GetEntities())
		rels += len(resp.GetRelationships())
	}
	slices.Sort(lat)
	q := func(f float64) string {
		return fmt.Sprintf("%.3f ms", float64(lat[int(f*float64(len(lat)-1))].Microseconds())/1000)
	}
	fmt.Fprintf(stdout, "GetVendor %d/%d depth %d, cache %s expected: %d calls over %d vendors (avg neighbourhood %d entities, %d relationships; avg reply %d entities, %d relationships, %d bytes)\n",
		*maxEnt, *maxRel, *depth, *expect, *n, len(chosen), hoodEnt/len(chosen), hoodRel/len(chosen), ents / *n, rels / *n, size/len(chosen))
	fmt.Fprintf(stdout, "  p50 %s  p90 %s  p99 %s  max %s\n", q(0.5), q(0.9), q(0.99), q(1))
	if *metricsURL != "" {
		after, err := scrapeHandling(ctx, *metricsURL)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "  server handling time (service histogram): %s\n", describeHistogram(before, after))
	}
	if mismatched > 0 {
		return fmt.Errorf("%d of %d replies did not match -expect %s", mismatched, *n, *expect)
	}
	return nil
}

const getVendorMethod = `method="/bmcis.vendorgraph.v1.VendorGraphService/GetVendor"`

// scrapeHandling reads the service's cumulative GetVendor latency buckets
// (upper bound in seconds -> count) from its Prometheus endpoint.
func scrapeHandling(ctx context.Context, url string) (map[float64]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("metrics URL: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape metrics: %w", err)
	}
	defer resp.Body.Close()
	out := map[float64]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "bmcis_grpc_server_handling_seconds_bucket{") || !strings.Contains(line, getVendorMethod) {
			continue
		}
		i := strings.Index(line, `le="`)
		j := strings.Index(line[i+4:], `"`)
		le, err := strconv.ParseFloat(line[i+4:i+4+j], 64)
		if err != nil {
			continue // +Inf
		}
		fields := strings.Fields(line)
		n, err := strconv.ParseFloat(fields[len(fields)-1], 64)
		if err != nil {
			return nil, fmt.Errorf("metrics line %q: %w", line, err)
		}
		out[le] = n
	}
	return out, sc.Err()
}

// describeHistogram reports the share of calls within a few bounds and the
// median's bucket, from two scrapes.
func describeHistogram(before, after map[float64]float64) string {
	bounds := make([]float64, 0, len(after))
	for le := range after {
		bounds = append(bounds, le)
	}
	slices.Sort(bounds)
	if len(bounds) == 0 {
		return "no GetVendor samples"
	}
	total := after[bounds[len(bounds)-1]] - before[bounds[len(bounds)-1]]
	var parts []string
	median := ""
	lower, lowerShare := 0.0, 0.0
	for _, le := range bounds {
		share := (after[le] - before[le]) / max(total, 1)
		if median == "" && share >= 0.5 {
			// Linear inside the bucket, as Prometheus' histogram_quantile does.
			est := lower + (le-lower)*(0.5-lowerShare)/max(share-lowerShare, 1e-9)
			median = fmt.Sprintf("p50 ~ %.2f ms (bucket <= %g ms)", est*1000, le*1000)
		}
		lower, lowerShare = le, share
		if le == 0.0005 || le == 0.001 || le == 0.005 || le == 0.01 {
			parts = append(parts, fmt.Sprintf("%.1f%% <= %g ms", share*100, le*1000))
		}
	}
	return median + " (" + strings.Join(parts, ", ") + ")"
}
