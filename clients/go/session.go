package lockd

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	lockdv1 "github.com/lockd/lockd/clients/go/lockdv1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// session is the one Session stream of a Client (docs/api.md "Sessions"),
// over which its holds are taken, renewed by the server and released.
//
// Lifecycle: opened by the first acquire that takes the session path, with
// open.owner = the Client's owner, open.lease_ttl = the session's lease
// (accepts) and open.keep_on_disconnect. One goroutine (run) reads the
// stream: it matches each `result` to its op by op_id and marks holds lost
// on `lost`. When the stream breaks it reconnects with capped, jittered
// backoff while the session has holds or operations, and opens a new
// session of the same owner with `resume` = every hold still held; holds
// the server does not list in `opened.resumed` are lost. While no stream is
// up a hold stays valid until its session-break bound (validity.go), then
// is lost. With no holds and no operations a broken stream is reopened only
// by the next acquire.
//
// Operations in flight when the stream breaks have an unknown outcome: an
// acquire undoes its attempt with the unary Release{acquire_request_id} and
// retries; a release is repeated as a unary Release with the same
// request_id. A release issued while no stream is up goes unary at once
// (the hold belongs to the owner, not to the stream).
//
// Thread-safe: every field below mu is guarded by it; an op's fields too.
// Sends go through the stream's batcher (batcher.go: what is queued while a
// send is in flight leaves as one batch); only run receives.
type session struct {
	c *Client

	batchesSent, batchesRead atomic.Uint64 // SessionBatch, SessionResponseBatch (tests)

	mu          sync.Mutex
	started     bool
	stopped     bool
	unsupported bool
	ttlFixed    bool
	ttl         time.Duration // asked: WithSessionTTL, else the first acquire's
	grantedTTL  time.Duration // from `opened`
	cur         *stream       // being opened or open
	open        bool          // cur got `opened`
	lastErr     string        // why the last stream ended
	nextID      uint64
	ops         map[uint64]*op
	holds       []*hold
	wake        chan struct{} // run: something changed (capacity 1)
	exited      chan struct{} // closed when run returns
}

// errNoSession: lockd has no Session stream; nothing was sent.
var errNoSession = errors.New("lockd: no Session stream")

type op struct {
	id      uint64
	req     *lockdv1.SessionRequest
	call    *acquireCall // acquires: the call (its locks and owner)
	sent    bool         // written (or being written) on an open stream
	cancel  bool         // a cancel was asked
	gone    bool         // abandoned: a late grant is given back
	done    chan struct{}
	result  *lockdv1.SessionResult
	holds   []*hold // a grant's, already in session.holds
	err     error   // when done without result (outcome unknown iff sent)
	release bool
}

type stream struct {
	cancel context.CancelFunc
	w      *batcher   // every send goes through it
	mu     sync.Mutex // no send after close, no CloseSend during a send
	cs     grpc.BidiStreamingClient[lockdv1.SessionRequest, lockdv1.SessionResponse]
	closed bool
}

var errStreamClosed = errors.New("lockd: session stream closed")

// write is w's send; an error (the stream's end) fails w's queue.
func (s *stream) write(req *lockdv1.SessionRequest) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.cs == nil {
		return errStreamClosed
	}
	return s.cs.Send(req)
}

func (s *stream) close(halfClose bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.closed = true
	if halfClose && s.cs != nil {
		_ = s.cs.CloseSend()
	}
}

func newSession(c *Client) *session {
	return &session{c: c, ops: map[uint64]*op{}, wake: make(chan struct{}, 1), exited: make(chan struct{})}
}

func (s *session) hang() time.Duration { return hangBound(s.c.o.keepaliveTime, s.c.o.keepaliveTO) }

func (s *session) safe(ttl time.Duration) bool {
	return sessionSafe(ttl, drift(ttl, s.c.o.driftFactor, s.c.o.minDrift), s.hang())
}

