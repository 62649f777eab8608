package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	vendorgraphv1 "github.com/bmcis/knowledge/gen/go/bmcis/vendorgraph/v1"
	"github.com/bmcis/knowledge/platform/deadaddr"
	"github.com/bmcis/knowledge/platform/grpcclient"
)

const graphTestToken = "graph-test-token-0123456789"

// stubGraph stands in for the vendorgraph service: it records what the CLI
// streams and answers with a fixed reply or rejection.
type stubGraph struct {
	vendorgraphv1.UnimplementedVendorGraphServiceServer
	mu       sync.Mutex
	received []*vendorgraphv1.ImportGraphRequest
	reject   *vendorgraphv1.ImportGraphFailure
	token    string
}

func (s *stubGraph) ImportGraph(stream grpc.ClientStreamingServer[vendorgraphv1.ImportGraphRequest, vendorgraphv1.ImportGraphResponse]) error {
	md, _ := metadata.FromIncomingContext(stream.Context())
	s.mu.Lock()
	if v := md.Get(grpcclient.ServiceTokenHeader); len(v) > 0 {
		s.token = v[0]
	}
	s.mu.Unlock()
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		s.mu.Lock()
		s.received = append(s.received, req)
		s.mu.Unlock()
	}
	if s.reject != nil {
		st, _ := status.New(codes.InvalidArgument, "import rejected").WithDetails(s.reject)
		return st.Err()
	}
	return stream.SendAndClose(&vendorgraphv1.ImportGraphResponse{
		Lines: int64(len(s.received)), EntitiesCreated: 2, RelationshipsCreated: 1, RelationshipsUnchanged: 4, Seconds: 0.01,
	})
}

func (s *stubGraph) GetGraphStatus(context.Context, *vendorgraphv1.GetGraphStatusRequest) (*vendorgraphv1.GetGraphStatusResponse, error) {
	return &vendorgraphv1.GetGraphStatusResponse{Vendors: 12, Entities: 76, Relationships: 113}, nil
}

func startStubGraph(t *testing.T) *stubGraph {
	t.Helper()
	stub := &stubGraph{}
	gs := grpc.NewServer()
	vendorgraphv1.RegisterVendorGraphServiceServer(gs, stub)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	t.Setenv("BMCIS_VENDORGRAPH_ADDR", lis.Addr().String())
	t.Setenv("BMCIS_INGEST_TOKEN", graphTestToken)
	return stub
}

func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	code := run(ctx, args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "graph.jsonl")
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	return path
}

func TestGraphImportStreamsEveryLine(t *testing.T) {
	stub := startStubGraph(t)
	path := writeFile(t, "{\"kind\":\"entity\"}\r\n\n{\"kind\":\"relationship\"}\n{\"last\":true}")
	code, stdout, stderr := runCLI(t, "graph", "import", path)
	require.Equal(t, 0, code, stderr)
	require.Equal(t, graphTestToken, stub.token)
	var got []string
	for i, r := range stub.received {
		require.Equal(t, int64(i+1), r.GetLineNumber())
		got = append(got, r.GetLine())
	}
	require.Equal(t, []string{`{"kind":"entity"}`, ``, `{"kind":"relationship"}`, `{"last":true}`}, got)
	require.Contains(t, stdout, "imported "+path+": 4 lines")
	require.Contains(t, stdout, "entities:      2 created, 0 updated, 0 unchanged")
	require.Contains(t, stdout, "relationships: 1 created, 0 updated, 4 unchanged")
	require.NotContains(t, stderr, "\r", "no progress bar when stderr is not a terminal")
}

func TestGraphImportRejectedListsProblems(t *testing.T) {
	stub := startStubGraph(t)
	stub.reject = &vendorgraphv1.ImportGraphFailure{Problems: []*vendorgraphv1.ImportProblem{
		{LineNumber: 2, Message: `missing required field "name"`},
		{LineNumber: 0, Message: "3 more problems not listed"},
	}}
	path := writeFile(t, "{}\n{}\n")
	code, stdout, stderr := runCLI(t, "graph", "import", path)
	require.Equal(t, 1, code)
	require.Empty(t, stdout)
	require.Contains(t, stderr, path+`:2: missing required field "name"`)
	require.Contains(t, stderr, path+": 3 more problems not listed")
	require.Contains(t, stderr, "nothing was written")
}

func TestGraphImportBadInput(t *testing.T) {
	startStubGraph(t)
	long := writeFile(t, "{}\n"+strings.Repeat("x", graphMaxLineBytes+1)+"\n")
	badUTF8 := writeFile(t, "{\"name\":\"\xff\"}\n")
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no subcommand", []string{"graph"}, 2, "needs a subcommand"},
		{"unknown subcommand", []string{"graph", "export"}, 2, `unknown graph subcommand "export"`},
		{"no file", []string{"graph", "import"}, 2, "exactly one FILE.jsonl"},
		{"two files", []string{"graph", "import", "a", "b"}, 2, "exactly one FILE.jsonl"},
		{"missing file", []string{"graph", "import", "/nonexistent/graph.jsonl"}, 1, "no such file"},
		{"directory", []string{"graph", "import", os.TempDir()}, 1, "is a directory"},
		{"line too long", []string{"graph", "import", long}, 1, ":2: line is"},
		{"invalid UTF-8", []string{"graph", "import", badUTF8}, 1, ":1: not valid UTF-8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runCLI(t, tc.args...)
			require.Equal(t, tc.code, code, stderr)
			require.Contains(t, stderr, tc.want)
		})
	}
	t.Run("no token", func(t *testing.T) {
		t.Setenv("BMCIS_INGEST_TOKEN", "")
		code, _, stderr := runCLI(t, "graph", "import", long)
		require.Equal(t, 2, code)
		require.Contains(t, stderr, "BMCIS_INGEST_TOKEN is not set")
	})
	t.Run("service down", func(t *testing.T) {
		addr := deadaddr.Loopback(t)
		code, _, stderr := runCLI(t, "graph", "import", "-addr", addr, writeFile(t, "{}\n"))
		require.Equal(t, exitUnavailable, code)
		require.Contains(t, stderr, addr)
	})
}

func TestGraphStatus(t *testing.T) {
	startStubGraph(t)
	code, stdout, stderr := runCLI(t, "graph", "status")
	require.Equal(t, 0, code, stderr)
	require.Equal(t, "vendors 12, entities 76, relationships 113, last updated never\n", stdout)
}
