package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/bmcis/knowledge/bmcisctl/internal/source"
	"github.com/bmcis/knowledge/platform/docformat"
)

func init() {
	commands["ingest"] = command{
		summary: "ingest documents into search: ingest [-addr HOST:PORT] [-quiet] PATH... (dirs of .md/.txt/.html/.docx/.pdf, .jsonl files)",
		run:     runIngest,
	}
}

func runIngest(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("ingest", stderr)
	addr := fs.String("addr", searchAddrFlag(), "search gRPC address (BMCIS_SEARCH_ADDR)")
	quiet := fs.Bool("quiet", false, "no progress bar")
	fs.Int64Var(&source.MaxFileBytes, "max-file-bytes", source.MaxFileBytes, "largest file read (the service's BMCIS_SEARCH_MAX_DOCUMENT_BYTES decides what it accepts)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: bmcisctl ingest [-addr HOST:PORT] [-quiet] PATH...")
		fmt.Fprintf(stderr, "  PATH is a file, or a directory tree of files (%s; source file = path\n", strings.Join(docformat.Extensions(), " "))
		fmt.Fprintln(stderr, "  relative to it, category = front matter `category:` or the first folder), or a JSON Lines file of")
		fmt.Fprintln(stderr, `  {"_id"|"id","title","text","category"?,"updated_at"?} records (e.g. a BEIR corpus.jsonl).`)
		fmt.Fprintln(stderr, "  A file that cannot be read (corrupt, encrypted, no text, not what its extension says) is listed")
		fmt.Fprintln(stderr, "  with its reason and the others go in; unchanged documents are skipped; the exit status is 1")
		fmt.Fprintln(stderr, "  when any document failed.")
		fs.PrintDefaults()
	}
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return usageErrorf("give at least one PATH")
	}
	if source.MaxFileBytes < 1 {
		return usageErrorf("-max-file-bytes must be at least 1, got %d", source.MaxFileBytes)
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
	return printIngestSummary(stdout, sum)
}

func printIngestSummary(w io.Writer, sum *searchIngestSummary) error {
	r := sum.Resp
	failed := int(r.DocumentsFailed) + len(sum.Problems)
	fmt.Fprintf(w, "documents  %d (written %d, skipped %d unchanged, failed %d)\n",
		int(r.DocumentsReceived)+len(sum.Problems), r.DocumentsWritten, r.DocumentsUnchanged, failed)
	fmt.Fprintf(w, "chunks     %d\n", r.ChunksWritten)
	fmt.Fprintf(w, "seconds    %.2f\n", sum.Seconds)
	if sum.Unconfirmed {
		fmt.Fprintln(w, UnconfirmedNote)
	}
	if failed == 0 {
		return nil
	}
	fmt.Fprintln(w, "failures:")
	for _, p := range sum.Problems {
		fmt.Fprintf(w, "  %s: %s\n", p.Where, p.Problem)
	}
	for _, f := range r.Failures {
		where := f.SourceFile
		if where == "" {
			where = f.ExternalId
		} else if f.ExternalId != "" && f.ExternalId != f.SourceFile {
			where = fmt.Sprintf("%s (id %s)", f.SourceFile, f.ExternalId)
		}
		if where == "" {
			where = "(no id)"
		}
		fmt.Fprintf(w, "  %s: %s\n", where, f.Reason)
	}
	return fmt.Errorf("%w: %d document(s) failed", errPartial, failed)
}