// accepts: whether an acquire asking lease `ttl` (zero: any) holds over
// this session (the last four rows of path.go's table).
func (s *session) accepts(ttl time.Duration) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.unsupported || !s.safe(ttl) {
		return false
	}
	if !s.ttlFixed {
		s.ttl = ttl
		if s.c.o.sessionTTL > 0 {
			s.ttl = s.c.o.sessionTTL
		}
		s.ttlFixed = true
	}
	if !s.safe(s.ttl) || !s.safe(s.grantedTTL) {
		return false
	}
	return ttl == 0 || ttl == s.ttl || (s.grantedTTL > 0 && ttl == s.grantedTTL)
}

func (s *session) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// submit registers req (its op_id set) and sends it if a stream is up.
func (s *session) submit(req *lockdv1.SessionRequest, call *acquireCall) *op {
	o := &op{req: proto.Clone(req).(*lockdv1.SessionRequest), call: call, done: make(chan struct{})}
	s.mu.Lock()
	s.nextID++
	o.id = s.nextID
	switch k := o.req.Kind.(type) {
	case *lockdv1.SessionRequest_Acquire:
		k.Acquire.OpId = o.id
	case *lockdv1.SessionRequest_AcquireAll:
		k.AcquireAll.OpId = o.id
	case *lockdv1.SessionRequest_Release:
		k.Release.OpId = o.id
		o.release = true
	}
	if s.stopped || s.unsupported {
		o.err = errNoSession
		if s.stopped {
			o.err = ErrClosed
		}
		close(o.done)
		s.mu.Unlock()
		return o
	}
	s.ops[o.id] = o
	if !s.started {
		s.started = true
		go s.run()
	}
	var st *stream
	var ticket uint64
	if s.open {
		st, o.sent = s.cur, true
		ticket = st.w.queue(o.req) // under mu: queued in op_id order
	}
	s.mu.Unlock()
	s.signal()
	if st != nil {
		st.w.flush(ticket)
	}
	return o
}

// finish ends o with its result or error. REQUIRES: s.mu held.
func (s *session) finish(o *op) {
	delete(s.ops, o.id)
	close(o.done)
}

func isDone(o *op) bool {
	select {
	case <-o.done:
		return true
	default:
		return false
	}
}

// cancelOp cancels a waiting acquire (drops it if it was never sent).
func (s *session) cancelOp(o *op) {
	s.mu.Lock()
	if isDone(o) {
		s.mu.Unlock()
		return
	}
	o.cancel = true
	if !o.sent {
		o.err = context.Canceled
		s.finish(o)
		s.mu.Unlock()
		return
	}
	var st *stream
	var ticket uint64
	if s.open {
		st = s.cur
		ticket = st.w.queue(&lockdv1.SessionRequest{Kind: &lockdv1.SessionRequest_Cancel{Cancel: &lockdv1.SessionCancel{OpId: o.id}}})
	}
	s.mu.Unlock()
	if st != nil {
		st.w.flush(ticket)
	}
}

// abandon: the caller stops waiting for o; a late grant of a sent acquire
// is given back by handleResult.
func (s *session) abandon(o *op) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if isDone(o) {
		return
	}
	if o.sent && !o.release {
		o.gone = true
	} else {
		delete(s.ops, o.id)
	}
}

func (s *session) forget(h *hold) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, x := range s.holds {
		if x == h {
			s.holds = append(s.holds[:i], s.holds[i+1:]...)
			return
		}
	}
}

