package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/bmcis/knowledge/bmcisctl/internal/source"
	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
	"github.com/bmcis/knowledge/platform/access"
	"github.com/bmcis/knowledge/platform/sourcename"
)

func init() {
	commands["sync"] = command{
		summary: "mirror a folder as a named source: sync [-addr HOST:PORT] [-watch] [-o FORMAT] NAME PATH",
		run:     runSync,
		complete: func(ctx context.Context, args []string) []string {
			if len(args) != 0 {
				return nil
			}
			return sourceNames(ctx)
		},
	}
	commands["sources"] = command{
		summary: "list, add, sync and remove sources: sources [add|sync|remove] [-addr HOST:PORT]",
		run:     runSourcesCommand,
		complete: func(ctx context.Context, args []string) []string {
			switch {
			case len(args) == 0:
				return []string{"add", "sync", "remove"}
			case len(args) == 1 && (args[0] == "sync" || args[0] == "remove"):
				return sourceNames(ctx)
			}
			return nil
		},
	}
}

// sourceNames lists the sources' names on the running search service, for
// completion; nothing when it cannot be reached.
func sourceNames(ctx context.Context) []string {
	c, closeConn, err := searchDial(searchAddrFlag(), envIngestToken)
	if err != nil {
		return nil
	}
	defer closeConn()
	resp, err := c.ListSources(ctx, &searchv1.ListSourcesRequest{})
	if err != nil {
		return nil
	}
	var names []string
	for _, s := range resp.GetSources() {
		names = append(names, s.GetName())
	}
	return names
}

// treeState is what a sync pass saw: each file's size and modification time.
type treeState map[string]source.FileState

func runSync(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("sync", stderr)
	addr := fs.String("addr", searchAddrFlag(), "search gRPC address (BMCIS_SEARCH_ADDR)")
	watch := fs.Bool("watch", false, "keep following changes until interrupted")
	fs.Int64Var(&source.MaxFileBytes, "max-file-bytes", source.MaxFileBytes, "largest file read (the service's BMCIS_SEARCH_MAX_DOCUMENT_BYTES decides what it accepts)")
	interval := fs.Duration("interval", time.Second, "with -watch: how often the folder is scanned")
	debounce := fs.Duration("debounce", time.Second, "with -watch: how long a change must stay still before it is synced")
	accessFlag := fs.String("access", "", "the source's default access list, e.g. group:hr,group:legal (everyone, group:NAME, user:ID); unset keeps the current default (everyone unless set before)")
	output := outputFlag(fs)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: bmcisctl sync [-addr HOST:PORT] [-access LIST] [-watch [-interval D] [-debounce D]] NAME PATH")
		fmt.Fprintln(stderr, "  Mirrors the folder PATH as the source NAME: new and changed files go in, documents whose files")
		fmt.Fprintln(stderr, "  are gone are deleted. Documents of other sources (and plain `ingest`) are never touched; the")
		fmt.Fprintln(stderr, "  documents' ids are NAME:RELATIVE/PATH. A file that cannot be read is listed with its reason")
		fmt.Fprintln(stderr, "  and its previous version stays; so does every document under a folder that cannot be read.")
		fmt.Fprintln(stderr, "  With -watch, the folder is scanned every -interval and a")
		fmt.Fprintln(stderr, "  change is synced once it has stayed still for -debounce, until interrupted.")
		fmt.Fprintln(stderr, "  Who may read the documents: -access sets the source's default; a "+source.AccessFileName+" file")
		fmt.Fprintln(stderr, "  (one principal a line, # comments) sets its folder's and those below (nearest wins).")
		fs.PrintDefaults()
	}
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 2 {
		return usageErrorf("give NAME and PATH")
	}
	if err := checkOutput(*output); err != nil {
		return err
	}
	if source.MaxFileBytes < 1 {
		return usageErrorf("-max-file-bytes must be at least 1, got %d", source.MaxFileBytes)
	}
	if *watch && (*interval <= 0 || *debounce < 0) {
		return usageErrorf("-interval must be positive and -debounce not negative")
	}
	name, root := fs.Arg(0), fs.Arg(1)
	if !sourcename.Valid(name) {
		return usageErrorf("source name %q: use %s", name, sourcename.Rule)
	}
	info, err := os.Stat(root)
	if err != nil {
		return fmt.Errorf("sync %s: %w", name, err)
	}
	if !info.IsDir() {
		return usageErrorf("%s is not a folder", root)
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return err
	}
	c, closeConn, err := searchDial(*addr, envIngestToken)
	if err != nil {
		return err
	}
	defer closeConn()

	header := &searchv1.SyncSource{Name: name, Root: abs, Mirror: true}
	if *accessFlag != "" {
		list, err := access.SplitList(*accessFlag)
		if err != nil {
			return usageErrorf("-access: %v", err)
		}
		header.DefaultAccess = &searchv1.AccessList{Principals: list}
	}
	out := syncOutput{w: stdout, format: *output}
	state, err := syncPass(ctx, c, header, root, nil, out)
	if !*watch {
		return err
	}
	if err != nil {
		fmt.Fprintf(stderr, "sync %s: %v (retrying on the next change)\n", name, err)
	}
	// With -o json|yaml stdout carries only the passes' results.
	notes := stdout
	if *output != outputTable {
		notes = stderr
	}
	fmt.Fprintf(notes, "watching %s (every %s, debounce %s); interrupt to stop\n", root, *interval, *debounce)
	return watchTree(ctx, root, *interval, *debounce, state, func(prev treeState) (treeState, error) {
		next, err := syncPass(ctx, c, header, root, prev, out)
		var failed filesFailedError
		if err != nil && ctx.Err() == nil && !errors.As(err, &failed) {
			fmt.Fprintf(stderr, "sync %s: %v (retrying)\n", name, err)
		}
		return next, err
	})
}

