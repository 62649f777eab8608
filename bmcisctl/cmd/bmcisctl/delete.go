package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
)

func init() {
	commands["delete"] = command{
		summary: "delete documents (and their chunks) by external id: delete [-addr HOST:PORT] [-o FORMAT] ID...",
		run:     runDelete,
	}
}

func runDelete(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("delete", stderr)
	addr := fs.String("addr", searchAddrFlag(), "search gRPC address (BMCIS_SEARCH_ADDR)")
	output := outputFlag(fs)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: bmcisctl delete [-addr HOST:PORT] ID...")
		fmt.Fprintln(stderr, "  Deletes each document with that external id (as `search` shows it, e.g. handbook:security/a.md)")
		fmt.Fprintln(stderr, "  and its chunks, with the ingest credential (BMCIS_INGEST_TOKEN). Every id is tried; an unknown")
		fmt.Fprintln(stderr, "  id is reported and the command exits 5 (partial). A document of a synced source comes back on the next")
		fmt.Fprintln(stderr, "  sync while its file exists.")
		fs.PrintDefaults()
	}
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return usageErrorf("give at least one document ID")
	}
	if err := checkOutput(*output); err != nil {
		return err
	}
	ids := fs.Args()
	for _, id := range ids {
		if strings.TrimSpace(id) == "" {
			return usageErrorf("an empty document ID")
		}
	}
	c, closeConn, err := searchDial(*addr, envIngestToken)
	if err != nil {
		return err
	}
	defer closeConn()
	// Each id's result is written as it comes (json: one object per
	// line); yaml collects them into one list.
	var list []any
	put := func(r deleteResult) error {
		if *output == outputYAML {
			list = append(list, r)
			return nil
		}
		return writeResult(stdout, *output, r, func(w io.Writer) error {
			if r.Deleted {
				_, err := fmt.Fprintf(w, "deleted %s (%d chunks)\n", r.ID, r.ChunksDeleted)
				return err
			}
			return nil
		})
	}
	failed := 0
	for _, id := range ids {
		resp, err := c.DeleteDocument(ctx, &searchv1.DeleteDocumentRequest{ExternalId: id})
		r := deleteResult{ID: id}
		switch status.Code(err) {
		case codes.OK:
			r.Deleted, r.ChunksDeleted = true, int(resp.GetChunksDeleted())
		case codes.NotFound:
			failed++
			r.Error = "not found"
			fmt.Fprintf(stderr, "bmcisctl delete: no document with id %q\n", id)
		case codes.InvalidArgument:
			failed++
			r.Error = status.Convert(err).Message()
			fmt.Fprintf(stderr, "bmcisctl delete: %q: %s\n", id, r.Error)
		default:
			// Refused, unavailable or interrupted: the remaining ids would
			// fail the same way.
			if *output == outputYAML {
				_ = writeResultList(stdout, *output, list, nil)
			}
			return fmt.Errorf("delete %q via %s: %w", id, *addr, err)
		}
		if err := put(r); err != nil {
			return err
		}
	}
	if *output == outputYAML {
		if err := writeResultList(stdout, *output, list, nil); err != nil {
			return err
		}
	}
	if failed > 0 {
		return fmt.Errorf("%w: %d of %d not found or refused", errPartial, failed, len(ids))
	}
	return nil
}

// deleteResult is what became of one id, as -o json|yaml shows it.
type deleteResult struct {
	ID            string `json:"id"`
	Deleted       bool   `json:"deleted"`
	ChunksDeleted int    `json:"chunks_deleted"`
	Error         string `json:"error,omitempty"`
}
