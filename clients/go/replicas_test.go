package lockd

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockd/lockd/clients/go/internal/lockdtest"
)

// Two lockd replicas over one redis-server; the replica holding a
// Client's session is killed (SIGKILL): the session resumes its hold on the
// other replica, the hold stays valid past the bound it would have without
// the resume, and workers (session and unary) contending for a fenced
// counter on both replicas see no error and lose no update.
func TestKilledReplicaSessionResumesOnTheOther(t *testing.T) {
	redis := lockdtest.StartRedis(t)
	flags := []string{"--backend=redis", fmt.Sprintf("--redis.addresses=127.0.0.1:%d", redis)}
	victim := lockdtest.StartLockd(t, flags...)
	other := lockdtest.NewLockd(t, flags...)
	target := victim.Addr + "," + other.Addr
	holder := newClient(t, target) // only the victim is up: the session lives there
	const ttl = 30 * time.Second
	held := holder.Mutex("resumed", LeaseTTL(ttl))
	if err := held.Lock(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	other.Start()
	holder2 := newClient(t, target) // a second session, resumed the same way if on the victim
	held2 := holder2.Mutex("resumed-2", LeaseTTL(ttl))
	if err := held2.Lock(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	workers := []*Client{newClient(t, target), newClient(t, target, WithoutSessions())}
	var res fenced
	var done [2]atomic.Int64
	stop := make(chan struct{})
	errs := make(chan error, 1000)
	var wg sync.WaitGroup
	for i, c := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := c.Mutex("busy", LeaseTTL(map[int]time.Duration{0: ttl, 1: 3 * time.Second}[i]))
			for {
				select {
				case <-stop:
					return
				default:
				}
				if err := m.Lock(ctxT(t, 20*time.Second)); err != nil {
					errs <- err
					continue
				}
				if err := res.work(m.Token()); err != nil {
					errs <- err
				}
				if err := m.Unlock(context.Background()); err != nil {
					errs <- err
				}
				done[i].Add(1)
			}
		}()
	}
	progress := func(n int64) bool {
		return lockdtest.Eventually(20*time.Second, func() bool { return done[0].Load() >= n && done[1].Load() >= n })
	}
	if !progress(10) {
		t.Fatal("the workers made no progress")
	}
	victim.Kill()
	killed := time.Now()
	before := done[0].Load() + done[1].Load()
	if !lockdtest.Eventually(20*time.Second, func() bool {
		return done[0].Load()+done[1].Load() >= before+40 && done[0].Load() > 20 && done[1].Load() > 20
	}) {
		t.Fatalf("the workers stalled after the kill: %d %d", done[0].Load(), done[1].Load())
	}
	// Past the validity a broken session's hold has without a resume:
	// 2/3 ttl - K - drift = 20 - 11 - 0.3 s.
	time.Sleep(time.Until(killed.Add(ttl*2/3 - 11*time.Second + time.Second)))
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if res.overlaps != 0 {
		t.Fatalf("%d overlapping holders", res.overlaps)
	}
	for _, m := range []*Mutex{held, held2} {
		if err := m.Err(); err != nil {
			t.Fatalf("hold lost across the replica's death: %v", err)
		}
	}
	info, err := workers[0].Describe(context.Background(), "resumed")
	if err != nil || !info.Held || info.Owner != holder.Owner() || info.FencingToken != held.Token() {
		t.Fatalf("resumed hold: %+v %v", info, err)
	}
	for _, m := range []*Mutex{held, held2} {
		if err := m.Unlock(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if info, _ := workers[0].Describe(context.Background(), "resumed"); info.Held {
		t.Fatalf("still held after Unlock: %+v", info)
	}
}
