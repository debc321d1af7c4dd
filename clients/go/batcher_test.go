package lockd

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	lockdv1 "github.com/lockd/lockd/clients/go/lockdv1"
	"google.golang.org/protobuf/proto"
)

// fakeSend stands in for the stream's Send, the batcher's seam: it records
// every message, and its first send can be held in flight.
type fakeSend struct {
	mu      sync.Mutex
	sent    []*lockdv1.SessionRequest
	entered chan struct{} // closed when the first send starts
	release chan struct{} // the first send waits for it
	err     error         // what the first send returns
}

func newFakeSend() *fakeSend {
	return &fakeSend{entered: make(chan struct{}), release: make(chan struct{})}
}

func (f *fakeSend) send(req *lockdv1.SessionRequest) error {
	f.mu.Lock()
	f.sent = append(f.sent, req)
	first := len(f.sent) == 1
	f.mu.Unlock()
	if first {
		close(f.entered)
		<-f.release
		return f.err
	}
	return nil
}

func (f *fakeSend) messages() []*lockdv1.SessionRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.sent)
}

// opReq is a release with op_id id, padded with a name of `pad` bytes.
func opReq(id uint64, pad int) *lockdv1.SessionRequest {
	return &lockdv1.SessionRequest{Kind: &lockdv1.SessionRequest_Release{Release: &lockdv1.SessionRelease{
		OpId: id, Request: &lockdv1.ReleaseRequest{Name: strings.Repeat("n", pad)}}}}
}

// opIDs: the op_ids a message carries, in order, and whether it is a batch.
func opIDs(msg *lockdv1.SessionRequest) ([]uint64, bool) {
	if b := msg.GetBatch(); b != nil {
		var ids []uint64
		for _, op := range b.GetOps() {
			ids = append(ids, op.GetRelease().GetOpId())
		}
		return ids, true
	}
	return []uint64{msg.GetRelease().GetOpId()}, false
}

// holdFirstSend starts sending op 1 alone and returns once that send is in
// flight; wait for the returned channel after releasing it.
func holdFirstSend(b *batcher, f *fakeSend) chan struct{} {
	done := make(chan struct{})
	go func() {
		b.flush(b.queue(opReq(1, 0)))
		close(done)
	}()
	<-f.entered
	return done
}

// flushAll flushes every ticket from a goroutine of its own, last first,
// and returns once all have returned.
func flushAll(b *batcher, tickets []uint64) *sync.WaitGroup {
	var wg sync.WaitGroup
	for _, tk := range slices.Backward(tickets) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b.flush(tk)
		}()
	}
	return &wg
}

func TestBatcherSendsALoneOpAtOnceAndAlone(t *testing.T) {
	f := newFakeSend()
	close(f.release)
	b := newBatcher(f.send)
	for id := uint64(1); id <= 3; id++ {
		req := opReq(id, 0)
		b.flush(b.queue(req))
		sent := f.messages()
		if len(sent) != int(id) || sent[id-1] != req {
			t.Fatalf("op %d: sent %v, want it alone as a plain request right after flush", id, sent)
		}
	}
}

func TestBatcherOpsQueuedDuringASendLeaveAsOneBatchInOrder(t *testing.T) {
	f := newFakeSend()
	b := newBatcher(f.send)
	first := holdFirstSend(b, f)
	var tickets []uint64
	for id := uint64(2); id <= 6; id++ {
		tickets = append(tickets, b.queue(opReq(id, 0)))
	}
	wg := flushAll(b, tickets)
	close(f.release)
	<-first
	wg.Wait()
	sent := f.messages()
	if len(sent) != 2 {
		t.Fatalf("%d sends, want op 1 then one batch: %v", len(sent), sent)
	}
	if ids, batch := opIDs(sent[0]); batch || !slices.Equal(ids, []uint64{1}) {
		t.Fatalf("first send: ops %v (batch %v), want op 1 alone", ids, batch)
	}
	if ids, batch := opIDs(sent[1]); !batch || !slices.Equal(ids, []uint64{2, 3, 4, 5, 6}) {
		t.Fatalf("second send: ops %v (batch %v), want one batch of ops 2-6 in order", ids, batch)
	}
}

func TestBatcherSplitsBatchesAtTheLimits(t *testing.T) {
	const big = 400 << 10 // three of these pass maxBatchBytes, two do not
	for _, tc := range []struct {
		name string
		pads []int // the queued ops' padding, op_ids 2, 3, ...
		want [][]uint64
	}{
		{"ops", slices.Repeat([]int{0}, 2*maxBatchOps+1),
			[][]uint64{idRange(2, maxBatchOps), idRange(2+maxBatchOps, maxBatchOps), {2 + 2*maxBatchOps}}},
		{"bytes", []int{big, big, big, big, big}, [][]uint64{{2, 3}, {4, 5}, {6}}},
		{"one op over the bytes", []int{0, 3 * big, 0}, [][]uint64{{2}, {3}, {4}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeSend()
			b := newBatcher(f.send)
			first := holdFirstSend(b, f)
			var tickets []uint64
			for i, pad := range tc.pads {
				tickets = append(tickets, b.queue(opReq(uint64(i+2), pad)))
			}
			wg := flushAll(b, tickets)
			close(f.release)
			<-first
			wg.Wait()
			sent := f.messages()[1:]
			if len(sent) != len(tc.want) {
				t.Fatalf("%d sends after op 1, want %d", len(sent), len(tc.want))
			}
			for i, msg := range sent {
				ids, batch := opIDs(msg)
				if !slices.Equal(ids, tc.want[i]) || batch != (len(tc.want[i]) > 1) {
					t.Fatalf("send %d: %d ops %v.. (batch %v), want %v..", i, len(ids), ids[:min(3, len(ids))], batch, tc.want[i][:min(3, len(tc.want[i]))])
				}
				if size := opsSize(msg); batch && size > maxBatchBytes {
					t.Fatalf("send %d: a batch of %d bytes of ops", i, size)
				}
			}
		})
	}
}

func idRange(from uint64, n int) []uint64 {
	ids := make([]uint64, n)
	for i := range ids {
		ids[i] = from + uint64(i)
	}
	return ids
}

func opsSize(msg *lockdv1.SessionRequest) int {
	n := 0
	for _, op := range msg.GetBatch().GetOps() {
		n += proto.Size(op)
	}
	return n
}

func TestBatcherDropsTheQueueAfterAFailedSend(t *testing.T) {
	f := newFakeSend()
	f.err = errors.New("stream broke")
	b := newBatcher(f.send)
	first := holdFirstSend(b, f)
	wg := flushAll(b, []uint64{b.queue(opReq(2, 0)), b.queue(opReq(3, 0))})
	close(f.release)
	<-first
	wg.Wait()
	if tk := b.queue(opReq(4, 0)); tk != 0 {
		t.Fatalf("queue after a failed send: ticket %d, want 0 (dropped)", tk)
	}
	b.flush(0)
	if sent := f.messages(); len(sent) != 1 {
		t.Fatalf("%d sends, want only the failed one: the queued ops are dropped", len(sent))
	}
}