// syncPass streams one sync of the tree: files whose state differs from
// prev (all of them when prev is nil) are sent, the others named as kept.
// It returns the state of what the service now holds; on a failed pass it
// returns prev, so the next pass sends the changes again.
// syncOutput is where and how the passes' results are written.
type syncOutput struct {
	w      io.Writer
	format string
}

// syncResult is what one sync pass did, as -o json|yaml shows it (with
// --watch, one per pass).
type syncResult struct {
	Time        time.Time       `json:"time"`
	Source      string          `json:"source"`
	Sent        int             `json:"sent"`
	Written     int             `json:"written"`
	Unchanged   int             `json:"unchanged"`
	Kept        int             `json:"kept"`
	Deleted     int             `json:"deleted"`
	Failed      int             `json:"failed"`
	Unconfirmed bool            `json:"unconfirmed"`
	Failures    []failureResult `json:"failures"`
}

func syncPass(ctx context.Context, c searchv1.SearchServiceClient, header *searchv1.SyncSource, root string, prev treeState, out syncOutput) (treeState, error) {
	// Every access file is read and checked before anything is sent: one
	// with an entry of an unknown form stops the pass with nothing written.
	lists, err := source.ReadAccessLists(root)
	if err != nil {
		return prev, fmt.Errorf("sync %s: %w", header.GetName(), err)
	}
	next := treeState{}
	kept := 0
	sum, err := searchIngestPlan(ctx, c, ingestPlan{sync: header, walk: func(emit func(source.Item) error, keep, keepFolder func(string) error) error {
		kept = 0 // the walk runs again when an older service needs the old RPC
		return source.WalkTree(root, func(rel string, st source.FileState) bool {
			st.Access = access.Key(lists.For(rel))
			old, ok := prev[rel]
			return ok && old == st
		}, func(rel string, st source.FileState, it source.Item) error {
			if !st.Folder {
				list := lists.For(rel)
				st.Access = access.Key(list)
				if it.Doc != nil {
					it.Doc.Access = list
				}
			}
			next[rel] = st
			switch {
			case st.Folder:
				// Not listed, so not known to be gone: everything the
				// service holds under it stays.
				if err := keepFolder(rel); err != nil {
					return err
				}
				it.Problem += " (a folder: every document stored under it stays)"
				return emit(it)
			case it.Doc == nil:
				// Unchanged, or present but unreadable: either way its
				// stored version stays.
				if err := keep(rel); err != nil {
					return err
				}
				if it.Problem == "" {
					kept++
					return nil
				}
			}
			return emit(it)
		})
	}}, nil)
	if err != nil {
		return prev, fmt.Errorf("sync %s: %w", header.GetName(), err)
	}
	r := sum.Resp
	failed := int(r.GetDocumentsFailed()) + len(sum.Problems)
	res := syncResult{
		Time: time.Now(), Source: header.GetName(), Sent: sum.Sent, Written: int(r.GetDocumentsWritten()),
		Unchanged: int(r.GetDocumentsUnchanged()), Kept: kept, Deleted: int(r.GetDocumentsDeleted()), Failed: failed,
		Unconfirmed: sum.Unconfirmed,
		Failures: ingestFailures(sum, func(f *searchv1.IngestFailure) string {
			return printableName(filepath.Join(root, filepath.FromSlash(f.GetSourceFile())))
		}),
	}
	werr := writeResult(out.w, out.format, res, func(w io.Writer) error {
		fmt.Fprintf(w, "%s  sync %s: %d sent (%d written, %d unchanged), %d kept unchanged, %d deleted, %d failed\n",
			res.Time.Format(time.TimeOnly), res.Source, res.Sent, res.Written, res.Unchanged, res.Kept, res.Deleted, res.Failed)
		if res.Unconfirmed {
			fmt.Fprintln(w, UnconfirmedNote)
		}
		if len(res.Failures) == 0 {
			return nil
		}
		fmt.Fprintln(w, "failures (their previous versions stay):")
		for _, f := range res.Failures {
			fmt.Fprintf(w, "  %s: %s\n", f.Where, f.Reason)
		}
		return nil
	})
	if werr != nil {
		return next, werr
	}
	if failed == 0 {
		return next, nil
	}
	// A failed file keeps its state in next: it is sent again when it
	// changes (is fixed), not on every pass.
	return next, filesFailedError(failed)
}

