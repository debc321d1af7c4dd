package lockd

import (
	"context"
	"fmt"
	"sync"

	"google.golang.org/grpc/codes"
)

// RWMutex is a read-write lock on one name (docs/api.md "Shared locks,
// semaphores and all-or-nothing acquires"): any number of readers (SHARED
// holds) or one writer (EXCLUSIVE). A reader arriving while a writer waits
// queues behind it, so writers never starve. Within one Client readers
// share the Client's one reentrant shared hold and a writer waits for them
// locally, as for Mutex. Safe for concurrent use.
type RWMutex struct {
	c   *Client
	ref lockRef
	o   lockOpts

	mu      sync.Mutex
	writer  *Lease
	readers []*Lease
}

// RWMutex returns the read-write lock `name`; it takes nothing yet.
func (c *Client) RWMutex(name string, opts ...LockOption) *RWMutex {
	o := c.lockOpts(opts)
	return &RWMutex{c: c, ref: lockRef{ns: o.ns, name: name}, o: o}
}

// Lock takes the lock for writing; errors as Mutex.Lock.
func (rw *RWMutex) Lock(ctx context.Context) error { return rw.lock(ctx, false, false) }

// TryLock takes it for writing without waiting; errors as Mutex.TryLock.
func (rw *RWMutex) TryLock(ctx context.Context) error { return rw.lock(ctx, false, true) }

// RLock takes the lock for reading; errors as Mutex.Lock.
func (rw *RWMutex) RLock(ctx context.Context) error { return rw.lock(ctx, true, false) }

// TryRLock takes it for reading without waiting; errors as Mutex.TryLock.
func (rw *RWMutex) TryRLock(ctx context.Context) error { return rw.lock(ctx, true, true) }

func (rw *RWMutex) lock(ctx context.Context, shared, try bool) error {
	ref := rw.ref
	ref.shared = shared
	l, err := rw.c.acquireOne(ctx, ref, rw.o, try)
	if err != nil {
		return err
	}
	rw.mu.Lock()
	if shared {
		rw.readers = append(rw.readers, l)
	} else {
		rw.writer = l
	}
	rw.mu.Unlock()
	return nil
}

// Unlock releases the write lock; errors as Mutex.Unlock.
func (rw *RWMutex) Unlock(ctx context.Context) error {
	rw.mu.Lock()
	l := rw.writer
	rw.writer = nil
	rw.mu.Unlock()
	if l == nil {
		return &Error{Code: codes.FailedPrecondition, Msg: fmt.Sprintf("unlock of %s: not locked", rw.ref.what())}
	}
	return l.Release(ctx)
}

// RUnlock releases one read lock; errors as Mutex.Unlock.
func (rw *RWMutex) RUnlock(ctx context.Context) error {
	rw.mu.Lock()
	var l *Lease
	if n := len(rw.readers); n > 0 {
		l, rw.readers = rw.readers[n-1], rw.readers[:n-1]
	}
	rw.mu.Unlock()
	if l == nil {
		return &Error{Code: codes.FailedPrecondition, Msg: fmt.Sprintf("runlock of %s: not locked for reading", rw.ref.what())}
	}
	return l.Release(ctx)
}

// current is the writer's lease, else the first reader's, else nil.
func (rw *RWMutex) current() *Lease {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	if rw.writer != nil {
		return rw.writer
	}
	if len(rw.readers) > 0 {
		return rw.readers[0]
	}
	return nil
}

// Token is the fencing token of the writer's hold, else of the readers'
// shared hold; 0 when not locked. A resource accepts a write only with a
// token at least the largest it has seen, and serves a read as current
// only when the reader's token is larger than the last write's.
func (rw *RWMutex) Token() uint64 { return rw.current().Token() }

// Done is closed when the writer's (else the readers') hold ends; closed
// already when not locked.
func (rw *RWMutex) Done() <-chan struct{} { return rw.current().Done() }

// Err is the loss of the writer's (else the readers') hold, nil while held.
func (rw *RWMutex) Err() error { return rw.current().Err() }

// RLocker is the read lock as a sync.Locker (panics on errors, as Mutex.Locker).
func (rw *RWMutex) RLocker() sync.Locker { return locker{rw.RLock, rw.RUnlock} }

// Locker is the write lock as a sync.Locker (panics on errors, as Mutex.Locker).
func (rw *RWMutex) Locker() sync.Locker { return locker{rw.Lock, rw.Unlock} }
