package lockd

import (
	"context"
	"sync"
)

// Mutex is an exclusive lock on one name, like sync.Mutex but across
// processes: not reentrant, and Unlock may be called by any goroutine.
// Goroutines of one Client take turns on a name in the Client itself (the
// Client is one owner for lockd); other Clients, in this process or
// another, are excluded by lockd. It is the writer half of an RWMutex.
// Safe for concurrent use.
type Mutex struct {
	rw *RWMutex
}

// Mutex returns the exclusive lock `name` (docs/api.md "Names"); it takes
// nothing yet.
func (c *Client) Mutex(name string, opts ...LockOption) *Mutex {
	return &Mutex{rw: c.RWMutex(name, opts...)}
}

// Lock takes the lock, waiting until it is granted or ctx ends. Errors: a
// context's error (errors.Is context.DeadlineExceeded or Canceled, and
// ErrLocked when lockd named the holder; nothing is held),
// ErrLockKindMismatch (the name is a semaphore), ErrClosed, and lockd's
// other errors with their gRPC code. While lockd is unreachable Lock keeps
// trying until ctx ends: give ctx a deadline to bound it. Every failure
// leaves no hold behind, unless Error.UnconfirmedRequestID says lockd could
// not be told (that hold ends with its lease).
func (m *Mutex) Lock(ctx context.Context) error { return m.rw.Lock(ctx) }

// TryLock takes the lock if it is free, without waiting. ErrLocked (with
// Error.Holder) when another owner or another goroutine of this Client holds
// it; UNAVAILABLE when lockd did not answer within the RPC timeout (retries
// included); other errors as Lock.
func (m *Mutex) TryLock(ctx context.Context) error { return m.rw.TryLock(ctx) }

// Unlock releases the lock (blocking up to the RPC timeout or ctx). Errors:
// ErrLeaseLost when the lease had been lost while locked (the work done
// under it was not protected); lockd's or the context's error (the hold
// then ends with its lease). The Mutex is unlocked afterwards whatever the
// result. Unlocking an unlocked Mutex is a FAILED_PRECONDITION error.
func (m *Mutex) Unlock(ctx context.Context) error { return m.rw.Unlock(ctx) }

// Token is the fencing token of the current hold; 0 when not locked.
func (m *Mutex) Token() uint64 { return m.rw.Token() }

// Done is closed when the current hold ends: its lease is lost (Err says
// why) or it is unlocked. Closed already when the Mutex is not locked.
func (m *Mutex) Done() <-chan struct{} { return m.rw.Done() }

// Err is the loss of the current hold (errors.Is ErrLeaseLost), nil while
// it is held or when the Mutex is not locked.
func (m *Mutex) Err() error { return m.rw.Err() }

// Locker is the Mutex as a sync.Locker, waiting without a deadline; it
// panics if Lock or Unlock fails (as a lost lease does on Unlock), so use
// it only where that is acceptable.
func (m *Mutex) Locker() sync.Locker { return m.rw.Locker() }

type locker struct {
	lock, unlock func(context.Context) error
}

func (l locker) Lock() {
	if err := l.lock(context.Background()); err != nil {
		panic(err)
	}
}

func (l locker) Unlock() {
	if err := l.unlock(context.Background()); err != nil {
		panic(err)
	}
}

var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()
