package lockd

import (
	"context"
	"fmt"
	"sync"

	"google.golang.org/grpc/codes"
)

// Mutex is an exclusive lock on one name, like sync.Mutex but across
// processes: not reentrant, and Unlock may be called by any goroutine.
// Goroutines of one Client take turns on a name in the Client itself (the
// Client is one owner for lockd); other Clients, in this process or
// another, are excluded by lockd. Safe for concurrent use.
type Mutex struct {
	c   *Client
	ref lockRef
	o   lockOpts

	mu sync.Mutex
	l  *Lease // while locked
}

// Mutex returns the exclusive lock `name` (docs/api.md "Names"); it takes
// nothing yet.
func (c *Client) Mutex(name string, opts ...LockOption) *Mutex {
	o := c.lockOpts(opts)
	return &Mutex{c: c, ref: lockRef{ns: o.ns, name: name}, o: o}
}

// Lock takes the lock, waiting until it is granted or ctx ends. Errors: a
// context's error (errors.Is context.DeadlineExceeded or Canceled; nothing
// is held), ErrLockKindMismatch (the name is a semaphore), ErrClosed, and
// lockd's other errors with their gRPC code. Every failure leaves no hold
// behind, unless Error.UnconfirmedRequestID says lockd could not be told
// (that hold ends with its lease).
func (m *Mutex) Lock(ctx context.Context) error { return m.lock(ctx, false) }

// TryLock takes the lock if it is free, without waiting. ErrLocked (with
// Error.Holder) when another owner or another goroutine of this Client holds
// it; other errors as Lock.
func (m *Mutex) TryLock(ctx context.Context) error { return m.lock(ctx, true) }

func (m *Mutex) lock(ctx context.Context, try bool) error {
	l, err := m.c.acquireOne(ctx, m.ref, m.o, try)
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.l = l
	m.mu.Unlock()
	return nil
}

// Unlock releases the lock (blocking up to the RPC timeout or ctx). Errors:
// ErrLeaseLost when the lease had been lost while locked (the work done
// under it was not protected); lockd's or the context's error (the hold
// then ends with its lease). The Mutex is unlocked afterwards whatever the
// result. Unlocking an unlocked Mutex is a FAILED_PRECONDITION error.
func (m *Mutex) Unlock(ctx context.Context) error {
	m.mu.Lock()
	l := m.l
	m.l = nil
	m.mu.Unlock()
	if l == nil {
		return &Error{Code: codes.FailedPrecondition, Msg: fmt.Sprintf("unlock of %s: not locked", m.ref.what())}
	}
	return l.Release(ctx)
}

func (m *Mutex) lease() *Lease {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.l
}

// Token is the fencing token of the current hold; 0 when not locked.
func (m *Mutex) Token() uint64 {
	if l := m.lease(); l != nil {
		return l.Token()
	}
	return 0
}

// Done is closed when the current hold ends: its lease is lost (Err says
// why) or it is unlocked. Closed already when the Mutex is not locked.
func (m *Mutex) Done() <-chan struct{} {
	if l := m.lease(); l != nil {
		return l.Done()
	}
	return closedChan
}

// Err is the loss of the current hold (errors.Is ErrLeaseLost), nil while
// it is held or when the Mutex is not locked.
func (m *Mutex) Err() error {
	if l := m.lease(); l != nil {
		return l.Err()
	}
	return nil
}

// Locker is the Mutex as a sync.Locker, waiting without a deadline; it
// panics if Lock or Unlock fails (as a lost lease does on Unlock), so use
// it only where that is acceptable.
func (m *Mutex) Locker() sync.Locker { return locker{m.Lock, m.Unlock} }

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
