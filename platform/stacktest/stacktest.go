// Package stacktest runs the real search, vendorgraph and auth services as
// subprocesses for tests in other modules (their server packages are
// internal to their own modules), on a fresh migrated database from
// platform/testdb, with 127.0.0.1:0 ports read back from the services' own
// "grpc listening" and "metrics listening" log lines. Each service connects
// as its own database role (testdb.ServiceURL), as deployed; the stack's
// DatabaseURL, the admin's, is for the test's own checks.
//
// It is for _test.go files only: it imports the database test helpers, which
// the light binaries (the MCP adapter, the gateway) must never link.
//
// A test starts a stack of its own with Start, which stops it when the test
// ends. A test package that shares one stack between its tests installs Main
// in TestMain and calls Shared, which starts the stack on first use and stops
// it after the last test:
//
//	func TestMain(m *testing.M) { stacktest.Main(m) }
//
//	func stack(t *testing.T) *stacktest.Stack {
//		return stacktest.Shared(t, "demo", stacktest.Options{}, func(t testing.TB, s *stacktest.Stack) {
//			s.IngestDemoDocs(t)
//			s.ImportDemoGraph(t)
//		})
//	}
//
// The binaries (the three services and bmcisctl, plus any named with Binary)
// are built once per test process with `go build` from the workspace root,
// into a temporary directory removed by Main (or left to the OS otherwise).
// A stack can run prebuilt binaries of another release instead
// (Options.BinDir), and Service.RestartFrom and Stack.StartAdapterBinaryOn
// swap a process for another release's: the rolling upgrade test (upgrade/).
// Data is loaded the way an operator loads it, with the built bmcisctl:
// `ingest`, `graph import` and `keys create`.
package stacktest

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/bmcis/knowledge/platform/config"
	"github.com/bmcis/knowledge/platform/deadaddr"
	"github.com/bmcis/knowledge/platform/grpcserver"
	"github.com/bmcis/knowledge/platform/rpcauth"
	"github.com/bmcis/knowledge/platform/testdb"
)

// Service names.
const (
	Search      = "search"
	VendorGraph = "vendorgraph"
	Auth        = "auth"
)

// Caller credentials of every stack, one per role (platform/rpcauth):
// ServiceToken is the read credential the gateway holds, AdapterToken the
// MCP adapter's own, IngestToken bmcisctl's for writing, AdminToken key
// management's. The services hold only their digests. Being published here,
// they and their digests are refused by every binary (platform/config's
// placeholder check) unless BMCIS_ALLOW_INSECURE_SECRETS is set, which the
// stack's environments do (devEnv).
const (
	ServiceToken = "stacktest-read-credential-0123456789abcdef"
	AdapterToken = "stacktest-adapter-credential-0123456789abcdef"
	IngestToken  = "stacktest-ingest-credential-0123456789abcdef"
	AdminToken   = "stacktest-admin-credential-0123456789abcdef"
	// VendorGraphToken is what the stack's vendorgraph presents to its
	// search (the vendorgraph role).
	VendorGraphToken = "stacktest-vendorgraph-credential-0123456789abcdef"
)

// devEnv marks the stack's processes as development ones, which accept the
// published credentials above (config.EnvAllowInsecureSecrets). It does not
// set pg.EnvAllowPrivilegedLogin: each service connects as its own role.
var devEnv = map[string]string{config.EnvAllowInsecureSecrets: "true"}

// credentialDigests is the services' side of the stack's credentials.
func credentialDigests() map[string]string {
	return map[string]string{
		grpcserver.CredentialEnv(rpcauth.Read):        rpcauth.DigestOf(ServiceToken).String(),
		grpcserver.CredentialEnv(rpcauth.Adapter):     rpcauth.DigestOf(AdapterToken).String(),
		grpcserver.CredentialEnv(rpcauth.Ingest):      rpcauth.DigestOf(IngestToken).String(),
		grpcserver.CredentialEnv(rpcauth.Admin):       rpcauth.DigestOf(AdminToken).String(),
		grpcserver.CredentialEnv(rpcauth.VendorGraph): rpcauth.DigestOf(VendorGraphToken).String(),
	}
}

