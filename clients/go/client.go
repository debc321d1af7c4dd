package lockd

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"sync"
	"time"

	lockdv1 "github.com/lockd/lockd/clients/go/lockdv1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Client is a connection to lockd (one replica or several) with one owner
// id and at most one Session stream. Safe for concurrent use by any number
// of goroutines. Close it when done: that releases every hold it has.
type Client struct {
	conn  *grpc.ClientConn
	stub  lockdv1.LockServiceClient
	o     options
	owner string
	sess  *session

	mu     sync.Mutex
	closed bool
	gates  map[string]*gate
	unary  map[*hold]struct{} // holds renewed by their own goroutine
}

// New makes a Client of lockd at `target`: one address ("127.0.0.1:7411"),
// a comma-separated list of replicas ("h1:7411,h2:7411,[::1]:7411"), or any
// gRPC target ("dns:///lockd-headless:7411"). Calls are balanced round robin
// over every address the target resolves to; a replica that is down gets
// none. New does not wait for lockd: ctx only bounds New itself. Errors
// (each naming what is wrong): an empty or malformed target, a bad option.
func New(ctx context.Context, target string, opts ...Option) (*Client, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	o := defaultOptions()
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	// gRPC-Go pings at most every 10 s: K (validity.go) is what it does.
	o.keepaliveTime = max(o.keepaliveTime, grpcMinPing)
	if o.owner == "" {
		host, _ := os.Hostname()
		o.owner = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), randomHex(16))
	}
	dialTo, dial, err := dialTarget(target)
	if err != nil {
		return nil, err
	}
	creds := insecure.NewCredentials()
	if o.tls != nil {
		creds = credentials.NewTLS(o.tls)
	}
	dial = append(dial,
		grpc.WithTransportCredentials(creds),
		grpc.WithDefaultServiceConfig(`{"loadBalancingConfig":[{"round_robin":{}}]}`),
		// A restarted lockd must be seen well within a lease.
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 2 * time.Second},
			MinConnectTimeout: 5 * time.Second,
		}),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{
			Time: keepaliveInterval(o.keepaliveTime), Timeout: o.keepaliveTO, PermitWithoutStream: true,
		}))
	if o.bearerToken != "" {
		dial = append(dial, grpc.WithPerRPCCredentials(bearer{token: o.bearerToken}))
	}
	dial = append(dial, o.dial...)
	conn, err := grpc.NewClient(dialTo, dial...)
	if err != nil {
		return nil, fmt.Errorf("lockd: target %q: %w", target, err)
	}
	conn.Connect()
	c := &Client{conn: conn, stub: lockdv1.NewLockServiceClient(conn), o: o, owner: o.owner,
		gates: map[string]*gate{}, unary: map[*hold]struct{}{}}
	c.sess = newSession(c)
	return c, nil
}

// Owner is the owner id of every hold of this Client.
func (c *Client) Owner() string { return c.owner }

// Close ends the session (lockd releases its holds), releases every hold
// taken over the unary RPCs (bounded by the release timeout each), and
// closes the connection. Mutexes and other handles of the Client fail
// with ErrClosed afterwards. Idempotent.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	unary := make([]*hold, 0, len(c.unary))
	for h := range c.unary {
		unary = append(unary, h)
	}
	c.mu.Unlock()
	c.sess.shutdown()
	for _, h := range unary {
		ctx, cancel := context.WithTimeout(context.Background(), c.o.releaseTimeout)
		_ = c.release(ctx, h)
		cancel()
	}
	return c.conn.Close()
}

func (c *Client) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

func (c *Client) namespace(ns string) string {
	if ns != "" {
		return ns
	}
	if c.o.namespace != "" {
		return c.o.namespace
	}
	return "default"
}

