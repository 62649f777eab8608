package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	vendorgraphv1 "github.com/bmcis/knowledge/gen/go/bmcis/vendorgraph/v1"
	"github.com/bmcis/knowledge/platform/grpcclient"
)

// graphMaxLineBytes matches the vendorgraph service's limit on one line.
const graphMaxLineBytes = 1 << 20

// graphDefaultAddr is where `make run` starts vendorgraph.
const graphDefaultAddr = "127.0.0.1:50052"

func init() {
	commands["graph"] = command{
		summary:  "vendor graph: graph import FILE.jsonl | graph status (BMCIS_VENDORGRAPH_ADDR, BMCIS_INGEST_TOKEN)",
		run:      runGraph,
		complete: subcommands("import", "status"),
	}
}

func graphUsage(w io.Writer) {
	fmt.Fprintln(w, "usage: bmcisctl graph import [-addr HOST:PORT] [-quiet] FILE.jsonl   (FILE may be - for stdin)")
	fmt.Fprintln(w, "       bmcisctl graph status [-addr HOST:PORT]")
	fmt.Fprintf(w, "  -addr defaults to BMCIS_VENDORGRAPH_ADDR or %s; the ingest credential comes from BMCIS_INGEST_TOKEN or .data/bmcisctl.json.\n", graphDefaultAddr)
	fmt.Fprintln(w, "  The file format is described in docs/VENDORGRAPH.md.")
}

func runGraph(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		graphUsage(stderr)
		return usageErrorf("graph needs a subcommand: import or status")
	}
	switch args[0] {
	case "import":
		return runGraphImport(ctx, args[1:], stdout, stderr)
	case "status":
		return runGraphStatus(ctx, args[1:], stdout, stderr)
	case "-h", "--help", "help":
		graphUsage(stderr)
		return nil
	}
	graphUsage(stderr)
	return usageErrorf("unknown graph subcommand %q", args[0])
}

// graphClient dials vendorgraph with the ingest credential: graph commands
// import and report status, both the ingest role's.
func graphClient(addr string) (vendorgraphv1.VendorGraphServiceClient, func(), error) {
	token, err := credential(envIngestToken)
	if err != nil {
		return nil, nil, err
	}
	conn, err := grpcclient.Dial(addr, token)
	if err != nil {
		return nil, nil, err
	}
	return vendorgraphv1.NewVendorGraphServiceClient(conn), func() { _ = conn.Close() }, nil
}

func runGraphStatus(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("graph status", stderr)
	addr := fs.String("addr", envOr("BMCIS_VENDORGRAPH_ADDR", graphDefaultAddr), "vendorgraph gRPC address")
	output := outputFlag(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usageErrorf("graph status takes no arguments")
	}
	if err := checkOutput(*output); err != nil {
		return err
	}
	client, closeConn, err := graphClient(*addr)
	if err != nil {
		return err
	}
	defer closeConn()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	st, err := client.GetGraphStatus(ctx, &vendorgraphv1.GetGraphStatusRequest{})
	if err != nil {
		return fmt.Errorf("vendorgraph at %s: %w", *addr, err)
	}
	if *output != outputTable {
		return writeRecord(stdout, *output, st)
	}
	last := "never"
	if st.GetLastUpdated() != nil {
		last = st.GetLastUpdated().AsTime().UTC().Format(time.RFC3339)
	}
	fmt.Fprintf(stdout, "vendors %d, entities %d, relationships %d, last updated %s\n",
		st.GetVendors(), st.GetEntities(), st.GetRelationships(), last)
	return nil
}

