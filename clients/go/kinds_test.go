package lockd

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockd/lockd/clients/go/internal/lockdtest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestRWMutexReadersShareWritersExclude(t *testing.T) {
	srv := lockdtest.StartLockd(t)
	a, b, w := newClient(t, srv.Addr), newClient(t, srv.Addr, WithoutSessions()), newClient(t, srv.Addr)
	ra, rb, wr := a.RWMutex("rw"), b.RWMutex("rw"), w.RWMutex("rw")
	for _, r := range []*RWMutex{ra, ra, rb} { // two readers in a, one in b
		if err := r.RLock(ctxT(t, 5*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	info, _ := w.Describe(context.Background(), "rw")
	if !info.Shared || len(info.Holders) != 2 {
		t.Fatalf("two shared holders expected: %+v", info)
	}
	if err := wr.TryLock(context.Background()); !errors.Is(err, ErrLocked) {
		t.Fatalf("writer TryLock among readers: %v", err)
	}
	locked := make(chan error, 1)
	go func() { locked <- wr.Lock(ctxT(t, 20*time.Second)) }()
	if !lockdtest.Eventually(5*time.Second, func() bool {
		info, err := w.Describe(context.Background(), "rw")
		return err == nil && info.Waiters == 1
	}) {
		t.Fatal("the writer never waited")
	}
	// A new reader arriving while a writer waits queues behind it.
	if err := newClient(t, srv.Addr).RWMutex("rw").TryRLock(context.Background()); !errors.Is(err, ErrLocked) {
		t.Fatal("a new reader barged past the waiting writer")
	}
	for _, r := range []*RWMutex{ra, ra, rb} {
		if err := r.RUnlock(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-locked; err != nil {
		t.Fatal(err)
	}
	if wr.Token() <= ra.Token() {
		t.Fatalf("writer token %d", wr.Token())
	}
	if err := wr.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	// A name held as a lock is not a semaphore.
	if err := ra.RLock(ctxT(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Semaphore("rw", 3).Acquire(ctxT(t, 5*time.Second), 1); !errors.Is(err, ErrLockKindMismatch) {
		t.Fatalf("semaphore acquire of a held lock: %v", err)
	}
	if err := ra.RUnlock(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestSemaphoreCountsPermits(t *testing.T) {
	srv := lockdtest.StartLockd(t)
	a, b, c := newClient(t, srv.Addr), newClient(t, srv.Addr), newClient(t, srv.Addr, WithoutSessions())
	la, err := a.Semaphore("sem", 3).Acquire(ctxT(t, 5*time.Second), 2)
	if err != nil {
		t.Fatal(err)
	}
	lb, err := b.Semaphore("sem", 3).Acquire(ctxT(t, 5*time.Second), 1)
	if err != nil {
		t.Fatal(err)
	}
	if la.Token() == lb.Token() {
		t.Fatal("two holders with one token")
	}
	if _, err := c.Semaphore("sem", 3).TryAcquire(context.Background(), 1); !errors.Is(err, ErrLocked) {
		t.Fatalf("a fourth permit: %v", err)
	}
	if _, err := c.Semaphore("sem", 4).TryAcquire(context.Background(), 1); !errors.Is(err, ErrLockKindMismatch) {
		t.Fatalf("another limit: %v", err)
	}
	if _, err := c.Semaphore("sem", 3).Acquire(context.Background(), 4); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("permits above the limit: %v", err)
	}
	got := make(chan *Lease, 1)
	go func() {
		l, err := c.Semaphore("sem", 3).Acquire(ctxT(t, 20*time.Second), 2)
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	time.Sleep(200 * time.Millisecond)
	if err := lb.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-got:
		t.Fatal("2 permits granted beside 2 of 3")
	case <-time.After(300 * time.Millisecond):
	}
	if err := la.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	lc := <-got
	if lc == nil {
		t.FailNow()
	}
	if err := lc.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	if info, _ := a.Describe(context.Background(), "sem"); info.Held {
		t.Fatalf("left held: %+v", info)
	}
}

func TestAcquireAllIsAllOrNothing(t *testing.T) {
	srv := lockdtest.StartLockd(t)
	for _, opts := range [][]Option{nil, {WithoutSessions()}} {
		a, b := newClient(t, srv.Addr, opts...), newClient(t, srv.Addr)
		mb := b.Mutex("acct-2")
		if err := mb.Lock(ctxT(t, 5*time.Second)); err != nil {
			t.Fatal(err)
		}
		specs := []LockSpec{{Name: "acct-1"}, {Name: "acct-2"}, {Name: "pool", Limit: 2}}
		_, err := a.AcquireAll(ctxT(t, 300*time.Millisecond), specs)
		var e *Error
		if !errors.As(err, &e) || (!errors.Is(err, ErrLocked) && !errors.Is(err, context.DeadlineExceeded)) {
			t.Fatalf("AcquireAll with acct-2 held: %v", err)
		}
		for _, n := range []string{"acct-1", "pool"} {
			if info, _ := a.Describe(context.Background(), n); info.Held {
				t.Fatalf("%s held after a failed AcquireAll: %+v", n, info)
			}
		}
		done := make(chan *LeaseSet, 1)
		go func() {
			set, err := a.AcquireAll(ctxT(t, 20*time.Second), specs)
			if err != nil {
				t.Error(err)
			}
			done <- set
		}()
		time.Sleep(200 * time.Millisecond)
		if err := mb.Unlock(context.Background()); err != nil {
			t.Fatal(err)
		}
		set := <-done
		if set == nil {
			t.FailNow()
		}
		if len(set.Leases) != 3 || set.Leases[1].Token() <= mb.Token() && mb.Token() != 0 {
			t.Fatalf("leases %+v", set.Leases)
		}
		for _, n := range []string{"acct-1", "acct-2", "pool"} {
			if info, _ := b.Describe(context.Background(), n); !info.Held || info.Holders[0].Owner != a.Owner() {
				t.Fatalf("%s not held by a: %+v", n, info)
			}
		}
		if err := set.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
		select {
		case <-set.Done():
		case <-time.After(time.Second):
			t.Fatal("Done open after Release")
		}
		for _, n := range []string{"acct-1", "acct-2", "pool"} {
			if info, _ := b.Describe(context.Background(), n); info.Held {
				t.Fatalf("%s held after Release: %+v", n, info)
			}
		}
	}
}