// acquire takes one hold of each lock of call over the session. Errors as
// Client.acquire, plus errNoSession: use the unary path (nothing was sent).
func (s *session) acquire(ctx context.Context, call acquireCall) ([]*hold, error) {
	c := s.c
	reqID := randomHex(16)
	unresolved := ""
	for {
		wait := waitFor(ctx, call)
		var one lockdv1.AcquireRequest
		var all lockdv1.AcquireAllRequest
		c.acquireRequest(call, reqID, wait, &one, &all)
		one.LeaseTtl, all.LeaseTtl = nil, nil // the session's lease applies
		req := &lockdv1.SessionRequest{Kind: &lockdv1.SessionRequest_Acquire{Acquire: &lockdv1.SessionAcquire{Request: &one}}}
		if call.all {
			req = &lockdv1.SessionRequest{Kind: &lockdv1.SessionRequest_AcquireAll{AcquireAll: &lockdv1.SessionAcquireAll{Request: &all}}}
		}
		o := s.submit(req, &call)
		select {
		case <-o.done:
		case <-ctx.Done():
			s.cancelOp(o)
			t := time.NewTimer(c.undoTimeout())
			select {
			case <-o.done:
			case <-t.C:
				s.abandon(o)
			}
			t.Stop()
		}
		s.mu.Lock()
		done, result, sent, cancelled, holds, oerr := isDone(o), o.result, o.sent, o.cancel, o.holds, o.err
		lastErr := s.lastErr
		s.mu.Unlock()
		if result != nil {
			if st := result.GetStatus(); st.GetCode() != 0 {
				if codes.Code(st.GetCode()) == codes.Canceled && cancelled {
					return nil, c.failAcquire(ctx, call, unresolved, nil, c.ctxOr(ctx, "acquire", call.what(), nil))
				}
				return nil, c.failAcquire(ctx, call, unresolved, nil, fromStatus("acquire", call.what(), status.FromProto(st)))
			}
			_, gerr := granted(call, result.GetAcquire(), result.GetAcquireAll())
			if gerr != nil {
				if cancelled || ctx.Err() != nil {
					return nil, c.failAcquire(ctx, call, unresolved, nil, c.ctxOr(ctx, "acquire", call.what(), gerr))
				}
				if e, ok := gerr.(*Error); ok && e.Reason == reasonNotAcquired && call.wait {
					reqID = randomHex(16) // the wait chunk ran out: ask again
					continue
				}
				return nil, c.failAcquire(ctx, call, unresolved, nil, gerr)
			}
			if cancelled { // granted as the cancel went out: give it back
				tokens := make([]uint64, len(holds))
				for i, h := range holds {
					s.forget(h)
					h.end()
					tokens[i] = h.token
				}
				return nil, c.failAcquire(ctx, call, reqID, tokens, c.ctxOr(ctx, "acquire", call.what(), nil))
			}
			return holds, nil
		}
		if !done { // no answer even to the cancel
			return nil, c.failAcquire(ctx, call, reqID, nil, c.ctxOr(ctx, "acquire", call.what(),
				status.Error(codes.Unavailable, "no answer on the session stream")))
		}
		if !sent {
			if errors.Is(oerr, errNoSession) || errors.Is(oerr, ErrClosed) {
				return nil, oerr
			}
			if !cancelled {
				return nil, c.failAcquire(ctx, call, unresolved, nil, fromErr("acquire (session open)", call.what(), oerr))
			}
			return nil, c.failAcquire(ctx, call, unresolved, nil, c.ctxOr(ctx, "acquire", call.what(),
				status.Error(codes.Unavailable, "no session stream to lockd in time: "+lastErr)))
		}
		// Sent, and the stream broke before the answer: outcome unknown.
		unresolved = reqID
		if cancelled || ctx.Err() != nil {
			return nil, c.failAcquire(ctx, call, unresolved, nil, c.ctxOr(ctx, "acquire", call.what(), oerr))
		}
		uctx, cancel := context.WithTimeout(ctx, c.undoTimeout())
		if c.undo(uctx, call.locks, nil, call.owner, unresolved) == nil {
			unresolved, reqID = "", randomHex(16)
		}
		cancel()
	}
}

// release gives up one hold of h over the stream, or unary when no stream
// is up or it broke before the answer (same request_id).
func (s *session) release(ctx context.Context, h *hold) error {
	s.forget(h)
	reqID := randomHex(16)
	s.mu.Lock()
	open := s.open && !s.stopped
	s.mu.Unlock()
	if open {
		req := &lockdv1.SessionRequest{Kind: &lockdv1.SessionRequest_Release{Release: &lockdv1.SessionRelease{
			Request: &lockdv1.ReleaseRequest{Namespace: h.ns, Name: h.name, RequestId: reqID, FencingToken: h.token}}}}
		o := s.submit(req, nil)
		rctx, cancel := context.WithTimeout(ctx, s.c.o.rpcTimeout)
		defer cancel()
		select {
		case <-o.done:
		case <-rctx.Done():
			s.abandon(o)
			return s.c.ctxOr(rctx, "release", h.what(), nil)
		}
		s.mu.Lock()
		result := o.result
		s.mu.Unlock()
		if result != nil {
			if st := result.GetStatus(); st.GetCode() != 0 {
				return fromStatus("release", h.what(), status.FromProto(st))
			}
			return nil
		}
	}
	return s.c.unaryRelease(ctx, h, reqID)
}