// Describe returns the state of lock `name` (Held false when free), in the
// Client's namespace or InNamespace's (other options are ignored).
func (c *Client) Describe(ctx context.Context, name string, opts ...LockOption) (*LockInfo, error) {
	ns := c.lockOpts(opts).ns
	ctx, cancel := context.WithTimeout(ctx, c.o.rpcTimeout)
	defer cancel()
	var info *lockdv1.LockInfo
	err := c.retry(ctx, func(ctx context.Context) (err error) {
		info, err = c.stub.Describe(ctx, &lockdv1.DescribeRequest{Namespace: ns, Name: name})
		return err
	})
	if err != nil {
		return nil, fromErr("describe", describeLock(ns, name), err)
	}
	return lockInfoFromProto(info), nil
}

// UndoAcquire gives back the hold that this Client's acquire with
// `requestID` added, if it did and it is still the owner's last request on
// the lock (Error.UnconfirmedRequestID names such an acquire). OK whether
// or not there was a hold to give back.
func (c *Client) UndoAcquire(ctx context.Context, name, requestID string) error {
	ref := lockRef{ns: c.namespace(""), name: name}
	return c.undo(ctx, []lockRef{ref}, nil, c.owner, requestID)
}

// acquireCall is one acquire as both paths take it.
type acquireCall struct {
	locks []lockRef
	all   bool   // AcquireAll (else one lock)
	owner string // the Client's, or an election candidate's
	ttl   time.Duration
	wait  bool // wait until ctx ends (else try once)
}

func (a *acquireCall) what() string {
	if len(a.locks) == 1 && !a.all {
		return a.locks[0].what()
	}
	s := "locks "
	for i, l := range a.locks {
		if i > 0 {
			s += ", "
		}
		s += l.what()
	}
	return s
}

// acquire takes every lock of `call` on the path choosePath picks. Errors:
// ErrLocked (with Holder) when not granted before ctx ended or at once for
// a try; a context's error (errors.Is context.Canceled/DeadlineExceeded);
// lockd's errors (ErrLockKindMismatch, ...). A failed acquire leaves no hold
// unless Error.UnconfirmedRequestID is set.
func (c *Client) acquire(ctx context.Context, call acquireCall) ([]*hold, error) {
	if c.isClosed() {
		return nil, ErrClosed
	}
	if call.wait {
		return c.acquireOnPath(ctx, call)
	}
	// A try is bounded by the RPC timeout, retries included.
	tctx, cancel := context.WithTimeout(ctx, c.o.rpcTimeout)
	defer cancel()
	holds, err := c.acquireOnPath(tctx, call)
	if e, ok := err.(*Error); ok && ctx.Err() == nil && errors.Is(e.cause, context.DeadlineExceeded) {
		e.Code, e.cause = codes.Unavailable, nil
		e.Msg = fmt.Sprintf("acquire of %s: no answer from lockd within the RPC timeout (%v)", call.what(), c.o.rpcTimeout)
	}
	return holds, err
}

func (c *Client) acquireOnPath(ctx context.Context, call acquireCall) ([]*hold, error) {
	if choosePath(pathInput{
		useSessions: c.o.useSessions, ownerIsClients: call.owner == c.owner, autoRenew: true, ttl: call.ttl,
	}, c.sess) == pathSession {
		holds, err := c.sess.acquire(ctx, call)
		if !errors.Is(err, errNoSession) {
			return holds, err
		}
	}
	return c.unaryAcquire(ctx, call)
}

// waitFor is the wait_timeout of an attempt: what is left of ctx (chunks of
// at most maxWait when ctx has no deadline), or zero for a try.
func waitFor(ctx context.Context, call acquireCall) time.Duration {
	if !call.wait {
		return 0
	}
	if d, ok := ctx.Deadline(); ok {
		return max(time.Until(d), 0)
	}
	return maxWait
}

// grpcMinPing is gRPC-Go's shortest client keepalive interval.
const grpcMinPing = 10 * time.Second

// maxWait bounds one waiting attempt when ctx has no deadline; a call that
// is not granted in it asks again.
const maxWait = time.Hour

