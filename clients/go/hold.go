package lockd

import (
	"context"
	"sync"
	"time"

	lockdv1 "github.com/lockd/lockd/clients/go/lockdv1"
)

// LockInfo is one lock's state (docs/api.md "Describe").
type LockInfo struct {
	Namespace    string
	Name         string
	Held         bool
	Owner        string // the newest holder's (see Holders for every holder)
	HoldCount    uint32
	FencingToken uint64
	TTLRemaining time.Duration // by the backend's clock
	Waiters      uint32
	Backend      string
	Shared       bool   // held SHARED (readers)
	Limit        uint32 // non-zero: held as a semaphore of this many permits
	Holders      []Holder
}

// Holder is one owner's hold of a name.
type Holder struct {
	Owner        string
	Shared       bool
	HoldCount    uint32
	Permits      uint32
	FencingToken uint64
	TTLRemaining time.Duration
}

func lockInfoFromProto(p *lockdv1.LockInfo) *LockInfo {
	if p == nil {
		return nil
	}
	info := &LockInfo{
		Namespace: p.GetNamespace(), Name: p.GetName(), Held: p.GetHeld(), Owner: p.GetOwner(),
		HoldCount: p.GetHoldCount(), FencingToken: p.GetFencingToken(),
		TTLRemaining: p.GetTtlRemaining().AsDuration(), Waiters: p.GetWaiters(),
		Backend: p.GetBackend(), Shared: p.GetMode() == lockdv1.LockMode_LOCK_MODE_SHARED,
		Limit: p.GetLimit(),
	}
	for _, h := range p.GetHolders() {
		info.Holders = append(info.Holders, Holder{
			Owner: h.GetOwner(), Shared: h.GetMode() == lockdv1.LockMode_LOCK_MODE_SHARED,
			HoldCount: h.GetHoldCount(), Permits: h.GetPermits(),
			FencingToken: h.GetFencingToken(), TTLRemaining: h.GetTtlRemaining().AsDuration(),
		})
	}
	return info
}

// lockRef is one lock of an acquire and its kind.
type lockRef struct {
	ns, name string // ns resolved: never empty
	shared   bool
	limit    uint32 // non-zero: a semaphore
	permits  uint32 // with limit: permits to take (0: 1)
}

func (l lockRef) what() string { return describeLock(l.ns, l.name) }

// hold is one hold of one owner on one lock, as a grant created it. Its
// validity: the zero time while a session stream is up (the server renews
// it), else the deadline of lease_validity's rules; past it the hold is
// lost. Thread-safe (mu); done is closed once, when the hold ends (lost or
// released).
type hold struct {
	lockRef
	owner   string
	token   uint64
	count   uint32
	ttl     time.Duration
	drift   time.Duration
	session bool // held over the Client's session (else renewed by watch)

	mu         sync.Mutex
	validUntil time.Time // zero: kept by the server (session up)
	lost       error
	ended      bool
	done       chan struct{}
}

func newHold(ref lockRef, owner string, resp *lockdv1.AcquireResponse, o *options) *hold {
	ttl := resp.GetLeaseTtl().AsDuration()
	return &hold{lockRef: ref, owner: owner, token: resp.GetFencingToken(), count: resp.GetHoldCount(),
		ttl: ttl, drift: drift(ttl, o.driftFactor, o.minDrift), done: make(chan struct{})}
}

// markLost ends the hold as lost with `err` (the first loss wins).
func (h *hold) markLost(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ended {
		return
	}
	h.ended, h.lost = true, err
	close(h.done)
}

// end ends the hold as released (or given up); false if it had ended.
func (h *hold) end() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ended {
		return false
	}
	h.ended = true
	close(h.done)
	return true
}

func (h *hold) setValidUntil(t time.Time) {
	h.mu.Lock()
	h.validUntil = t
	h.mu.Unlock()
}

// expired marks the hold lost when its validity has passed; reports whether
// it is (now) ended.
func (h *hold) expired(now time.Time) bool {
	h.mu.Lock()
	vu, ended := h.validUntil, h.ended
	h.mu.Unlock()
	if ended {
		return true
	}
	if !vu.IsZero() && !now.Before(vu) {
		h.markLost(lostError(h.what(), "VALIDITY_EXPIRED",
			"its validity ran out before a renewal or a new session confirmed it"))
		return true
	}
	return false
}

// err is nil while the hold is active or was released, else why it was lost.
func (h *hold) err() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lost
}

// active: not ended and within its validity.
func (h *hold) active() bool {
	return !h.expired(time.Now())
}

// watch renews a unary hold every ttl/3 from the last renewal's send time
// until it ends; a renewal answered LOCK_NOT_HELD or with another token, or
// validity running out while renewals fail, marks it lost.
func (h *hold) watch(c *Client, lastSend time.Time) {
	backoff := c.o.initialBackoff
	next := lastSend.Add(h.ttl / 3)
	for {
		timer := time.NewTimer(time.Until(next))
		select {
		case <-h.done:
			timer.Stop()
			return
		case <-timer.C:
		}
		h.mu.Lock()
		vu := h.validUntil
		h.mu.Unlock()
		if err := c.renew(h, minTime(time.Now().Add(c.o.rpcTimeout), vu)); err == nil {
			backoff = c.o.initialBackoff
			h.mu.Lock()
			next = h.validUntil.Add(-h.ttl + h.drift + h.ttl/3)
			h.mu.Unlock()
			continue
		}
		if h.expired(time.Now()) {
			return
		}
		next = time.Now().Add(jittered(backoff))
		backoff = min(2*backoff, c.o.maxBackoff)
	}
}

// renew sends one Renew of h (its token), bounded by `deadline`; OK extends
// the validity from the send time.
func (c *Client) renew(h *hold, deadline time.Time) error {
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	send := time.Now()
	resp, err := c.stub.Renew(ctx, &lockdv1.RenewRequest{Namespace: h.ns, Name: h.name, Owner: h.owner,
		LeaseTtl: durationOrNil(h.ttl), FencingToken: h.token})
	if err != nil {
		e := fromErr("renew", h.what(), err).(*Error)
		if e.Reason == reasonLockNotHeld {
			h.markLost(lostError(h.what(), reasonLockNotHeld, "lockd answered a renewal LOCK_NOT_HELD"))
		}
		return e
	}
	if resp.GetFencingToken() != h.token {
		h.markLost(lostError(h.what(), "FENCING_TOKEN_CHANGED", "a renewal found another fencing token"))
		return h.err()
	}
	h.setValidUntil(unaryValidUntil(send, h.ttl, h.drift))
	return nil
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
