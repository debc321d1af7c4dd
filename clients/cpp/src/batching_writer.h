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
//     completes, by the same writer as ONE SessionBatch, in the order they
//     were queued: at most kMaxBatchOps ops and, unless one op alone is
//     larger, kMaxBatchBytes; the rest go in the writes after. A lone
//     queued request goes alone.
//  4. The writer keeps writing until the queue is empty, so under steady
//     load one caller may write other callers' requests for a while (each
//     write takes everything queued, so each round is short).
//  5. After a write fails (the stream broke) every request queued then or
//     later is dropped: the stream's reader sees its end and settles the
//     operations.
//
// States (under mu_):
//
//   idle    ──Queue (returns true)──▶ writing ──queue empty after a write──▶ idle
//   writing ──Queue (returns false)──▶ writing (the request waits its turn)
//   writing ──a write fails──▶ failed (queue dropped; Queue drops and returns false)
//
// The caller sends `open` first and alone (nothing else is queued before
// it is written); `open` and `batch` are never put in a batch by this class
// because callers never queue them after ops.
//
// Thread-safe: state behind mu_; `write` runs on one thread at a time, with
// mu_ not held. Lock order: a caller may hold its own lock while calling
// Queue (SessionStream does, to queue in op_id order), never while calling
// Flush.

#ifndef LOCKD_CLIENTS_CPP_SRC_BATCHING_WRITER_H_
#define LOCKD_CLIENTS_CPP_SRC_BATCHING_WRITER_H_

#include <cstddef>
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

  // Queues `req` (open, acquire, release, cancel or acquire_all). Returns
  // true when no write was in flight: the caller is now the writer and must
  // call Flush(). Never blocks on a write.
  [[nodiscard]] bool Queue(v1::SessionRequest req) ABSL_LOCKS_EXCLUDED(mu_);

  // REQUIRES: the last Queue() of this thread returned true. Writes what is
  // queued (rules 2-4) until the queue is empty or a write fails.
  void Flush() ABSL_LOCKS_EXCLUDED(mu_);

  // Queue(req), then Flush() if this thread became the writer.
  void Send(v1::SessionRequest req) ABSL_LOCKS_EXCLUDED(mu_) {
    if (Queue(std::move(req))) Flush();
  }

 private:
  struct Queued {
    v1::SessionRequest req;
    size_t bytes = 0;
  };

  // The next write's ops, taken from the head of queued_.
  std::vector<Queued> TakeNext() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const WriteFn write_;

  absl::Mutex mu_;
  std::vector<Queued> queued_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool failed_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace lockd::client_internal

#endif  // LOCKD_CLIENTS_CPP_SRC_BATCHING_WRITER_H_