func (c *Client) acquireRequest(call acquireCall, reqID string, wait time.Duration, one *lockdv1.AcquireRequest, all *lockdv1.AcquireAllRequest) {
	if !call.all {
		l := call.locks[0]
		*one = lockdv1.AcquireRequest{Namespace: l.ns, Name: l.name, Owner: call.owner,
			LeaseTtl: durationOrNil(call.ttl), WaitTimeout: durationOrNil(wait), RequestId: reqID,
			Mode: mode(l.shared), Limit: l.limit, Permits: l.permits}
		return
	}
	*all = lockdv1.AcquireAllRequest{Owner: call.owner, LeaseTtl: durationOrNil(call.ttl),
		WaitTimeout: durationOrNil(wait), RequestId: reqID}
	for _, l := range call.locks {
		all.Locks = append(all.Locks, &lockdv1.LockSpec{Namespace: l.ns, Name: l.name,
			Mode: mode(l.shared), Limit: l.limit, Permits: l.permits})
	}
}

// granted: one AcquireResponse per lock when the answer is a grant, else
// the ErrLocked naming the holder.
func granted(call acquireCall, one *lockdv1.AcquireResponse, all *lockdv1.AcquireAllResponse) ([]*lockdv1.AcquireResponse, error) {
	if !call.all {
		if !one.GetAcquired() {
			return nil, notAcquired(call, one.GetCurrent())
		}
		return []*lockdv1.AcquireResponse{one}, nil
	}
	if !all.GetAcquired() {
		return nil, notAcquired(call, all.GetBlockedOn())
	}
	if len(all.GetLocks()) != len(call.locks) {
		return nil, &Error{Code: codes.Internal, Msg: fmt.Sprintf("acquire of %s: lockd granted %d locks, not %d", call.what(), len(all.GetLocks()), len(call.locks))}
	}
	return all.GetLocks(), nil
}

func notAcquired(call acquireCall, current *lockdv1.LockInfo) *Error {
	e := &Error{Code: codes.DeadlineExceeded, Reason: reasonNotAcquired, Holder: lockInfoFromProto(current),
		Msg: fmt.Sprintf("acquire of %s: held by another owner", call.what())}
	if e.Holder != nil && e.Holder.Owner != "" {
		e.Msg += " (" + e.Holder.Owner + ")"
	}
	return e
}

func (c *Client) unaryAcquire(ctx context.Context, call acquireCall) ([]*hold, error) {
	reqID := randomHex(16)
	unresolved := "" // an attempt that may have left a hold
	backoff := c.o.initialBackoff
	for {
		wait := waitFor(ctx, call)
		actx, cancel := context.WithTimeout(ctx, wait+c.o.rpcTimeout)
		send := time.Now()
		var one lockdv1.AcquireRequest
		var all lockdv1.AcquireAllRequest
		c.acquireRequest(call, reqID, wait, &one, &all)
		var r1 *lockdv1.AcquireResponse
		var rAll *lockdv1.AcquireAllResponse
		var err error
		if call.all {
			rAll, err = c.stub.AcquireAll(actx, &all)
		} else {
			r1, err = c.stub.Acquire(actx, &one)
		}
		cancel()
		if err == nil {
			resps, gerr := granted(call, r1, rAll)
			if gerr != nil {
				if e, ok := gerr.(*Error); ok && e.Reason == reasonNotAcquired && call.wait && ctx.Err() == nil {
					reqID = randomHex(16) // the wait chunk ran out: ask again
					continue
				}
				return nil, c.failAcquire(ctx, call, unresolved, nil, c.ctxOr(ctx, "acquire", call.what(), gerr))
			}
			return c.unaryHolds(call, resps, send)
		}
		if !outcomeUnknown(err) {
			return nil, c.failAcquire(ctx, call, unresolved, nil, fromErr("acquire", call.what(), err))
		}
		unresolved = reqID
		if status.Code(err) != codes.Unavailable || ctx.Err() != nil {
			return nil, c.failAcquire(ctx, call, unresolved, nil, c.ctxOr(ctx, "acquire", call.what(), err))
		}
		// UNAVAILABLE: undo, then retry (docs/api.md "Uncertain outcomes").
		uctx, ucancel := context.WithTimeout(ctx, c.undoTimeout())
		if c.undo(uctx, call.locks, nil, call.owner, reqID) == nil {
			unresolved, reqID = "", randomHex(16)
		}
		ucancel()
		if !sleepCtx(ctx, jittered(backoff)) {
			return nil, c.failAcquire(ctx, call, unresolved, nil, c.ctxOr(ctx, "acquire", call.what(), err))
		}
		backoff = min(2*backoff, c.o.maxBackoff)
	}
}