// EnvRedisURL names the variable with the test Redis (`make test` sets it);
// when set, auth shares its rate limiter through it, as in production.
const EnvRedisURL = "BMCIS_TEST_REDIS_URL"

// AllServices lists the services a stack starts by default.
var AllServices = []string{Search, VendorGraph, Auth}

// packages maps binary names to their packages, relative to the workspace
// root. The first four are built together by Build.
var packages = map[string]string{
	Search:        "./services/search/cmd/search",
	VendorGraph:   "./services/vendorgraph/cmd/vendorgraph",
	Auth:          "./services/auth/cmd/auth",
	"bmcisctl":    "./bmcisctl/cmd/bmcisctl",
	"mcp-adapter": "./mcp-adapter/cmd/mcp-adapter",
	"gateway":     "./gateway/cmd/gateway",
}

var coreBinaries = []string{Search, VendorGraph, Auth, "bmcisctl"}

var build struct {
	sync.Mutex
	dir   string
	built map[string]error
}

// RepoRoot returns the workspace root: the nearest directory above the
// working directory that holds go.work.
func RepoRoot(t testing.TB) string {
	t.Helper()
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.work")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("stacktest: no go.work above %s: run the tests inside the repository", dir)
		}
	}
}

// Build builds the three services and bmcisctl once per test process and
// returns the directory holding them.
func Build(t testing.TB) string {
	t.Helper()
	if err := buildBinaries(coreBinaries...); err != nil {
		t.Fatal(err)
	}
	return build.dir
}

// Binary returns the path of one binary (a service, "bmcisctl",
// "mcp-adapter" or "gateway"), built once per test process.
func Binary(t testing.TB, name string) string {
	t.Helper()
	if _, ok := packages[name]; !ok {
		t.Fatalf("stacktest: unknown binary %q", name)
	}
	if err := buildBinaries(name); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(build.dir, name)
}

func buildBinaries(names ...string) error {
	build.Lock()
	defer build.Unlock()
	if build.built == nil {
		build.built = map[string]error{}
	}
	var todo []string
	for _, n := range names {
		if err, done := build.built[n]; done {
			if err != nil {
				return err
			}
			continue
		}
		todo = append(todo, n)
	}
	if len(todo) == 0 {
		return nil
	}
	if build.dir == "" {
		d, err := os.MkdirTemp("", "bmcis-stacktest-bin-")
		if err != nil {
			return err
		}
		build.dir = d
	}
	root, err := repoRoot()
	if err != nil {
		return err
	}
	args := []string{"build", "-o", build.dir + string(os.PathSeparator)}
	for _, n := range todo {
		args = append(args, packages[n])
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		err = fmt.Errorf("stacktest: go build %s: %v\n%s", strings.Join(todo, " "), err, out)
	}
	for _, n := range todo {
		build.built[n] = err
	}
	return err
}

// binary is the path of a binary the stack runs: from Options.BinDir when
// set, else the workspace's, built once per test process.
func (s *Stack) binary(name string) (string, error) {
	if s.opts.BinDir != "" {
		return filepath.Join(s.opts.BinDir, name), nil
	}
	if err := buildBinaries(name); err != nil {
		return "", err
	}
	return filepath.Join(build.dir, name), nil
}

// Options configure a stack.
type Options struct {
	// DatabaseURL is the database the services use; empty creates a fresh
	// migrated one with testdb.New (dropped with the stack).
	DatabaseURL string
	// Services to start; nil starts AllServices.
	Services []string
	// Env is added to every service's environment (NAME=VALUE overrides the
	// stack's defaults).
	Env map[string]string
	// ServiceEnv is added to one service's environment, after Env.
	ServiceEnv map[string]map[string]string
	// NoRedis keeps auth on its in-memory limiter even when
	// BMCIS_TEST_REDIS_URL is set.
	NoRedis bool
	// BinDir holds prebuilt binaries (the services, bmcisctl, mcp-adapter)
	// to run instead of the workspace's: another release's, for a rolling
	// upgrade test. Empty builds the workspace's once per test process.
	BinDir string
}

