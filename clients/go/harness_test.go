package lockd

// Test servers: the real lockd binary ($LOCKD_BINARY) on a free loopback
// port in a temporary directory (memory backend, or redis on a
// redis-server started here), and a TCP proxy that can hold back lockd's
// replies or cut every connection. No mock stands in for lockd.

import (
	"context"
	"errors"
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

func lockdBinary(t testing.TB) string {
	t.Helper()
	bin := os.Getenv("LOCKD_BINARY")
	if bin == "" {
		t.Skip("LOCKD_BINARY is not set (ctest go_client_test sets it)")
	}
	return bin
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// lockdProc is one lockd process; Kill sends SIGKILL, Start starts it
// again on the same port.
type lockdProc struct {
	t     testing.TB
	addr  string
	flags []string
	log   string
	cmd   *exec.Cmd
	done  chan struct{}
}

func startLockd(t testing.TB, flags ...string) *lockdProc {
	t.Helper()
	bin := lockdBinary(t)
	p := &lockdProc{t: t, addr: fmt.Sprintf("127.0.0.1:%d", freePort(t)), flags: flags}
	p.log = filepath.Join(t.TempDir(), "lockd.log")
	_ = bin
	p.Start()
	t.Cleanup(p.Kill)
	return p
}

func (p *lockdProc) Start() {
	p.t.Helper()
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		p.t.Fatal(err)
	}
	defer f.Close()
	before, _ := os.ReadFile(p.log)
	args := append([]string{"--listen=" + p.addr, "--lease.min=100ms"}, p.flags...)
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

func (p *lockdProc) Kill() {
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

// startRedis runs redis-server on a free loopback port, without
// persistence, in a temporary directory.
func startRedis(t testing.TB) int {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server not installed")
	}
	port := freePort(t)
	cmd := exec.Command(bin, "--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--save", "",
		"--appendonly", "no", "--dir", t.TempDir())
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	if !eventually(20*time.Second, func() bool {
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

func eventually(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return cond()
}

func newClient(t testing.TB, target string, opts ...Option) *Client {
	t.Helper()
	opts = append([]Option{WithKeepalive(10*time.Second, time.Second), WithRPCTimeout(5 * time.Second)}, opts...)
	c, err := New(context.Background(), target, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// proxy forwards TCP to lockd. holdReplies(true) keeps lockd's bytes (they
// are forwarded in order once released): an acquire is granted and its
// reply written, so lockd counts it as delivered, yet the client hears
// nothing. cut() closes every connection, dropping what was held back.
type proxy struct {
	l        net.Listener
	upstream string

	mu    sync.Mutex
	hold  bool
	held  *sync.Cond
	conns []net.Conn
}

func startProxy(t testing.TB, upstream string) *proxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{l: l, upstream: upstream}
	p.held = sync.NewCond(&p.mu)
	go p.accept()
	t.Cleanup(func() { _ = l.Close(); p.cut() })
	return p
}

func (p *proxy) Addr() string { return p.l.Addr().String() }

func (p *proxy) accept() {
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
func (p *proxy) replies(u, c net.Conn) {
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

func (p *proxy) holdReplies(hold bool) {
	p.mu.Lock()
	p.hold = hold
	p.mu.Unlock()
	p.held.Broadcast()
}

// cut closes every connection; replies held back are dropped.
func (p *proxy) cut() {
	p.mu.Lock()
	conns := p.conns
	p.conns = nil
	p.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
}

func isCtxErr(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
}