// shutdown half-closes the stream (the server releases every hold left),
// waits up to the release timeout for its end, then cancels it.
func (s *session) shutdown() {
	s.mu.Lock()
	s.stopped = true
	started, st := s.started, s.cur
	s.mu.Unlock()
	if !started {
		return
	}
	s.signal()
	if st != nil {
		st.close(true)
	}
	t := time.NewTimer(s.c.o.releaseTimeout)
	defer t.Stop()
	select {
	case <-s.exited:
	case <-t.C:
		s.mu.Lock()
		st = s.cur
		s.mu.Unlock()
		if st != nil {
			st.cancel()
		}
		<-s.exited
	}
	// The half-close released them (or they end with their lease).
	s.mu.Lock()
	holds := s.holds
	s.holds = nil
	s.mu.Unlock()
	for _, h := range holds {
		h.end()
	}
}

func (s *session) run() {
	defer close(s.exited)
	initial := max(s.c.o.initialBackoff, time.Millisecond)
	backoff := initial
	for {
		s.mu.Lock()
		stopped, idle := s.stopped, len(s.ops) == 0 && len(s.holds) == 0
		s.mu.Unlock()
		if stopped {
			return
		}
		if idle {
			<-s.wake
			continue
		}
		if s.runStream() {
			backoff = initial
		}
		s.mu.Lock()
		skip := s.stopped || s.unsupported || (len(s.ops) == 0 && len(s.holds) == 0)
		s.mu.Unlock()
		if skip {
			continue
		}
		s.backoff(time.Now().Add(jittered(backoff)))
		backoff = min(2*backoff, s.c.o.maxBackoff)
	}
}

// backoff waits until `until` (or stop), losing holds whose validity ends.
func (s *session) backoff(until time.Time) {
	for {
		now := time.Now()
		wake := minTime(until, now.Add(100*time.Millisecond))
		s.mu.Lock()
		if s.stopped {
			s.mu.Unlock()
			return
		}
		kept := s.holds[:0]
		for _, h := range s.holds {
			if !h.expired(now) {
				kept = append(kept, h)
			}
		}
		s.holds = kept
		s.mu.Unlock()
		if !now.Before(until) {
			return
		}
		t := time.NewTimer(time.Until(wake))
		select {
		case <-t.C:
		case <-s.wake:
			s.signal() // keep it for run
			t.Stop()
			if s.isStopped() {
				return
			}
			time.Sleep(time.Until(wake))
		}
	}
}

func (s *session) isStopped() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stopped
}

