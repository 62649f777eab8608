package stacktest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/migrations"
)

// EnvPostgresBin names the directory of PostgreSQL's server binaries
// (initdb, postgres); it defaults to Debian's /usr/lib/postgresql/15/bin,
// where deploy/local/install-deps.sh puts them (with pgvector).
const EnvPostgresBin = "BMCIS_PG_BIN"

// Postgres is a private PostgreSQL cluster for one test, in a directory and
// on a port of its own, which the test may stop, kill (-9) and start again;
// the shared test server is never touched. The postmaster runs in the
// foreground as a child of the test (as the postgres user when the test runs
// as root), so it ends with the test process.
type Postgres struct {
	t    testing.TB
	bin  string
	port int
	data string
	run  string
	cred *syscall.Credential

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}

	logMu sync.Mutex
	logs  bytes.Buffer
}

// StartPostgres initialises a cluster in a temporary directory, starts it on
// a free loopback port, creates the database "bmcis" and migrates it. It is
// stopped and removed when the test ends.
func StartPostgres(t testing.TB) *Postgres {
	t.Helper()
	p := StartPostgresEmpty(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool, err := pgxpool.New(ctx, p.URL())
	require.NoError(t, err)
	defer pool.Close()
	_, err = migrations.Up(ctx, pool)
	require.NoError(t, err, "migrate the private cluster")
	return p
}

// StartPostgresEmpty is StartPostgres without the migrations: the database
// "bmcis" is created empty, for a test that migrates it with a given
// release's bmcisctl (a rolling upgrade test).
func StartPostgresEmpty(t testing.TB) *Postgres {
	t.Helper()
	bin := os.Getenv(EnvPostgresBin)
	if bin == "" {
		bin = "/usr/lib/postgresql/15/bin"
	}
	if _, err := os.Stat(filepath.Join(bin, "initdb")); err != nil {
		t.Fatalf("no initdb in %s (set %s): install PostgreSQL 15 with deploy/local/install-deps.sh", bin, EnvPostgresBin)
	}
	base, err := os.MkdirTemp("", "bmcis-pg-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(base) })
	p := &Postgres{t: t, bin: bin, data: filepath.Join(base, "data"), run: filepath.Join(base, "run")}
	require.NoError(t, os.Mkdir(p.data, 0o700))
	require.NoError(t, os.Mkdir(p.run, 0o755))
	if os.Geteuid() == 0 {
		// PostgreSQL refuses to run as root.
		u, err := user.Lookup("postgres")
		require.NoError(t, err, "running as root needs the postgres user (deploy/local/install-deps.sh creates it)")
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		p.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		require.NoError(t, os.Chmod(base, 0o755))
		for _, d := range []string{p.data, p.run} {
			require.NoError(t, os.Chown(d, uid, gid))
		}
	}
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", p.data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C.UTF-8", "--no-sync")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: p.cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	t.Cleanup(p.Stop)
	for range 20 {
		if p.port, err = lowPort(); err != nil {
			break
		}
		if err = p.start(); !errors.Is(err, errPortTaken) {
			break
		}
	}
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, p.url("postgres"))
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "CREATE DATABASE bmcis")
	_ = conn.Close(ctx)
	require.NoError(t, err)
	return p
}

// URL is the database's URL (user postgres, trust auth on loopback).
func (p *Postgres) URL() string { return p.url("bmcis") }

func (p *Postgres) url(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", p.port, db)
}

// Port is the cluster's TCP port.
func (p *Postgres) Port() int { return p.port }

// Start starts the postmaster (again) on the cluster's port and waits until
// it accepts connections.
func (p *Postgres) Start() {
	p.t.Helper()
	if err := p.start(); err != nil {
		p.t.Fatal(err)
	}
}

func (p *Postgres) start() error {
	p.mu.Lock()
	// Durability stays on for commits (synchronous_commit): the kill tests
	// check that nothing acknowledged is lost. fsync=off only matters for an
	// operating-system crash, which no test makes.
	cmd := exec.Command(filepath.Join(p.bin, "postgres"), "-D", p.data, "-p", strconv.Itoa(p.port), "-k", p.run,
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "full_page_writes=off",
		"-c", "max_connections=200", "-c", "shared_buffers=64MB")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: p.cred, Pdeathsig: syscall.SIGQUIT}
	p.logMu.Lock()
	p.logs.Reset()
	p.logMu.Unlock()
	logs := &lockedWriter{mu: &p.logMu, w: &p.logs}
	cmd.Stdout, cmd.Stderr = logs, logs
	err := cmd.Start()
	if err != nil {
		p.mu.Unlock()
		return fmt.Errorf("start postgres: %w", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	p.cmd, p.done = cmd, done
	p.mu.Unlock()

	deadline := time.Now().Add(30 * time.Second)
	for {
		err := p.ours()
		if err == nil {
			return nil
		}
		select {
		case <-done:
			p.mu.Lock()
			p.cmd = nil
			p.mu.Unlock()
			if strings.Contains(p.Logs(), "could not bind") {
				return fmt.Errorf("postgres on port %d: %w", p.port, errPortTaken)
			}
			return fmt.Errorf("postgres exited on start: %s", p.Logs())
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres did not accept connections within 30 s: %v\n%s", err, p.Logs())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ours checks that the server accepting connections on the port is this
// cluster (its data directory), not another one that holds the port.
func (p *Postgres) ours() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, p.url("postgres"))
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(ctx) }()
	var dir string
	if err := conn.QueryRow(ctx, "SHOW data_directory").Scan(&dir); err != nil {
		return err
	}
	if dir != p.data {
		return fmt.Errorf("another cluster (%s) answers on port %d", dir, p.port)
	}
	return nil
}

// Stop shuts the cluster down the way an operator would (fast shutdown:
// sessions are ended, the server checkpoints) and waits for it to exit.
func (p *Postgres) Stop() {
	p.signal(syscall.SIGINT, false)
}

// Kill kills the postmaster and every server process (SIGKILL), as the
// kernel's OOM killer or a lost node would, and waits for them to exit.
func (p *Postgres) Kill() {
	p.signal(syscall.SIGKILL, true)
}

func (p *Postgres) signal(sig syscall.Signal, children bool) {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.cmd = nil
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	var kids []int
	if children {
		kids = childrenOf(cmd.Process.Pid)
	}
	_ = cmd.Process.Signal(sig)
	for _, pid := range kids {
		_ = syscall.Kill(pid, sig)
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
	// A restart must not find server processes still attached to the old
	// shared memory.
	for _, pid := range kids {
		for i := 0; i < 500 && syscall.Kill(pid, 0) == nil; i++ {
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// Logs returns what the server wrote since it last started.
func (p *Postgres) Logs() string {
	p.logMu.Lock()
	defer p.logMu.Unlock()
	return p.logs.String()
}

// childrenOf lists the processes whose parent is pid (from /proc).
func childrenOf(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...; comm may hold spaces, so split after ')'.
		rest := string(stat[bytes.LastIndexByte(stat, ')')+1:])
		f := strings.Fields(rest)
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			out = append(out, child)
		}
	}
	return out
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	// The buffer is capped: a long test keeps only the start of the log.
	if l.w.Len() > 1<<20 {
		return len(b), nil
	}
	return l.w.Write(b)
}
