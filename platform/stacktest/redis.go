package stacktest

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"fmt"
	"math/big"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Redis is a private redis-server for one test, which the test may kill and
// restart; the shared test Redis is never touched.
type Redis struct {
	t    testing.TB
	port int
	dir  string
	cmd  *exec.Cmd
	done chan struct{}
}

// StartRedis starts a redis-server on a free loopback port; it is killed when
// the test ends.
func StartRedis(t testing.TB) *Redis {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatalf("redis-server not found: install it with deploy/local/install-deps.sh (Debian package redis-server)")
	}
	r := &Redis{t: t, port: freeLowPort(t), dir: t.TempDir()}
	r.Start()
	t.Cleanup(r.Kill)
	return r
}

// freeLowPort picks a free loopback port below Linux's ephemeral range
// (32768-60999). A port from that range could be taken, while the server is
// down for a restart, as the source port of a client still dialling it (TCP
// self-connect), and the restart would then fail.
func freeLowPort(t testing.TB) int {
	t.Helper()
	for range 100 {
		n, err := rand.Int(rand.Reader, big.NewInt(10_000))
		require.NoError(t, err)
		port := 20_000 + int(n.Int64())
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		require.NoError(t, l.Close())
		return port
	}
	t.Fatalf("no free port for a private redis-server")
	return 0
}

// URL returns the server's redis:// URL.
func (r *Redis) URL() string { return fmt.Sprintf("redis://127.0.0.1:%d/0", r.port) }

// Start (re)starts the server on its port and waits until it answers.
func (r *Redis) Start() {
	r.t.Helper()
	r.cmd = exec.Command("redis-server", "--port", fmt.Sprint(r.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", r.dir)
	var out bytes.Buffer
	r.cmd.Stdout, r.cmd.Stderr = &out, &out
	require.NoError(r.t, r.cmd.Start())
	r.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); close(done) }(r.cmd, r.done)
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := r.ping()
		if err == nil {
			return
		}
		select {
		case <-r.done:
			r.t.Fatalf("private redis-server on port %d exited: %s", r.port, out.String())
		default:
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("private redis-server did not answer on port %d: %v", r.port, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ping speaks the one Redis command it needs over a plain connection.
func (r *Redis) ping() error {
	c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", r.port), time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "+PONG") {
		return fmt.Errorf("unexpected answer %q", strings.TrimSpace(line))
	}
	return nil
}

// Kill stops the server abruptly (SIGKILL) and waits for it to exit.
func (r *Redis) Kill() {
	if r.cmd == nil || r.cmd.Process == nil {
		return
	}
	_ = r.cmd.Process.Kill()
	<-r.done
	r.cmd = nil
}