// runStream runs one stream until it ends; true if the server opened it.
func (s *session) runStream() bool {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st := &stream{cancel: cancel}
	st.w = newBatcher(func(req *lockdv1.SessionRequest) error {
		err := st.write(req)
		if err == nil && req.GetBatch() != nil {
			s.batchesSent.Add(1)
		}
		return err
	})
	open := &lockdv1.SessionOpen{Owner: s.c.owner, Namespace: s.c.o.namespace, KeepOnDisconnect: s.c.o.keepOnDisc}
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return false
	}
	if s.ttlFixed && s.ttl > 0 {
		open.LeaseTtl = durationOrNil(s.ttl)
	}
	listed := map[lockRef]map[uint64]bool{}
	for _, h := range s.holds {
		if h.err() != nil || listed[h.lockRef][h.token] { // reentrant holds share one entry
			continue
		}
		if listed[h.lockRef] == nil {
			listed[h.lockRef] = map[uint64]bool{}
		}
		listed[h.lockRef][h.token] = true
		open.Resume = append(open.Resume, &lockdv1.LockRef{Namespace: h.ns, Name: h.name, FencingToken: h.token})
	}
	s.cur, s.open = st, false
	s.mu.Unlock()

	cs, err := s.c.stub.Session(ctx) // may wait for a connection: not under st.mu
	if err != nil {
		s.onStreamEnd(st, status.Convert(err), false)
		return false
	}
	st.mu.Lock()
	st.cs = cs
	if st.closed { // shutdown came first: half-close now
		_ = cs.CloseSend()
	}
	st.mu.Unlock()
	// Alone: nothing else is queued before `opened`.
	st.w.flush(st.w.queue(&lockdv1.SessionRequest{Kind: &lockdv1.SessionRequest_Open{Open: open}}))
	opened := false
	resp, err := cs.Recv()
	if err == nil {
		if o := resp.GetOpened(); o != nil {
			opened = true
			s.onOpened(st, o)
			for {
				resp, err = cs.Recv()
				if err != nil {
					break
				}
				items := []*lockdv1.SessionResponse{resp}
				if b := resp.GetBatch(); b != nil {
					s.batchesRead.Add(1)
					items = b.GetItems()
				}
				for _, item := range items { // each as if it came alone
					if r := item.GetResult(); r != nil {
						s.handleResult(st, r)
					} else if l := item.GetLost(); l != nil {
						s.handleLost(l)
					}
				}
			}
		} else {
			cancel() // not the protocol
			for err == nil {
				_, err = cs.Recv()
			}
		}
	}
	st.close(false)
	end := status.Convert(err)
	if errors.Is(err, io.EOF) {
		end = status.New(codes.OK, "")
	}
	s.onStreamEnd(st, end, opened)
	return opened
}

func sameHold(h *hold, ns, name string, token uint64) bool {
	return h.ns == ns && h.name == name && h.token == token
}

// onOpened: resumed holds are kept by the server again, the others lost;
// queued operations are sent, in op_id order.
func (s *session) onOpened(st *stream, opened *lockdv1.SessionOpened) {
	var notResumed []*hold
	var queued []*op
	var ticket uint64
	s.mu.Lock()
	s.grantedTTL = opened.GetLeaseTtl().AsDuration()
	s.open, s.lastErr = true, ""
	kept := s.holds[:0]
	for _, h := range s.holds {
		resumed := false
		for _, info := range opened.GetResumed() {
			resumed = resumed || sameHold(h, info.GetNamespace(), info.GetName(), info.GetFencingToken())
		}
		if resumed {
			h.setValidUntil(time.Time{})
			kept = append(kept, h)
		} else {
			notResumed = append(notResumed, h)
		}
	}
	s.holds = kept
	for _, o := range s.ops {
		if !o.sent {
			o.sent = true
			queued = append(queued, o)
		}
	}
	slices.SortFunc(queued, func(a, b *op) int { return cmp.Compare(a.id, b.id) })
	for _, o := range queued {
		ticket = st.w.queue(o.req)
	}
	s.mu.Unlock()
	for _, h := range notResumed {
		h.markLost(lostError(h.what(), "SESSION_NOT_RESUMED",
			"after the session stream broke, the new session did not get it back (the hold had ended or changed hands)"))
	}
	st.w.flush(ticket)
}

