// Internal: the write side of a Client's Session stream, shared by all its
// threads (docs/api.md "Batches on a Session"). Rules:
//
//  1. One write in flight at a time, made by a caller's own thread (a sync
//     gRPC stream takes one writer at a time); no thread of its own.
//  2. A request queued while no write is in flight is written at once,
//     alone (a plain SessionRequest, never a one-op batch), by the thread
//     that queued it: nothing waits on a timer, so a lone op pays no
//     latency.
//  3. Requests queued while a write is in flight are written, when it
//     completes, as ONE SessionBatch in the order they were queued, by the
//     first of their callers to get the writer's turn: at most kMaxBatchOps
//     ops and, unless one op alone is larger, kMaxBatchBytes; the rest go in
//     the writes after. A lone queued request goes alone.
//  4. Each caller writes until its own request has left, not longer: its
//     write carries whatever queued before it, and a caller whose request
//     left in another's batch returns without writing. So no caller keeps
//     writing for the others under steady load.
//  5. After a write fails (the stream broke) every request queued then or
//     later is dropped: the stream's reader sees its end and settles the
//     operations.
//
// A request's life: Queue() gives it a ticket; Flush(ticket) waits for the
// writer's turn (write_mu_), then either finds it taken by an earlier
// writer and returns, or takes it with everything queued before it and
// writes. The caller sends `open` first and alone (nothing else is queued
// before it is written), so `open` is never in a batch.
//
// Thread-safe: the queue behind mu_, the stream's writes behind write_mu_.
// Lock order: write_mu_, then mu_; a caller may hold its own lock while
// calling Queue (SessionStream does, to queue in op_id order), never while
// calling Flush.

#ifndef LOCKD_CLIENTS_CPP_SRC_BATCHING_WRITER_H_
#define LOCKD_CLIENTS_CPP_SRC_BATCHING_WRITER_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "lockd/v1/lock.pb.h"

namespace lockd::client_internal {

class BatchingWriter {
 public:
  // The server's bound on a SessionBatch (more is a protocol error).
  static constexpr size_t kMaxBatchOps = 1000;
  // A batch stops growing before its ops pass this many bytes, well inside
  // gRPC's default 4 MiB receive limit of the server (an acquire_all of 64
  // long names is about 40 KiB).
  static constexpr size_t kMaxBatchBytes = 1 << 20;

  // Writes one message on the stream, blocking until gRPC takes it; false
  // when the stream is broken or closed.
  using WriteFn = std::function<bool(const v1::SessionRequest& msg)>;

  explicit BatchingWriter(WriteFn write) : write_(std::move(write)) {}
  BatchingWriter(const BatchingWriter&) = delete;
  BatchingWriter& operator=(const BatchingWriter&) = delete;

  // Queues `req` (open, acquire, release, cancel or acquire_all) and
  // returns its ticket for Flush; 0 when the stream has failed (dropped).
  // Never blocks on a write.
  [[nodiscard]] uint64_t Queue(v1::SessionRequest req) ABSL_LOCKS_EXCLUDED(mu_);

  // Returns once the request of `ticket` (and everything queued before it)
  // has been written, by this thread or an earlier writer (rules 2-4), or
  // dropped (rule 5). Blocks while another caller's write is in flight.
  // Does nothing for ticket 0.
  void Flush(uint64_t ticket) ABSL_LOCKS_EXCLUDED(mu_, write_mu_);

  // Flush(Queue(req)).
  void Send(v1::SessionRequest req) ABSL_LOCKS_EXCLUDED(mu_, write_mu_) {
    Flush(Queue(std::move(req)));
  }

 private:
  struct Queued {
    v1::SessionRequest req;
    size_t bytes = 0;
  };

  // The next write's ops, taken from the head of queued_.
  std::vector<Queued> TakeNext() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const WriteFn write_;

  // Held for a write; the one who holds it is the writer.
  absl::Mutex write_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  absl::Mutex mu_;
  std::vector<Queued> queued_ ABSL_GUARDED_BY(mu_);
  uint64_t last_queued_ ABSL_GUARDED_BY(mu_) = 0;  // tickets are 1, 2, ...
  uint64_t taken_ ABSL_GUARDED_BY(mu_) = 0;        // tickets taken for a write
  bool failed_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace lockd::client_internal

#endif  // LOCKD_CLIENTS_CPP_SRC_BATCHING_WRITER_H_
