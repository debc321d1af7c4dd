package lockd

import (
	"context"
	"fmt"

	"google.golang.org/grpc/codes"
)

// MaxSemaphoreLimit is the largest semaphore limit lockd takes.
const MaxSemaphoreLimit = 10000

// Semaphore is the name `name` used as a semaphore of `limit` permits,
// shared by every owner that acquires it with the same limit: owners whose
// permits add up to at most the limit hold it at once, waiting acquires are
// granted first come, first served (a large request at the head holds back
// later small ones). The Client is one holder: its goroutines' acquires of
// one Semaphore take turns in the Client (use a Client per holder for
// several holders in one process). A handle: cheap, safe for concurrent use.
type Semaphore struct {
	c     *Client
	ref   lockRef
	limit uint32
	o     lockOpts
}

// Semaphore returns the semaphore `name` of `limit` permits (1-10,000,
// checked by Acquire); it takes nothing yet.
func (c *Client) Semaphore(name string, limit uint32, opts ...LockOption) *Semaphore {
	o := c.lockOpts(opts)
	return &Semaphore{c: c, ref: lockRef{ns: o.ns, name: name, limit: limit}, limit: limit, o: o}
}

// Acquire takes `permits` (1-limit) of the semaphore, waiting until they
// are granted or ctx ends. The Lease is one hold with its own fencing token;
// Release gives the permits back. Errors as Mutex.Lock, plus, at once,
// ErrLockKindMismatch (the name is held as a lock, or as a semaphore of
// another limit) and INVALID_ARGUMENT naming limit or permits out of range
// (nothing sent).
func (s *Semaphore) Acquire(ctx context.Context, permits uint32) (*Lease, error) {
	return s.acquire(ctx, permits, false)
}

// TryAcquire takes `permits` if they are free now; ErrLocked otherwise.
func (s *Semaphore) TryAcquire(ctx context.Context, permits uint32) (*Lease, error) {
	return s.acquire(ctx, permits, true)
}

func (s *Semaphore) acquire(ctx context.Context, permits uint32, try bool) (*Lease, error) {
	if s.limit < 1 || s.limit > MaxSemaphoreLimit {
		return nil, &Error{Code: codes.InvalidArgument, Msg: fmt.Sprintf("limit: must be between 1 and %d (got %d)", MaxSemaphoreLimit, s.limit)}
	}
	if permits < 1 || permits > s.limit {
		return nil, &Error{Code: codes.InvalidArgument, Msg: fmt.Sprintf("permits: must be between 1 and the limit %d (got %d)", s.limit, permits)}
	}
	ref := s.ref
	ref.permits = permits
	return s.c.acquireOne(ctx, ref, s.o, try)
}
