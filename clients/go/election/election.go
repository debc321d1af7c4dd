// Package election is leader election on one lockd lock, like etcd's
// concurrency.Election: candidates Campaign with a value (say the pod
// name); the one holding the lock is the leader until it Resigns, its
// process dies (its lease then ends, waiters get the lock) or its lease is
// lost (Done closes: stop acting as leader).
//
// How others learn the leader: lockd v1 has no watch of a lock's holder
// and no data attached to a lock, so the candidate's value travels in the
// lock's owner, "<value>#<8 hex>" (the suffix keeps two candidates with
// the same value apart), and Leader and Observe read it with Describe
// (docs/api.md "Describe"). Observe polls every PollInterval, so it sees a
// change within that interval.
//
// The lock is held for the candidate's owner, not the Client's, so it goes
// over the unary RPCs and is renewed every ttl/3 by the client (see the
// path table in package lockd); a leader that dies is replaced after its
// lease: choose it with lockd.LeaseTTL.
package election

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"sync"
	"time"

	lockd "github.com/lockd/lockd/clients/go"
)

// ErrNoLeader: nobody holds the election's lock.
var ErrNoLeader = errors.New("election: no leader")

// ErrNotLeader: Resign without leadership.
var ErrNotLeader = errors.New("election: not the leader")

// PollInterval is how often Observe asks lockd for the leader.
var PollInterval = 250 * time.Millisecond

// Election is one candidate's view of the election on lock `name`. Safe
// for concurrent use.
type Election struct {
	c    *lockd.Client
	name string
	opts []lockd.LockOption

	idle *lockd.Mutex // never locked

	mu     sync.Mutex
	leader *lockd.Mutex // while this candidate leads
}

// New is the election on lock `name` of client c; opts as for a Mutex
// (lockd.InNamespace, lockd.LeaseTTL).
func New(c *lockd.Client, name string, opts ...lockd.LockOption) *Election {
	return &Election{c: c, name: name, opts: opts, idle: c.Mutex(name, opts...)}
}

var suffix = regexp.MustCompile(`#[0-9a-f]{8}$`)

func randomSuffix() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return "#" + hex.EncodeToString(b[:])
}

// Campaign waits until this candidate leads, or ctx ends (then nothing is
// held and the error is the context's, errors.Is context.Canceled or
// DeadlineExceeded). value: what Leader and Observe report, 1-247 bytes of
// UTF-8 without control characters (lockd checks it as an owner). Calling
// Campaign while leading is an error.
func (e *Election) Campaign(ctx context.Context, value string) error {
	e.mu.Lock()
	if e.leader != nil {
		e.mu.Unlock()
		return fmt.Errorf("election %q: Campaign while leading", e.name)
	}
	e.mu.Unlock()
	owner := value + randomSuffix()
	m := e.c.Mutex(e.name, append(append([]lockd.LockOption{}, e.opts...), lockd.AsOwner(owner))...)
	if err := m.Lock(ctx); err != nil {
		return err
	}
	e.mu.Lock()
	e.leader = m
	e.mu.Unlock()
	return nil
}

// Resign gives up leadership (the next candidate is granted the lock).
// ErrNotLeader when not leading; lockd.ErrLeaseLost when leadership had
// been lost already.
func (e *Election) Resign(ctx context.Context) error {
	e.mu.Lock()
	m := e.leader
	e.leader = nil
	e.mu.Unlock()
	if m == nil {
		return ErrNotLeader
	}
	return m.Unlock(ctx)
}

// current is the Mutex of this candidate's leadership, or an unlocked one
// (Done closed, Err nil, Token 0) when not leading.
func (e *Election) current() *lockd.Mutex {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.leader == nil {
		return e.idle
	}
	return e.leader
}

// Done is closed when this candidate's leadership ends: lost (Err says
// why) or resigned; closed already when not leading.
func (e *Election) Done() <-chan struct{} { return e.current().Done() }

// Err is why leadership was lost (errors.Is lockd.ErrLeaseLost), nil while
// leading.
func (e *Election) Err() error { return e.current().Err() }

// Token is the fencing token of this candidate's leadership (0 when not
// leading): pass it with every action taken as leader.
func (e *Election) Token() uint64 { return e.current().Token() }

// Leader is the value of the current leader; ErrNoLeader when there is none.
func (e *Election) Leader(ctx context.Context) (string, error) {
	v, _, err := e.leaderOf(ctx)
	return v, err
}

func (e *Election) leaderOf(ctx context.Context) (string, uint64, error) {
	info, err := e.c.Describe(ctx, e.name, e.opts...)
	if err != nil {
		return "", 0, err
	}
	if !info.Held {
		return "", 0, ErrNoLeader
	}
	return suffix.ReplaceAllString(info.Owner, ""), info.FencingToken, nil
}

// Observe sends the leader's value each time leadership changes hands (a
// new fencing token), starting with the current leader, until ctx ends;
// then the channel is closed. A reader too slow for a change skips to the
// next. Errors of lockd are retried at the next poll.
func (e *Election) Observe(ctx context.Context) <-chan string {
	ch := make(chan string)
	go func() {
		defer close(ch)
		var last uint64
		t := time.NewTicker(PollInterval)
		defer t.Stop()
		for {
			if v, token, err := e.leaderOf(ctx); err == nil && token != last {
				select {
				case ch <- v:
					last = token
				case <-ctx.Done():
					return
				}
			}
			select {
			case <-t.C:
			case <-ctx.Done():
				return
			}
		}
	}()
	return ch
}