// Stack is a set of running services on one database.
type Stack struct {
	// DatabaseURL is the services' database, as the migration role (the
	// admin) connects to it.
	DatabaseURL string
	// serviceURLs is the database as each service's own role connects.
	serviceURLs map[string]string

	bin      string
	opts     Options
	mu       sync.Mutex
	services map[string]*Service
	extra    []*Service
	// searchAddr is where vendorgraph calls search when the stack has none.
	searchAddr string
}

// Start starts a stack for this test; it is stopped when the test ends.
// Search starts first (vendorgraph is given its address), the others then in
// parallel; Start returns once each serves gRPC.
func Start(t testing.TB, opts Options) *Stack {
	t.Helper()
	s, err := start(t, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func start(t testing.TB, opts Options) (*Stack, error) {
	bin := opts.BinDir
	if bin == "" {
		if err := buildBinaries(coreBinaries...); err != nil {
			return nil, err
		}
		bin = build.dir
	}
	if opts.DatabaseURL == "" {
		_, opts.DatabaseURL = testdb.New(t)
	}
	names := opts.Services
	if names == nil {
		names = AllServices
	}
	s := &Stack{DatabaseURL: opts.DatabaseURL, bin: bin, opts: opts, services: map[string]*Service{},
		serviceURLs: map[string]string{}}
	// Each service connects as its own database role, as deployed.
	for _, name := range AllServices {
		u, err := testdb.ServiceURLErr(opts.DatabaseURL, name)
		if err != nil {
			return nil, err
		}
		s.serviceURLs[name] = u
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, svc := range s.all() {
				t.Logf("--- %s log (last lines)\n%s", svc.Name, svc.Logs())
			}
		}
		s.Close()
	})
	// Search starts first: vendorgraph is given its address (an import
	// sends search the names it changed). Without a search in the stack,
	// vendorgraph's calls go to an address that refuses them.
	launch := func(name string) error {
		svc, err := s.launch(name, s.env(name, nil))
		if err != nil {
			return err
		}
		s.mu.Lock()
		s.services[name] = svc
		s.mu.Unlock()
		return nil
	}
	rest := names
	if slices.Contains(names, Search) {
		if err := launch(Search); err != nil {
			return nil, err
		}
		rest = slices.DeleteFunc(slices.Clone(names), func(n string) bool { return n == Search })
	} else {
		s.searchAddr = deadaddr.Loopback(t)
	}
	var wg sync.WaitGroup
	errs := make([]error, len(rest))
	for i, name := range rest {
		wg.Go(func() { errs[i] = launch(name) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return s, nil
}

// env is a service's environment: the process's, the stack defaults, the
// options, then extra.
func (s *Stack) env(name string, extra map[string]string) []string {
	vars := map[string]string{
		"DATABASE_URL":           s.serviceURLs[name],
		"BMCIS_GRPC_ADDR":        "127.0.0.1:0",
		"BMCIS_METRICS_ADDR":     "127.0.0.1:0",
		"BMCIS_SHUTDOWN_DRAIN":   "0s",
		"BMCIS_SHUTDOWN_TIMEOUT": "5s",
		"BMCIS_LOG_LEVEL":        "info",
	}
	maps.Copy(vars, credentialDigests())
	maps.Copy(vars, devEnv)
	if r := os.Getenv(EnvRedisURL); r != "" && !s.opts.NoRedis && name == Auth {
		vars["REDIS_URL"] = r
	}
	if name == VendorGraph {
		vars["BMCIS_VENDORGRAPH_TOKEN"] = VendorGraphToken
		vars["BMCIS_SEARCH_ADDR"] = s.searchAddr
		if svc := s.Service(Search); svc != nil {
			vars["BMCIS_SEARCH_ADDR"] = svc.Addr()
		}
	}
	for k, v := range s.opts.Env {
		vars[k] = v
	}
	for k, v := range s.opts.ServiceEnv[name] {
		vars[k] = v
	}
	for k, v := range extra {
		vars[k] = v
	}
	out := os.Environ()
	for k, v := range vars {
		out = append(out, k+"="+v)
	}
	return out
}

// Service returns a running service of the stack (nil when not started).
func (s *Stack) Service(name string) *Service {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.services[name]
}

// Addr is a service's gRPC address.
func (s *Stack) Addr(name string) string {
	if svc := s.Service(name); svc != nil {
		return svc.Addr()
	}
	return ""
}

// StartService starts one more process of a service on the stack's database,
// with extra environment (for example a second auth whose Redis is
// unreachable). It is stopped with the stack.
func (s *Stack) StartService(t testing.TB, name string, extra map[string]string) *Service {
	t.Helper()
	svc, err := s.launch(name, s.env(name, extra))
	if err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	s.extra = append(s.extra, svc)
	s.mu.Unlock()
	return svc
}

func (s *Stack) all() []*Service {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*Service, 0, len(s.services)+len(s.extra))
	names := make([]string, 0, len(s.services))
	for n := range s.services {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		out = append(out, s.services[n])
	}
	return append(out, s.extra...)
}

// Close stops every process of the stack (Start and Shared arrange it).
func (s *Stack) Close() {
	var wg sync.WaitGroup
	for _, svc := range s.all() {
		wg.Go(func() { _ = svc.stop() })
	}
	wg.Wait()
}

// ClientEnv is the environment a client of the stack needs (bmcisctl, the
// MCP adapter, the gateway): the read credential in BMCIS_SERVICE_TOKEN
// (what the adapter and the gateway hold), bmcisctl's ingest and admin
// credentials, the development flag that lets them through (devEnv), and
// each running service's address as BMCIS_<NAME>_ADDR.
func (s *Stack) ClientEnv() map[string]string {
	out := map[string]string{
		"BMCIS_SERVICE_TOKEN": ServiceToken,
		"BMCIS_INGEST_TOKEN":  IngestToken,
		"BMCIS_ADMIN_TOKEN":   AdminToken,
	}
	maps.Copy(out, devEnv)
	for _, svc := range s.all() {
		k := "BMCIS_" + strings.ToUpper(svc.Name) + "_ADDR"
		if _, done := out[k]; !done {
			out[k] = svc.Addr()
		}
	}
	// The stack's own services win over extra processes of the same name.
	for name, svc := range s.services {
		out["BMCIS_"+strings.ToUpper(name)+"_ADDR"] = svc.Addr()
	}
	return out
}

// Service is one running service process.
type Service struct {
	Name string

	bin   string
	env   []string
	mu    sync.Mutex
	cmd   *exec.Cmd
	addr  string
	maddr string
	exit  chan struct{}
	logs  *logTail
}

// Addr is the gRPC address (host:port); it survives Restart.
func (p *Service) Addr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.addr
}

// MetricsAddr is the metrics listener's address (host:port).
func (p *Service) MetricsAddr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.maddr
}