func runGraphImport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("graph import", stderr)
	fs.Usage = func() { graphUsage(stderr) }
	addr := fs.String("addr", envOr("BMCIS_VENDORGRAPH_ADDR", graphDefaultAddr), "vendorgraph gRPC address")
	quiet := fs.Bool("quiet", false, "no progress bar")
	output := outputFlag(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageErrorf("graph import needs exactly one FILE.jsonl")
	}
	if err := checkOutput(*output); err != nil {
		return err
	}
	path := fs.Arg(0)
	in, size, err := graphOpen(path)
	if err != nil {
		return err
	}
	defer in.Close()
	client, closeConn, err := graphClient(*addr)
	if err != nil {
		return err
	}
	defer closeConn()

	// Cancelling the stream makes the server drop the import: nothing is
	// written until every line has arrived and validated.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := client.ImportGraph(ctx)
	if err != nil {
		return fmt.Errorf("start import on %s: %w", *addr, err)
	}
	bar := newGraphProgress(stderr, size, !*quiet && graphIsTerminal(stderr))
	start := time.Now()
	r := bufio.NewReaderSize(in, 1<<20)
	var lineNo int64
	for {
		line, readErr := r.ReadString('\n')
		if readErr != nil && !errors.Is(readErr, io.EOF) {
			return fmt.Errorf("read %s: %w", path, readErr)
		}
		if line == "" && errors.Is(readErr, io.EOF) {
			break
		}
		lineNo++
		bar.add(int64(len(line)))
		line = strings.TrimRight(line, "\r\n")
		switch {
		case len(line) > graphMaxLineBytes:
			bar.done()
			return fmt.Errorf("%s:%d: line is %d bytes, at most %d; nothing was imported", path, lineNo, len(line), graphMaxLineBytes)
		case !utf8.ValidString(line):
			bar.done()
			return fmt.Errorf("%s:%d: not valid UTF-8; nothing was imported", path, lineNo)
		}
		if err := stream.Send(&vendorgraphv1.ImportGraphRequest{LineNumber: lineNo, Line: line}); err != nil {
			// io.EOF: the server has already answered; CloseAndRecv says how.
			if errors.Is(err, io.EOF) {
				break
			}
			bar.done()
			return fmt.Errorf("send line %d to %s: %w", lineNo, *addr, err)
		}
		if errors.Is(readErr, io.EOF) {
			break
		}
	}
	bar.finish(lineNo)
	resp, err := stream.CloseAndRecv()
	if err != nil {
		return graphImportError(path, *addr, err, stderr)
	}
	elapsed := time.Since(start).Seconds()
	if *output != outputTable {
		// The service's counts, and the command's seconds.
		v, err := protoValue(resp)
		if err != nil {
			return err
		}
		res, _ := v.(map[string]any)
		res["file"], res["elapsed_seconds"] = path, elapsed
		return writeResult(stdout, *output, res, nil)
	}
	fmt.Fprintf(stdout, "imported %s: %d lines in %.1fs (%.0f lines/s; server %.1fs)\n",
		path, resp.GetLines(), elapsed, float64(resp.GetLines())/max(elapsed, 1e-9), resp.GetSeconds())
	fmt.Fprintf(stdout, "  entities:      %d created, %d updated, %d unchanged\n",
		resp.GetEntitiesCreated(), resp.GetEntitiesUpdated(), resp.GetEntitiesUnchanged())
	fmt.Fprintf(stdout, "  relationships: %d created, %d updated, %d unchanged\n",
		resp.GetRelationshipsCreated(), resp.GetRelationshipsUpdated(), resp.GetRelationshipsUnchanged())
	return nil
}

// graphImportError prints a rejected import's problems as FILE:LINE: message.
func graphImportError(path, addr string, err error, stderr io.Writer) error {
	st, _ := status.FromError(err)
	if st.Code() == codes.InvalidArgument {
		for _, d := range st.Details() {
			failure, ok := d.(*vendorgraphv1.ImportGraphFailure)
			if !ok {
				continue
			}
			for _, p := range failure.GetProblems() {
				if p.GetLineNumber() > 0 {
					fmt.Fprintf(stderr, "%s:%d: %s\n", path, p.GetLineNumber(), p.GetMessage())
				} else {
					fmt.Fprintf(stderr, "%s: %s\n", path, p.GetMessage())
				}
			}
			return fmt.Errorf("import of %s rejected with %d problem(s) listed above; nothing was written", path, len(failure.GetProblems()))
		}
	}
	return fmt.Errorf("import of %s via %s: %w", path, addr, err)
}

func graphOpen(path string) (io.ReadCloser, int64, error) {
	if path == "-" {
		return io.NopCloser(os.Stdin), -1, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, fmt.Errorf("open graph file: %w", err)
	}
	info, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, 0, fmt.Errorf("stat graph file: %w", err)
	}
	if info.IsDir() {
		_ = f.Close()
		return nil, 0, fmt.Errorf("%s is a directory, not a JSON Lines file", path)
	}
	return f, info.Size(), nil
}

func graphIsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	info, err := f.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0
}

// graphProgress draws a one-line progress bar on a terminal, at most ten
// times a second.
type graphProgress struct {
	w       io.Writer
	total   int64 // -1 when unknown (stdin)
	read    int64
	lines   int64
	on      bool
	start   time.Time
	lastOut time.Time
}

func newGraphProgress(w io.Writer, total int64, on bool) *graphProgress {
	return &graphProgress{w: w, total: total, on: on, start: time.Now()}
}

func (p *graphProgress) add(n int64) {
	p.read += n
	p.lines++
	if !p.on || p.lines%1024 != 0 {
		return
	}
	if now := time.Now(); now.Sub(p.lastOut) >= 100*time.Millisecond {
		p.lastOut = now
		p.draw()
	}
}

func (p *graphProgress) draw() {
	rate := float64(p.lines) / max(time.Since(p.start).Seconds(), 1e-9)
	mb := float64(p.read) / (1 << 20)
	if p.total <= 0 {
		fmt.Fprintf(p.w, "\r%9d lines  %7.1f MiB  %8.0f lines/s ", p.lines, mb, rate)
		return
	}
	frac := min(float64(p.read)/float64(p.total), 1)
	const width = 30
	filled := int(frac * width)
	fmt.Fprintf(p.w, "\r[%s%s] %3.0f%%  %9d lines  %7.1f/%.1f MiB  %8.0f lines/s ",
		strings.Repeat("#", filled), strings.Repeat(".", width-filled), frac*100,
		p.lines, mb, float64(p.total)/(1<<20), rate)
}

// done ends the bar's line.
func (p *graphProgress) done() {
	if p.on {
		fmt.Fprintln(p.w)
	}
}

// finish draws the final state and says what happens next.
func (p *graphProgress) finish(lines int64) {
	if !p.on {
		return
	}
	p.draw()
	fmt.Fprintf(p.w, "\nsent %d lines; the server is validating and writing them...\n", lines)
}