// filesFailedError: the pass completed but some files could not be ingested.
type filesFailedError int

func (e filesFailedError) Error() string { return fmt.Sprintf("%d file(s) failed", int(e)) }

// Is makes a failed file a partial sync (exitPartial): the others went in.
func (e filesFailedError) Is(target error) bool { return target == errPartial }

// watchTree scans root every interval; when the tree differs from what was
// last synced and has stayed the same for debounce, it calls pass. It
// returns when ctx ends (an interrupt), with nil.
//
// Polling, not file-system events: a scan is a stat per file, which the
// sync needs anyway to name the files still present; it works the same on
// network and container-mounted folders where inotify/FSEvents miss
// changes, needs no per-directory watch (inotify's max_user_watches), and
// cannot lose changes to an event-queue overflow.
func watchTree(ctx context.Context, root string, interval, debounce time.Duration, synced treeState, pass func(prev treeState) (treeState, error)) error {
	var pending treeState
	var since time.Time
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		snap, err := scanTree(root)
		if err != nil {
			continue // the folder may be moving; look again
		}
		switch {
		case maps.Equal(snap, synced):
			pending = nil
		case pending == nil || !maps.Equal(snap, pending):
			pending, since = snap, time.Now()
		case time.Since(since) >= debounce:
			next, err := pass(synced)
			if ctx.Err() != nil {
				return nil
			}
			if err == nil || next != nil {
				synced = next
			}
			pending = nil
		}
	}
}

// scanTree reads every file's state without reading any file.
func scanTree(root string) (treeState, error) {
	lists, err := source.ReadAccessLists(root)
	if err != nil {
		// A broken access file is a change too: the pass reports it.
		lists = source.AccessLists{".": {"\x00unreadable"}}
	}
	st := treeState{}
	err = source.WalkTree(root, func(string, source.FileState) bool { return true },
		func(rel string, fst source.FileState, _ source.Item) error {
			if !fst.Folder {
				fst.Access = access.Key(lists.For(rel))
			}
			st[rel] = fst // problems too: syncPass records them the same way
			return nil
		})
	return st, err
}

func runSources(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("sources", stderr)
	addr := fs.String("addr", searchAddrFlag(), "search gRPC address (BMCIS_SEARCH_ADDR)")
	output := outputFlag(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := checkOutput(*output); err != nil {
		return err
	}
	c, closeConn, err := searchDial(*addr, envIngestToken)
	if err != nil {
		return err
	}
	defer closeConn()
	resp, err := c.ListSources(ctx, &searchv1.ListSourcesRequest{})
	if err != nil {
		return fmt.Errorf("list sources via %s: %w", *addr, err)
	}
	if *output != outputTable {
		return writeRecords(stdout, *output, resp.GetSources())
	}
	if len(resp.GetSources()) == 0 {
		fmt.Fprintln(stdout, "no sources (bmcisctl sync NAME PATH or bmcisctl sources add makes one)")
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tKIND\tEVERY\tDOCUMENTS\tCHUNKS\tLAST SYNC\tWRITTEN\tUNCHANGED\tFAILED\tDELETED\tSTATUS\tROOT")
	var errs []string
	for _, s := range resp.GetSources() {
		last := "never"
		if s.GetLastSyncAt() != nil {
			last = s.GetLastSyncAt().AsTime().Local().Format(time.DateTime)
		}
		every := "-"
		if s.GetEverySeconds() > 0 {
			every = (time.Duration(s.GetEverySeconds()) * time.Second).String()
		}
		st := s.GetLastStatus()
		switch {
		case s.GetRunning():
			st = "running"
		case st == "":
			st = "-"
		case st == "failed":
			st = fmt.Sprintf("failed x%d", s.GetConsecutiveFailures())
			errs = append(errs, s.GetName()+": "+s.GetLastError())
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\t%d\t%d\t%d\t%d\t%s\t%s\n", s.GetName(), s.GetKind(), every,
			s.GetDocumentCount(), s.GetChunkCount(), last,
			s.GetLastWritten(), s.GetLastUnchanged(), s.GetLastFailed(), s.GetLastDeleted(), st, s.GetRoot())
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, e := range errs {
		fmt.Fprintln(stdout, "last error of "+e)
	}
	return nil
}
