package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	authv1 "github.com/bmcis/knowledge/gen/go/bmcis/auth/v1"
	"github.com/bmcis/knowledge/platform/access"
	"github.com/bmcis/knowledge/platform/grpcclient"
	"github.com/bmcis/knowledge/platform/ratelimit"
)

const keysDefaultAddr = "127.0.0.1:50053"

func init() {
	commands["keys"] = command{
		summary: "manage API keys on the auth service: keys create|list|revoke|rotate",
		run:     runKeys,
		complete: func(ctx context.Context, args []string) []string {
			switch {
			case len(args) == 0:
				return []string{"create", "list", "revoke", "rotate"}
			case len(args) == 1 && (args[0] == "revoke" || args[0] == "rotate"):
				return keyIDs(ctx)
			}
			return nil
		},
	}
}

func keysUsage(w io.Writer) {
	var limits []string
	for _, t := range ratelimit.Tiers {
		limits = append(limits, "[--"+t.FlagName()+" N]")
	}
	fmt.Fprint(w, `usage:
  bmcisctl keys create --name N [--owner O] `+strings.Join(limits, " ")+` [--expires-in 90d]
                       [--categories security,hr] [--tools semantic_search,get_chunks] [--groups hr,legal]
  bmcisctl keys list [--owner O] [--all] [-q]
  bmcisctl keys revoke KEY_ID
  bmcisctl keys rotate KEY_ID [--overlap 24h] [--expires-in 90d]

create and rotate print the new key alone on stdout; it is shown only once.
Durations take Go units plus days: 90d, 1d12h, 36h, 30m.
Environment: BMCIS_AUTH_ADDR (default 127.0.0.1:50053), BMCIS_ADMIN_TOKEN (the
admin credential); after make run both come from .data/bmcisctl.json.
`)
}

func runKeys(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		keysUsage(stderr)
		if len(args) == 0 {
			return usageErrorf("give a subcommand: create, list, revoke or rotate")
		}
		return flag.ErrHelp
	}
	sub := map[string]func(context.Context, []string, io.Writer, io.Writer) error{
		"create": runKeysCreate,
		"list":   runKeysList,
		"revoke": runKeysRevoke,
		"rotate": runKeysRotate,
	}[args[0]]
	if sub == nil {
		keysUsage(stderr)
		return usageErrorf("unknown keys subcommand %q", args[0])
	}
	return sub(ctx, args[1:], stdout, stderr)
}

// keyIDs lists the active keys' ids on the running auth service, for
// completion; nothing when it cannot be reached.
func keyIDs(ctx context.Context) []string {
	client, ctx, done, err := keysClient(ctx)
	if err != nil {
		return nil
	}
	defer done()
	resp, err := client.ListKeys(ctx, &authv1.ListKeysRequest{})
	if err != nil {
		return nil
	}
	var ids []string
	for _, k := range resp.GetKeys() {
		ids = append(ids, k.GetKeyId())
	}
	return ids
}

