package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/bmcis/knowledge/bmcisctl/internal/source"
	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
	"github.com/bmcis/knowledge/platform/docformat"
	"github.com/bmcis/knowledge/platform/docid"
)

func init() {
	commands["ingest"] = command{
		summary: "ingest documents into search: ingest [-addr HOST:PORT] [-quiet] [-o FORMAT] PATH... (dirs of .md/.txt/.html/.docx/.pdf, .jsonl files)",
		run:     runIngest,
	}
}

func runIngest(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("ingest", stderr)
	addr := fs.String("addr", searchAddrFlag(), "search gRPC address (BMCIS_SEARCH_ADDR)")
	quiet := fs.Bool("quiet", false, "no progress bar")
	output := outputFlag(fs)
	fs.Int64Var(&source.MaxFileBytes, "max-file-bytes", source.MaxFileBytes, "largest file read (the service's BMCIS_SEARCH_MAX_DOCUMENT_BYTES decides what it accepts)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: bmcisctl ingest [-addr HOST:PORT] [-quiet] [-o FORMAT] PATH...")
		fmt.Fprintf(stderr, "  PATH is a file, or a directory tree of files (%s; source file = path\n", strings.Join(docformat.Extensions(), " "))
		fmt.Fprintln(stderr, "  relative to it, category = front matter `category:` or the first folder), or a JSON Lines file of")
		fmt.Fprintln(stderr, `  {"_id"|"id","title","text","category"?,"updated_at"?,"access"?} records (e.g. a BEIR corpus.jsonl;`)
		fmt.Fprintln(stderr, `  "access": ["group:hr","user:ID"] says who may read the record, docs/ACCESS.md; every record's`)
		fmt.Fprintln(stderr, "  list is checked before anything is sent).")
		fmt.Fprintln(stderr, "  A file that cannot be read (corrupt, encrypted, no text, not what its extension says) is listed")
		fmt.Fprintln(stderr, "  with its reason and the others go in; unchanged documents are skipped; the exit status is 5")
		fmt.Fprintln(stderr, "  (partial) when any document failed.")
		fs.PrintDefaults()
	}
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return usageErrorf("give at least one PATH")
	}
	if err := checkOutput(*output); err != nil {
		return err
	}
	if source.MaxFileBytes < 1 {
		return usageErrorf("-max-file-bytes must be at least 1, got %d", source.MaxFileBytes)
	}
	if err := source.CheckAccess(fs.Args()); err != nil {
		return fmt.Errorf("ingest: nothing sent: %w", err)
	}
	c, closeConn, err := searchDial(*addr, envIngestToken)
	if err != nil {
		return err
	}
	defer closeConn()
	total := source.Count(fs.Args())
	bar := newSearchProgressBar(stderr, total, *quiet)
	sum, err := searchIngest(ctx, c, fs.Args(), func(sent, problems int) { bar.update(sent + problems) })
	bar.done()
	if err != nil {
		return fmt.Errorf("ingest via %s: %w", *addr, err)
	}
	return printIngestSummary(stdout, *output, sum)
}

// ingestResult is what an ingest did, as -o json|yaml shows it.
type ingestResult struct {
	Documents   int             `json:"documents"`
	Written     int             `json:"written"`
	Unchanged   int             `json:"unchanged"`
	Failed      int             `json:"failed"`
	Chunks      int             `json:"chunks"`
	Seconds     float64         `json:"seconds"`
	Unconfirmed bool            `json:"unconfirmed"`
	Failures    []failureResult `json:"failures"`
}

// failureResult is one document that did not go in, and why.
type failureResult struct {
	Where  string `json:"where"`
	Reason string `json:"reason"`
}

// ingestFailures lists the documents of sum that did not go in: those
// that could not be read, then those the service refused (named by
// where).
func ingestFailures(sum *searchIngestSummary, where func(*searchv1.IngestFailure) string) []failureResult {
	out := []failureResult{}
	for _, p := range sum.Problems {
		out = append(out, failureResult{Where: printableName(p.Where), Reason: p.Problem})
	}
	for _, f := range sum.Resp.GetFailures() {
		out = append(out, failureResult{Where: where(f), Reason: f.GetReason()})
	}
	return out
}

// printableName is a file name or id as a line of output shows it: quoted
// when it holds a control character (platform/docid's rule: ingestion
// refuses such an id), which would otherwise break the line or drive the
// terminal.
func printableName(s string) string {
	if errors.Is(docid.Check(s), docid.ErrControl) {
		return strconv.Quote(s)
	}
	return s
}

// ingestFailureWhere names a refused document by its file and id.
func ingestFailureWhere(f *searchv1.IngestFailure) string {
	where := printableName(f.GetSourceFile())
	if where == "" {
		where = printableName(f.GetExternalId())
	} else if f.GetExternalId() != "" && f.GetExternalId() != f.GetSourceFile() {
		where = fmt.Sprintf("%s (id %s)", where, printableName(f.GetExternalId()))
	}
	if where == "" {
		where = "(no id)"
	}
	return where
}

func printIngestSummary(w io.Writer, format string, sum *searchIngestSummary) error {
	r := sum.Resp
	failed := int(r.GetDocumentsFailed()) + len(sum.Problems)
	res := ingestResult{
		Documents: int(r.GetDocumentsReceived()) + len(sum.Problems), Written: int(r.GetDocumentsWritten()),
		Unchanged: int(r.GetDocumentsUnchanged()), Failed: failed, Chunks: int(r.GetChunksWritten()),
		Seconds: sum.Seconds, Unconfirmed: sum.Unconfirmed, Failures: ingestFailures(sum, ingestFailureWhere),
	}
	err := writeResult(w, format, res, func(w io.Writer) error {
		fmt.Fprintf(w, "documents  %d (written %d, skipped %d unchanged, failed %d)\n", res.Documents, res.Written, res.Unchanged, res.Failed)
		fmt.Fprintf(w, "chunks     %d\n", res.Chunks)
		fmt.Fprintf(w, "seconds    %.2f\n", res.Seconds)
		if res.Unconfirmed {
			fmt.Fprintln(w, UnconfirmedNote)
		}
		if len(res.Failures) == 0 {
			return nil
		}
		fmt.Fprintln(w, "failures:")
		for _, f := range res.Failures {
			fmt.Fprintf(w, "  %s: %s\n", f.Where, f.Reason)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if failed == 0 {
		return nil
	}
	return fmt.Errorf("%w: %d document(s) failed", errPartial, failed)
}
