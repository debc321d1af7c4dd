package lockd

import (
	"sync"

	lockdv1 "github.com/lockd/lockd/clients/go/lockdv1"
	"google.golang.org/protobuf/proto"
)

// batcher is the write side of one Session stream, shared by every
// goroutine of a Client (docs/api.md "Batches on a Session"). gRPC-Go's
// ClientStream.SendMsg blocks while flow control holds and takes one caller
// at a time, so sends take turns, and what queues behind a send leaves with
// the next one. Rules:
//
//  1. One send in flight at a time, made by a caller's goroutine (the
//     batcher has none of its own).
//  2. A request queued while no send is in flight is sent at once, alone,
//     as a plain SessionRequest (never a one-op batch), by the goroutine
//     that queued it. Nothing waits on a timer: a lone op pays no latency.
//  3. Requests queued while a send is in flight leave, when it returns, as
//     ONE SessionBatch in the order they were queued, sent by the first of
//     their callers to get the turn: at most maxBatchOps ops and, unless
//     one op alone is larger, maxBatchBytes; the rest in the sends after.
//     A lone queued request goes alone.
//  4. A caller sends until its own request has left, no longer; a caller
//     whose request left in another's send returns without sending.
//  5. After a send fails (the stream broke or was closed) every request
//     queued then or later is dropped: the stream's reader sees the end and
//     settles the operations.
//
// Use: queue(req) gives a ticket and never waits for a send, so a caller
// may hold its own lock while queueing (session does, to queue in op_id
// order); flush(ticket), called without that lock, returns once the request
// has left or was dropped. `open` is queued and flushed before anything
// else is queued, so it is never in a batch.
//
// Thread-safe: the queue behind mu; turn is held by the goroutine whose
// send is in flight. Lock order: turn, then mu.
type batcher struct {
	send func(*lockdv1.SessionRequest) error // blocks until gRPC takes it

	turn sync.Mutex

	mu       sync.Mutex
	queued   []queuedReq
	lastTick uint64 // tickets are 1, 2, ...
	taken    uint64 // tickets taken for a send
	failed   bool
}

type queuedReq struct {
	req   *lockdv1.SessionRequest
	bytes int
}

const (
	// The server's bound on a SessionBatch (more is a protocol error).
	maxBatchOps = 1000
	// A batch stops growing before its ops pass this, well inside gRPC's
	// default 4 MiB receive limit of the server.
	maxBatchBytes = 1 << 20
)

func newBatcher(send func(*lockdv1.SessionRequest) error) *batcher {
	return &batcher{send: send}
}

// queue adds req (not modified afterwards) and returns its ticket for
// flush; 0 once a send has failed (req is dropped).
func (b *batcher) queue(req *lockdv1.SessionRequest) uint64 {
	n := proto.Size(req)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.failed {
		return 0
	}
	b.queued = append(b.queued, queuedReq{req, n})
	b.lastTick++
	return b.lastTick
}

// flush returns once the request of ticket, and every one queued before
// it, has been sent (by this goroutine or another) or dropped. Blocks
// while another send is in flight. Does nothing for ticket 0.
func (b *batcher) flush(ticket uint64) {
	if ticket == 0 {
		return
	}
	b.turn.Lock()
	defer b.turn.Unlock()
	for {
		b.mu.Lock()
		if b.failed || b.taken >= ticket {
			b.mu.Unlock()
			return
		}
		next := b.takeNext()
		b.mu.Unlock()
		msg := next[0]
		if len(next) > 1 {
			msg = &lockdv1.SessionRequest{Kind: &lockdv1.SessionRequest_Batch{Batch: &lockdv1.SessionBatch{Ops: next}}}
		}
		if b.send(msg) != nil {
			b.mu.Lock()
			b.failed, b.queued = true, nil
			b.mu.Unlock()
			return
		}
	}
}

// takeNext removes the next send's requests from the queue (at least one).
// REQUIRES: b.mu held, b.queued not empty.
func (b *batcher) takeNext() []*lockdv1.SessionRequest {
	var next []*lockdv1.SessionRequest
	bytes := 0
	for _, q := range b.queued {
		if len(next) == maxBatchOps || (len(next) > 0 && bytes+q.bytes > maxBatchBytes) {
			break
		}
		next = append(next, q.req)
		bytes += q.bytes
	}
	clear(b.queued[:len(next)]) // the sent requests are not kept alive
	b.queued = b.queued[len(next):]
	b.taken += uint64(len(next))
	return next
}
