package stacktest

import (
	"bufio"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
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

// StartRedis starts a redis-server on a loopback port of its own; it is
// killed when the test ends.
func StartRedis(t testing.TB) *Redis {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatalf("redis-server not found: install it with deploy/local/install-deps.sh (Debian package redis-server)")
	}
	r := &Redis{t: t, dir: t.TempDir()}
	t.Cleanup(r.Kill)
	var err error
	for range 20 {
		if r.port, err = lowPort(); err != nil {
			break
		}
		if err = r.start(); !errors.Is(err, errPortTaken) {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// errPortTaken: the server could not bind its port (another listener holds
// it); the first start tries another one.
var errPortTaken = errors.New("port taken")

// lowPort picks a loopback port below Linux's ephemeral range (32768-60999)
// at random. A port from that range could be taken, while the server is down
// for a restart, as the source port of a client still dialling it (TCP
// self-connect), and the restart would then fail. The port is not probed
// (listening and closing would race other listeners for it): the server
// binds it itself, and whoever answers there is checked to be the server
// just started.
func lowPort() (int, error) {
	n, err := rand.Int(rand.Reader, big.NewInt(10_000))
	if err != nil {
		return 0, err
	}
	return 20_000 + int(n.Int64()), nil
}

// URL returns the server's redis:// URL.
func (r *Redis) URL() string { return fmt.Sprintf("redis://127.0.0.1:%d/0", r.port) }

// Start (re)starts the server on its port and waits until it answers.
func (r *Redis) Start() {
	r.t.Helper()
	if err := r.start(); err != nil {
		r.t.Fatal(err)
	}
}

func (r *Redis) start() error {
	r.cmd = exec.Command("redis-server", "--port", fmt.Sprint(r.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", r.dir)
	out := &SyncBuffer{}
	r.cmd.Stdout, r.cmd.Stderr = out, out
	if err := r.cmd.Start(); err != nil {
		r.cmd = nil
		return fmt.Errorf("start redis-server: %w", err)
	}
	r.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); close(done) }(r.cmd, r.done)
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := r.ping()
		if err == nil {
			return nil
		}
		select {
		case <-r.done:
			r.cmd = nil
			if strings.Contains(out.String(), "Address already in use") {
				return fmt.Errorf("private redis-server on port %d: %w", r.port, errPortTaken)
			}
			return fmt.Errorf("private redis-server on port %d exited: %s", r.port, out.String())
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("private redis-server did not answer on port %d: %v", r.port, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ping checks that the server answering on the port is the process this
// Redis started (INFO's process_id), speaking the one command it needs over a
// plain connection.
func (r *Redis) ping() error {
	c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", r.port), time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("INFO server\r\n")); err != nil {
		return err
	}
	br := bufio.NewReader(c)
	head, err := br.ReadString('\n')
	if err != nil {
		return err
	}
	n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(head, "$")))
	if !strings.HasPrefix(head, "$") || err != nil {
		return fmt.Errorf("unexpected answer %q", strings.TrimSpace(head))
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(br, body); err != nil {
		return err
	}
	want := fmt.Sprintf("process_id:%d\r\n", r.cmd.Process.Pid)
	if !strings.Contains(string(body), want) {
		return fmt.Errorf("another server answers on port %d", r.port)
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