func (s *session) handleResult(st *stream, r *lockdv1.SessionResult) {
	var resps []*lockdv1.AcquireResponse
	if r.GetStatus().GetCode() == 0 {
		if a := r.GetAcquire(); a.GetAcquired() {
			resps = []*lockdv1.AcquireResponse{a}
		} else if all := r.GetAcquireAll(); all.GetAcquired() {
			resps = all.GetLocks()
		}
	}
	s.mu.Lock()
	o, ok := s.ops[r.GetOpId()]
	if !ok {
		s.mu.Unlock()
		return
	}
	isGrant := o.call != nil && len(resps) == len(o.call.locks) && len(resps) > 0
	if o.gone {
		delete(s.ops, o.id)
		if !isGrant {
			s.mu.Unlock()
			return
		}
		// docs/api.md acquire_request_id: gives back exactly this grant (its
		// token); a no-op if the caller's own undo already did.
		reqID := o.req.GetAcquire().GetRequest().GetRequestId()
		if o.req.GetAcquireAll() != nil {
			reqID = o.req.GetAcquireAll().GetRequest().GetRequestId()
		}
		var ticket uint64
		for i, a := range resps {
			s.nextID++
			l := o.call.locks[i]
			ticket = st.w.queue(&lockdv1.SessionRequest{Kind: &lockdv1.SessionRequest_Release{Release: &lockdv1.SessionRelease{
				OpId: s.nextID, Request: &lockdv1.ReleaseRequest{Namespace: l.ns, Name: l.name,
					AcquireRequestId: reqID, FencingToken: a.GetFencingToken()}}}})
		}
		s.mu.Unlock()
		go st.w.flush(ticket) // the reader never waits for another's send
		return
	}
	if isGrant {
		// Registered here, under mu, so that a break right after this result
		// resumes them.
		for i, a := range resps {
			h := newHold(o.call.locks[i], o.call.owner, a, &s.c.o)
			if h.ttl == 0 {
				h.ttl = s.grantedTTL
				h.drift = drift(h.ttl, s.c.o.driftFactor, s.c.o.minDrift)
			}
			h.session = true
			o.holds = append(o.holds, h)
			s.holds = append(s.holds, h)
		}
	}
	o.result = r
	s.finish(o)
	s.mu.Unlock()
}

func (s *session) handleLost(l *lockdv1.LockLost) {
	var gone []*hold
	s.mu.Lock()
	kept := s.holds[:0]
	for _, h := range s.holds {
		if sameHold(h, l.GetNamespace(), l.GetName(), l.GetFencingToken()) {
			gone = append(gone, h)
		} else {
			kept = append(kept, h)
		}
	}
	s.holds = kept
	s.mu.Unlock()
	reason := l.GetReason()
	if reason == "" {
		reason = reasonLockNotHeld
	}
	for _, h := range gone {
		h.markLost(lostError(h.what(), reason, fmt.Sprintf("lockd reports the hold gone (%s)", reason)))
	}
}

// onStreamEnd: after stream st ended with `end` (whether it had opened).
func (s *session) onStreamEnd(st *stream, end *status.Status, opened bool) {
	var rejected []*hold
	s.mu.Lock()
	if s.cur == st {
		s.cur = nil
	}
	s.open = false
	s.lastErr = "the session stream ended"
	if end.Code() != codes.OK {
		s.lastErr = end.Message()
	}
	// An open the server refused outright (not a transport failure) fails
	// the operations waiting for it, and the holds it could not resume.
	refused := !opened && end.Code() != codes.OK && !outcomeUnknown(end.Err())
	if refused && end.Code() == codes.Unimplemented {
		s.unsupported = true
	}
	if refused && end.Code() == codes.InvalidArgument {
		s.ttlFixed, s.grantedTTL = false, 0 // e.g. open.lease_ttl out of bounds
	}
	for _, o := range s.ops {
		switch {
		case o.sent:
			o.err = status.Error(codes.Unavailable, "the session stream broke before the answer: "+s.lastErr)
		case refused && end.Code() == codes.Unimplemented:
			o.err = errNoSession
		case refused:
			o.err = end.Err()
		default:
			continue
		}
		s.finish(o)
	}
	if refused {
		rejected, s.holds = s.holds, nil
	} else {
		noticed := time.Now()
		for _, h := range s.holds {
			h.mu.Lock()
			if h.validUntil.IsZero() {
				h.validUntil = sessionBreakValidUntil(noticed, s.hang(), h.ttl, h.drift)
			}
			h.mu.Unlock()
		}
	}
	s.mu.Unlock()
	for _, h := range rejected {
		h.markLost(lostError(h.what(), "SESSION_REFUSED", "lockd refused to reopen the session: "+end.Message()))
	}
}