// unaryHolds registers a unary grant: validity from the send time, renewed
// by a goroutine per hold; a grant so late that its renewal is due (a long
// wait) is renewed before it is returned (if that fails, it is released
// and the renewal's error returned).
func (c *Client) unaryHolds(call acquireCall, resps []*lockdv1.AcquireResponse, send time.Time) ([]*hold, error) {
	holds := make([]*hold, len(resps))
	c.mu.Lock()
	for i, r := range resps {
		h := newHold(call.locks[i], call.owner, r, &c.o)
		h.validUntil = unaryValidUntil(send, h.ttl, h.drift)
		holds[i] = h
		c.unary[h] = struct{}{}
	}
	c.mu.Unlock()
	var err error
	for _, h := range holds {
		last := send
		if time.Since(send) > h.ttl/3 && err == nil {
			last = time.Now()
			err = c.renew(h, last.Add(c.o.rpcTimeout))
		}
		go h.watch(c, last)
	}
	if err != nil { // the grant cannot be trusted: give it back
		ctx, cancel := context.WithTimeout(context.Background(), c.undoTimeout())
		defer cancel()
		for _, h := range holds {
			_ = c.release(ctx, h)
		}
		return nil, err
	}
	return holds, nil
}

// failAcquire is the error a failed acquire reports: it first undoes the
// attempt `unresolved` (if any), even past ctx, bounded by the undo
// timeout; tokens (when a grant was seen) limit the undo to that grant.
func (c *Client) failAcquire(ctx context.Context, call acquireCall, unresolved string, tokens []uint64, err error) error {
	if unresolved == "" {
		return err
	}
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.undoTimeout())
	defer cancel()
	if uerr := c.undo(uctx, call.locks, tokens, call.owner, unresolved); uerr != nil {
		e, ok := err.(*Error)
		if !ok {
			e = &Error{Code: status.Code(err), Msg: err.Error(), cause: err}
		}
		e.UnconfirmedRequestID = unresolved
		e.Msg += fmt.Sprintf("; the undo of acquire request %s of owner %s went unanswered (%v): a hold it took ends with its lease", unresolved, call.owner, uerr)
		return e
	}
	return err
}

// undo releases, on every lock, the hold that `owner`'s acquire `reqID`
// added, if any (Release{acquire_request_id}); nil when every undo was
// confirmed (OK, or LOCK_NOT_HELD: nothing is held).
func (c *Client) undo(ctx context.Context, locks []lockRef, tokens []uint64, owner, reqID string) error {
	var first error
	for i, l := range locks {
		var token uint64
		if i < len(tokens) {
			token = tokens[i]
		}
		err := c.retry(ctx, func(ctx context.Context) error {
			_, err := c.stub.Release(ctx, &lockdv1.ReleaseRequest{Namespace: l.ns, Name: l.name,
				Owner: owner, AcquireRequestId: reqID, FencingToken: token})
			return err
		})
		if err != nil && first == nil {
			if e := fromErr("undo", l.what(), err).(*Error); e.Reason != reasonLockNotHeld {
				first = e
			}
		}
	}
	return first
}

