// The writing side of one Session stream; the session's other rules are in
// session.h, the protocol in docs/api.md "Batches on a Session". Rules:
//
//  1. One gRPC write in flight at a time; Send never waits for the client
//     (no gRPC thread ever blocks on a slow reader).
//  2. A response sent while no write is in flight is written at once, alone:
//     nothing waits on a timer to fill a batch, so a lone result pays no
//     latency.
//  3. Responses sent while a write is in flight wait in the outbox, in the
//     order sent. When the write completes, the next write carries them: a
//     lone one alone; several as ONE SessionResponseBatch, once batches are
//     enabled (rule 4), taking from the head of the outbox every `result`
//     and `lost` up to kMaxResponseBatch items and kMaxResponseBatchBytes
//     (the rest goes in the writes after). Any other response (`opened`)
//     is never put in a batch: it goes alone when it reaches the head.
//  4. Batches are off until EnableBatches(), which the reactor calls when
//     its client sends a batch: a client that never does (every client of
//     0.1.0) cannot read a response batch, and gets one response per write.
//
// States (one enum; every transition happens under mu_):
//
//   kIdle    ──Send──▶ kWriting ──WriteDone(true), outbox empty──▶ kIdle
//   kWriting ──WriteDone(true), outbox not empty──▶ kWriting (the next write)
//   kWriting ──WriteDone(false)──▶ kFailed (the outbox is dropped)
//   kIdle, kFailed ──CloseIfIdle──▶ kClosed
//
// In kFailed and kClosed every Send is dropped: the stream is broken, or
// the reactor is about to call Finish (no write may start after that).
//
// Thread-safe: guarded by mu_. Lock order: the reactor's mutex, then mu_
// (SessionReactor calls CloseIfIdle under its own). `start_write` is never
// called with mu_ held.

#ifndef LOCKD_SERVICE_SESSION_WRITER_H_
#define LOCKD_SERVICE_SESSION_WRITER_H_

#include <cstddef>
#include <deque>
#include <functional>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "lockd/v1/lock.pb.h"

namespace lockd {

// At most this many items in one SessionResponseBatch (the same bound as a
// client's SessionBatch).
inline constexpr int kMaxResponseBatch = 1000;
// A batch stops growing before its items pass this many bytes (a single
// response may be larger and goes alone), well inside gRPC's default 4 MiB
// receive limit of the clients.
inline constexpr size_t kMaxResponseBatchBytes = 1 << 20;

class SessionWriter {
 public:
  // Starts one gRPC write of `*resp` (ServerBidiReactor::StartWrite); the
  // message stays valid and unchanged until the matching WriteDone.
  using StartWrite = std::function<void(const v1::SessionResponse* resp)>;

  // The stream must route each write's completion (OnWriteDone) to
  // WriteDone.
  explicit SessionWriter(StartWrite start_write) : start_write_(std::move(start_write)) {}
  SessionWriter(const SessionWriter&) = delete;
  SessionWriter& operator=(const SessionWriter&) = delete;

  // Queues `resp`, and writes it at once when no write is in flight.
  void Send(v1::SessionResponse resp) ABSL_LOCKS_EXCLUDED(mu_);

  // From now on, several queued results and `lost` leave as one batch
  // (rule 4). Idempotent.
  void EnableBatches() ABSL_LOCKS_EXCLUDED(mu_);

  // The stream's OnWriteDone(ok): starts the next write, if any. True when
  // no write is in flight afterwards (the reactor may then finish).
  bool WriteDone(bool ok) ABSL_LOCKS_EXCLUDED(mu_);

  // True, and no write starts any more, when no write is in flight; false
  // while one is (WriteDone tells when it ends).
  bool CloseIfIdle() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  enum class State { kIdle, kWriting, kFailed, kClosed };

  // Moves the next write (rule 3) from the head of outbox_ into
  // writing_now_. REQUIRES: outbox_ is not empty.
  void TakeNextWrite() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const StartWrite start_write_;
  absl::Mutex mu_;
  State state_ ABSL_GUARDED_BY(mu_) = State::kIdle;
  bool batches_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<v1::SessionResponse> outbox_ ABSL_GUARDED_BY(mu_);
  // The write in flight; gRPC reads it until WriteDone, so it changes only
  // in kWriting's transitions.
  v1::SessionResponse writing_now_ ABSL_GUARDED_BY(mu_);
};

}  // namespace lockd

#endif  // LOCKD_SERVICE_SESSION_WRITER_H_
