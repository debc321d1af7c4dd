// Package lockdtest starts what the Go client's tests run against: the
// real lockd binary ($LOCKD_BINARY) on a free loopback port, logging into a
// temporary directory (memory backend, or redis on a redis-server started
// here), and a TCP Proxy that can hold back lockd's replies or cut every
// connection. No mock stands in for lockd. Everything stops with the test.
package lockdtest

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Binary is $LOCKD_BINARY; the test is skipped without it.
func Binary(t testing.TB) string {
	t.Helper()
	bin := os.Getenv("LOCKD_BINARY")
	if bin == "" {
		t.Skip("LOCKD_BINARY is not set (ctest go_client_test sets it)")
	}
	return bin
}

// FreePort is a loopback port nothing listens on (at the time of the call).
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Lockd is one lockd process; Kill sends SIGKILL, Start starts it
// again on the same port.
type Lockd struct {
	t     testing.TB
	Addr  string
	flags []string
	log   string
	cmd   *exec.Cmd
	done  chan struct{}
}

// StartLockd starts lockd with `flags` (and --lease.min=100ms) on a free
// port; it is killed when the test ends.
func StartLockd(t testing.TB, flags ...string) *Lockd {
	t.Helper()
	p := NewLockd(t, flags...)
	p.Start()
	return p
}

// NewLockd is StartLockd without the start: its address is known, nothing
// listens there yet.
func NewLockd(t testing.TB, flags ...string) *Lockd {
	t.Helper()
	Binary(t)
	p := &Lockd{t: t, Addr: fmt.Sprintf("127.0.0.1:%d", FreePort(t)), flags: flags}
	p.log = filepath.Join(t.TempDir(), "lockd.log")
	t.Cleanup(p.Kill)
	return p
}

// Start starts the process (again), waiting until it serves.
func (p *Lockd) Start() {
	p.t.Helper()
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		p.t.Fatal(err)
	}
	defer f.Close()
	before, _ := os.ReadFile(p.log)
	args := append([]string{"--listen=" + p.Addr, "--lease.min=100ms"}, p.flags...)
	p.cmd = exec.Command(os.Getenv("LOCKD_BINARY"), args...)
	p.cmd.Stdout, p.cmd.Stderr = f, f
	if err := p.cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	p.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); close(done) }(p.cmd, p.done)
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		out, _ := os.ReadFile(p.log)
		if strings.Contains(string(out[len(before):]), "lockd serving on") {
			return
		}
		select {
		case <-p.done:
			p.t.Fatalf("lockd exited: %s", out)
		case <-time.After(20 * time.Millisecond):
		}
	}
	p.t.Fatalf("lockd did not start")
}

// Kill sends SIGKILL and waits for the process to end.
func (p *Lockd) Kill() {
	if p.cmd == nil {
		return
	}
	select {
	case <-p.done:
	default:
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	p.cmd = nil
}

// StartRedis runs redis-server on a free loopback port, without
// persistence, in a temporary directory.
func StartRedis(t testing.TB) int {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server not installed")
	}
	port := FreePort(t)
	cmd := exec.Command(bin, "--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--save", "",
		"--appendonly", "no", "--dir", t.TempDir())
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	if !Eventually(20*time.Second, func() bool {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
		if err != nil {
			return false
		}
		defer c.Close()
		_, _ = c.Write([]byte("PING\r\n"))
		buf := make([]byte, 16)
		n, _ := c.Read(buf)
		return strings.HasPrefix(string(buf[:n]), "+PONG")
	}) {
		t.Fatal("redis-server did not start")
	}
	return port
}

// Eventually polls cond every 10 ms for up to d; its last answer.
func Eventually(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return cond()
}

// Proxy forwards TCP to lockd. HoldReplies(true) keeps lockd's bytes (they
// are forwarded in order once released): an acquire is granted and its
// reply written, so lockd counts it as delivered, yet the client hears
// nothing. Cut() closes every connection, dropping what was held back.
type Proxy struct {
	l        net.Listener
	upstream string

	mu    sync.Mutex
	hold  bool
	held  *sync.Cond
	conns []net.Conn
}

// StartProxy forwards a free loopback port to `upstream` until the test ends.
func StartProxy(t testing.TB, upstream string) *Proxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{l: l, upstream: upstream}
	p.held = sync.NewCond(&p.mu)
	go p.accept()
	t.Cleanup(func() { _ = l.Close(); p.Cut() })
	return p
}

// Addr is the proxy's address.
func (p *Proxy) Addr() string { return p.l.Addr().String() }

func (p *Proxy) accept() {
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		u, err := net.Dial("tcp", p.upstream)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, u)
		p.mu.Unlock()
		go func() { _, _ = io.Copy(u, c); _ = u.Close(); _ = c.Close() }()
		go p.replies(u, c)
	}
}

// replies copies lockd's bytes to the client, waiting while they are held.
func (p *Proxy) replies(u, c net.Conn) {
	buf := make([]byte, 64<<10)
	for {
		n, err := u.Read(buf)
		if n > 0 {
			p.mu.Lock()
			for p.hold {
				p.held.Wait()
			}
			p.mu.Unlock()
			if _, werr := c.Write(buf[:n]); werr != nil {
				err = werr
			}
		}
		if err != nil {
			_ = c.Close()
			_ = u.Close()
			return
		}
	}
}

// HoldReplies holds lockd's bytes back (true) or lets them through.
func (p *Proxy) HoldReplies(hold bool) {
	p.mu.Lock()
	p.hold = hold
	p.mu.Unlock()
	p.held.Broadcast()
}

// cut closes every connection; replies held back are dropped.
func (p *Proxy) Cut() {
	p.mu.Lock()
	conns := p.conns
	p.conns = nil
	p.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
}