// MetricsURL is http://MetricsAddr/metrics.
func (p *Service) MetricsURL() string { return "http://" + p.MetricsAddr() + "/metrics" }

// PID is the running process's id (0 when not started).
func (p *Service) PID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Logs returns the last lines the process wrote to stderr.
func (p *Service) Logs() string { return p.logs.String() }

// Running reports whether the process is still running.
func (p *Service) Running() bool {
	p.mu.Lock()
	exit := p.exit
	p.mu.Unlock()
	select {
	case <-exit:
		return false
	default:
		return true
	}
}

// Stop sends SIGTERM and waits for the process to end (killing it after
// 15 s).
func (p *Service) Stop(t testing.TB) {
	t.Helper()
	if err := p.stop(); err != nil {
		t.Error(err)
	}
}

func (p *Service) stop() error {
	p.mu.Lock()
	cmd, exit := p.cmd, p.exit
	p.mu.Unlock()
	select {
	case <-exit:
		return nil
	default:
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exit:
		return nil
	case <-time.After(15 * time.Second):
		_ = cmd.Process.Kill()
		<-exit
		return fmt.Errorf("stacktest: %s ignored SIGTERM for 15 s and was killed", p.Name)
	}
}

// Kill kills the process (SIGKILL: no drain, connections dropped) and
// waits for it to end; Start brings it back on the same address.
func (p *Service) Kill(t testing.TB) {
	t.Helper()
	p.mu.Lock()
	cmd, exit := p.cmd, p.exit
	p.mu.Unlock()
	_ = cmd.Process.Kill()
	<-exit
}

