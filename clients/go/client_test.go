package lockd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockd/lockd/clients/go/internal/lockdtest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// fenced is a resource guarded by fencing tokens: it rejects a write whose
// token is smaller than the largest it has seen, and counts writes.
type fenced struct {
	mu       sync.Mutex
	maxToken uint64
	count    int
	inside   int
	overlaps int
}

func (f *fenced) work(token uint64) error {
	f.mu.Lock()
	if token < f.maxToken {
		f.mu.Unlock()
		return fmt.Errorf("stale token %d < %d", token, f.maxToken)
	}
	f.maxToken = token
	f.inside++
	if f.inside > 1 {
		f.overlaps++
	}
	v := f.count
	f.mu.Unlock()
	time.Sleep(time.Millisecond) // a read-modify-write that races without the lock
	f.mu.Lock()
	f.count = v + 1
	f.inside--
	f.mu.Unlock()
	return nil
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

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func TestMutexExcludesGoroutinesAndClients(t *testing.T) {
	srv := lockdtest.StartLockd(t)
	// Two Clients (two owners), each shared by goroutines, with a Mutex
	// value per goroutine: lockd excludes the Clients, each Client its own
	// goroutines; the fenced counter loses nothing.
	clients := []*Client{newClient(t, srv.Addr), newClient(t, srv.Addr, WithoutSessions())}
	var res fenced
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	const perGoroutine = 15
	for _, c := range clients {
		for g := 0; g < 3; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				m := c.Mutex("counter")
				for i := 0; i < perGoroutine; i++ {
					if err := m.Lock(ctxT(t, 20*time.Second)); err != nil {
						errs <- err
						return
					}
					if err := res.work(m.Token()); err != nil {
						errs <- err
					}
					if err := m.Unlock(context.Background()); err != nil {
						errs <- err
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if want := len(clients) * 3 * perGoroutine; res.count != want || res.overlaps != 0 {
		t.Fatalf("count %d (want %d), overlaps %d", res.count, want, res.overlaps)
	}
	info, err := clients[0].Describe(context.Background(), "counter")
	if err != nil || info.Held {
		t.Fatalf("lock left behind: %+v %v", info, err)
	}
}

// TestHelperProcess is the child of TestMutexExcludesProcesses: it adds
// one to the counter file `n` times under the Mutex.
func TestHelperProcess(t *testing.T) {
	target := os.Getenv("LOCKD_GO_HELPER_TARGET")
	if target == "" {
		t.Skip("helper process only")
	}
	file := os.Getenv("LOCKD_GO_HELPER_FILE")
	n, _ := strconv.Atoi(os.Getenv("LOCKD_GO_HELPER_N"))
	c := newClient(t, target)
	m := c.Mutex("file-counter")
	for i := 0; i < n; i++ {
		if err := m.Lock(ctxT(t, 30*time.Second)); err != nil {
			t.Fatal(err)
		}
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var count int
		var last uint64
		fmt.Sscan(string(raw), &count, &last)
		if m.Token() < last {
			t.Fatalf("token %d below the last writer's %d", m.Token(), last)
		}
		time.Sleep(time.Millisecond)
		if err := os.WriteFile(file, []byte(fmt.Sprintf("%d %d", count+1, m.Token())), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := m.Unlock(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

func TestMutexExcludesProcesses(t *testing.T) {
	srv := lockdtest.StartLockd(t)
	file := filepath.Join(t.TempDir(), "counter")
	if err := os.WriteFile(file, []byte("0 0"), 0o644); err != nil {
		t.Fatal(err)
	}
	const n = 25
	var procs []*exec.Cmd
	var outs []*strings.Builder
	for i := 0; i < 2; i++ {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
		cmd.Env = append(os.Environ(), "LOCKD_GO_HELPER_TARGET="+srv.Addr, "LOCKD_GO_HELPER_FILE="+file,
			fmt.Sprintf("LOCKD_GO_HELPER_N=%d", n))
		out := &strings.Builder{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		procs, outs = append(procs, cmd), append(outs, out)
	}
	for i, cmd := range procs {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("helper %d: %v\n%s", i, err, outs[i])
		}
	}
	raw, _ := os.ReadFile(file)
	var count int
	fmt.Sscan(string(raw), &count)
	if count != 2*n {
		t.Fatalf("counter %d, want %d: an update was lost", count, 2*n)
	}
}

func TestTryLockFailsAtOnceNamingTheHolder(t *testing.T) {
	srv := lockdtest.StartLockd(t)
	a, b := newClient(t, srv.Addr), newClient(t, srv.Addr)
	ma := a.Mutex("try")
	if err := ma.TryLock(context.Background()); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err := b.Mutex("try").TryLock(context.Background())
	var e *Error
	if !errors.Is(err, ErrLocked) || !errors.As(err, &e) || e.Holder == nil || e.Holder.Owner != a.Owner() {
		t.Fatalf("TryLock of a held lock: %v (holder %+v)", err, e)
	}
	if time.Since(start) > 2*time.Second {
		t.Fatalf("TryLock waited %v", time.Since(start))
	}
	// Another goroutine of the same Client is refused too (not reentrant).
	if err := a.Mutex("try").TryLock(context.Background()); !errors.Is(err, ErrLocked) {
		t.Fatalf("TryLock by the holder's own Client: %v", err)
	}
	if err := ma.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	mb := b.Mutex("try")
	if err := mb.TryLock(context.Background()); err != nil {
		t.Fatal(err)
	}
	if mb.Token() <= 0 {
		t.Fatalf("token %d", mb.Token())
	}
	if err := mb.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := mb.Unlock(context.Background()); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("second Unlock: %v", err)
	}
}

func TestCancelledLockLeavesNothingBehind(t *testing.T) {
	srv := lockdtest.StartLockd(t)
	for _, sessions := range []bool{true, false} {
		t.Run(fmt.Sprintf("sessions=%v", sessions), func(t *testing.T) {
			var opts []Option
			if !sessions {
				opts = append(opts, WithoutSessions())
			}
			holder, waiter := newClient(t, srv.Addr), newClient(t, srv.Addr, opts...)
			name := fmt.Sprintf("cancel-%v", sessions)
			h := holder.Mutex(name)
			if err := h.Lock(ctxT(t, 5*time.Second)); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			errc := make(chan error, 1)
			go func() { errc <- waiter.Mutex(name).Lock(ctx) }()
			if !lockdtest.Eventually(5*time.Second, func() bool {
				info, err := holder.Describe(context.Background(), name)
				return err == nil && info.Waiters == 1
			}) {
				t.Fatal("the waiter never waited")
			}
			cancel()
			if err := <-errc; !errors.Is(err, context.Canceled) {
				t.Fatalf("cancelled Lock: %v", err)
			}
			// Nothing waits any more, and the lock goes to nobody when freed.
			if !lockdtest.Eventually(5*time.Second, func() bool {
				info, err := holder.Describe(context.Background(), name)
				return err == nil && info.Waiters == 0
			}) {
				t.Fatal("the cancelled waiter is still parked")
			}
			if err := h.Unlock(context.Background()); err != nil {
				t.Fatal(err)
			}
			time.Sleep(100 * time.Millisecond)
			if info, _ := holder.Describe(context.Background(), name); info.Held {
				t.Fatalf("held after a cancelled Lock: %+v", info)
			}
			// A deadline that passes while waiting: the same.
			if err := h.Lock(ctxT(t, 5*time.Second)); err != nil {
				t.Fatal(err)
			}
			err := waiter.Mutex(name).Lock(ctxT(t, 300*time.Millisecond))
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Lock past its deadline: %v", err)
			}
			if err := h.Unlock(context.Background()); err != nil {
				t.Fatal(err)
			}
			time.Sleep(100 * time.Millisecond)
			if info, _ := holder.Describe(context.Background(), name); info.Held {
				t.Fatalf("held after a timed-out Lock: %+v", info)
			}
		})
	}
}

func TestDoneClosesWhenLockdIsKilled(t *testing.T) {
	srv := lockdtest.StartLockd(t)
	for _, tc := range []struct {
		name string
		opts []Option
		ttl  time.Duration
	}{
		// Session: validity after the break = 2/3 ttl - K - drift = 20 - 11 - 0.3 s.
		{"session", nil, 30 * time.Second},
		// Unary: validity = send + ttl - drift of the last renewal.
		{"unary", []Option{WithoutSessions()}, 2 * time.Second},
	} {
		c := newClient(t, srv.Addr, tc.opts...)
		m := c.Mutex("done-"+tc.name, LeaseTTL(tc.ttl))
		if err := m.Lock(ctxT(t, 5*time.Second)); err != nil {
			t.Fatal(tc.name, err)
		}
		select {
		case <-m.Done():
			t.Fatalf("%s: Done closed while held: %v", tc.name, m.Err())
		default:
		}
		defer func(name string, m *Mutex, ttl time.Duration) {
			select {
			case <-m.Done():
			case <-time.After(ttl + 2*time.Second):
				t.Fatalf("%s: Done not closed within the lease after lockd was killed", name)
			}
			if err := m.Err(); !errors.Is(err, ErrLeaseLost) {
				t.Fatalf("%s: Err after the loss: %v", name, err)
			}
			if err := m.Unlock(context.Background()); !errors.Is(err, ErrLeaseLost) {
				t.Fatalf("%s: Unlock after the loss: %v", name, err)
			}
		}(tc.name, m, tc.ttl)
	}
	time.Sleep(1500 * time.Millisecond) // a unary renewal or two
	srv.Kill()
}

func TestAcquireWhoseReplyWasLostIsUndone(t *testing.T) {
	srv := lockdtest.StartLockd(t)
	observer := newClient(t, srv.Addr)
	for _, sessions := range []bool{true, false} {
		t.Run(fmt.Sprintf("sessions=%v", sessions), func(t *testing.T) {
			px := lockdtest.StartProxy(t, srv.Addr)
			opts := []Option{WithReleaseTimeout(3 * time.Second)}
			if !sessions {
				opts = append(opts, WithoutSessions())
			}
			c := newClient(t, px.Addr(), opts...)
			name := fmt.Sprintf("undo-%v", sessions)
			warm := c.Mutex("warm-up")
			if err := warm.Lock(ctxT(t, 5*time.Second)); err != nil { // connected, session open
				t.Fatal(err)
			}
			if err := warm.Unlock(context.Background()); err != nil {
				t.Fatal(err)
			}
			// 1. lockd grants and writes the reply, which the proxy keeps; the
			// deadline passes; the client's undo gives the hold back.
			px.HoldReplies(true)
			errc := make(chan error, 1)
			go func() { errc <- c.Mutex(name).Lock(ctxT(t, 2*time.Second)) }()
			if !lockdtest.Eventually(5*time.Second, func() bool {
				info, err := observer.Describe(context.Background(), name)
				return err == nil && info.Held && info.Owner == c.Owner()
			}) {
				t.Fatal("lockd never granted the acquire")
			}
			// The undo comes after the deadline (2 s) and the wait for an
			// answer to the cancel (the undo timeout, 3 s): 8 s leaves margin.
			if !lockdtest.Eventually(8*time.Second, func() bool {
				info, err := observer.Describe(context.Background(), name)
				return err == nil && !info.Held
			}) {
				t.Fatal("the hold of an acquire whose reply was lost was left behind")
			}
			px.HoldReplies(false)
			if err := <-errc; err == nil {
				t.Fatal("Lock succeeded although its reply came after its deadline")
			} else if e, ok := err.(*Error); ok && e.UnconfirmedRequestID != "" {
				t.Fatalf("undo reported unconfirmed: %v", err)
			}
			// 2. The connection breaks with the reply on its way: the client
			// undoes, retries, and holds the lock exactly once.
			px.HoldReplies(true)
			m := c.Mutex(name)
			go func() { errc <- m.Lock(ctxT(t, 20*time.Second)) }()
			if !lockdtest.Eventually(5*time.Second, func() bool {
				info, err := observer.Describe(context.Background(), name)
				return err == nil && info.Held
			}) {
				t.Fatal("lockd never granted the acquire")
			}
			px.Cut()
			px.HoldReplies(false)
			if err := <-errc; err != nil {
				t.Fatal(err)
			}
			info, err := observer.Describe(context.Background(), name)
			if err != nil || !info.Held || info.Owner != c.Owner() || info.HoldCount != 1 || info.FencingToken != m.Token() {
				t.Fatalf("after the retried acquire: %+v (token %d) %v", info, m.Token(), err)
			}
			if err := m.Unlock(context.Background()); err != nil {
				t.Fatal(err)
			}
			if info, _ := observer.Describe(context.Background(), name); info.Held {
				t.Fatalf("a second hold was left behind: %+v", info)
			}
		})
	}
}

func TestBadTargetsAndOptionsNameTheProblem(t *testing.T) {
	for target, want := range map[string]string{
		"":                           "empty target",
		"127.0.0.1:1,,127.0.0.1:2":   "empty entry",
		"127.0.0.1:1,127.0.0.1":      "127.0.0.1",
		"127.0.0.1:1,127.0.0.1:0":    "port",
		"127.0.0.1:1,127.0.0.1:abcd": "port",
	} {
		if _, err := New(context.Background(), target); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("New(%q): %v, want an error naming %q", target, err, want)
		}
	}
	if _, err := New(context.Background(), "x:1", WithTLSFiles("/nonexistent/ca.pem", "", "", "")); err == nil ||
		!strings.Contains(err.Error(), "/nonexistent/ca.pem") {
		t.Errorf("missing CA file: %v", err)
	}
	if _, err := New(context.Background(), "x:1", WithTLSFiles("", "c.pem", "", "")); err == nil ||
		!strings.Contains(err.Error(), "keyFile") {
		t.Errorf("cert without key: %v", err)
	}
}

func TestAddressListWithADeadEntryAndDNSTargetsReachLockd(t *testing.T) {
	srv := lockdtest.StartLockd(t)
	list := fmt.Sprintf("127.0.0.1:%d,%s", lockdtest.FreePort(t), srv.Addr) // nothing listens on the first
	for _, tc := range []struct {
		target string
		opts   []Option
	}{{list, nil}, {list, []Option{WithoutSessions()}}, {"dns:///" + srv.Addr, nil}} {
		c := newClient(t, tc.target, tc.opts...)
		for i := 0; i < 5; i++ {
			m := c.Mutex("dead-first")
			if err := m.Lock(ctxT(t, 10*time.Second)); err != nil {
				t.Fatal(err)
			}
			if err := m.Unlock(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func TestCloseReleasesEveryHold(t *testing.T) {
	srv := lockdtest.StartLockd(t)
	observer := newClient(t, srv.Addr)
	c, err := New(context.Background(), srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	session, unary := c.Mutex("close-session"), c.Mutex("close-unary", LeaseTTL(5*time.Second))
	for _, m := range []*Mutex{session, unary} {
		if err := m.Lock(ctxT(t, 5*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"close-session", "close-unary"} {
		if !lockdtest.Eventually(5*time.Second, func() bool {
			info, err := observer.Describe(context.Background(), name)
			return err == nil && !info.Held
		}) {
			t.Fatalf("%s still held after Close", name)
		}
	}
	if err := session.Unlock(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Unlock after Close: %v", err)
	}
	if err := c.Mutex("x").Lock(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Lock after Close: %v", err)
	}
}

func TestUnreachableLockdIsUnavailableForATryAndAContextErrorForALock(t *testing.T) {
	dead := fmt.Sprintf("127.0.0.1:%d", lockdtest.FreePort(t))
	for _, opts := range [][]Option{nil, {WithoutSessions()}} {
		c := newClient(t, dead, append(opts, WithRPCTimeout(time.Second))...)
		start := time.Now()
		if err := c.Mutex("x").TryLock(context.Background()); status.Code(err) != codes.Unavailable {
			t.Fatalf("TryLock of an unreachable lockd: %v", err)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Fatalf("TryLock took %v with a 1 s RPC timeout", d)
		}
		if err := c.Mutex("x").Lock(ctxT(t, 500*time.Millisecond)); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Lock of an unreachable lockd: %v", err)
		}
	}
}
