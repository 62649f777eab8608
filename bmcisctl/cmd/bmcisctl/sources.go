package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
	"github.com/bmcis/knowledge/platform/access"
)

// sourceRunTimeout bounds `sources sync`: the service's own run limit
// (BMCIS_SEARCH_SOURCES_RUN_TIMEOUT, 30m) ends a run before it.
const sourceRunTimeout = 35 * time.Minute

func sourcesUsage(w io.Writer) {
	fmt.Fprint(w, `usage:
  bmcisctl sources [-o FORMAT]             list every source: kind, schedule, last run, counts, last error
  bmcisctl sources add NAME --kind git --url URL [--branch B] [--path SUBDIR] [--every 15m] [--token-env VAR | --token-file PATH]
  bmcisctl sources add NAME --kind web --url SITEMAP_OR_START_URL [--prefix URL] [--every 1h]
  bmcisctl sources add NAME --kind folder --path /srv/docs [--every 1h]
  bmcisctl sources sync NAME               run the source now, wait, print the counts
  bmcisctl sources remove NAME             remove the source and its documents

The search service fetches these sources itself (docs/SOURCES.md); without
--every a source runs only on `+"`sources sync`"+`. A token is never sent or
stored: --token-env names a variable (SOURCE_TOKEN_...) and --token-file a
file (below BMCIS_SEARCH_SOURCES_SECRETS_DIR, a mounted Secret) on the
search service, where it is read at each run.
Folders on this machine: bmcisctl sync NAME PATH.
Environment: BMCIS_SEARCH_ADDR, BMCIS_INGEST_TOKEN (the operator credential).
`)
}

// runSourcesCommand lists the sources, or runs a subcommand.
func runSourcesCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		switch args[0] {
		case "add":
			return runSourcesAdd(ctx, args[1:], stdout, stderr)
		case "sync":
			return runSourcesSync(ctx, args[1:], stdout, stderr)
		case "remove":
			return runSourcesRemove(ctx, args[1:], stdout, stderr)
		case "-h", "--help", "help":
			sourcesUsage(stderr)
			return flag.ErrHelp
		}
	}
	return runSources(ctx, args, stdout, stderr)
}

// oneSourceName parses flags around one positional NAME.
func oneSourceName(fs *flag.FlagSet, args []string) (string, error) {
	pos, err := parseKeysFlags(fs, args)
	if err != nil {
		return "", err
	}
	if len(pos) != 1 {
		return "", usageErrorf("give one source NAME")
	}
	return pos[0], nil
}