// Signal sends sig to the process (SIGTERM to drain it) without waiting.
func (p *Service) Signal(sig os.Signal) error {
	p.mu.Lock()
	cmd := p.cmd
	p.mu.Unlock()
	return cmd.Process.Signal(sig)
}

// Wait waits up to d for the process to end and reports whether it did.
func (p *Service) Wait(d time.Duration) bool {
	p.mu.Lock()
	exit := p.exit
	p.mu.Unlock()
	select {
	case <-exit:
		return true
	case <-time.After(d):
		return false
	}
}

// Restart stops the process and starts it again on the same gRPC address,
// so clients dialed to it reconnect.
func (p *Service) Restart(t testing.TB) {
	t.Helper()
	if err := p.stop(); err != nil {
		t.Error(err)
	}
	p.Start(t)
}

// RestartFrom stops the process and starts the same service from binDir's
// binary (another release's) on the same gRPC address and environment: one
// step of a rolling upgrade.
func (p *Service) RestartFrom(t testing.TB, binDir string) {
	t.Helper()
	if err := p.stop(); err != nil {
		t.Error(err)
	}
	p.mu.Lock()
	p.bin = filepath.Join(binDir, p.Name)
	p.mu.Unlock()
	p.Start(t)
}

// Start starts a stopped service again on its gRPC address.
func (p *Service) Start(t testing.TB) {
	t.Helper()
	addr := p.Addr()
	env := append(append([]string(nil), p.env...), "BMCIS_GRPC_ADDR="+addr)
	var err error
	for attempt := 0; attempt < 20; attempt++ {
		// The old listener's port is free once the process is gone; retry
		// briefly in case the kernel is slow to release it.
		if err = p.run(env); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("stacktest: restart %s on %s: %v", p.Name, addr, err)
}

func (s *Stack) launch(name string, env []string) (*Service, error) {
	p := &Service{Name: name, bin: filepath.Join(s.bin, name), env: env, logs: &logTail{max: 400}}
	if err := p.run(env); err != nil {
		return nil, err
	}
	return p, nil
}

// run starts the process with env and waits until it serves gRPC.
func (p *Service) run(env []string) error {
	p.mu.Lock()
	cmd := exec.Command(p.bin)
	p.mu.Unlock()
	cmd.Env = env
	cmd.Stdout = io.Discard
	setParentDeathSignal(cmd)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("stacktest: start %s: %w", p.Name, err)
	}
	exit := make(chan struct{})
	ready := make(chan struct{})
	p.mu.Lock()
	p.cmd, p.exit = cmd, exit
	p.mu.Unlock()
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<16), 1<<20)
		var once sync.Once
		for sc.Scan() {
			line := sc.Text()
			p.logs.add(line)
			var l struct{ Msg, Addr string }
			if json.Unmarshal([]byte(line), &l) != nil {
				continue
			}
			switch l.Msg {
			case "metrics listening":
				p.mu.Lock()
				p.maddr = l.Addr
				p.mu.Unlock()
			case "grpc listening":
				p.mu.Lock()
				p.addr = l.Addr
				p.mu.Unlock()
				once.Do(func() { close(ready) })
			}
		}
	}()
	go func() {
		_ = cmd.Wait()
		close(exit)
	}()
	select {
	case <-ready:
		return nil
	case <-exit:
		return fmt.Errorf("stacktest: %s exited before serving:\n%s", p.Name, p.logs.String())
	case <-time.After(90 * time.Second):
		_ = cmd.Process.Kill()
		<-exit
		return fmt.Errorf("stacktest: %s did not serve within 90 s:\n%s", p.Name, p.logs.String())
	}
}

type logTail struct {
	mu    sync.Mutex
	max   int
	lines []string
}

func (l *logTail) add(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, s)
	if len(l.lines) > l.max {
		l.lines = l.lines[len(l.lines)-l.max:]
	}
}

func (l *logTail) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// LogContains reports whether any kept log line contains s.
func (p *Service) LogContains(s string) bool { return strings.Contains(p.Logs(), s) }

// WaitLog waits up to d for a log line containing s.
func (p *Service) WaitLog(t testing.TB, s string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !p.LogContains(s) {
		if time.Now().After(deadline) {
			t.Fatalf("stacktest: %s logged no %q within %s:\n%s", p.Name, s, d, p.Logs())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