// keysClient dials the auth service with the admin credential, bounded so a
// dead service does not hang the command.
func keysClient(ctx context.Context) (authv1.AuthServiceClient, context.Context, func(), error) {
	admin, err := credential(envAdminToken)
	if err != nil {
		return nil, nil, nil, err
	}
	addr := envOr("BMCIS_AUTH_ADDR", keysDefaultAddr)
	conn, err := grpcclient.Dial(addr, admin)
	if err != nil {
		return nil, nil, nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	return authv1.NewAuthServiceClient(conn), ctx, func() { cancel(); _ = conn.Close() }, nil
}

// parseKeysFlags parses flags that may come before or after positional
// arguments ("rotate KEY_ID --overlap 1h").
func parseKeysFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := parse(fs, args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return positional, nil
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
}

// parseDays parses a Go duration that may start with a number of days:
// "90d", "1d12h", "36h".
func parseDays(in string) (time.Duration, error) {
	bad := fmt.Errorf("invalid duration %q: use e.g. 90d, 1d12h, 36h or 30m", in)
	s := strings.TrimSpace(in)
	var days time.Duration
	if i := strings.IndexByte(s, 'd'); i >= 0 {
		n, err := strconv.ParseInt(s[:i], 10, 64)
		if err != nil || n < 0 || n > 100*365 {
			return 0, bad
		}
		days, s = time.Duration(n)*24*time.Hour, s[i+1:]
		if s == "" {
			return days, nil
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, bad
	}
	return days + d, nil
}

func runKeysCreate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("keys create", stderr)
	name := fs.String("name", "", "key name (required), e.g. the application using it")
	owner := fs.String("owner", "", "owner (default: the name); one owner may hold several keys")
	// One flag per rate-limit tier: --limit-minute, --limit-hour, ...
	limits := make([]*int64, len(ratelimit.Tiers))
	for i, t := range ratelimit.Tiers {
		limits[i] = fs.Int64(t.FlagName(), 0, "calls per "+t.Name+" (0: service default)")
	}
	expires := fs.String("expires-in", "", "lifetime, e.g. 30d (default: the auth service's BMCIS_KEY_LIFETIME, 90d)")
	categories := fs.String("categories", "", "comma-separated document categories the key may read (default: all)")
	tools := fs.String("tools", "", "comma-separated MCP tools the key may use: semantic_search, get_chunks, find_vendor_info (default: all)")
	groups := fs.String("groups", "", "comma-separated caller groups, e.g. hr,legal: the key also reads documents whose access list names group:NAME of one (default: none, everyone's documents only)")
	output := outputFlag(fs)
	rest, err := parseKeysFlags(fs, args)
	if err != nil {
		return err
	}
	if err := checkOutput(*output); err != nil {
		return err
	}
	if len(rest) > 0 {
		return usageErrorf("unexpected argument %q", rest[0])
	}
	if strings.TrimSpace(*name) == "" {
		return usageErrorf("--name is required")
	}
	for i, t := range ratelimit.Tiers {
		if *limits[i] < 0 {
			return usageErrorf("--%s must be 0 (service default) or more, got %d", t.FlagName(), *limits[i])
		}
	}
	req := &authv1.CreateKeyRequest{Name: *name, Owner: *owner, Limits: &authv1.RateLimits{}}
	for i, t := range ratelimit.Tiers {
		if *limits[i] != 0 {
			req.Limits.Tiers = append(req.Limits.Tiers, &authv1.TierLimit{Tier: t.Name, Value: *limits[i]})
		}
	}
	cats, tls := splitList(*categories), splitList(*tools)
	// An empty scope list means "all" to the auth service, so a scope flag
	// given with nothing in it (an unset shell variable) would widen the
	// key instead of narrowing it.
	if flagGiven(fs, "categories") && len(cats) == 0 {
		return usageErrorf("--categories: name at least one category, or leave the flag out for a key that reads every category")
	}
	if flagGiven(fs, "tools") && len(tls) == 0 {
		return usageErrorf("--tools: name at least one tool, or leave the flag out for a key that may use every tool")
	}
	if len(cats) > 0 || len(tls) > 0 {
		req.Scopes = &authv1.Scopes{Categories: cats, Tools: tls}
	}
	if req.Groups, err = access.ParseGroups(splitList(*groups)); err != nil {
		return usageErrorf("--groups: %v", err)
	}
	if *expires != "" {
		d, err := parseDays(*expires)
		if err != nil {
			return usageErrorf("--expires-in: %v", err)
		}
		req.ExpiresIn = durationpb.New(d)
	}
	client, ctx, done, err := keysClient(ctx)
	if err != nil {
		return err
	}
	defer done()
	resp, err := client.CreateKey(ctx, req)
	if err != nil {
		return fmt.Errorf("create key: %w", err)
	}
	if *output != outputTable {
		// The key and its record, the contract's fields.
		return writeRecord(stdout, *output, resp)
	}
	// The key alone on stdout, so `key=$(bmcisctl keys create ...)` works;
	// everything else on stderr.
	fmt.Fprintln(stdout, resp.GetApiKey())
	k := resp.GetKey()
	fmt.Fprintf(stderr, "created key %s (name %q, owner %q, expires %s, reads %s, groups %s); it is shown only this once\n",
		k.GetKeyId(), k.GetName(), k.GetOwner(), keysTime(k.GetExpiresAt(), "never"), keysScopes(k.GetScopes()), keysGroups(k.GetGroups()))
	return nil
}

func runKeysList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("keys list", stderr)
	owner := fs.String("owner", "", "only this owner's keys")
	all := fs.Bool("all", false, "include revoked and expired keys")
	quiet := fs.Bool("q", false, "print key ids only, one per line")
	output := outputFlag(fs)
	rest, err := parseKeysFlags(fs, args)
	if err != nil {
		return err
	}
	if err := checkOutput(*output); err != nil {
		return err
	}
	if len(rest) > 0 {
		return usageErrorf("unexpected argument %q", rest[0])
	}
	client, ctx, done, err := keysClient(ctx)
	if err != nil {
		return err
	}
	defer done()
	resp, err := client.ListKeys(ctx, &authv1.ListKeysRequest{Owner: *owner, IncludeInactive: *all})
	if err != nil {
		return fmt.Errorf("list keys: %w", err)
	}
	if *quiet {
		for _, k := range resp.GetKeys() {
			fmt.Fprintln(stdout, k.GetKeyId())
		}
		return nil
	}
	if *output != outputTable {
		return writeRecords(stdout, *output, resp.GetKeys())
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	names := make([]string, len(ratelimit.Tiers))
	for i, t := range ratelimit.Tiers {
		names[i] = strings.ToUpper(t.Name)
	}
	fmt.Fprintln(tw, "KEY ID\tNAME\tOWNER\tLIMITS ("+strings.Join(names, "/")+")\tCREATED\tLAST USED\tEXPIRES\tSTATUS\tGROUPS\tSCOPES")
	now := time.Now()
	for _, k := range resp.GetKeys() {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", k.GetKeyId(), k.GetName(), k.GetOwner(),
			keysLimits(k.GetLimits()), keysTime(k.GetCreatedAt(), "-"), keysTime(k.GetLastUsedAt(), "never"),
			keysTime(k.GetExpiresAt(), "never"), keysStatus(k, now), keysGroups(k.GetGroups()), keysScopes(k.GetScopes()))
	}
	return tw.Flush()
}

