package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/bmcis/knowledge/platform/config"
)

// TestServiceErrorsPrintOneWay: a service's error prints as "message
// (Code)" after whatever context the command wrapped around it, never as
// grpc's "rpc error: code = ... desc = ...", and keeps its exit code.
func TestServiceErrorsPrintOneWay(t *testing.T) {
	notFound := status.Error(codes.NotFound, `no source named "x"`)
	denied := status.Error(codes.PermissionDenied, "this credential may not call Reindex")
	// A configuration the command refuses exits as a usage error (nothing
	// was done) but says what it is.
	badConfig := config.FromMap(nil)
	badConfig.Failf("DATABASE_URL", "its password is a published placeholder")
	tests := []struct {
		name string
		err  error
		want string
		code int
	}{
		{"bare", notFound, `bmcisctl: no source named "x" (NotFound)` + "\n", exitFailed},
		{"wrapped", fmt.Errorf("sync source %q via %s: %w", "x", "127.0.0.1:1", notFound),
			`bmcisctl: sync source "x" via 127.0.0.1:1: no source named "x" (NotFound)` + "\n", exitFailed},
		{"wrapped twice", fmt.Errorf("query q1: %w", fmt.Errorf("search: %w", denied)),
			"bmcisctl: query q1: search: this credential may not call Reindex (PermissionDenied)\n", exitRefused},
		{"no message", fmt.Errorf("list keys: %w", status.Error(codes.Unavailable, "")),
			"bmcisctl: list keys: Unavailable\n", exitUnavailable},
		{"not a service's", fmt.Errorf("read x: %w", errors.New("no such file")), "bmcisctl: read x: no such file\n", exitFailed},
		{"partial", fmt.Errorf("%w: 2 files not taken", errPartial), "bmcisctl: partial: 2 files not taken\n", exitPartial},
		{"deadline", context.DeadlineExceeded, "bmcisctl: context deadline exceeded\n", exitUnavailable},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			require.Equal(t, tc.code, exitCode(nil, tc.err, &stderr))
			require.Equal(t, tc.want, stderr.String())
		})
	}
}
