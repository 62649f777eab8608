package main

import (
	"context"
	"fmt"
	"io"
	"strconv"

	"github.com/bmcis/knowledge/migrations"
	"github.com/bmcis/knowledge/platform/pg"
)

func init() {
	commands["migrate"] = command{
		summary: "apply (up), roll back (down [VERSION]) or show (status) the schema; uses DATABASE_URL",
		run:     runMigrate,
	}
}

func runMigrate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("migrate", stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: bmcisctl migrate up | down [VERSION] | status")
		fmt.Fprintln(stderr, "  DATABASE_URL names the database; BMCIS_EMBEDDING_DIMENSIONS fixes the vector size (default 256).")
	}
	if err := parse(fs, args); err != nil {
		return err
	}
	rest := fs.Args()
	if len(rest) == 0 {
		rest = []string{"up"}
	}
	url := envOr("DATABASE_URL", "")
	if url == "" {
		return usageErrorf("DATABASE_URL is not set")
	}
	pool, err := pg.ConnectRaw(ctx, url)
	if err != nil {
		return err
	}
	defer pool.Close()

	switch rest[0] {
	case "up":
		applied, err := migrations.Up(ctx, pool)
		if err != nil {
			return err
		}
		current, _, err := migrations.Status(ctx, pool)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "applied %d migration(s); schema version %d\n", len(applied), current)
	case "down":
		target := int64(0)
		if len(rest) > 1 {
			v, err := strconv.ParseInt(rest[1], 10, 64)
			if err != nil || v < 0 {
				return usageErrorf("VERSION must be a non-negative integer, got %q", rest[1])
			}
			target = v
		}
		rolled, err := migrations.DownTo(ctx, pool, target)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "rolled back %d migration(s); schema version %d\n", len(rolled), target)
	case "status":
		current, pending, err := migrations.Status(ctx, pool)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "schema version %d; pending migrations: %t\n", current, pending)
	default:
		return usageErrorf("unknown migrate action %q (want up, down or status)", rest[0])
	}
	return nil
}
