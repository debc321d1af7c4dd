package lockd

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/lockd/lockd/clients/go/internal/lockdtest"
)

// Many goroutines share one Client, hence one Session stream: under load
// their ops leave in batches and lockd answers in response batches, and
// every result still reaches the goroutine whose op it answers. A grant
// routed to another op would show as a TryLock of a busy lock that
// succeeds, or an Unlock whose fencing token is not the holder's
// (LOCK_NOT_HELD); a lost result as a call that never returns.
func TestSharedClientBatchesOpsAndRoutesEveryResult(t *testing.T) {
	srv := lockdtest.StartLockd(t)
	c := newClient(t, srv.Addr)
	other := newClient(t, srv.Addr)
	const busy = 32 // one per TryLock goroutine: the Client's own gate would refuse a second
	for i := range busy {
		if err := other.Mutex(fmt.Sprintf("busy-%d", i)).Lock(ctxT(t, 5*time.Second)); err != nil {
			t.Fatal(err)
		}
	}

	const goroutines, perRound = 64, 10
	lastToken := make([]uint64, goroutines) // goroutine g's, of "own-g"
	round := func() error {
		var wg sync.WaitGroup
		errs := make(chan error, goroutines)
		for g := range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx := ctxT(t, 30*time.Second)
				for range perRound {
					if g%2 == 1 {
						name := fmt.Sprintf("busy-%d", g/2)
						var e *Error
						if err := c.Mutex(name).TryLock(ctx); !errors.Is(err, ErrLocked) || !errors.As(err, &e) ||
							e.Holder == nil || e.Holder.Owner != other.Owner() {
							errs <- fmt.Errorf("TryLock(%s), held by the other Client: %v", name, err)
							return
						}
						continue
					}
					m := c.Mutex(fmt.Sprintf("own-%d", g))
					if err := m.Lock(ctx); err != nil {
						errs <- fmt.Errorf("Lock(own-%d): %v", g, err)
						return
					}
					if m.Token() <= lastToken[g] {
						errs <- fmt.Errorf("own-%d: token %d after %d", g, m.Token(), lastToken[g])
						return
					}
					lastToken[g] = m.Token()
					if err := m.Unlock(ctx); err != nil {
						errs <- fmt.Errorf("Unlock(own-%d): %v", g, err)
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		return <-errs
	}
	// Rounds until both kinds of batch were seen (the first round nearly
	// always suffices), within a bound.
	for deadline := time.Now().Add(30 * time.Second); ; {
		if err := round(); err != nil {
			t.Fatal(err)
		}
		if c.sess.batchesSent.Load() > 0 && c.sess.batchesRead.Load() > 0 || time.Now().After(deadline) {
			break
		}
	}
	if sent, read := c.sess.batchesSent.Load(), c.sess.batchesRead.Load(); sent == 0 || read == 0 {
		t.Fatalf("%d batches sent, %d response batches read: 64 goroutines never queued behind a send", sent, read)
	}
	t.Logf("%d batches sent, %d response batches read", c.sess.batchesSent.Load(), c.sess.batchesRead.Load())

	for g := 0; g < goroutines; g += 2 {
		info, err := c.Describe(ctxT(t, 5*time.Second), fmt.Sprintf("own-%d", g))
		if err != nil || info.Held {
			t.Fatalf("own-%d after every Unlock: %+v, %v", g, info, err)
		}
	}
	for i := range busy {
		info, err := c.Describe(ctxT(t, 5*time.Second), fmt.Sprintf("busy-%d", i))
		if err != nil || !info.Held || info.Owner != other.Owner() {
			t.Fatalf("busy-%d: %+v, %v; want still held by the other Client", i, info, err)
		}
	}
}
