package election_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	lockd "github.com/lockd/lockd/clients/go"
	"github.com/lockd/lockd/clients/go/election"
	"github.com/lockd/lockd/clients/go/internal/lockdtest"
)

// A leader that dies is replaced after its lease.
const ttl = 2 * time.Second

func candidate(t *testing.T, target string) *election.Election {
	t.Helper()
	c, err := lockd.New(context.Background(), target, lockd.WithRPCTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return election.New(c, "leader", lockd.LeaseTTL(ttl))
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// next waits for the next value Observe sends.
func next(t *testing.T, ch <-chan string) string {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatal("Observe sent nothing")
		return ""
	}
}

func TestOneLeaderAndFailoverOnResign(t *testing.T) {
	srv := lockdtest.StartLockd(t)
	watcher := candidate(t, srv.Addr)
	if _, err := watcher.Leader(context.Background()); !errors.Is(err, election.ErrNoLeader) {
		t.Fatalf("Leader before any campaign: %v", err)
	}
	observed := watcher.Observe(ctxT(t, time.Minute))

	a, b := candidate(t, srv.Addr), candidate(t, srv.Addr)
	if err := a.Campaign(ctxT(t, 5*time.Second), "pod-a"); err != nil {
		t.Fatal(err)
	}
	if v := next(t, observed); v != "pod-a" {
		t.Fatalf("observed %q, want pod-a", v)
	}
	won := make(chan error, 1)
	go func() { won <- b.Campaign(ctxT(t, 30*time.Second), "pod-b") }()
	time.Sleep(300 * time.Millisecond)
	select {
	case err := <-won:
		t.Fatalf("a second leader while pod-a leads: %v", err)
	default:
	}
	if v, err := b.Leader(context.Background()); err != nil || v != "pod-a" {
		t.Fatalf("Leader: %q %v", v, err)
	}
	tokenA := a.Token()
	if err := a.Resign(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-a.Done():
	default:
		t.Fatal("Done open after Resign")
	}
	if err := <-won; err != nil {
		t.Fatal(err)
	}
	if b.Token() <= tokenA {
		t.Fatalf("new leader's token %d not above %d", b.Token(), tokenA)
	}
	if v := next(t, observed); v != "pod-b" {
		t.Fatalf("observed %q, want pod-b", v)
	}
	if err := a.Resign(context.Background()); !errors.Is(err, election.ErrNotLeader) {
		t.Fatalf("Resign when not leading: %v", err)
	}
	// A campaign whose ctx ends leaves nothing: pod-b still leads alone.
	if err := a.Campaign(ctxT(t, 300*time.Millisecond), "pod-a"); err == nil {
		t.Fatal("Campaign won while pod-b leads")
	}
	if v, err := watcher.Leader(context.Background()); err != nil || v != "pod-b" {
		t.Fatalf("Leader: %q %v", v, err)
	}
}

// TestHelperLeader is the child of TestFailoverWhenTheLeaderIsKilled: it
// campaigns, says LEADER, and waits to be killed.
func TestHelperLeader(t *testing.T) {
	target := os.Getenv("LOCKD_GO_ELECTION_TARGET")
	if target == "" {
		t.Skip("helper process only")
	}
	e := candidate(t, target)
	if err := e.Campaign(ctxT(t, 10*time.Second), "doomed"); err != nil {
		t.Fatal(err)
	}
	fmt.Println("LEADER")
	time.Sleep(time.Minute)
}

func TestFailoverWhenTheLeaderIsKilled(t *testing.T) {
	srv := lockdtest.StartLockd(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperLeader$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "LOCKD_GO_ELECTION_TARGET="+srv.Addr)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := bufio.NewScanner(out)
	for lines.Scan() && lines.Text() != "LEADER" {
	}
	e := candidate(t, srv.Addr)
	if v, err := e.Leader(context.Background()); err != nil || v != "doomed" {
		t.Fatalf("Leader: %q %v", v, err)
	}
	won := make(chan error, 1)
	go func() { won <- e.Campaign(ctxT(t, 30*time.Second), "survivor") }()
	time.Sleep(500 * time.Millisecond)
	_ = cmd.Process.Kill() // SIGKILL: no release; its lease ends
	killed := time.Now()
	if err := <-won; err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(killed); waited > ttl+4*time.Second {
		t.Fatalf("took over %v after the kill, lease %v", waited, ttl)
	}
	if v, err := e.Leader(context.Background()); err != nil || v != "survivor" {
		t.Fatalf("Leader: %q %v", v, err)
	}
	select {
	case <-e.Done():
		t.Fatalf("Done closed while leading: %v", e.Err())
	default:
	}
	if err := e.Resign(context.Background()); err != nil {
		t.Fatal(err)
	}
}