func runSourcesAdd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("sources add", stderr)
	addr := fs.String("addr", searchAddrFlag(), "search gRPC address (BMCIS_SEARCH_ADDR)")
	output := outputFlag(fs)
	kind := fs.String("kind", "", "git, web or folder (required)")
	url := fs.String("url", "", "git: repository URL (https://); web: sitemap.xml or start page")
	branch := fs.String("branch", "", "git: branch (default: the remote's default branch)")
	path := fs.String("path", "", "git: folder of the repository to take; folder: absolute path on the search service")
	prefix := fs.String("prefix", "", "web: only pages under this URL (default: the site for a sitemap, the start page's folder for a crawl)")
	every := fs.String("every", "", "run every this long (at least 1m; e.g. 15m, 1h, 1d); default: only on sources sync")
	tokenEnv := fs.String("token-env", "", "git: the variable holding the token on the search service (its name starts SOURCE_TOKEN_)")
	tokenFile := fs.String("token-file", "", "git: the file holding the token on the search service (a mounted Secret)")
	accessFlag := fs.String("access", "", "who may read its documents, e.g. group:hr,group:legal (everyone, group:NAME, user:ID); default everyone")
	fs.Usage = func() { sourcesUsage(stderr); fs.PrintDefaults() }
	name, err := oneSourceName(fs, args)
	if err != nil {
		return err
	}
	if err := checkOutput(*output); err != nil {
		return err
	}
	if *kind == "" {
		return usageErrorf("--kind is required (git, web or folder)")
	}
	if *tokenEnv != "" && *tokenFile != "" {
		return usageErrorf("give --token-env or --token-file, not both")
	}
	settings := map[string]string{}
	for k, v := range map[string]string{"url": *url, "branch": *branch, "path": *path, "prefix": *prefix} {
		if v != "" {
			settings[k] = v
		}
	}
	switch {
	case *tokenEnv != "":
		settings["token_ref"] = "env:" + *tokenEnv
	case *tokenFile != "":
		settings["token_ref"] = "file:" + *tokenFile
	}
	req := &searchv1.AddSourceRequest{Name: name, Kind: *kind, Settings: settings}
	if *accessFlag != "" {
		list, err := access.SplitList(*accessFlag)
		if err != nil {
			return usageErrorf("--access: %v", err)
		}
		req.DefaultAccess = &searchv1.AccessList{Principals: list}
	}
	if *every != "" {
		d, err := parseDays(*every)
		if err != nil {
			return usageErrorf("--every: %v", err)
		}
		req.EverySeconds = int64(d / time.Second)
	}
	c, closeConn, err := searchDial(*addr, envIngestToken)
	if err != nil {
		return err
	}
	defer closeConn()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	resp, err := c.AddSource(ctx, req)
	if status.Code(err) == codes.InvalidArgument {
		return usageErrorf("%s", status.Convert(err).Message())
	}
	if err != nil {
		return fmt.Errorf("add source %q via %s: %w", name, *addr, err)
	}
	if *output != outputTable {
		return writeRecord(stdout, *output, resp.GetSource())
	}
	when := "on `bmcisctl sources sync " + name + "` only"
	if req.EverySeconds > 0 {
		when = "every " + (time.Duration(req.EverySeconds) * time.Second).String() + ", first run now"
	}
	_, err = fmt.Fprintf(stdout, "added %s source %s (%s)\n", resp.GetSource().GetKind(), name, when)
	return err
}

func runSourcesSync(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("sources sync", stderr)
	addr := fs.String("addr", searchAddrFlag(), "search gRPC address (BMCIS_SEARCH_ADDR)")
	output := outputFlag(fs)
	fs.Usage = func() { sourcesUsage(stderr); fs.PrintDefaults() }
	name, err := oneSourceName(fs, args)
	if err != nil {
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
	ctx, cancel := context.WithTimeout(ctx, sourceRunTimeout)
	defer cancel()
	resp, err := c.SyncSource(ctx, &searchv1.SyncSourceRequest{Name: name})
	if err != nil {
		return fmt.Errorf("sync source %q via %s: %w", name, *addr, err)
	}
	if *output != outputTable {
		if err := writeRecord(stdout, *output, resp); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(stdout, "%s: %d written, %d unchanged, %d failed, %d deleted in %.1fs\n", name,
			resp.GetDocumentsWritten(), resp.GetDocumentsUnchanged(), resp.GetDocumentsFailed(), resp.GetDocumentsDeleted(), resp.GetSeconds())
		for _, f := range resp.GetFailures() {
			fmt.Fprintf(stdout, "  failed %s: %s\n", printableName(f.GetSourceFile()), f.GetReason())
		}
		if n := resp.GetNote(); n != "" {
			fmt.Fprintln(stdout, "  note: "+n)
		}
	}
	if resp.GetDocumentsFailed() > 0 {
		return fmt.Errorf("%w: %s not taken", errPartial, count(resp.GetDocumentsFailed(), "file"))
	}
	return nil
}

func runSourcesRemove(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("sources remove", stderr)
	addr := fs.String("addr", searchAddrFlag(), "search gRPC address (BMCIS_SEARCH_ADDR)")
	output := outputFlag(fs)
	fs.Usage = func() { sourcesUsage(stderr); fs.PrintDefaults() }
	name, err := oneSourceName(fs, args)
	if err != nil {
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
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	resp, err := c.RemoveSource(ctx, &searchv1.RemoveSourceRequest{Name: name})
	if err != nil {
		return fmt.Errorf("remove source %q via %s: %w", name, *addr, err)
	}
	if *output != outputTable {
		return writeRecord(stdout, *output, resp)
	}
	_, err = fmt.Fprintf(stdout, "removed source %s and its %s\n", name, count(resp.GetDocumentsDeleted(), "document"))
	return err
}