func runKeysRevoke(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("keys revoke", stderr)
	output := outputFlag(fs)
	rest, err := parseKeysFlags(fs, args)
	if err != nil {
		return err
	}
	if err := checkOutput(*output); err != nil {
		return err
	}
	if len(rest) != 1 {
		return usageErrorf("give exactly one KEY_ID")
	}
	client, ctx, done, err := keysClient(ctx)
	if err != nil {
		return err
	}
	defer done()
	resp, err := client.RevokeKey(ctx, &authv1.RevokeKeyRequest{KeyId: rest[0]})
	if err != nil {
		return fmt.Errorf("revoke key: %w", err)
	}
	if *output != outputTable {
		return writeRecord(stdout, *output, resp)
	}
	fmt.Fprintf(stdout, "revoked %s at %s (other auth replicas refuse it within 30 s)\n",
		resp.GetKey().GetKeyId(), keysTime(resp.GetKey().GetRevokedAt(), "-"))
	return nil
}

func runKeysRotate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("keys rotate", stderr)
	overlap := fs.String("overlap", "", "how long the old key keeps working (default 24h; 0 revokes it now)")
	expires := fs.String("expires-in", "", "lifetime of the new key (default: the old key's lifetime)")
	output := outputFlag(fs)
	rest, err := parseKeysFlags(fs, args)
	if err != nil {
		return err
	}
	if err := checkOutput(*output); err != nil {
		return err
	}
	if len(rest) != 1 {
		return usageErrorf("give exactly one KEY_ID")
	}
	req := &authv1.RotateKeyRequest{KeyId: rest[0]}
	if *overlap != "" {
		d, err := parseDays(*overlap)
		if err != nil {
			return usageErrorf("--overlap: %v", err)
		}
		req.Overlap = durationpb.New(d)
	}
	if *expires != "" {
		d, err := parseDays(*expires)
		if err != nil {
			return usageErrorf("--expires-in: %v", err)
		}
		req.ExpiresIn = durationpb.New(d)
	}
	client, ctx, done, err := keysClient(ctx)
	if err != nil {
		return err
	}
	defer done()
	resp, err := client.RotateKey(ctx, req)
	if err != nil {
		return fmt.Errorf("rotate key: %w", err)
	}
	if *output != outputTable {
		return writeRecord(stdout, *output, resp)
	}
	fmt.Fprintln(stdout, resp.GetApiKey())
	prev := resp.GetPrevious()
	until := keysTime(prev.GetExpiresAt(), "never")
	if prev.GetRevokedAt() != nil {
		until = "now (revoked)"
	}
	fmt.Fprintf(stderr, "rotated %s to %s (groups %s, kept); the old key works until %s; the new key is shown only this once\n",
		prev.GetKeyId(), resp.GetKey().GetKeyId(), keysGroups(resp.GetKey().GetGroups()), until)
	return nil
}

func keysTime(ts *timestamppb.Timestamp, none string) string {
	if ts == nil {
		return none
	}
	return ts.AsTime().UTC().Format("2006-01-02 15:04Z")
}

// keysLimits shows a key's own limit per tier, in tier order.
func keysLimits(l *authv1.RateLimits) string {
	parts := make([]string, len(ratelimit.Tiers))
	for i, t := range ratelimit.Tiers {
		parts[i] = "default"
		for _, tl := range l.GetTiers() {
			if tl.GetTier() == t.Name && tl.GetValue() != 0 {
				parts[i] = strconv.FormatInt(tl.GetValue(), 10)
			}
		}
	}
	return strings.Join(parts, "/")
}

// splitList splits a comma-separated flag value, dropping empty entries.
func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// keysScopes describes what a key may read, in one column.
func keysScopes(sc *authv1.Scopes) string {
	var parts []string
	if c := sc.GetCategories(); len(c) > 0 {
		parts = append(parts, "categories="+strings.Join(c, ","))
	}
	if t := sc.GetTools(); len(t) > 0 {
		parts = append(parts, "tools="+strings.Join(t, ","))
	}
	if len(parts) == 0 {
		return "all"
	}
	return strings.Join(parts, " ")
}

// keysGroups lists a key's caller groups in one column.
func keysGroups(groups []string) string {
	if len(groups) == 0 {
		return "-"
	}
	return strings.Join(groups, ",")
}

func keysStatus(k *authv1.ApiKey, now time.Time) string {
	switch {
	case k.GetRevokedAt() != nil && !k.GetRevokedAt().AsTime().After(now):
		return "revoked"
	case k.GetExpiresAt() != nil && !k.GetExpiresAt().AsTime().After(now):
		return "expired"
	}
	return "active"
}
