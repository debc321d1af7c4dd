package lockd

import (
	"context"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
)

// Lease is one hold of one lock (a Mutex's, a reader's, a writer's, a
// semaphore's permits, or one lock of an AcquireAll). Safe for concurrent
// use.
type Lease struct {
	c  *Client
	h  *hold
	gs *gates // the local gates it holds (nil for a lease of a LeaseSet)

	once sync.Once
	rerr error
}

// Token is the fencing token: pass it to the resource the lock protects,
// which must reject writes carrying a smaller token than one it has seen.
// A nil Lease (nothing held) has 0.
func (l *Lease) Token() uint64 {
	if l == nil {
		return 0
	}
	return l.h.token
}

// HoldCount is the owner's hold count right after this acquire (1 on a
// first grant; more for a reentrant shared hold).
func (l *Lease) HoldCount() uint32 { return l.h.count }

// TTL is the lease lockd granted.
func (l *Lease) TTL() time.Duration { return l.h.ttl }

// Done is closed when the hold ends: lost (Err says why) or released;
// closed already for a nil Lease.
func (l *Lease) Done() <-chan struct{} {
	if l == nil {
		return closedChan
	}
	return l.h.done
}

// Err is nil while the hold is held and after Release (and for a nil
// Lease); once it is lost, an *Error that errors.Is ErrLeaseLost, with the
// reason.
func (l *Lease) Err() error {
	if l == nil {
		return nil
	}
	l.h.expired(time.Now())
	return l.h.err()
}

// Valid reports whether the hold is held and within its validity: check it
// just before an action the lock protects, and pass Token along.
func (l *Lease) Valid() bool { return l.h.active() }

// Release gives up the hold (blocking up to the RPC timeout or ctx) and
// ends it, whatever the result. Errors: the loss (ErrLeaseLost) when the
// hold had been lost, the work done under it not being protected; lockd's
// or the context's error (the hold then ends with its lease). A second
// call returns the first's result.
func (l *Lease) Release(ctx context.Context) error {
	l.once.Do(func() {
		l.rerr = l.c.release(ctx, l.h)
		if l.gs != nil {
			l.gs.release()
		}
	})
	return l.rerr
}

// LeaseSet is the holds of one AcquireAll, one Lease per lock in the order
// given. Each is renewed, lost and released on its own.
type LeaseSet struct {
	Leases []*Lease
	gs     *gates

	once sync.Once
	done chan struct{}
	rerr error
}

// Done is closed when the first of the leases ends (lost or released).
func (s *LeaseSet) Done() <-chan struct{} { return s.done }

// Err is the first loss among the leases, nil while none is lost.
func (s *LeaseSet) Err() error {
	for _, l := range s.Leases {
		if err := l.Err(); err != nil {
			return err
		}
	}
	return nil
}

// Release releases every lease, all of them even after a failure; the
// first error is returned.
func (s *LeaseSet) Release(ctx context.Context) error {
	s.once.Do(func() {
		for _, l := range s.Leases {
			if err := l.Release(ctx); err != nil && s.rerr == nil {
				s.rerr = err
			}
		}
		s.gs.release()
	})
	return s.rerr
}

// LockOption configures one Mutex, RWMutex, Semaphore or AcquireAll.
type LockOption func(*lockOpts)

type lockOpts struct {
	ns    string
	ttl   time.Duration
	owner string
}

// InNamespace names the lock's namespace instead of the Client's.
func InNamespace(ns string) LockOption { return func(o *lockOpts) { o.ns = ns } }

// LeaseTTL asks this lease instead of the Client's (WithLeaseTTL). A lease
// other than the session's goes over the unary RPCs (see the path table).
func LeaseTTL(ttl time.Duration) LockOption { return func(o *lockOpts) { o.ttl = ttl } }

// AsOwner holds the lock for `owner` instead of the Client's owner (as
// package election does for each candidate). Such holds go over the unary
// RPCs, each renewed every ttl/3 by a goroutine of its own (a session holds
// for its own owner only: see the path table).
func AsOwner(owner string) LockOption { return func(o *lockOpts) { o.owner = owner } }

func (c *Client) lockOpts(opts []LockOption) lockOpts {
	o := lockOpts{ttl: c.o.ttl, owner: c.owner}
	for _, opt := range opts {
		opt(&o)
	}
	o.ns = c.namespace(o.ns)
	return o
}

// acquireLeases takes the local gates of refs, then the holds from lockd.
// try: once (ErrLocked at once when a gate or the lock is taken).
func (c *Client) acquireLeases(ctx context.Context, refs []lockRef, ttl time.Duration, owner string, all, try bool) ([]*Lease, *gates, error) {
	call := acquireCall{locks: refs, all: all, owner: owner, ttl: ttl, wait: !try}
	if ttl < 0 {
		return nil, nil, &Error{Code: codes.InvalidArgument, Msg: "lease ttl: must not be negative"}
	}
	gs, ok := c.takeGates(ctx, refs, try)
	if !ok {
		if try {
			return nil, nil, &Error{Code: codes.DeadlineExceeded, Reason: reasonNotAcquired,
				Msg: "acquire of " + call.what() + ": held by another goroutine of this Client"}
		}
		return nil, nil, c.ctxOr(ctx, "acquire", call.what(), nil)
	}
	holds, err := c.acquire(ctx, call)
	if err != nil {
		gs.release()
		return nil, nil, err
	}
	leases := make([]*Lease, len(holds))
	for i, h := range holds {
		leases[i] = &Lease{c: c, h: h}
	}
	return leases, gs, nil
}

func (c *Client) acquireOne(ctx context.Context, ref lockRef, o lockOpts, try bool) (*Lease, error) {
	leases, gs, err := c.acquireLeases(ctx, []lockRef{ref}, o.ttl, o.owner, false, try)
	if err != nil {
		return nil, err
	}
	leases[0].gs = gs
	return leases[0], nil
}

// LockSpec is one lock of AcquireAll: a lock held exclusive (the default)
// or Shared, or a semaphore of Limit permits taking Permits (0: 1).
type LockSpec struct {
	Namespace string // empty: the Client's (or InNamespace's)
	Name      string
	Shared    bool
	Limit     uint32
	Permits   uint32
}

// AcquireAll takes every lock of specs (1-64, none twice) for this Client,
// all or nothing (docs/api.md "AcquireAll"), waiting until ctx ends. lockd
// takes them in (namespace, name) order, so two callers never deadlock
// whatever order they list them in. Errors as Mutex.Lock, ErrLocked naming
// the lock that could not be taken; a failed call holds none of them.
func (c *Client) AcquireAll(ctx context.Context, specs []LockSpec, opts ...LockOption) (*LeaseSet, error) {
	o := c.lockOpts(opts)
	refs := make([]lockRef, len(specs))
	for i, s := range specs {
		ns := s.Namespace
		if ns == "" {
			ns = o.ns
		}
		refs[i] = lockRef{ns: ns, name: s.Name, shared: s.Shared, limit: s.Limit, permits: s.Permits}
	}
	leases, gs, err := c.acquireLeases(ctx, refs, o.ttl, o.owner, true, false)
	if err != nil {
		return nil, err
	}
	set := &LeaseSet{Leases: leases, gs: gs, done: make(chan struct{})}
	var once sync.Once
	for _, l := range leases {
		go func() {
			<-l.Done()
			once.Do(func() { close(set.done) })
		}()
	}
	return set, nil
}