// release gives up one hold of h (its token) and ends it; a lost hold
// answers its loss.
func (c *Client) release(ctx context.Context, h *hold) error {
	c.mu.Lock()
	_, unary := c.unary[h]
	delete(c.unary, h)
	closed := c.closed && !unary // Close releases unary holds with this
	c.mu.Unlock()
	if closed {
		return ErrClosed
	}
	if lost := h.err(); lost != nil {
		return lost
	}
	var err error
	if unary {
		err = c.unaryRelease(ctx, h, randomHex(16))
	} else {
		err = c.sess.release(ctx, h)
	}
	if e, ok := err.(*Error); ok && e.Reason == reasonLockNotHeld {
		h.markLost(lostError(h.what(), reasonLockNotHeld, "lockd answered the release LOCK_NOT_HELD"))
		return h.err()
	}
	h.end()
	return err
}

func (c *Client) unaryRelease(ctx context.Context, h *hold, reqID string) error {
	ctx, cancel := context.WithTimeout(ctx, c.o.rpcTimeout)
	defer cancel()
	err := c.retry(ctx, func(ctx context.Context) error {
		_, err := c.stub.Release(ctx, &lockdv1.ReleaseRequest{Namespace: h.ns, Name: h.name,
			Owner: h.owner, RequestId: reqID, FencingToken: h.token})
		return err
	})
	return fromErr("release", h.what(), err)
}

// retry runs `call` again after UNAVAILABLE, with capped jittered backoff,
// until another answer or ctx ends.
func (c *Client) retry(ctx context.Context, call func(context.Context) error) error {
	backoff := c.o.initialBackoff
	for {
		err := call(ctx)
		if status.Code(err) != codes.Unavailable {
			return err
		}
		if !sleepCtx(ctx, jittered(backoff)) {
			return err
		}
		backoff = min(2*backoff, c.o.maxBackoff)
	}
}

func (c *Client) undoTimeout() time.Duration { return min(c.o.rpcTimeout, c.o.releaseTimeout) }

// ctxOr: the caller's context error when ctx ended, else err translated. A
// not-acquired answer stays ErrLocked (with its holder) and also matches the
// context's error.
func (c *Client) ctxOr(ctx context.Context, op, what string, err error) error {
	cerr := ctx.Err()
	if d, ok := ctx.Deadline(); ok && cerr == nil && status.Code(err) == codes.DeadlineExceeded &&
		!time.Now().Before(d) {
		// gRPC's timer for the caller's deadline may fire a moment before
		// the context's own: the call ended with the context all the same.
		cerr = context.DeadlineExceeded
	}
	if cerr != nil {
		if e, ok := err.(*Error); ok && e.Reason == reasonNotAcquired {
			e.cause = cerr
			return e
		}
		code := codes.Canceled
		if errors.Is(cerr, context.DeadlineExceeded) {
			code = codes.DeadlineExceeded
		}
		return &Error{Code: code, Msg: fmt.Sprintf("%s of %s: %v", op, what, cerr), cause: cerr}
	}
	return fromErr(op, what, err)
}

// outcomeUnknown: the call may have been applied although no answer said so.
func outcomeUnknown(err error) bool {
	switch status.Code(err) {
	case codes.DeadlineExceeded, codes.Canceled, codes.Unavailable, codes.Unknown, codes.Internal,
		codes.Aborted, codes.DataLoss:
		return true
	}
	return false
}

func mode(shared bool) lockdv1.LockMode {
	if shared {
		return lockdv1.LockMode_LOCK_MODE_SHARED
	}
	return lockdv1.LockMode_LOCK_MODE_EXCLUSIVE
}

func durationOrNil(d time.Duration) *durationpb.Duration {
	if d <= 0 {
		return nil
	}
	return durationpb.New(d)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = cryptorand(b)
	return hex.EncodeToString(b)
}

var cryptorand = rand.Read

// jittered is uniform in [b/2, b].
func jittered(b time.Duration) time.Duration {
	return b/2 + time.Duration(mrand.Int64N(int64(b/2)+1))
}

// sleepCtx sleeps d; false if ctx ended first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// bearer sends the token with every call.
type bearer struct{ token string }

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + b.token}, nil
}
func (b bearer) RequireTransportSecurity() bool { return false }
